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

from pathlib import Path
from typing import Any

import pyarrow as pa

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.taxonomy import Rank

GROUPABLE_TYPES = "a string, integer, float or boolean column"
"""What a --group-by column may hold: each value becomes a filter literal of the column's own type."""


def check_filter_on_schema(dataset: Any, where: str | None, *, option: str = "--where") -> None:
    """Refuse a filter Lance cannot plan on this dataset (a syntax error, an unknown column, a type mismatch),
    without reading a row; the message keeps Lance's reason and drops its source location."""
    if where is None:
        return
    try:
        dataset.scanner(filter=where, columns=[dataset.schema.names[0]]).explain_plan()
    except (ValueError, OSError, RuntimeError) as exc:
        reason = str(exc).split(", /")[0].removeprefix("Invalid user input: ")
        raise UsageError(f"{option} {where!r}: {reason}") from None


def _groupable(kind: pa.DataType) -> bool:
    return (pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_dictionary(kind))


def check_group_by(dataset: Any, group_by: str) -> None:
    """--group-by names a column of the dataset whose type can name groups ('auto' and 'none' always pass)."""
    if group_by in ("auto", "none"):
        return
    if group_by not in dataset.schema.names:
        raise UsageError(f"--group-by {group_by!r}: no such column in {dataset.uri}")
    kind = dataset.schema.field(group_by).type
    if not _groupable(kind):
        raise UsageError(f"--group-by {group_by!r}: a column of type {kind} cannot name groups; use {GROUPABLE_TYPES}")


def check_breakdown(dataset: Any, columns: tuple[str, ...]) -> None:
    """Every --breakdown column is in the dataset."""
    for column in columns:
        if column not in dataset.schema.names:
            raise UsageError(f"--breakdown {column!r}: no such column in {dataset.uri}")


def check_task_columns(dataset: Any, settings: Any) -> None:
    """The columns and files a task's settings name: the embedding column, the candidates column, the group keys,
    the location-embedding column, a label-set or candidate file."""
    names = dataset.schema.names
    column = getattr(settings, "column", None)
    if column is not None:
        if column not in names:
            raise SchemaError(f"column {column!r} is not in {dataset.uri}")
        if not column.startswith(store.EMBEDDING_PREFIX):
            raise SchemaError(f"column {column!r} is not an embedding column ({store.EMBEDDING_PREFIX}*)")
    candidates = getattr(settings, "candidates", None)
    if candidates is not None and candidates not in names:
        raise SchemaError(f"--candidates {candidates!r}: no such column in {dataset.uri}")
    for option, key in (("--group-key", getattr(settings, "group_key", None)),
                        ("--prior-group-key", getattr(settings, "prior_group_key", None))):
        if key is not None and key not in ("auto", "uuid") and key not in names:
            raise SchemaError(f"{option} {key!r} is not a column of {dataset.uri}")
    location = getattr(settings, "prior_location_column", None)
    if location is not None and location not in names:
        raise SchemaError(f"--prior-location-column {location!r} is not in {dataset.uri}")
    for option, value in (("--labels", getattr(settings, "labels", None)),
                          ("--lineage-candidates", getattr(settings, "lineage_candidates", "benchmark"))):
        if value is not None and value != "benchmark" and "://" not in value and not Path(value).is_file():
            raise CladebenchError(f"{option}: file not found: {value}")


def check_eval_settings(config: Any) -> None:
    """Refuse what is wrong whatever the dataset, as usage errors naming the option (every eval config's
    ``__post_init__`` calls this): the filter's form, an empty --group-by or --breakdown name, and (for the tasks
    that have them) an unknown --rank or a --within that is not RANK=NAME."""
    store.check_filter(config.where)
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
    within = getattr(config, "within", None)
    if within is not None:
        rank_name, _, name = within.partition("=")
        if not name.strip():
            raise UsageError(f"--within takes RANK=NAME (e.g. class=Aves), got {within!r}")
        Rank.parse(rank_name.strip())


def check_before_model(dataset: Any, config: Any, settings: Any, where: str | None) -> None:
    """Every check of the command against the dataset that needs no model: run before any model loads."""
    check_filter_on_schema(dataset, where)
    check_group_by(dataset, config.group_by)
    check_breakdown(dataset, config.breakdown)
    check_task_columns(dataset, settings)
