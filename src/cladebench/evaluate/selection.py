"""Which rows an evaluation scores, and how they split into the dataset's separate benchmarks.

Why a module of its own: the selection is decided from the dataset's rows before any model loads (a filter or a
clade that selects nothing is refused in a second, not after the model), and ``run`` only consumes its result.
The selection is the user's ``--where``, the training-exposure options and ``--within``; the groups are the
values of the partition column (``--group-by``), each evaluated with its own label set and never pooled; a group
the task cannot evaluate (too few images for the shots) is left out with its reason, and the others still run.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

import pyarrow as pa
import pyarrow.compute as pc

from cladebench import store
from cladebench.errors import CladebenchError, NotEvaluableError, SchemaError, UsageError
from cladebench.tasks.common import NAMING_COLUMNS
from cladebench.taxonomy import Rank, mixed_script_words, normalised_name, parse_within

if TYPE_CHECKING:
    import lance

    from cladebench.evaluate.configs import EvalConfig
    from cladebench.tasks.configs import TaskSettings

PARTITION_COLUMNS: tuple[str, ...] = ("challenge_group",)
"""Columns whose values are separate benchmarks inside one dataset; ``--group-by auto`` picks the first present."""


def and_filters(*clauses: str | None) -> str | None:
    """The clauses joined with AND, each in parentheses; blank ones are left out (a blank filter is none, as
    :func:`cladebench.store.check_filter` reads it), and none at all is ``None``."""
    present = [c for c in clauses if c and c.strip()]
    return " AND ".join(f"({c})" for c in present) if present else None


def within_filter(within: str | None, names: Sequence[str]) -> str | None:
    """SQL for ``--within RANK=NAME`` at a rank above species whose column the dataset has (the task compares names
    stripped, as this does); ``None`` otherwise, where the task's own comparison is the only one."""
    if within is None:
        return None
    rank, name = parse_within(within)
    if rank == Rank.SPECIES or rank.column not in names:
        return None
    return f"btrim({store.sql_identifier(rank.column)}) = {store.sql_literal(name)}"


def exposure_filter(config: EvalConfig, dataset: lance.LanceDataset) -> str | None:
    """SQL for the training-exposure options of an eval config.

    A row whose ``seen_in_training`` is missing has unknown exposure (builders write null when no
    training lists were given), so either option leaves it out rather than calling it unseen; an empty
    list means no listed model trained on it. A ``--not-seen-by`` name that no row's list holds is refused
    (:func:`check_training_name`): a typo would otherwise keep every row.
    """
    if not (config.unseen_only or config.not_seen_by):
        return None
    if "seen_in_training" not in dataset.schema.names:
        raise CladebenchError("--unseen-only/--not-seen-by need a seen_in_training column, which this dataset lacks")
    if config.not_seen_by:
        check_training_name(dataset, config.not_seen_by)
    clauses = []
    if config.unseen_only:
        clauses.append("seen_in_training IS NOT NULL AND array_length(seen_in_training) = 0")
    if config.not_seen_by:
        clauses.append(f"seen_in_training IS NOT NULL AND NOT array_has(seen_in_training, "
                       f"{store.sql_literal(config.not_seen_by)})")
    return and_filters(*clauses)


KNOWN_NAMES_SHOWN = 20
"""Most names of ``seen_in_training`` a refused ``--not-seen-by`` lists (the closest ones are always named)."""


def training_names(dataset: lance.LanceDataset) -> list[str]:
    """Every model name any row's ``seen_in_training`` holds, sorted."""
    lists = store.read(dataset, columns=["seen_in_training"]).column(0)
    return sorted({str(name) for name in pc.list_flatten(lists).drop_null().to_pylist()})


def check_training_name(dataset: lance.LanceDataset, name: str) -> None:
    """Refuse a ``--not-seen-by`` name no row's ``seen_in_training`` holds (exit 2), naming the closest known ones.

    One matching row is enough, so the usual case reads a row; only a refusal reads the whole column.
    """
    found = store.read(dataset, columns=["seen_in_training"], limit=1,
                       where=f"array_has(seen_in_training, {store.sql_literal(name)})")
    if found.num_rows:
        return
    known = training_names(dataset)
    if not known:
        raise UsageError(f"--not-seen-by {name!r}: no row's seen_in_training names any model, so no row could be "
                         "left out; use --unseen-only, or a dataset whose rows list the models trained on them")
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = ("; did you mean " + " or ".join(repr(c) for c in close) + "?") if close else ""
    shown = ", ".join(known[:KNOWN_NAMES_SHOWN]) + (f" and {len(known) - KNOWN_NAMES_SHOWN} more"
                                                     if len(known) > KNOWN_NAMES_SHOWN else "")
    raise UsageError(f"--not-seen-by {name!r}: no row's seen_in_training names it, so it would leave out no row"
                     f"{hint} (known: {shown})")


def selection_filter(dataset: lance.LanceDataset, where: str | None, settings: TaskSettings) -> str | None:
    """The filter of every selected row: ``where`` and the ``--within`` clade where the dataset has its column."""
    return and_filters(where, within_filter(settings.clade(), dataset.schema.names))


def check_unique_uuids(uuids: pa.ChunkedArray, uri: str) -> int:
    """The number of selected rows, given their uuids; a uuid on two selected rows (a dataset written by another
    tool) is a schema error naming some, since each would be counted twice in every metric."""
    counts = pc.value_counts(uuids)
    repeated = counts.filter(pc.greater(counts.field("counts"), 1))
    if len(repeated):
        shown = ", ".join(repr(v) for v in repeated.field("values")[:3].to_pylist())
        raise SchemaError(f"{len(repeated)} uuid(s) appear on more than one selected row of {uri} (e.g. "
                          f"{shown}); each row would be counted twice: remove the duplicates (cladebench subset "
                          "--where keeps the rows you choose) before evaluating")
    return len(uuids)


MIXED_SCRIPT_UUIDS = 5
"""Row uuids a mixed-script name's record and line name (with the count of all)."""


class MixedScriptName(TypedDict):
    """What the plan and the record keep of a name that mixes scripts."""

    words: list[str]
    rows: int
    uuids: list[str]


def mixed_script_names(dataset: lance.LanceDataset, where: str | None) -> dict[str, MixedScriptName]:
    """Name -> its mixed words, its rows' count and their first uuids, for each name of the selected rows with a
    word that mixes Latin letters with another script's (:func:`~cladebench.taxonomy.mixed_script_words`). Such
    a name reads as its Latin twin but is another string, so it would be a class of its own: it is said whether
    or not its twin is among the labels, so a silent drop in accuracy has a named cause. A word is said once,
    under the fullest name that holds it (the binomial rather than its epithet)."""
    schema = dataset.schema
    names = [c for c in ("scientific_name", *reversed(NAMING_COLUMNS)) if c in schema.names
             and (pa.types.is_string(schema.field(c).type) or pa.types.is_large_string(schema.field(c).type))]
    if not names or "uuid" not in schema.names:
        return {}
    table = store.read(dataset, columns=["uuid", *dict.fromkeys(names)], where=where)
    by_word: dict[str, tuple[str, dict[str, None]]] = {}
    for column in dict.fromkeys(names):
        values = table.column(column)
        mixed = [v for v in pc.unique(values).to_pylist() if v is not None and mixed_script_words(v)]
        if not mixed:
            continue
        mask = pc.is_in(values, value_set=pa.array(mixed, values.type))
        for name, uuid in zip(values.filter(mask).to_pylist(), table.column("uuid").filter(mask).to_pylist(),
                              strict=True):
            name = normalised_name(name)
            for word in mixed_script_words(name):
                by_word.setdefault(word, (name, {}))[1][str(uuid)] = None
    found: dict[str, MixedScriptName] = {}
    for word, (name, uuids) in by_word.items():
        entry = found.setdefault(name, {"words": [], "rows": 0, "uuids": []})
        entry["words"].append(word)
        entry["rows"] = max(entry["rows"], len(uuids))
        entry["uuids"] = list(dict.fromkeys([*entry["uuids"], *uuids]))[:MIXED_SCRIPT_UUIDS]
    return found


def check_breakdown_values(dataset: lance.LanceDataset, columns: Sequence[str], where: str | None) -> None:
    """Refuse (exit 2, before any model) a ``--breakdown`` column that has no value on any selected row (all
    null, or only empty lists): it would give no breakdown, and a run that silently lacks one reads as if the
    column had one group."""
    if not columns:
        return
    table = store.read(dataset, columns=list(dict.fromkeys(columns)), where=where)
    for column in dict.fromkeys(columns):
        values = table.column(column)
        if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
            values = values.filter(pc.greater(pc.list_value_length(values), 0))
        if not len(values.drop_null()):
            scope = f" of the {table.num_rows:,} selected" if table.num_rows else ""
            raise UsageError(f"--breakdown {column!r}: no row{scope} has a value in it (all null or empty), so "
                             "there is nothing to break down by; drop the option or fill the column")


def partition_column(dataset: lance.LanceDataset, group_by: str) -> str | None:
    """The column whose values are evaluated separately, or None for one pooled evaluation."""
    if group_by == "none":
        return None
    names = dataset.schema.names
    if group_by == "auto":
        return next((c for c in PARTITION_COLUMNS if c in names), None)
    if group_by not in names:
        raise UsageError(f"--group-by {group_by!r}: no such column in {dataset.uri}")
    return group_by


def group_values(dataset: lance.LanceDataset, column: str, where: str | None) -> tuple[list[str], int, dict[str, str]]:
    """Distinct non-null values of ``column`` among the selected rows (sorted, as text), the rows without one,
    and the SQL filter selecting each value (a literal of the column's own type: a quoted 2 is not 2)."""
    values = store.read(dataset, columns=[column], where=where).column(0)
    missing = values.null_count
    kind = values.type
    filters: dict[str, str] = {}
    for value in values.drop_null().to_pylist():
        if pa.types.is_boolean(kind):
            literal = "true" if value else "false"
        elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
            literal = repr(value)
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind):
            literal = store.sql_literal(str(value))
        else:
            raise CladebenchError(f"--group-by {column!r}: a column of type {kind} cannot name groups; use a "
                                  "string, integer, float or boolean column")
        filters[str(value)] = f"{column} = {literal}"
    return sorted(filters), missing, filters


def select_groups(dataset: lance.LanceDataset, uri: str, config: EvalConfig, settings: TaskSettings, where: str | None,
                  selected_rows: int) -> tuple[str | None, list[str | None], int, dict[str, str]]:
    """The partition column (or None), its values among the selected rows (``[None]`` when pooled), the selected
    rows without a value, and each value's filter. ``--within`` counts here too: a group without a row of the
    clade is not evaluated (the task would refuse it); a selection with no row at all (``selected_rows``, as the
    plan counted them) is refused."""
    within = settings.clade()
    clade = within_filter(within, dataset.schema.names)
    selected = selection_filter(dataset, where, settings)
    parts = [part for part in (f"the filter {where!r}" if where else "", f"--within {within}" if clade else "")
             if part]
    scope = " by " + " and ".join(parts) if parts else ""
    column = partition_column(dataset, config.group_by)
    if column is None:
        if selected_rows == 0:
            raise CladebenchError(f"no row of {uri} is selected{scope}")
        return None, [None], 0, {}
    groups, rows_without_group, filters = group_values(dataset, column, selected)
    if not groups:
        if not rows_without_group:
            raise CladebenchError(f"no row of {uri} is selected{scope}")
        raise CladebenchError(f"no selected row has a {column} value{scope}; --group-by none evaluates them pooled")
    return column, list(groups), rows_without_group, filters


LEFT_OUT = "left_out"
"""Key of a metric estimate without a value because its group was left out: why (the task's reason)."""


def none_evaluable(group_column: str | None, left_out: Mapping[str, str]) -> NotEvaluableError:
    """The error of a grouped run none of whose groups could be evaluated, each group with its reason (exit 1)."""
    if len(left_out) == 1:
        ((group, reason),) = left_out.items()
        return NotEvaluableError(f"{group_column} {group!r}: {reason}")
    reasons = "; ".join(f"{group!r}: {reason}" for group, reason in left_out.items())
    return NotEvaluableError(f"no {group_column} group can be evaluated: {reasons}")


def left_out_metrics(names: Sequence[str], group: str, reason: str, separator: str) -> dict[str, object]:
    """A left-out group's metrics ``names`` (those the evaluated groups report) without a value and with the reason,
    so the gap shows where the group's numbers would be (n/a in a report) and is never a silent hole."""
    return {f"{group}{separator}{name}": {"value": None, "low": None, "high": None, "n": 0, LEFT_OUT: reason}
            for name in names}
