"""Nearest neighbours for the app: of a row ("more like this", the strips of the image page) and of a text.

Through the column's vector index when it has one (:func:`cladebench.store.search.nearest`), else by the exact
scan (:func:`~cladebench.store.search.brute_force_nearest`): the app never builds an index, because that writes a
new version of the dataset and the app only reads it (``cladebench search`` builds a column's missing index; a server
started afterwards uses it). A text is encoded by the text tower of the model named on the column
(or ``--model``), loaded once per server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cladebench.errors import CladebenchError, UsageError
from cladebench.serve.state import ServeState
from cladebench.store import embedding_columns, sql_literal
from cladebench.store.search import brute_force_nearest, nearest, vector_index_partitions

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


def row_vector(state: ServeState, column: str, uuid: str) -> np.ndarray | None:
    """The stored vector of row ``uuid`` in ``column``; None when the row has none (not embedded, failed)."""
    table = state.dataset.to_table(columns=[column], filter=f"uuid = {sql_literal(uuid)}", limit=1)
    if table.num_rows == 0 or not table.column(column)[0].is_valid:
        return None
    vector = np.asarray(table.column(column)[0].as_py(), dtype=np.float32)
    return vector if np.isfinite(vector).all() and np.any(vector) else None


def search(state: ServeState, column: str, vector: np.ndarray, *, k: int, where: str | None = None,
           exclude: str | None = None) -> Neighbours:
    """The ``k`` rows nearest ``vector`` in ``column`` among the rows passing ``where`` (``exclude`` left out)."""
    shown = [c for c in NAME_COLUMNS if c in state.columns]
    use_index = indexed(state, column)
    wanted = k + (1 if exclude is not None else 0)
    if use_index:
        table = nearest(state.dataset, column, vector, k=wanted, where=where, columns=shown)
    else:
        table = brute_force_nearest(state.dataset, column, vector, k=wanted, where=where, columns=shown)
    hits = [row for row in table.to_pylist() if row["uuid"] != exclude][:k]
    return Neighbours(column=column, hits=hits, indexed=use_index)


def like(state: ServeState, column: str, uuid: str, *, k: int, where: str | None = None) -> Neighbours | None:
    """The rows most like row ``uuid`` in ``column`` (itself left out); None when the row has no vector there."""
    vector = row_vector(state, column, uuid)
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
    encoder = state.remembered(("encoder", model), lambda: load_encoder(model, device=state.device))
    with state.encode_lock:
        return np.asarray(class_text_embeddings(encoder, [text], "raw")[0], dtype=np.float32)
