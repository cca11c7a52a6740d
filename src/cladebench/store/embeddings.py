"""Embedding columns as the tasks read them: valid rows and their vectors, the failures table beside a column,
the columns benchmarks publish without our metadata, and the one row normaliser.

Embeddings are raw in storage, normalised in use: ``embed`` writes the model's raw outputs, and every reader
that compares by cosine normalises rows with :func:`normalise_rows` at the moment of use. These helpers live
with the store, below ``embed`` and the tasks, so that a task reads a column without importing the code that
writes it.

Published columns: Fine-Grained Challenges ships ``emb_bioclip``, ``emb_bioclip2`` and ``emb_bioclip2p5``:
vectors made by the Imageomics models, stored as plain lists with no record of the model on the field.
Evaluating them with the matching model saves encoding the images again, but only if the column is known to
hold that model's vectors; :data:`PUBLISHED_EMBEDDING_COLUMNS` says which, so a mismatch is still refused
rather than guessed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cladebench.errors import SchemaError
from cladebench.models.registry import resolve_model
from cladebench.registry import Registry
from cladebench.store.dataset import is_remote, read
from cladebench.store.sql import sql_identifier

if TYPE_CHECKING:
    import lance

STATE_DIR = "_cladebench"
"""The folder inside a local dataset where cladebench keeps what belongs to it but is not a column: the
failures tables of embedding columns, the staging and locks of ``embed`` runs."""

PUBLISHED_EMBEDDING_COLUMNS: Registry[str] = Registry("published embedding column")
"""Column name -> model alias (or id) of the model that made the published vectors."""


def register_published_column(column: str, model: str) -> None:
    """Declare that a published ``column`` holds embeddings of ``model`` (an alias or model id)."""
    PUBLISHED_EMBEDDING_COLUMNS.add(column, model)


for _column, _model in (("emb_bioclip", "bioclip"), ("emb_bioclip2", "bioclip-2"), ("emb_bioclip2p5", "bioclip-2.5")):
    register_published_column(_column, _model)


def published_metadata(column: str) -> dict[str, Any]:
    """Metadata for a published column, in the shape ``cladebench embed`` writes; empty when unknown.

    The revision is left out: the publisher does not record which weights they used beyond the model.
    """
    model = PUBLISHED_EMBEDDING_COLUMNS.get(column)
    if model is None:
        return {}
    return {"model": resolve_model(model).id, "source": "published with the dataset", "revision": None}


# --- the state beside a dataset -----------------------------------------------------------------------


def state_dir(uri: str) -> Path:
    """Where cladebench keeps a dataset's failures tables, staging and locks: ``<dataset>/_cladebench`` for a
    local dataset; for a remote one (``s3://``), a folder named after the URI in this machine's cache."""
    if is_remote(uri):
        from cladebench.cache import cache_dir

        return cache_dir() / "staging" / hashlib.sha256(uri.encode()).hexdigest()[:16]
    return Path(uri.removeprefix("file://")) / STATE_DIR


def failures_path(uri: str, column: str, *, name: str | None = None) -> Path:
    """The failures table of an embedding column (``name``: the file's name without ``.parquet`` when it is not
    the column's)."""
    return state_dir(uri) / "failures" / f"{name or column}.parquet"


def failures(uri: str, column: str) -> pa.Table:
    """The failures table of an embedding column: uuid, reason, column, model (empty when none failed)."""
    path = failures_path(uri, column)
    if not path.exists():
        return pa.table({"uuid": pa.array([], pa.string()), "reason": pa.array([], pa.string())})
    return pq.read_table(path)


# --- reading vectors ------------------------------------------------------------------------------------


def _is_float_vector(t: pa.DataType) -> bool:
    lists = pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t)
    return lists and pa.types.is_floating(t.value_type)


def valid_embeddings(dataset: lance.LanceDataset, column: str, *, where: str | None = None,
                     columns: Sequence[str] = ("uuid",), dim: int | None = None) -> tuple[pa.Table, np.ndarray]:
    """Rows with an embedding in ``column`` and the raw vectors as an (n, dim) float32 array.

    A column that is not a list of floats, whose vectors are not all one width, whose width differs from the
    ``dim`` its field metadata declares, or from ``dim`` when given (e.g. a text tower's width), is a
    :class:`SchemaError` naming it: scores over such vectors would be wrong or fail halfway.
    """
    if column not in dataset.schema.names:
        raise SchemaError(f"{dataset.uri} has no column {column!r}")
    found = dataset.schema.field(column)
    if not _is_float_vector(found.type):
        raise SchemaError(f"{dataset.uri}: column {column!r} has type {found.type}; an embedding column holds a "
                          "list of floats per row")
    declared = (found.metadata or {}).get(b"dim")
    expected = {"its field metadata": int(declared)} if declared is not None and declared.strip().isdigit() else {}
    if dim is not None:
        expected["the model"] = dim
    name = sql_identifier(column)
    table = read(dataset, columns=[*columns, column],
                       where=f"({where}) AND {name} IS NOT NULL" if where else f"{name} IS NOT NULL")
    values = table.column(column).combine_chunks()
    if pa.types.is_fixed_size_list(values.type):
        width = values.type.list_size
    else:  # published columns may be plain lists (of float16 or float32): every row must have one length
        lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
        width = int(lengths[0]) if len(lengths) else next(iter(expected.values()), 0)
        bad = np.flatnonzero(lengths != width)
        if bad.size:
            row = int(bad[0])
            where_row = f"uuid={table.column('uuid')[row]}" if "uuid" in table.column_names else f"#{row}"
            raise SchemaError(f"{dataset.uri}: column {column!r} row {where_row} has {lengths[row]} values where "
                              f"the first row has {width}: not one embedding space")
    for source, want in expected.items():
        if table.num_rows and width != want:
            raise SchemaError(f"{dataset.uri}: column {column!r} holds vectors of width {width}, but {source} "
                              f"says {want}; re-embed the column (cladebench embed --overwrite)")
    if width == 0:
        return table.drop_columns([column]), np.zeros((0, 0), np.float32)
    vectors = values.flatten().to_numpy(zero_copy_only=False).reshape(-1, width).astype(np.float32, copy=False)
    bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
    if bad.size:  # NaN or inf (e.g. float16 overflow in a published column) would score as anything
        row = int(bad[0])
        where_row = f"uuid={table.column('uuid')[row]}" if "uuid" in table.column_names else f"#{row}"
        raise SchemaError(f"{dataset.uri}: column {column!r} has non-finite values in {bad.size} row(s), first "
                          f"{where_row}; re-embed those rows or filter them out with --where")
    return table.drop_columns([column]), vectors



def normalise_rows(vectors: np.ndarray, *, dtype: Any = np.float32, floor: float = 1e-12) -> np.ndarray:
    """Each row L2-normalised (embeddings are raw in storage, normalised in use), computed in ``dtype``.

    ``dtype=None`` keeps the input's own dtype. A row's norm is raised to at least ``floor`` before the
    division, so an all-zero row comes back all zero; ``floor=0`` leaves it as the division makes it (NaN),
    for callers that refuse such rows before, or want them to show. The last axis is the vector's.

    Example:
        >>> normalise_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    vectors = np.asarray(vectors, dtype=dtype)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, floor)
