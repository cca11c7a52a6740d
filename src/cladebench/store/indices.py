"""Indices on a dataset: IVF-FLAT on embedding columns (cosine: raw vectors, normalised in use) and B-tree or
bitmap on scalar columns, built in place and listed for ``info``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import pyarrow as pa

from cladebench.errors import SchemaError
from cladebench.store.dataset import column_field

if TYPE_CHECKING:
    import lance


VectorMetric = Literal["cosine", "l2", "dot"]


def create_vector_index(dataset: lance.LanceDataset, column: str, *, metric: VectorMetric = "cosine",
                        num_partitions: int | None = None) -> lance.LanceDataset:
    """Build an IVF_FLAT index on an ``emb_*`` column (cosine by default: raw vectors, normalised in use).

    ``num_partitions`` defaults to about sqrt(rows), the usual IVF rule of thumb, at least 1.
    """
    field = column_field(dataset, column)
    if not pa.types.is_fixed_size_list(field.type):
        raise SchemaError(f"column {column!r}: a vector index needs fixed_size_list<float32>, found {field.type}")
    rows = dataset.count_rows()
    if num_partitions is None:
        num_partitions = max(1, min(4096, int(rows**0.5)))
    return dataset.create_index(column, index_type="IVF_FLAT", metric=metric, num_partitions=num_partitions,
                                replace=True)


ScalarIndexKind = Literal["BTREE", "BITMAP"]


def create_scalar_index(dataset: lance.LanceDataset, column: str, kind: ScalarIndexKind = "BTREE") -> None:
    """Build a scalar index: BTREE for many distinct values (uuid, taxon_id), BITMAP for few (groups, ranks)."""
    column_field(dataset, column)
    if kind not in ("BTREE", "BITMAP"):
        raise SchemaError(f"unknown scalar index kind {kind!r}; use BTREE or BITMAP")
    dataset.create_scalar_index(column, index_type=kind, replace=True)


def indices(dataset: lance.LanceDataset) -> list[dict[str, object]]:
    """The dataset's indices: name, type and columns."""
    out = []
    for index in dataset.describe_indices():
        out.append({
            "name": index.name,
            "type": getattr(index, "index_type", None) or str(getattr(index, "type", "")),
            "columns": list(getattr(index, "field_names", None) or getattr(index, "fields", []) or []),
        })
    return out
