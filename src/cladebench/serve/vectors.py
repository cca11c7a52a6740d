"""Nearest neighbours for the app: of a row ("more like this", the strips of the image page) and of a text.

Through the column's vector index when it has one (:func:`cladebench.store.search.nearest`), else exactly: every
row compared, against the column's unit vectors kept in memory (read once per dataset version and column, on the
first page that needs them, within :data:`VECTOR_MEMORY`), or by the exact scan
(:func:`~cladebench.store.search.brute_force_nearest`) for a column too large to keep. The app never builds an index,
because that writes a new version of the dataset and the app only reads it (``cladebench search`` builds a column's
missing index; a server started afterwards uses it). A text is encoded by the text tower of the model named on the
column (or ``--model``), loaded once per server.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError, UsageError
from cladebench.serve.state import ServeState
from cladebench.store import embedding_columns, read, sql_literal
from cladebench.store.search import (
    brute_force_nearest,
    embedding_dim,
    nearest,
    query_matrix,
    unit_vectors,
    vector_index_partitions,
)

NAME_COLUMNS = ("uuid", "scientific_name", "species", "genus")
"""Columns read with each neighbour (what its cell shows)."""


@dataclass(frozen=True)
class Neighbours:
    """The hits of one search: rows nearest first, and how they were found."""

    column: str
    hits: list[dict[str, Any]]
    """uuid, the names, ``cosine_similarity``."""
    indexed: bool
    """True: through the vector index (approximate); False: every row compared (exact)."""


def columns_of(state: ServeState) -> list[str]:
    """The dataset's embedding columns."""
    return embedding_columns(state.dataset.schema)


def check_column(state: ServeState, column: str | None) -> str:
    """``column``, or the only embedding column when None; a usage error otherwise."""
    known = columns_of(state)
    if not known:
        raise UsageError("the dataset has no embedding column: run `cladebench embed` on it first")
    if column is None or column == "":
        return known[0]
    if column not in known:
        raise UsageError(f"no embedding column {column!r}; the dataset has {', '.join(known)}")
    return column


def indexed(state: ServeState, column: str) -> bool:
    """Whether ``column`` has a vector index (asked once per server)."""
    return state.remembered(("indexed", column), lambda: vector_index_partitions(state.dataset, column) is not None)


VECTOR_MEMORY = 1 << 30
"""Most bytes of unit vectors a server keeps in memory, all columns together (float32 values plus a byte per row:
100k rows of 512 floats take 205 MB; the rows' uuids add about 100 bytes each). When another column needs room,
the least recently searched goes; a column larger than this alone is read by the exact scan on every search, as
without the cache (a vector index, made by ``cladebench search``, is the fast way there)."""


@dataclass(frozen=True)
class UnitVectors:
    """One embedding column of the served version in memory (:func:`cladebench.store.search.unit_vectors`), so an
    exact search is one matrix product, without a read."""

    uuids: pa.Array
    """Every row's uuid, in dataset order."""
    vectors: np.ndarray
    """(rows, dim) float32, unit length; zeros where :attr:`valid` is False."""
    valid: np.ndarray
    """Whether the row has a cosine (a vector that is non-null, finite and not all zeros)."""
    positions: dict[str, int]
    """uuid -> its row."""

    @property
    def nbytes(self) -> int:
        return int(self.vectors.nbytes + self.valid.nbytes)


_LOADING = threading.Lock()
"""Guards the cache and its reads: two pages opened at once wait for one read of a column instead of making two
(and holding the column twice)."""


def cached_vectors(state: ServeState, column: str) -> UnitVectors | None:
    """``column``'s unit vectors at the served version: read on the first search, then kept (within
    :data:`VECTOR_MEMORY`, the least recently searched column dropped first); None for a column larger than that."""
    key = (state.version, column)  # the served version: a server that opens a newer one reads it afresh
    with _LOADING:
        cache: OrderedDict[tuple[int, str], UnitVectors | None] = state.remembered(("unit-vectors",), OrderedDict)
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        needed = state.dataset.count_rows() * (4 * embedding_dim(state.dataset, column) + 1)
        if needed > VECTOR_MEMORY:
            cache[key] = None  # remembered, so the size is not asked again
            return None
        while sum(v.nbytes for v in cache.values() if v is not None) + needed > VECTOR_MEMORY:
            cache.popitem(last=False)
        uuids, vectors, valid = unit_vectors(state.dataset, column)
        entry = UnitVectors(uuids=uuids.combine_chunks(), vectors=vectors, valid=valid,
                            positions={u: i for i, u in enumerate(uuids.to_pylist())})
        cache[key] = entry
        return entry


def row_vector(state: ServeState, column: str, uuid: str) -> np.ndarray | None:
    """The stored vector of row ``uuid`` in ``column``; None when the row has none (not embedded, failed)."""
    table = state.dataset.to_table(columns=[column], filter=f"uuid = {sql_literal(uuid)}", limit=1)
    if table.num_rows == 0 or not table.column(column)[0].is_valid:
        return None
    vector = np.asarray(table.column(column)[0].as_py(), dtype=np.float32)
    return vector if np.isfinite(vector).all() and np.any(vector) else None


def _in_memory(state: ServeState, cached: UnitVectors, vector: np.ndarray, *, k: int, where: str | None,
               exclude: str | None, shown: list[str]) -> list[dict[str, object]]:
    """:func:`~cladebench.store.search.brute_force_nearest`'s hits (most similar first, dataset order among
    equals), from the vectors in memory; ``where`` is evaluated by Lance, as there."""
    similarity = cached.vectors @ (vector.astype(np.float32) / np.linalg.norm(vector))
    passing = cached.valid.copy()
    if where:
        rows = pc.index_in(read(state.dataset, columns=["uuid"], where=where).column("uuid"),
                           value_set=cached.uuids)
        allowed = np.zeros_like(passing)
        allowed[rows.drop_null().to_numpy()] = True
        passing &= allowed
    if exclude is not None and exclude in cached.positions:
        passing[cached.positions[exclude]] = False
    candidates = np.flatnonzero(passing)
    if len(candidates) > k:
        candidates = candidates[np.argpartition(-similarity[candidates], k - 1)[:k]]
    candidates = candidates[np.lexsort((candidates, -similarity[candidates]))]
    table = state.dataset.take(candidates.tolist(), columns=shown)
    return [{**row, "cosine_similarity": float(similarity[i]), "distance": float(1.0 - similarity[i])}
            for row, i in zip(table.to_pylist(), candidates, strict=True)]


def search(state: ServeState, column: str, vector: np.ndarray, *, k: int, where: str | None = None,
           exclude: str | None = None) -> Neighbours:
    """The ``k`` rows nearest ``vector`` in ``column`` among the rows passing ``where`` (``exclude`` left out)."""
    shown = [c for c in NAME_COLUMNS if c in state.columns]
    use_index = indexed(state, column)
    cached = None if use_index else cached_vectors(state, column)
    if cached is not None:
        # The scan's check of the query: another width (a text model not the column's), NaN or zeros is one line.
        vector = query_matrix(vector, cached.vectors.shape[1], column)[0]
        return Neighbours(column=column, hits=_in_memory(state, cached, vector, k=k, where=where, exclude=exclude,
                                                         shown=shown), indexed=False)
    wanted = k + (1 if exclude is not None else 0)
    if use_index:
        table = nearest(state.dataset, column, vector, k=wanted, where=where, columns=shown)
    else:
        table = brute_force_nearest(state.dataset, column, vector, k=wanted, where=where, columns=shown)
    hits = [row for row in table.to_pylist() if row["uuid"] != exclude][:k]
    return Neighbours(column=column, hits=hits, indexed=use_index)


def like(state: ServeState, column: str, uuid: str, *, k: int, where: str | None = None) -> Neighbours | None:
    """The rows most like row ``uuid`` in ``column`` (itself left out); None when the row has no vector there."""
    cached = None if indexed(state, column) else cached_vectors(state, column)
    if cached is None:
        vector = row_vector(state, column, uuid)
    else:
        at = cached.positions.get(uuid)
        vector = None if at is None or not cached.valid[at] else cached.vectors[at]
    return None if vector is None else search(state, column, vector, k=k, where=where, exclude=uuid)


def column_model(state: ServeState, column: str) -> str:
    """The model whose text tower matches ``column``: ``--model``, else the one the column's metadata names."""
    if state.model:
        return state.model
    from cladebench.tasks.common import column_metadata

    model = column_metadata(state.dataset, column).get("model")
    if not model:
        raise CladebenchError(f"{column} does not name its model; start serve with --model to search it by text")
    return str(model)


def text_vector(state: ServeState, column: str, text: str) -> np.ndarray:
    """``text`` encoded by the text tower of ``column``'s model (loaded once per server), unit length."""
    from cladebench.models import class_text_embeddings, load_encoder

    model = column_model(state, column)
    encoder = state.remembered(("encoder", model),
                               lambda: load_encoder(model, device=state.device, texts="text search"))
    with state.encode_lock:
        return np.asarray(class_text_embeddings(encoder, [text], "raw")[0], dtype=np.float32)
