"""What an evaluation can check against the dataset's schema before any model (or torch) loads.

Loading a model takes seconds (torch, weights, a text tower); a misspelt column or a filter that does not
parse should cost none of them. Everything here reads only the dataset's schema and metadata, never its rows:
the filter is planned by Lance on the schema (``explain_plan``), not run.

Errors keep the exit codes the tasks use for the same mistakes later in a run: an option naming a column the
dataset lacks is a usage error (exit 2) for ``--group-by`` and ``--breakdown``, and a schema error (exit 4) for
the columns a task reads (``--column``, ``--candidates``, group keys), as the tasks report them; a file that is
not there is an input failure (exit 1).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.taxonomy import NAME_STYLES, Rank, parse_within
from cladebench.templates import get_templates

if TYPE_CHECKING:
    import lance

    from cladebench.models.spec import ModelSpec
    from cladebench.tasks import Task
    from cladebench.tasks.configs import TaskSettings

GROUPABLE_TYPES = "a string, integer, float or boolean column"
"""What a --group-by column may hold: each value becomes a filter literal of the column's own type."""


def check_filter_on_schema(dataset: lance.LanceDataset, where: str | None, *, option: str = "--where") -> None:
    """Refuse a filter Lance cannot plan on this dataset (a syntax error, an unknown column, a type mismatch),
    without reading a row; the message keeps Lance's reason and drops its source location."""
    if where is None or not where.strip():  # blank is no filter, as store.check_filter reads it
        return
    try:
        dataset.scanner(filter=where, columns=[dataset.schema.names[0]]).explain_plan()
    except (ValueError, OSError, RuntimeError) as exc:
        reason = str(exc).split(", /")[0].removeprefix("Invalid user input: ")
        missing = _NO_FIELD.search(reason)
        if missing:  # Lance lists every field, hidden ones included: name the column and the closest instead
            name = missing.group(1).strip("\"'`")
            close = difflib.get_close_matches(name, dataset.schema.names, n=1)
            reason = f"no column {name!r} in {dataset.uri}" + (f"; did you mean {close[0]!r}?" if close else "")
        raise UsageError(f"{option} {where!r}: {reason}") from None


_NO_FIELD = re.compile(r"No field named ([^\s,]+?)\.?(?:\s|$)")


def _groupable(kind: pa.DataType) -> bool:
    return (pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind))


def check_group_by(dataset: lance.LanceDataset, group_by: str) -> None:
    """--group-by names a column of the dataset whose type can name groups ('auto' and 'none' always pass)."""
    if group_by in ("auto", "none"):
        return
    if group_by not in dataset.schema.names:
        raise UsageError(f"--group-by {group_by!r}: no such column in {dataset.uri}")
    kind = dataset.schema.field(group_by).type
    if not _groupable(kind):
        raise UsageError(f"--group-by {group_by!r}: a column of type {kind} cannot name groups; use {GROUPABLE_TYPES}")


def check_breakdown(dataset: lance.LanceDataset, columns: tuple[str, ...]) -> None:
    """Every --breakdown column is in the dataset and holds values that name groups: a string, number or boolean,
    or a list of names (CrypticBio's cryptic_group, joined into one group); never vectors or image bytes, found
    here rather than after every prediction is made."""
    for column in columns:
        if column not in dataset.schema.names:
            raise UsageError(f"--breakdown {column!r}: no such column in {dataset.uri}")
        kind = dataset.schema.field(column).type
        names = (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
            pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type))
        if not (_groupable(kind) or names):
            raise UsageError(f"--breakdown {column!r}: a column of type {kind} cannot name groups; use "
                             f"{GROUPABLE_TYPES}, or a list of names")


def check_embedding_column(dataset: lance.LanceDataset, column: str | None) -> None:
    """The embedding column a command names (None: the one naming the model, found later) is one of the dataset's."""
    if column is not None:
        if column not in dataset.schema.names:
            raise SchemaError(f"column {column!r} is not in {dataset.uri}")
        if not column.startswith(store.EMBEDDING_PREFIX):
            raise SchemaError(f"column {column!r} is not an embedding column ({store.EMBEDDING_PREFIX}*)")


def check_task_columns(dataset: lance.LanceDataset, settings: TaskSettings) -> None:
    """The columns and files a task's settings name: the embedding column, the candidates column, the group keys,
    the location-embedding column, a label-set or candidate file."""
    names = dataset.schema.names
    check_embedding_column(dataset, settings.column)
    candidates = settings.candidates_column()
    if candidates is not None:
        from cladebench.tasks.common import check_candidates_column

        check_candidates_column(dataset, candidates)
    for option, key in settings.group_keys().items():
        if key not in ("auto", "uuid") and key not in names:
            raise SchemaError(f"{option} {key!r} is not a column of {dataset.uri}")
        if key in names and pa.types.is_fixed_size_list(dataset.schema.field(key).type):
            raise UsageError(f"{option} {key!r} is a column of vectors; name a column whose equal values are one "
                             "observation (source_id, an observer, a site)")
    location, adds_location = settings.location_embedding()
    if location is not None and location not in names:
        raise SchemaError(f"--prior-location-column {location!r} is not in {dataset.uri}")
    if adds_location:
        from cladebench.tasks.geo.fusion import location_column

        location_column(names, location)  # the one loc_emb_* column, found (or missed) as the task will
    labels = settings.label_source()
    tree_of_life = settings.tree_of_life_labels()  # zero-shot's rule for its tree-of-life sets (False: a file)
    for option, value in (("--labels", None if tree_of_life else labels),
                          ("--lineage-candidates", settings.candidate_lineages())):
        if value is not None and value != "benchmark" and "://" not in value and not Path(value).is_file():
            raise CladebenchError(f"{option}: file not found: {value}")
    if labels is not None and "://" not in labels and not tree_of_life:
        check_label_file(Path(labels), settings.label_rank() or "species")


def check_label_file(path: Path, rank: str) -> None:
    """A --labels file that cannot give the two labels a task needs, whatever the benchmark's taxa: unreadable,
    not UTF-8, not a readable CSV, a CSV row without a name at the rank, or fewer than two names in all. Names
    are resolved against the benchmark later, by the task; nothing here depends on the dataset's rows."""
    from cladebench.tasks.common import label_set_from_file

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CladebenchError(f"--labels: cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CladebenchError(f"{path}: line {line}: not UTF-8 text (byte {data[exc.start]:#04x} at offset "
                              f"{exc.start}); save the file as UTF-8") from None
    if path.suffix.lower() in (".csv", ".tsv"):
        count = len(label_set_from_file(path, rank, []))  # a CSV names each label's lineage itself
    else:
        count = len({name for line in text.splitlines() if (name := line.split("#", 1)[0].strip())})
    if count < 2:
        raise CladebenchError(f"--labels {path}: {count} label(s) at rank {Rank.parse(rank).column}; a label set "
                              "needs at least 2")


def check_eval_settings(config: Any) -> None:
    """Refuse what is wrong whatever the dataset, as usage errors naming the option (every eval config's
    ``__post_init__`` calls this): the filter's form, an empty --group-by or --breakdown name, and (for the tasks
    that have them) an unknown --rank or a --within that is not RANK=NAME."""
    store.check_filter(config.where)
    store.check_filter(getattr(config, "prior_fit_where", None), option="--prior-fit-where")
    if not config.group_by.strip():
        raise UsageError("--group-by is empty; use 'auto', 'none' or a column name")
    for column in config.breakdown:
        if not column.strip():
            raise UsageError("--breakdown names an empty column")
    if len(set(config.breakdown)) != len(config.breakdown):
        raise UsageError(f"--breakdown lists a column twice: {' '.join(config.breakdown)}")
    if config.not_seen_by is not None and not config.not_seen_by.strip():
        raise UsageError("--not-seen-by is empty; name a model as seen_in_training lists it")
    rank = getattr(config, "rank", None)
    if rank is not None:
        Rank.parse(rank)
    for option in ("templates", "query_templates"):
        templates = getattr(config, option, None)
        if templates is not None:
            try:
                get_templates(templates)
            except ValueError as exc:  # an unknown set is an UnknownNameError (a UsageError) already
                raise UsageError(f"--{option.replace('_', '-')}: {exc}") from None
    name_style = getattr(config, "name_style", None)
    if name_style is not None:
        NAME_STYLES.get_named(name_style)
    group_key = getattr(config, "group_key", None)
    if group_key is not None and not group_key.strip():
        raise UsageError("--group-key is empty; use 'auto', 'uuid' or a column name")
    within = getattr(config, "within", None)
    if within is not None:
        parse_within(within)


def check_model_given(task: Task, settings: TaskSettings, *, model_named: bool) -> None:
    """A usage error when the task needs a model and none was named: tasks with a text tower always do, tasks on
    stored vectors only to find the column holding the model's embeddings."""
    if model_named:
        return
    if task.uses_encoder:
        raise UsageError(f"the {task.name} task needs --model (its text tower or endpoint scores the images)")
    if settings.column is None:
        raise UsageError(f"the {task.name} task needs --column emb_* (the stored vectors to evaluate) or --model "
                         "(to find the column holding its embeddings)")


def model_refusal(task: Task, spec: ModelSpec) -> str | None:
    """Why the model ``spec`` means cannot run ``task`` (what it lacks, e.g. "needs a text tower"), or None when it
    can: the task's needs (:attr:`cladebench.tasks.Task.needs`) against the kind's capabilities, asked, not named."""
    from cladebench.models.spec import lacking, missing_for

    missing = missing_for(task.needs, spec.capabilities)
    return None if missing is None else f"needs {lacking(missing)}"


def tasks_for(spec: ModelSpec) -> list[str]:
    """The tasks the model ``spec`` can run (each registered task's needs met by its capabilities)."""
    from cladebench.models.spec import missing_for
    from cladebench.tasks import all_tasks

    return [name for name, task in all_tasks().items() if missing_for(task.needs, spec.capabilities) is None]


def check_model_can(task: Task, spec: ModelSpec | None) -> None:
    """A usage error, before any weights load, when the model cannot run the task: one line naming the task, the
    model, what it lacks, and the tasks that do run on it."""
    if spec is None:
        return
    refusal = model_refusal(task, spec)
    if refusal is None:
        return
    from cladebench.provenance import redact_text

    runs = tasks_for(spec)
    raise UsageError(f"the {task.name} task {refusal}; model {redact_text(spec.name or spec.id)!r} is "
                     f"{spec.traits.described}, without it; tasks that run on it: {', '.join(runs) or 'none'}")


def check_prior_dataset(dataset: lance.LanceDataset, settings: TaskSettings) -> None:
    """The geo prior's other dataset opens (exit 3 when it is not there) and --prior-fit-where plans on the
    dataset it selects from."""
    fit_where, other = settings.prior_fit()
    if other is None and fit_where is None:
        return
    fit_dataset = store.open_dataset(other) if other is not None else dataset
    check_filter_on_schema(fit_dataset, fit_where, option="--prior-fit-where")


def check_before_model(dataset: lance.LanceDataset, config: Any, settings: TaskSettings,
                       where: str | None) -> None:
    """Every check of the command against the dataset that needs no model: run before any model loads. The
    user's --where is checked by itself first, so a refusal quotes it as typed."""
    check_filter_on_schema(dataset, config.where)
    check_filter_on_schema(dataset, where)
    check_group_by(dataset, config.group_by)
    check_breakdown(dataset, config.breakdown)
    check_task_columns(dataset, settings)
    check_prior_dataset(dataset, settings)
