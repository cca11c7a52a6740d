"""Text-to-image search over a dataset, and INQUIRE-style fullrank evaluation of it.

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
normalised by min(annotated positives, rows), precision divided by the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cladebench import store
from cladebench.errors import CladebenchError, UsageError
from cladebench.store.search import brute_force_nearest, nearest, vector_index_partitions
from cladebench.tasks.zeroshot import find_embedding_column

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder

SEARCH_K = 20
"""Hits an interactive search shows by default."""
FULLRANK_K = 50
"""Cutoff of a fullrank evaluation by default: INQUIRE's ``eval_fullrank.py --k`` default."""

EXACT_RANKING = ("exact: every row that passes the filter and has a finite, non-zero vector is compared with every "
                 "query by cosine (numpy, float64), no vector index; the whole gallery is ranked, as in INQUIRE's "
                 "fullrank")
"""How a fullrank evaluation ranks, as its run record states it."""
SHORT_LIST_RULE = ("a query with fewer than k rows passing the filter is scored over the rows it has (cutoff c = "
                   "rows): AP normalised by min(count_pos, c), precision divided by c, as INQUIRE's "
                   "compute_retrieval_metrics cuts at the length of the list it is given")
"""How a query whose filter leaves fewer than k rows is scored."""
COUNT_POS_RULE = ("count_pos is the query's annotated positives (all of them, whether or not they pass the filter), "
                  "as INQUIRE's len(pos_images); at least the relevant rows retrieved")
"""What a fullrank query's count_pos is."""


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


def ensure_index(dataset: lance.LanceDataset, column: str) -> tuple[lance.LanceDataset, bool]:
    """The dataset with an IVF index on ``column``; builds one (about sqrt(rows) partitions) when missing."""
    if vector_index_partitions(dataset, column) is not None:
        return dataset, False
    return store.create_vector_index(dataset, column), True


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise UsageError(f"--k must be a positive integer, got {k!r}")
    return int(k)


def search_text(dataset: lance.LanceDataset, encoder: Encoder, texts: Sequence[str], *, k: int = SEARCH_K,
                where: str | None = None, column: str | None = None, templates: str = "raw",
                columns: Sequence[str] = ("uuid",), nprobes: Any = None, exact: bool = False) -> SearchResult:
    """The ``k`` images nearest each text (cosine), among rows passing ``where``.

    By default through the IVF index (built when missing; approximate, ``nprobes`` partitions probed);
    ``exact`` compares every row instead, touching no index (what an evaluation needs).
    """
    from cladebench.models import class_text_embeddings

    k = _check_k(k)
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
                        exact=exact)


def fullrank(dataset: lance.LanceDataset, encoder: Encoder, queries: pa.Table, annotations: pa.Table, *,
             match_column: str, k: int = FULLRANK_K, where: str | None = None, column: str | None = None,
             templates: str = "raw") -> tuple[pa.Table, dict[str, Any]]:
    """INQUIRE fullrank: per query, the exact top ``k`` images and INQUIRE's metrics against all annotated positives.

    ``queries`` has ``query_id`` and ``query_text``; ``annotations`` has ``query_id`` and the image key
    (``inat24_file_name`` as :func:`cladebench.curate.sources.inquire.read_inquire_annotations` gives it). Returns
    one row per retrieved image (query_id, rank, uuid, key, score, relevant) and the per-query table.
    The ranking is exact (:data:`EXACT_RANKING`). One row beyond the cutoff is looked at, so that a tie
    straddling the cutoff is seen and counted (``ties_at_cut``); it is not part of the output.
    """
    from cladebench.metrics.retrieval import score_ragged

    k = _check_k(k)
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


def write_fullrank_record(dataset: lance.LanceDataset, encoder: Encoder, command: Any) -> tuple[Any, Any]:
    """Run :func:`fullrank` for ``cladebench search --queries --annotations`` and write its run record."""
    import hashlib
    from pathlib import Path

    from cladebench.curate.sources.inquire import read_inquire_annotations, read_inquire_queries
    from cladebench.evaluate.record import (
        RunRecord,
        check_out_outside_dataset,
        command_line,
        dataset_provenance,
        metric_definitions,
        software_versions,
    )
    from cladebench.metrics.retrieval import RetrievalConfig, summarize, summarize_by

    check_out_outside_dataset(command.out, command.dataset)
    queries = read_inquire_queries(command.queries)
    annotations = read_inquire_annotations(command.annotations)
    k = FULLRANK_K if command.k is None else _check_k(command.k)
    table, info = fullrank(dataset, encoder, queries, annotations, match_column=command.match_column, k=k,
                           where=command.where, column=command.column, templates=command.templates)
    per_query = info["per_query"]
    config = RetrievalConfig(k=k)
    metrics = {name: estimate.to_dict() for name, estimate in summarize(per_query, config).estimates.items()}
    supercategories = [str(s) for s in queries.column("supercategory").to_pylist()]
    for group, summary in summarize_by(per_query, supercategories, config).items():
        for name, estimate in summary.estimates.items():
            metrics[f"supercategory={group}/{name}"] = estimate.to_dict()
    files = {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (command.queries, command.annotations)}
    described = encoder.describe()
    provenance = {
        "dataset": dataset_provenance(dataset, command.dataset, where=command.where,
                                      evaluated_uuids=sorted(set(table.column("uuid").to_pylist()))),
        "split": {"kind": "none: every query searches the whole (filtered) dataset", "seed": None,
                  "sampling_unit": "query"},
        "label_set": {"kind": "queries", "size": len(info["query_ids"]), "files_sha256": files},
        "model": {"id": described["model_id"], "revision": described.get("revision"),
                  "image_embeddings": {"column": info["column"]}},
        "prompts": {"templates_name": command.templates},
        "task": {"protocol": "INQUIRE fullrank", "k": k, "match_column": command.match_column,
                 "ranking": info["ranking"], "annotated_positives": info["positives"],
                 "count_pos_rule": COUNT_POS_RULE,
                 "short_lists": int((per_query.cutoff < k).sum()), "short_list_rule": SHORT_LIST_RULE,
                 **per_query.tie_counts()},
        "metrics": metric_definitions(sorted({n.rsplit("/", 1)[-1] for n in metrics})),
        "software": software_versions(),
        "command": command_line(),
    }
    settings = {name: str(v) if isinstance(v, Path) else v for name, v in vars(command).items()}
    record = RunRecord(task="fullrank", metrics=metrics, provenance=provenance, config={**settings, "k": k})
    return record, record.write(command.out, table)
