"""Text-to-image search over a dataset, and INQUIRE-style fullrank evaluation of it.

``cladebench search DATASET "text" --model M`` encodes the text with the model's text tower and asks
Lance for the nearest images in the model's ``emb_*`` column through an IVF index (built when the
column has none, since a search over millions of rows should not scan them all). With a query file and
an annotation file it becomes a fullrank evaluation as INQUIRE defines it: for each query the top 50
images are retrieved, a retrieved image is relevant when its key (``--match-column``, e.g.
``inat24_file_name``) is among the query's annotated positives, and AP@50 is normalised by
min(annotated positives, 50), so positives the search missed count against it
(:mod:`cladebench.retrieval_metrics`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cladebench import store
from cladebench.errors import CladebenchError
from cladebench.search import nearest, vector_index_partitions
from cladebench.tasks.zeroshot import find_embedding_column

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder


@dataclass(frozen=True)
class SearchResult:
    """Hits of each query, nearest first, and how the search was done."""

    hits: pa.Table
    """``query_index``, the requested columns, ``cosine_similarity``, ``rank`` (1-based within its query)."""
    column: str
    index_built: bool
    """Whether this search built the IVF index (it is kept for the next search)."""


def ensure_index(dataset: lance.LanceDataset, column: str) -> tuple[lance.LanceDataset, bool]:
    """The dataset with an IVF index on ``column``; builds one (about sqrt(rows) partitions) when missing."""
    if vector_index_partitions(dataset, column) is not None:
        return dataset, False
    return store.create_vector_index(dataset, column), True


def search_text(dataset: lance.LanceDataset, encoder: Encoder, texts: Sequence[str], *, k: int = 20,
                where: str | None = None, column: str | None = None, templates: str = "raw",
                columns: Sequence[str] = ("uuid",), nprobes: Any = None) -> SearchResult:
    """The ``k`` images nearest each text (cosine), among rows passing ``where``, through the IVF index."""
    from cladebench.models import class_text_embeddings

    column = column or find_embedding_column(dataset, encoder.model_id)
    dataset, built = ensure_index(dataset, column)
    vectors = class_text_embeddings(encoder, list(texts), templates)
    hits = nearest(dataset, column, vectors, k=k, where=where, nprobes=nprobes, columns=columns)
    query_index = np.asarray(hits.column("query_index").to_numpy(zero_copy_only=False))
    ranks = np.zeros(len(query_index), dtype=np.int32)
    for q in np.unique(query_index):
        positions = np.flatnonzero(query_index == q)
        ranks[positions] = np.arange(1, len(positions) + 1)
    return SearchResult(hits=hits.append_column("rank", pa.array(ranks)), column=column, index_built=built)


def fullrank(dataset: lance.LanceDataset, encoder: Encoder, queries: pa.Table, annotations: pa.Table, *,
             match_column: str, k: int = 50, where: str | None = None, column: str | None = None,
             templates: str = "raw", nprobes: Any = None) -> tuple[pa.Table, dict[str, Any]]:
    """INQUIRE fullrank: per query, the top ``k`` images and INQUIRE's metrics against all annotated positives.

    ``queries`` has ``query_id`` and ``query_text``; ``annotations`` has ``query_id`` and the image key
    (``inat24_file_name`` as :func:`cladebench.sources.inquire.read_inquire_annotations` gives it). Returns
    one row per retrieved image (query_id, rank, uuid, key, score, relevant) and the per-query table.
    """
    from cladebench.retrieval_metrics import score_ragged

    if match_column not in dataset.schema.names:
        raise CladebenchError(f"--match-column {match_column!r} is not a column of {dataset.uri}")
    key_column = match_column if match_column in annotations.column_names else "inat24_file_name"
    positives: dict[int, set[str]] = {}
    for query_id, key in zip(annotations.column("query_id").to_pylist(), annotations.column(key_column).to_pylist(),
                             strict=True):
        positives.setdefault(int(query_id), set()).add(str(key))
    ids = [int(q) for q in queries.column("query_id").to_pylist()]
    texts = queries.column("query_text").to_pylist()
    result = search_text(dataset, encoder, texts, k=k, where=where, column=column, templates=templates,
                         columns=("uuid", match_column), nprobes=nprobes)
    hits = result.hits
    query_index = np.asarray(hits.column("query_index").to_numpy(zero_copy_only=False))
    keys = [str(v) for v in hits.column(match_column).to_pylist()]
    scores = np.asarray(hits.column("cosine_similarity").to_numpy(zero_copy_only=False), dtype=np.float64)
    relevant = np.array([key in positives.get(ids[q], ()) for q, key in zip(query_index, keys, strict=True)])
    relevances, score_lists, counts = [], [], []
    for q, query_id in enumerate(ids):
        positions = np.flatnonzero(query_index == q)
        # Fewer than k hits (a filter leaving fewer than k rows) count as k - hits misses at the bottom, so
        # AP stays normalised by min(positives, k) and precision by k, as over a full gallery.
        missing = k - len(positions)
        floor = float(scores[positions].min()) - 1.0 if len(positions) else 0.0
        relevances.append(np.concatenate([relevant[positions].astype(np.int64), np.zeros(missing, np.int64)]))
        score_lists.append(np.concatenate([scores[positions], np.full(missing, floor)]))
        counts.append(max(len(positives.get(query_id, ())), int(relevant[positions].sum())))
    per_query = score_ragged(relevances, score_lists, k, count_pos=np.asarray(counts))
    table = pa.table({
        "query_id": pa.array([ids[q] for q in query_index], pa.int64()),
        "rank": hits.column("rank"), "uuid": hits.column("uuid"), match_column: pa.array(keys),
        "score": pa.array(scores), "relevant": pa.array(relevant),
    })
    return table, {"per_query": per_query, "query_ids": ids, "column": result.column,
                   "index_built": result.index_built, "positives": counts}


def write_fullrank_record(dataset: lance.LanceDataset, encoder: Encoder, command: Any) -> tuple[Any, Any]:
    """Run :func:`fullrank` for ``cladebench search --queries --annotations`` and write its run record."""
    import hashlib
    from pathlib import Path

    from cladebench.results import (
        RunRecord,
        command_line,
        dataset_provenance,
        metric_definitions,
        software_versions,
    )
    from cladebench.retrieval_metrics import RetrievalConfig, summarize, summarize_by
    from cladebench.sources.inquire import read_inquire_annotations, read_inquire_queries

    queries = read_inquire_queries(command.queries)
    annotations = read_inquire_annotations(command.annotations)
    table, info = fullrank(dataset, encoder, queries, annotations, match_column=command.match_column, k=command.k,
                           where=command.where, column=command.column, templates=command.templates)
    per_query = info["per_query"]
    config = RetrievalConfig(k=command.k)
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
        "task": {"protocol": "INQUIRE fullrank", "k": command.k, "match_column": command.match_column,
                 "annotated_positives": info["positives"], "index_built": info["index_built"]},
        "metrics": metric_definitions(sorted({n.rsplit("/", 1)[-1] for n in metrics})),
        "software": software_versions(),
        "command": command_line(),
    }
    record = RunRecord(task="fullrank", metrics=metrics, provenance=provenance, config={
        k: str(v) if isinstance(v, Path) else v for k, v in vars(command).items()})
    return record, record.write(command.out, table)
