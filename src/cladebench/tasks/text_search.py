"""Text-to-image search over a dataset, and INQUIRE-style fullrank ranking and scoring of it.

``cladebench search DATASET "text" --model M`` encodes the text with the model's text tower and asks
Lance for the nearest images in the model's ``emb_*`` column through an IVF index (built when the
column has none, since a search over millions of rows should not scan them all). That answer is
approximate: Lance probes only some of the index's partitions.

With a query file and an annotation file it becomes a fullrank evaluation as INQUIRE defines it
(``src/eval_fullrank.py``): for each query the top ``k`` images (50 by default, as there) are retrieved,
a retrieved image is relevant when its key (``--match-column``, e.g. ``inat24_file_name``) is among the
query's annotated positives, and AP@k is normalised by min(annotated positives, k), so positives the
search missed count against it (:mod:`cladebench.metrics.retrieval`). The evaluation ranks **exactly**:
every row that passes the filter is compared with every query (:func:`cladebench.store.search.brute_force_nearest`),
never through the index, because INQUIRE's fullrank ranks its whole gallery and an index's missed
neighbours would lower every metric by an amount that depends on the index. The run record says so.

When a filter leaves a query fewer than ``k`` rows, the query is scored over the rows it has, as INQUIRE's
``compute_retrieval_metrics`` scores the list it is given (its cutoff is the list's length): AP is
normalised by min(annotated positives, rows), precision divided by the rows. The run record of a fullrank
evaluation is written by :mod:`cladebench.evaluate.fullrank` (tasks predict and score; they write no records).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cladebench import store
from cladebench.config import at_least
from cladebench.errors import CladebenchError, UsageError
from cladebench.store.search import brute_force_nearest, nearest, vector_index_partitions
from cladebench.tasks.common import find_embedding_column

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder
    from cladebench.store.search import NProbes

SEARCH_K = 20
"""Hits an interactive search shows by default."""
FULLRANK_K = 50
"""Cutoff of a fullrank evaluation by default: INQUIRE's ``eval_fullrank.py --k`` default."""

EXACT_RANKING = ("exact: every row that passes the filter and has a finite, non-zero vector is compared with every "
                 "query by cosine (numpy, float64), no vector index; the whole gallery is ranked, as in INQUIRE's "
                 "fullrank")
"""How a fullrank evaluation ranks, as its run record states it."""


@dataclass(frozen=True)
class SearchResult:
    """Hits of each query, nearest first, and how the search was done."""

    hits: pa.Table
    """``query_index``, the requested columns, ``cosine_similarity``, ``rank`` (1-based within its query)."""
    column: str
    index_built: bool
    """Whether this search built the IVF index (it is kept for the next search)."""
    exact: bool = False
    """Whether every row was compared (no index): the exact nearest rows."""
    version: int | None = None
    """The dataset version searched: the new one that building the index wrote, when ``index_built``."""


def ensure_index(dataset: lance.LanceDataset, column: str) -> tuple[lance.LanceDataset, bool]:
    """The dataset with an IVF index on ``column``; builds one (about sqrt(rows) partitions) when missing."""
    if vector_index_partitions(dataset, column) is not None:
        return dataset, False
    return store.create_vector_index(dataset, column), True


def check_k(k: int) -> int:
    """``k`` as an int; anything but an integer of at least 1 is a usage error naming ``--k``."""
    try:
        at_least("--k", k, 1)
    except UsageError:  # the range check of every option, in the words `search --k` has always used
        raise UsageError(f"--k must be a positive integer, got {k!r}") from None
    return int(k)


def search_text(dataset: lance.LanceDataset, encoder: Encoder, texts: Sequence[str], *, k: int = SEARCH_K,
                where: str | None = None, column: str | None = None, templates: str = "raw",
                columns: Sequence[str] = ("uuid",), nprobes: NProbes = None, exact: bool = False) -> SearchResult:
    """The ``k`` images nearest each text (cosine), among rows passing ``where``.

    By default through the IVF index (built when missing; approximate, ``nprobes`` partitions probed);
    ``exact`` compares every row instead, touching no index (what an evaluation needs).
    """
    from cladebench.models import class_text_embeddings

    k = check_k(k)
    column = column or find_embedding_column(dataset, encoder.model_id)
    vectors = class_text_embeddings(encoder, list(texts), templates)
    if exact:
        built = False
        hits = brute_force_nearest(dataset, column, vectors, k=k, where=where, columns=columns)
    else:
        dataset, built = ensure_index(dataset, column)
        hits = nearest(dataset, column, vectors, k=k, where=where, nprobes=nprobes, columns=columns)
    query_index = np.asarray(hits.column("query_index").to_numpy(zero_copy_only=False))
    ranks = np.zeros(len(query_index), dtype=np.int32)
    for q in np.unique(query_index):
        positions = np.flatnonzero(query_index == q)
        ranks[positions] = np.arange(1, len(positions) + 1)
    return SearchResult(hits=hits.append_column("rank", pa.array(ranks)), column=column, index_built=built,
                        exact=exact, version=dataset.version)


def fullrank(dataset: lance.LanceDataset, encoder: Encoder, queries: pa.Table, annotations: pa.Table, *,
             match_column: str, k: int = FULLRANK_K, where: str | None = None, column: str | None = None,
             templates: str = "raw") -> tuple[pa.Table, dict[str, Any]]:
    """INQUIRE fullrank: per query, the exact top ``k`` images and INQUIRE's metrics against all annotated positives.

    ``queries`` has ``query_id`` and ``query_text``; ``annotations`` has ``query_id`` and the image key
    (``inat24_file_name`` as :func:`cladebench.benchmarks.inquire.source.read_inquire_annotations` gives it). Returns
    one row per retrieved image (query_id, rank, uuid, key, score, relevant) and the per-query table.
    The ranking is exact (:data:`EXACT_RANKING`). One row beyond the cutoff is looked at, so that a tie
    straddling the cutoff is seen and counted (``ties_at_cut``); it is not part of the output.
    """
    from cladebench.metrics.retrieval import score_ragged

    k = check_k(k)
    if match_column not in dataset.schema.names:
        raise CladebenchError(f"--match-column {match_column!r} is not a column of {dataset.uri}")
    key_column = match_column if match_column in annotations.column_names else "inat24_file_name"
    positives: dict[int, set[str]] = {}
    for query_id, key in zip(annotations.column("query_id").to_pylist(), annotations.column(key_column).to_pylist(),
                             strict=True):
        positives.setdefault(int(query_id), set()).add(str(key))
    ids = [int(q) for q in queries.column("query_id").to_pylist()]
    texts = queries.column("query_text").to_pylist()
    result = search_text(dataset, encoder, texts, k=k + 1, where=where, column=column, templates=templates,
                         columns=("uuid", match_column), exact=True)
    hits = result.hits
    if hits.num_rows == 0:
        scope = f"passes the filter {where!r} and " if where else ""
        raise CladebenchError(f"no row of {dataset.uri} {scope}has a vector in {result.column}: nothing to rank")
    query_index = np.asarray(hits.column("query_index").to_numpy(zero_copy_only=False))
    keys = [str(v) for v in hits.column(match_column).to_pylist()]
    scores = np.asarray(hits.column("cosine_similarity").to_numpy(zero_copy_only=False), dtype=np.float64)
    relevant = np.array([key in positives.get(ids[q], ()) for q, key in zip(query_index, keys, strict=True)])
    ranks = np.asarray(hits.column("rank").to_numpy(zero_copy_only=False))
    relevances, score_lists, counts = [], [], []
    for q, query_id in enumerate(ids):
        positions = np.flatnonzero(query_index == q)
        # The list as retrieved (k + 1 rows at most); the metrics keep its top min(k, rows), the extra row
        # only shows whether a tie straddles the cut.
        relevances.append(relevant[positions].astype(np.int64))
        score_lists.append(scores[positions])
        counts.append(max(len(positives.get(query_id, ())), int(relevant[positions].sum())))
    per_query = score_ragged(relevances, score_lists, k, count_pos=np.asarray(counts))
    kept = ranks <= k
    table = pa.table({
        "query_id": pa.array([ids[q] for q in query_index[kept]], pa.int64()),
        "rank": hits.column("rank").filter(pa.array(kept)), "uuid": hits.column("uuid").filter(pa.array(kept)),
        match_column: pa.array([key for key, keep in zip(keys, kept, strict=True) if keep]),
        "score": pa.array(scores[kept]), "relevant": pa.array(relevant[kept]),
    })
    return table, {"per_query": per_query, "query_ids": ids, "column": result.column,
                   "ranking": EXACT_RANKING, "positives": counts}
