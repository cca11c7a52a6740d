"""Rows with a class label and a sampling group, read with their vectors from one or more embedding columns.

Why a module of its own: few-shot and retrieval both score frozen image embeddings against the benchmark's taxa,
with photos of one observation kept together (a group); they read the same rows the same way, and neither
task imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cladebench.errors import CladebenchError, SchemaError
from cladebench.tasks.common import has_direction, label_set
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank, lineages_from_table

if TYPE_CHECKING:
    import lance



LABEL_STYLE = "taxon"
"""Name style of the label strings (the full lineage, so homonyms in different clades stay apart)."""
AUTO_GROUP_KEY = "source_id"
"""Column ``group_key="auto"`` uses when the evaluated rows have values in it (else each image is its own group)."""


# --- rows ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelledRows:
    """The evaluated rows: ids, class labels, sampling groups and the vectors of each embedding column."""

    uuids: list[str]
    labels: list[str | None]
    """Class label (name style ``taxon``) per row; ``None`` when the row has no name at the rank."""
    classes: tuple[str, ...]
    """All labels present, in label-set order."""
    groups: list[str]
    """Sampling unit per row (a row without a group value is its own unit)."""
    group_key: str
    """The column the groups came from (``uuid`` when each image is its own unit)."""
    rows_without_group: int
    """Rows whose group value was null and that became their own unit."""
    vectors: dict[str, np.ndarray]
    """Raw vectors per column, rows aligned with ``uuids``."""
    rows_without_direction: int = 0
    """Rows left out because a vector was all zeros (or its norm not finite): SimpleShot's first step, and
    cosine kNN, need a direction, and a zero vector would silently land in the first class."""
    class_lineages: tuple[Lineage, ...] = ()
    """Each class's lineage (down to the rank), aligned with :attr:`classes`: what a mistake's LCA height is
    measured on."""


def _combined_where(where: str | None, columns: Sequence[str]) -> str | None:
    """The filter plus "every other column has a vector", so all columns are read over the same rows."""
    from cladebench.store import sql_identifier

    parts = [f"({where})"] if where else []
    parts.extend(f"{sql_identifier(c)} IS NOT NULL" for c in columns[1:])
    return " AND ".join(parts) or None


def _resolve_group_key(rows: pa.Table, group_key: str) -> str:
    if group_key != "auto":
        return group_key
    if AUTO_GROUP_KEY in rows.column_names and rows.column(AUTO_GROUP_KEY).null_count < rows.num_rows:
        return AUTO_GROUP_KEY
    return "uuid"


def read_labelled_rows(dataset: lance.LanceDataset, columns: Sequence[str], *, rank: Rank | str,
                       where: str | None = None, group_key: str = "auto",
                       keep_without_direction: bool = False) -> LabelledRows:
    """Rows with a vector in every one of ``columns`` (and matching ``where``), with labels and groups.

    Rows whose vector has no direction (all zeros, or a norm that is not finite) are left out and counted in
    ``rows_without_direction``, unless ``keep_without_direction`` (for a caller that lists them itself).
    """
    from cladebench.store.embeddings import valid_embeddings

    names = dataset.schema.names
    for column in columns:
        if column not in names:
            raise SchemaError(f"column {column!r} is not in {dataset.uri}")
    if group_key not in ("auto", "uuid") and group_key not in names:
        raise SchemaError(f"group_key {group_key!r} is not a column of {dataset.uri}")
    wanted = ["uuid", *(c for c in (*RANK_COLUMNS, "scientific_name") if c in names)]
    if group_key not in ("auto", "uuid") and group_key not in wanted:
        wanted.append(group_key)
    if group_key == "auto" and AUTO_GROUP_KEY in names:
        wanted.append(AUTO_GROUP_KEY)
    shared_where = _combined_where(where, columns)
    rows, first = valid_embeddings(dataset, columns[0], where=shared_where, columns=tuple(wanted))
    vectors = {columns[0]: first}
    uuids = rows.column("uuid").to_pylist()
    for column in columns[1:]:
        other_rows, other = valid_embeddings(dataset, column, where=_combined_where(where, [column, *columns]),
                                             columns=("uuid",))
        if other_rows.column("uuid").to_pylist() != uuids:
            raise CladebenchError(f"columns {columns[0]!r} and {column!r} were read in different row orders")
        vectors[column] = other

    directed = np.ones(rows.num_rows, dtype=bool)
    for array in () if keep_without_direction else vectors.values():
        directed &= has_direction(array)
    without_direction = int((~directed).sum())
    if without_direction:
        keep = np.flatnonzero(directed)
        rows = rows.take(pa.array(keep))
        vectors = {c: array[keep] for c, array in vectors.items()}
        uuids = rows.column("uuid").to_pylist()
        if not uuids:
            raise CladebenchError(f"no row has a usable vector in {', '.join(map(repr, columns))}: all "
                                  f"{without_direction:,} are all zeros (a vector without a direction)")

    rank = Rank.parse(rank)
    lineages = lineages_from_table(rows.select([c for c in wanted if c != "uuid"]))
    labels_in_order = label_set(lineages, rank)
    texts = labels_in_order.texts(LABEL_STYLE)
    index = labels_in_order.index_of()  # case ignored, as the label set is de-duplicated
    labels = [texts[index[lin.match_key(rank)]] if lin.names[rank] is not None else None for lin in lineages]

    key = _resolve_group_key(rows, group_key)
    values = uuids if key == "uuid" else rows.column(key).to_pylist()
    groups = [f"{key}={v}" if v is not None else f"uuid={u}" for v, u in zip(values, uuids, strict=True)]
    missing = 0 if key == "uuid" else sum(v is None for v in values)
    return LabelledRows(uuids=uuids, labels=labels, classes=tuple(texts), groups=groups, group_key=key,
                        rows_without_group=missing, vectors=vectors, rows_without_direction=without_direction,
                        class_lineages=labels_in_order.lineages)

