"""Nearest-neighbour search over an ``emb_*`` column, through Lance's vector index or by exact brute force.

Retrieval tasks, few-shot support sets and the inspection of an embedding space all ask the same question:
which rows lie closest to these query vectors, among the rows that pass a filter (one ``challenge_group``,
the rows not ``seen_in_training``)? :func:`nearest` answers it with Lance's vector search, which uses the
IVF index when there is one; :func:`brute_force_nearest` answers it exactly with numpy, streaming the rows
through in batches. Both return the same table, so the exact answer is the reference the indexed one is
checked against (in the tests and in ``bench/nn_search.py``).

Two choices hold for both functions:

- **Cosine, always.** Embeddings are stored raw (the store's rule) and compared by cosine similarity at
  query time; the distance reported is ``1 - cosine similarity`` (Lance's cosine distance). Rows whose
  vector is null, all zeros or not finite have no cosine and are never returned (Lance skips them too).
- **The filter comes before the top-k** (Lance's *prefilter*). With a filter, the result is the k nearest
  rows *among the rows that pass it*, not the k nearest rows with the failures removed afterwards (which
  can return fewer than k rows, or none). The filter is a SQL ``WHERE`` clause evaluated by Lance in both
  functions, so the two agree on what passes. With an index and ``nprobes`` below the number of IVF
  partitions, only the probed partitions are searched, and a selective filter can then leave fewer than k
  rows; ``nprobes="all"`` makes the indexed search exhaustive (and equal to brute force).

Example:
    >>> import os, tempfile
    >>> import numpy as np, pyarrow as pa
    >>> from cladebench.store import embedding_field, write_dataset
    >>> vectors = np.array([[1, 0], [0, 1], [1, 1], [-1, 0]], dtype=np.float32)
    >>> field = embedding_field("toy", 2, {"model": "toy-model"})
    >>> table = pa.table({
    ...     "uuid": ["a", "b", "c", "d"],
    ...     "image": pa.array([b""] * 4, pa.large_binary()),
    ...     "challenge_group": ["x", "x", "y", "x"],
    ...     "emb_toy": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 2),
    ... }).cast(pa.schema([("uuid", pa.string()), ("image", pa.large_binary()), ("challenge_group", pa.string()),
    ...                    field]))
    >>> ds = write_dataset(table, os.path.join(tempfile.mkdtemp(), "toy.lance"))
    >>> hits = nearest(ds, "emb_toy", [1.0, 0.2], k=2)
    >>> hits.column("uuid").to_pylist()
    ['a', 'c']
    >>> nearest(ds, "emb_toy", [1.0, 0.2], k=2, where="challenge_group = 'x'").column("uuid").to_pylist()
    ['a', 'b']
    >>> brute_force_nearest(ds, "emb_toy", [1.0, 0.2], k=2, where="challenge_group = 'x'").column("uuid").to_pylist()
    ['a', 'b']
    >>> [round(s, 3) for s in hits.column("cosine_similarity").to_pylist()]
    [0.981, 0.832]
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.environment import defaults
from cladebench.errors import CladebenchError, SchemaError
from cladebench.store.embeddings import normalise_rows
from cladebench.store.schema import EMBEDDING_PREFIX, embedding_columns
from cladebench.store.species import holds_epithets, species_filter
from cladebench.store.sql import check_filter

if TYPE_CHECKING:
    import lance
    from numpy.typing import ArrayLike

QUERY_INDEX = "query_index"
"""Output column: which query vector (row of ``query_vectors``) a hit belongs to."""
DISTANCE = "distance"
"""Output column: cosine distance, ``1 - cosine similarity``, as Lance defines it."""
COSINE_SIMILARITY = "cosine_similarity"
"""Output column: cosine similarity between the query and the hit's vector."""
RESULT_COLUMNS = (QUERY_INDEX, DISTANCE, COSINE_SIMILARITY)

NProbes = int | Literal["all"] | None

# Floats of the query x rows similarity block that brute force holds at once (128 MiB of float64).
_SIMILARITY_BLOCK = 1 << 24


# --- validation ----------------------------------------------------------------------------------


def embedding_dim(dataset: lance.LanceDataset, column: str) -> int:
    """Dimension of an ``emb_*`` column; a :class:`SchemaError` when the column is missing or not an embedding."""
    names = dataset.schema.names
    known = embedding_columns(dataset.schema)
    if column not in names:
        raise SchemaError(
            f"column {column!r} is not in the dataset; its embedding columns are {known or 'none'}"
        )
    if not column.startswith(EMBEDDING_PREFIX):
        raise SchemaError(
            f"column {column!r} is not an embedding column (their names start with {EMBEDDING_PREFIX!r}); "
            f"the dataset's embedding columns are {known or 'none'}"
        )
    field_type = dataset.schema.field(column).type
    if not (pa.types.is_fixed_size_list(field_type) and pa.types.is_float32(field_type.value_type)):
        raise SchemaError(
            f"column {column!r}: expected fixed_size_list<float32>[D] for an embedding column, found {field_type}"
        )
    return field_type.list_size


def query_matrix(query_vectors: ArrayLike, dim: int, column: str) -> np.ndarray:
    """Query vectors as a C-contiguous float32 (n, dim) matrix; one vector may be given 1-D. Another width than
    ``column``'s, a NaN or an all-zero vector (no cosine) is refused in one line: every search checks its query
    here, the app's search from vectors in memory too."""
    try:
        queries = np.asarray(query_vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise CladebenchError(f"query vectors must be numbers in a 1-D or 2-D array: {exc}") from None
    if queries.ndim == 1:
        queries = queries[None, :]
    if queries.ndim != 2:
        raise CladebenchError(f"query vectors must be 1-D (one vector) or 2-D (one per row), got shape {queries.shape}")
    if queries.shape[0] == 0:
        raise CladebenchError("no query vectors were given")
    if queries.shape[1] != dim:
        raise SchemaError(
            f"query vectors have dimension {queries.shape[1]}, but column {column!r} has dimension {dim}"
        )
    finite = np.isfinite(queries).all(axis=1)
    if not finite.all():
        raise CladebenchError(f"query vector {int(np.argmin(finite))} has a NaN or infinite value")
    norms = np.linalg.norm(queries, axis=1)
    if not (norms > 0).all():
        raise CladebenchError(f"query vector {int(np.argmin(norms > 0))} is all zeros; its cosine is undefined")
    return np.ascontiguousarray(queries)


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise CladebenchError(f"k must be a positive integer, got {k!r}")
    return int(k)


def _check_columns(dataset: lance.LanceDataset, columns: Sequence[str]) -> list[str]:
    if isinstance(columns, str):
        columns = [columns]
    columns = list(columns)
    clash = [c for c in columns if c in RESULT_COLUMNS]
    if clash:
        raise CladebenchError(f"columns {clash} clash with the result's own columns {list(RESULT_COLUMNS)}")
    missing = [c for c in columns if c not in dataset.schema.names]
    if missing:
        raise SchemaError(f"column(s) {missing} are not in the dataset; it has {dataset.schema.names}")
    if len(set(columns)) != len(columns):
        raise CladebenchError(f"columns {columns} name a column twice")
    return columns


def _check_where(where: str | None, dataset: lance.LanceDataset | None = None) -> str | None:
    where = check_filter(where)  # one check for every filter: a ';' is refused, never dropped
    # A dataset written before species held the binomial: the filter's species means the binomial all the same.
    return species_filter(where) if where is not None and dataset is not None and holds_epithets(dataset) else where


def _lance_message(exc: BaseException) -> str:
    return str(exc).split(", /")[0]  # Lance appends Rust source locations


def vector_index_partitions(dataset: lance.LanceDataset, column: str) -> int | None:
    """Number of IVF partitions of the vector index on ``column`` (the largest over its segments), or None.

    This reads the index statistics, which is not free; resolve it once rather than per query. The statistics
    are asked for without the centroids (one vector per partition, which only the partition count is wanted
    from here), unless ``LANCE_INCLUDE_VECTOR_CENTROIDS`` says otherwise; Lance warns on every call that
    leaves that variable unset.
    """
    for index in dataset.describe_indices():
        if column in list(index.field_names) and str(index.index_type).upper().startswith("IVF"):
            with _without_centroids():
                stats = dataset.stats.index_stats(index.name)
            return max(int(segment["num_partitions"]) for segment in stats["indices"])
    return None


_CENTROIDS_VARIABLE = "LANCE_INCLUDE_VECTOR_CENTROIDS"


@contextlib.contextmanager
def _without_centroids() -> Iterator[None]:
    """``LANCE_INCLUDE_VECTOR_CENTROIDS=false`` for one statistics call (Lance reads it per call), unless set."""
    with defaults({_CENTROIDS_VARIABLE: "false"}):
        yield


# --- indexed (Lance) search ------------------------------------------------------------------------


def nearest(
    dataset: lance.LanceDataset,
    column: str,
    query_vectors: ArrayLike,
    *,
    k: int = 10,
    where: str | None = None,
    nprobes: NProbes = None,
    refine_factor: int | None = None,
    use_index: bool = True,
    columns: Sequence[str] = ("uuid",),
) -> pa.Table:
    """The ``k`` rows nearest each query vector by cosine, among the rows that pass ``where``, via Lance.

    Args:
        dataset: A Lance dataset with the ``emb_*`` column.
        column: The embedding column to search.
        query_vectors: One vector (1-D) or one per row (2-D), of the column's dimension; need not be normalised.
        k: Hits per query.
        where: A SQL filter, applied before the top-k (prefilter).
        nprobes: IVF partitions to probe; ``None`` lets Lance choose, ``"all"`` probes every partition (exact).
        refine_factor: Re-rank ``k * refine_factor`` candidates by exact distance (for quantised indices).
        use_index: False searches every row exactly, ignoring any index.
        columns: Dataset columns to return with each hit.

    Returns:
        One row per hit: ``query_index`` (int32), the ``columns``, ``distance`` and ``cosine_similarity``
        (float32), ordered by query, then nearest first. A query can have fewer than ``k`` hits when fewer
        rows pass the filter (or, with ``nprobes`` below the partition count, lie in the probed partitions).
    """
    dim = embedding_dim(dataset, column)
    queries = query_matrix(query_vectors, dim, column)
    k = _check_k(k)
    projection = _check_columns(dataset, columns)
    where = _check_where(where, dataset)
    search: dict[str, object] = {"column": column, "q": queries, "k": k, "metric": "cosine", "use_index": use_index}
    if nprobes == "all":
        # Lance clamps nprobes to the partition count; the row count bounds it without reading index stats.
        search["nprobes"] = max(1, dataset.count_rows())
    elif nprobes is not None:
        if isinstance(nprobes, bool) or not isinstance(nprobes, (int, np.integer)) or nprobes < 1:
            raise CladebenchError(f"nprobes must be a positive integer, 'all' or None, got {nprobes!r}")
        search["nprobes"] = int(nprobes)
    if refine_factor is not None:
        if isinstance(refine_factor, bool) or not isinstance(refine_factor, (int, np.integer)) or refine_factor < 1:
            raise CladebenchError(f"refine_factor must be a positive integer, got {refine_factor!r}")
        search["refine_factor"] = int(refine_factor)
    try:
        hits = dataset.to_table(
            columns=[*projection, "_distance"], nearest=search, filter=where, prefilter=where is not None,
        )
    except (ValueError, OSError, TypeError) as exc:
        raise CladebenchError(
            f"vector search on {column!r} with filter {where!r} failed: {_lance_message(exc)}"
        ) from None
    distance = hits.column("_distance").cast(pa.float32())
    result = pa.table(
        {
            QUERY_INDEX: hits.column(QUERY_INDEX).cast(pa.int32()),
            **{name: hits.column(name) for name in projection},
            DISTANCE: distance,
            COSINE_SIMILARITY: pc.subtract(pa.scalar(1.0, pa.float32()), distance),
        }
    )
    return result.sort_by([(QUERY_INDEX, "ascending"), (DISTANCE, "ascending")])


# --- exact (numpy) search ------------------------------------------------------------------------------


def _batch_vectors(array: pa.Array | pa.ChunkedArray, dim: int,
                   dtype: type[np.floating] = np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One batch's vectors as ``dtype`` (n, dim), their norms (float64), and a mask of the rows with a cosine.

    A row has a cosine when its vector is non-null, finite and not all zeros.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    n = len(array)
    values = array.values.slice(array.offset * dim, n * dim)
    vectors = values.to_numpy(zero_copy_only=False).reshape(n, dim)
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64))  # float64 whatever is stored
    valid = np.isfinite(norms) & (norms > 0)
    if array.null_count:
        valid &= ~array.is_null().to_numpy(zero_copy_only=False)
    return vectors.astype(dtype, copy=False), norms, valid


def unit_vectors(dataset: lance.LanceDataset, column: str, *,
                 batch_size: int = 65536) -> tuple[pa.ChunkedArray, np.ndarray, np.ndarray]:
    """Every row's ``uuid``, its vector in ``column`` at unit length (float32, rows in dataset order) and a mask of
    the rows that have a cosine (the others' vectors are zeros): what :func:`brute_force_nearest` compares each
    query with, for a caller that searches one column many times and keeps it in memory instead of reading it per
    query. Read in batches, so the only large array is the result (rows x dim x 4 bytes)."""
    dim = embedding_dim(dataset, column)
    rows = dataset.count_rows()
    vectors = np.zeros((rows, dim), dtype=np.float32)
    valid = np.zeros(rows, dtype=bool)
    uuids = []
    start = 0
    try:
        for batch in dataset.scanner(columns=["uuid", column], batch_size=batch_size, scan_in_order=True).to_batches():
            if batch.num_rows == 0:
                continue
            raw, norms, ok = _batch_vectors(batch.column(column), dim, dtype=np.float32)
            end = start + batch.num_rows
            np.divide(raw, norms[:, None], out=vectors[start:end], where=ok[:, None])
            valid[start:end] = ok
            uuids.append(batch.column("uuid"))
            start = end
    except (ValueError, OSError) as exc:
        raise CladebenchError(f"cannot read {column!r}: {_lance_message(exc)}") from None
    # One version throughout (a Lance dataset object is pinned to its version): the scan covers every counted row.
    return pa.chunked_array(uuids) if uuids else pa.chunked_array([], pa.string()), vectors, valid


def brute_force_nearest(
    dataset: lance.LanceDataset,
    column: str,
    query_vectors: ArrayLike,
    *,
    k: int = 10,
    where: str | None = None,
    columns: Sequence[str] = ("uuid",),
    batch_size: int | None = None,
) -> pa.Table:
    """The exact answer to :func:`nearest`: every row that passes ``where`` is compared with every query.

    Rows stream from Lance (which evaluates ``where``, so the filter means exactly what it means to
    :func:`nearest`) in batches of ``batch_size`` rows; each batch is L2-normalised and multiplied with
    the normalised queries in float64, and a running top-k per query is kept, so memory stays bounded
    by the batch. The result has the same columns and order as :func:`nearest`'s.
    """
    dim = embedding_dim(dataset, column)
    queries = query_matrix(query_vectors, dim, column)
    k = _check_k(k)
    projection = _check_columns(dataset, columns)
    where = _check_where(where, dataset)
    num_queries = len(queries)
    # float64 so that near-ties are ranked by the true cosine, whatever the batch size (the output is float32).
    unit_queries = normalise_rows(queries, dtype=np.float64, floor=0.0)  # no zero rows: query_matrix refused them
    if batch_size is None:
        batch_size = int(min(65536, max(1024, _SIMILARITY_BLOCK // num_queries)))
    read_columns = [column, *[c for c in projection if c != column]]
    try:
        scanner = dataset.scanner(columns=read_columns, filter=where, batch_size=batch_size, scan_in_order=True)
        batches = scanner.to_batches()
    except (ValueError, OSError, TypeError) as exc:
        raise CladebenchError(f"cannot read {column!r} with filter {where!r}: {_lance_message(exc)}") from None

    # Running top-k: best_similarity[q, j] is the similarity of best_rows row q * width + j.
    best_similarity = np.empty((num_queries, 0), dtype=np.float64)
    best_rows: pa.Table | None = None
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            vectors, norms, valid = _batch_vectors(batch.column(column), dim)
            similarity = unit_queries @ vectors.T
            similarity /= np.where(valid, norms, 1.0)[None, :]
            similarity[:, ~valid] = -np.inf
            width = best_similarity.shape[1]
            candidates = np.concatenate([best_similarity, similarity], axis=1)
            keep = min(k, candidates.shape[1])
            if keep < candidates.shape[1]:
                chosen = np.argpartition(-candidates, keep - 1, axis=1)[:, :keep]
            else:
                chosen = np.broadcast_to(np.arange(keep), (num_queries, keep))
            query_ids = np.arange(num_queries)[:, None]
            # Index into concat(best_rows, batch): earlier best first, then this batch's rows.
            take = np.where(chosen < width, query_ids * width + chosen, num_queries * width + (chosen - width))
            batch_rows = pa.Table.from_batches([batch]).select(projection)
            previous = batch_rows.slice(0, 0) if best_rows is None else best_rows
            best_rows = pa.concat_tables([previous, batch_rows]).take(pa.array(take.ravel()))
            best_similarity = np.take_along_axis(candidates, chosen, axis=1)
    except (ValueError, OSError) as exc:
        raise CladebenchError(f"cannot read {column!r} with filter {where!r}: {_lance_message(exc)}") from None

    if best_rows is None:  # no row passed the filter
        best_rows = pa.schema([dataset.schema.field(name) for name in projection]).empty_table()
    width = best_similarity.shape[1]
    order = np.argsort(-best_similarity, axis=1, kind="stable")
    sorted_similarity = np.take_along_axis(best_similarity, order, axis=1)
    rows = (np.arange(num_queries)[:, None] * width + order).ravel()
    found = np.isfinite(sorted_similarity).ravel()
    similarity = sorted_similarity.ravel()[found]
    hits = best_rows.take(pa.array(rows[found]))
    query_index = np.repeat(np.arange(num_queries, dtype=np.int32), width)[found]
    return pa.table(
        {
            QUERY_INDEX: pa.array(query_index, pa.int32()),
            **{name: hits.column(name) for name in projection},
            DISTANCE: pa.array((1.0 - similarity).astype(np.float32), pa.float32()),
            COSINE_SIMILARITY: pa.array(similarity.astype(np.float32), pa.float32()),
        }
    )


__all__ = [
    "COSINE_SIMILARITY",
    "DISTANCE",
    "QUERY_INDEX",
    "RESULT_COLUMNS",
    "brute_force_nearest",
    "embedding_dim",
    "nearest",
    "query_matrix",
    "unit_vectors",
    "vector_index_partitions",
]
