"""Image-to-image retrieval on frozen embeddings: does an image's nearest neighbour share its taxon?

What it measures: how well an embedding space puts images of one taxon next to each other, with no
text tower and no training, the "mAP of same-species neighbours" of embedding comparisons. Any
labelled dataset with an ``emb_*`` column can be scored, including with image-only models.

Protocol. The evaluated rows are those that pass the filter (``cladebench eval`` already evaluates
each ``challenge_group`` on its own, so each group is its own gallery). Every row with a name at
``rank`` is a query; its gallery is every *other* such row, except those of its own group:

- **relevant** means the same taxon at ``rank`` (the label compares the full lineage, so homonyms in
  different clades stay apart);
- **rows without a name at the rank** (a genus-only camera-trap row when ranking species) are neither
  queries nor gallery images: whether they match is unknown, and scoring them as misses would
  penalise a model for finding a true match. They are counted (``rows.without_label``);
- **the query itself and the images of its own group** (``group_key``: ``source_id``, i.e. the photos
  of one iNaturalist observation, when the rows have it) are left out of its gallery. Several photos
  of one organism are near-duplicates; finding them says little about the embedding space and would
  inflate every score. Each query's number of such exclusions is in its row (``excluded_same_group``)
  and the totals are in the run's info;
- a query with no relevant image left in its gallery has undefined metrics (0/0): it is kept in the
  table with ``defined = False`` and left out of every mean, and the means say how many were left out
  (:mod:`cladebench.metrics.retrieval` does this);
- rows whose vector has no cosine (all zeros, NaN or infinite) are skipped and listed.

Search is exact: cosine similarity of L2-normalised vectors by numpy matrix products, in chunks of
queries so that memory stays bounded by a (chunk x gallery) block, and not through the dataset's IVF
index (:func:`cladebench.store.search.nearest`). An approximate index misses some true neighbours, and how
many depends on its partitions, its training and the probes used; a benchmark number must not depend
on index recall. The gallery of one benchmark group is small enough for the n^2 cosines. The products
are float64, as in :func:`cladebench.store.search.brute_force_nearest`: float32 products round differently with
the number of rows multiplied at once, so a near-tie could rank differently with the chunk size. Rows are put
in uuid order before ranking, so ties (kept in candidate order) do not depend on where rows sit in the
dataset.

Metrics (fractions in [0, 1], named with the cutoff and the rank, e.g. for k = 10 and species):

- ``map_species``: mean over queries of average precision over the *full* ranking of the gallery
  (sklearn ``average_precision_score`` on the query's gallery, k = gallery size), the usual "mAP";
- ``map@10_species``: mean of INQUIRE's AP@10, which is normalised by min(relevant images, 10) rather
  than by the hits, so relevant images ranked below 10 count against the model;
- ``mrr_species``: mean reciprocal rank of the first relevant image in the full ranking;
- ``precision@10_species``: relevant images among the top min(10, gallery) / min(10, gallery);
- ``recall@10_species``: relevant images among the top 10 / relevant images in the gallery.

Per-query values follow :mod:`cladebench.metrics.retrieval` exactly (its tie rules included), divided
by 100 where INQUIRE reports percentages. Each mean is a macro mean over the defined queries with a
percentile bootstrap interval over queries. Queries of one gallery are not fully independent (they
share images, and photos of one observation are similar), so the intervals lean narrow.

Each metric has a ``_class_mean`` companion: the queries' values averaged within each class, then
across classes. In the plain mean a species with 300 images weighs 300 times one with a single pair;
the class mean asks how well a typical *taxon* is retrieved, so a few large classes cannot dominate.
Its interval resamples queries too and recomputes the class mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cladebench.errors import CladebenchError, UsageError
from cladebench.metrics import Statistic, bootstrap_ci, define_metric
from cladebench.metrics.retrieval import EXCLUSION_RULE, RetrievalConfig, macro_means, score_ragged
from cladebench.store.embeddings import normalise_rows
from cladebench.tasks.common import Predictions, column_metadata, has_direction, label_digest, resolve_embedding_column
from cladebench.tasks.configs import RetrievalTaskConfig
from cladebench.tasks.labelled_rows import LABEL_STYLE, read_labelled_rows
from cladebench.taxonomy import Rank

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder

QUERY_CHUNK_ELEMENTS = 1 << 21
"""Query x gallery cells ranked at once (16 MiB of float64). Ranking one chunk holds a few float64/int64
copies of it (about 100 MiB in all), so the chunk shrinks as the gallery grows."""


# --- ranking -----------------------------------------------------------------------------------------


def unit_vectors(vectors: np.ndarray) -> np.ndarray:
    """Rows L2-normalised in float64; every row must have a finite, non-zero norm."""
    vectors = np.asarray(vectors, dtype=np.float64)
    if not has_direction(vectors).all():
        raise CladebenchError("a vector is all zeros or not finite: its cosine is undefined")
    return np.ascontiguousarray(normalise_rows(vectors, dtype=np.float64, floor=0.0))


def _codes(values: Sequence[str | None]) -> np.ndarray:
    return np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)[1].ravel()


def _masked(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """A float column with NaN as null, so undefined metrics are nulls in Parquet and JSON."""
    return pa.array(values, pa.float64(), mask=mask | np.isnan(values))


def score_gallery(vectors: np.ndarray, labels: Sequence[str], groups: Sequence[str | None], uuids: Sequence[str], *,
                  k: int, chunk_size: int | None = None) -> pa.Table:
    """Rank, for each row, every row outside its group by cosine and score the ranking; one output row per query.

    ``labels`` decide relevance, ``groups`` which rows are left out of a query's gallery (its own group, which
    holds the query itself). Columns: ``uuid``, ``true_label``, ``gallery_size``, ``relevant`` (relevant images
    in the gallery), ``excluded_same_group`` (other images of the query's group, left out), ``defined``,
    ``hits_at_k``, ``precision_at_k``, ``recall_at_k``, ``ap_at_k`` (INQUIRE), ``ap_full`` (full ranking),
    ``reciprocal_rank`` (full ranking), ``neighbours`` and ``neighbour_similarities`` (the top min(k, gallery)
    in ranking order). Metrics are fractions, null where undefined. The result does not depend on
    ``chunk_size`` (queries per matrix product; by default bounded by :data:`QUERY_CHUNK_ELEMENTS`).
    """
    n = len(labels)
    if len(groups) != n or len(uuids) != n or len(vectors) != n:
        raise ValueError(f"vectors, labels, groups and uuids differ in length: {len(vectors)}, {n}, {len(groups)}, "
                         f"{len(uuids)}")
    if n == 0:
        raise CladebenchError("no labelled images to rank")
    unit = unit_vectors(vectors)
    label_codes, group_codes = _codes(labels), _codes(groups)
    uuid_array = np.asarray(uuids, dtype=object)
    chunk = chunk_size or max(1, QUERY_CHUNK_ELEMENTS // n)
    columns: dict[str, list[Any]] = {name: [] for name in (
        "gallery_size", "relevant", "excluded_same_group", "hits_at_k", "precision_at_k", "recall_at_k", "ap_at_k",
        "ap_full", "reciprocal_rank", "neighbours", "neighbour_similarities")}
    for start in range(0, n, chunk):
        _score_chunk(unit, label_codes, group_codes, uuid_array, slice(start, min(start + chunk, n)), k, columns)
    lists = ("neighbours", "neighbour_similarities")
    merged = {name: np.concatenate(parts) for name, parts in columns.items() if name not in lists}
    listed = {name: [row for part in columns[name] for row in part] for name in lists}
    defined = merged["relevant"] > 0
    undefined = ~defined
    return pa.table({
        "uuid": pa.array(list(uuids), pa.string()),
        "true_label": pa.array(list(labels), pa.string()),
        "gallery_size": pa.array(merged["gallery_size"], pa.int64()),
        "relevant": pa.array(merged["relevant"], pa.int64()),
        "excluded_same_group": pa.array(merged["excluded_same_group"], pa.int64()),
        "defined": pa.array(defined, pa.bool_()),
        "hits_at_k": pa.array(merged["hits_at_k"], pa.int64()),
        **{name: _masked(merged[name], undefined)
           for name in ("precision_at_k", "recall_at_k", "ap_at_k", "ap_full", "reciprocal_rank")},
        "neighbours": pa.array(listed["neighbours"], pa.list_(pa.string())),
        "neighbour_similarities": pa.array(listed["neighbour_similarities"], pa.list_(pa.float32())),
    })


def _score_chunk(unit: np.ndarray, label_codes: np.ndarray, group_codes: np.ndarray, uuids: np.ndarray,
                 rows: slice, k: int, out: dict[str, list[object]]) -> None:
    """Score the queries ``rows`` against the whole gallery and append their columns to ``out``."""
    similarity = unit[rows] @ unit.T  # (chunk, n) float64
    own_group = group_codes[rows, None] == group_codes[None, :]
    relevant = label_codes[rows, None] == label_codes[None, :]
    keep = ~own_group
    sizes = keep.sum(axis=1)
    count = len(sizes)
    candidates = [np.flatnonzero(keep[i]) for i in range(count)]
    scores = [similarity[i, candidates[i]] for i in range(count)]
    relevance = [relevant[i, candidates[i]] for i in range(count)]
    scored = np.flatnonzero(sizes > 0)  # a query whose group is the whole gallery has nothing to rank

    values = {name: np.full(count, np.nan) for name in ("precision_at_k", "recall_at_k", "ap_at_k", "ap_full",
                                                         "reciprocal_rank")}
    hits = np.zeros(count, dtype=np.int64)
    if scored.size:
        at_k = score_ragged([relevance[i] for i in scored], [scores[i] for i in scored], k)
        # A cutoff at the largest gallery keeps every query's whole gallery: AP@n, and MRR over the full ranking.
        full = score_ragged([relevance[i] for i in scored], [scores[i] for i in scored], int(sizes.max()))
        values["precision_at_k"][scored] = at_k.precision / 100.0
        values["recall_at_k"][scored] = at_k.recall / 100.0
        values["ap_at_k"][scored] = at_k.ap / 100.0
        values["ap_full"][scored] = full.ap / 100.0
        values["reciprocal_rank"][scored] = full.mrr
        hits[scored] = at_k.hits
    neighbours, neighbour_similarities = [], []
    for i in range(count):
        # The order score_ragged ranks by: descending score, ties in candidate order.
        top = np.argsort(-scores[i], kind="stable")[:k]
        neighbours.append(uuids[candidates[i][top]].tolist())
        neighbour_similarities.append(scores[i][top].tolist())
    for name, array in values.items():
        out[name].append(array)
    out["gallery_size"].append(sizes)
    out["relevant"].append(np.array([int(r.sum()) for r in relevance], dtype=np.int64))
    out["excluded_same_group"].append(own_group.sum(axis=1) - 1)
    out["hits_at_k"].append(hits)
    out["neighbours"].append(neighbours)
    out["neighbour_similarities"].append(neighbour_similarities)


# --- the task ----------------------------------------------------------------------------------------


def _resolve_column(dataset: lance.LanceDataset, encoder: Encoder | None, config: RetrievalTaskConfig) -> str:
    return resolve_embedding_column(dataset, encoder, config.column, task="retrieval")


SKIPPED_UUIDS_LISTED = 20
"""Uuids of skipped rows (vectors without a cosine) named in the run's info; the count is always complete."""


def _check_cutoff(dataset: lance.LanceDataset, k: int) -> None:
    """A cutoff no gallery of the dataset can reach is a mistake, refused: ``precision@1000000`` would name a
    million images where there are a few dozen (and each query would keep its whole gallery as neighbours). A
    cutoff above a small group's gallery is not: there the top min(k, gallery) count, as the metrics say. A
    dataset of one row has no gallery at all: the task calls it undefined, whatever the cutoff."""
    largest = dataset.count_rows() - 1
    if 1 <= largest < k:
        raise UsageError(f"-k {k} is more than any query's gallery holds: the dataset has {largest + 1:,} rows, "
                         f"so a gallery has at most {largest:,} images; use -k {largest} or less")


def retrieval(dataset: lance.LanceDataset, encoder: Encoder | None, config: RetrievalTaskConfig) -> Predictions:
    """Run image-to-image retrieval; see the module docstring. ``encoder`` may be None when ``column`` is given."""
    column = _resolve_column(dataset, encoder, config)
    rank = Rank.parse(config.rank)
    _check_cutoff(dataset, config.k)
    rows = read_labelled_rows(dataset, [column], rank=rank, where=config.where, group_key=config.group_key,
                              keep_without_direction=True)  # counted and listed below, with their uuids
    if not rows.uuids:
        raise CladebenchError(f"no rows with embeddings in {column!r} match the filter {config.where!r}")
    vectors = rows.vectors[column]
    has_cosine = has_direction(vectors)
    labelled = np.array([label is not None for label in rows.labels])
    chosen = np.flatnonzero(labelled & has_cosine)
    chosen = chosen[np.argsort(np.asarray(rows.uuids, dtype=object)[chosen].astype(str), kind="stable")]
    if chosen.size == 0:
        raise CladebenchError(f"no row has both a usable vector in {column!r} and a name at rank {rank.column}")
    labels = [label for i in chosen if (label := rows.labels[i]) is not None]  # all chosen rows are labelled
    table = score_gallery(vectors[chosen], labels, [rows.groups[i] for i in chosen], [rows.uuids[i] for i in chosen],
                          k=config.k)
    defined = table.column("defined").to_numpy(zero_copy_only=False)
    if not defined.any():
        raise CladebenchError(f"no query has another image of its taxon at rank {rank.column} outside its own group "
                              f"({rows.group_key}); retrieval is undefined on these {chosen.size} rows")
    excluded = table.column("excluded_same_group").to_numpy()
    present = set(labels)
    classes = [c for c in rows.classes if c in present]
    skipped = [rows.uuids[i] for i in np.flatnonzero(labelled & ~has_cosine)]
    info = {
        "column": column,
        "embedding_metadata": column_metadata(dataset, column),
        "rank": rank.column,
        "k": config.k,
        "label_set": {"rank": rank.column, "size": len(classes), "sha256": label_digest(classes),
                      "name_style": LABEL_STYLE},
        "where": config.where,
        "search": "exact cosine on L2-normalised vectors (numpy, float64), not the vector index",
        "rows": {"read": len(rows.uuids), "without_label": int((~labelled).sum()),
                 "without_usable_vector": len(skipped), "skipped_uuids": skipped[:SKIPPED_UUIDS_LISTED],
                 "queries": int(chosen.size), "defined_queries": int(defined.sum()),
                 "undefined_queries": int((~defined).sum())},
        "exclusions": {"rule": "the query itself and every image sharing its group value are left out of its "
                               "gallery; rows without a name at the rank are neither queries nor gallery images",
                       "group_key": config.group_key, "sampling_unit": rows.group_key,
                       "rows_without_group": rows.rows_without_group,
                       "same_group_pairs": int(excluded.sum()),
                       "queries_with_same_group_images": int((excluded > 0).sum())},
        "split": {"kind": "none: every labelled image queries every other labelled image outside its group",
                  "seed": None, "sampling_unit": rows.group_key, "group_key": config.group_key},
    }
    return Predictions(table=table, labels=classes, info=info)


# --- metrics -----------------------------------------------------------------------------------------

CLASS_MEAN = "_class_mean"
"""Suffix of the per-class mean of a metric: queries averaged within each class, then the classes averaged."""

_DEFINITIONS = {
    "map": ("mean over queries of average precision over the full ranking of the query's gallery (sklearn "
            "average_precision_score; every same-{rank} image counts)"),
    "map@{k}": ("mean over queries of INQUIRE's AP@{k}: sklearn average precision of the top min({k}, gallery) "
                "times hits / min(relevant, {k}), so relevant images ranked below {k} count against the model"),
    "mrr": "mean over queries of 1 / rank of the first same-{rank} image in the full ranking (ties: expected value)",
    "precision@{k}": "mean over queries of the share of same-{rank} images among the top min({k}, gallery)",
    "recall@{k}": "mean over queries of the same-{rank} images among the top {k} / those in the gallery",
}
_COLUMNS = {"map": "ap_full", "map@{k}": "ap_at_k", "mrr": "reciprocal_rank", "precision@{k}": "precision_at_k",
            "recall@{k}": "recall_at_k"}
_COMMON = ("image-to-image retrieval by exact cosine: each image with a name at the rank queries every other one "
           "outside its group (query and same-group images excluded); ")
_INTERVAL = "percentile bootstrap interval over queries"


def metric_names(k: int, rank: Rank | str) -> dict[str, str]:
    """Registered metric name for each prediction column, e.g. ``{"ap_full": "map_species", ...}``.

    The names carry the rank (like zero-shot's ``top1_species``), so runs at different ranks are never compared
    under one name, and differ from :mod:`cladebench.metrics.retrieval`' INQUIRE names (``ap@10`` is in percent).
    """
    rank = Rank.parse(rank).column
    names = {}
    for template, column in _COLUMNS.items():
        base = template.format(k=k)
        text = _COMMON + _DEFINITIONS[template].format(k=k, rank=rank)
        name = define_metric(f"{base}_{rank}", f"{text}; macro mean of the defined queries, {_INTERVAL}; "
                                                f"{EXCLUSION_RULE}")
        define_metric(name + CLASS_MEAN, f"{text}; averaged within each class, then over classes (each class "
                                         f"weighs the same), {_INTERVAL}; {EXCLUSION_RULE}")
        names[column] = name
    return names


def _class_mean_statistic(values: np.ndarray, classes: np.ndarray) -> Statistic:
    """The mean over classes of each class's weighted mean, as a :data:`cladebench.metrics.Statistic`.

    A class that a resample leaves without any query drops out of that resample's mean.
    """
    order = np.argsort(classes, kind="stable")
    sorted_classes = classes[order]
    starts = np.flatnonzero(np.r_[True, sorted_classes[1:] != sorted_classes[:-1]])
    sorted_values = values[order]

    def statistic(weights: np.ndarray) -> np.ndarray:
        weights = weights[:, order]
        totals = np.add.reduceat(weights * sorted_values, starts, axis=1)
        counts = np.add.reduceat(weights, starts, axis=1)
        present = counts > 0
        means = np.divide(totals, counts, out=np.zeros_like(totals), where=present)
        return means.sum(axis=1) / present.sum(axis=1)

    return statistic


def retrieval_summary(table: pa.Table, k: int, rank: Rank | str,
                      config: RetrievalConfig | None = None) -> dict[str, dict[str, object]]:
    """Macro means (and per-class means) of a prediction table's per-query metrics; see the module docstring."""
    config = config or RetrievalConfig(k=k)
    names = metric_names(k, rank)
    defined = table.column("defined").to_numpy(zero_copy_only=False).astype(bool)
    values = {name: table.column(column).to_numpy(zero_copy_only=False).astype(np.float64)
              for column, name in names.items()}
    summary = macro_means(values, defined, config)
    classes = np.asarray(table.column("true_label").to_pylist(), dtype=object)[defined].astype(str)
    metrics: dict[str, dict[str, object]] = {}
    extra = {"n_excluded": summary.n_excluded, "exclusion": summary.exclusion}
    for name, estimate in summary.estimates.items():
        metrics[name] = {**estimate.to_dict(), **extra}
    for name in summary.estimates:
        kept = values[name][defined]
        class_mean = bootstrap_ci(_class_mean_statistic(kept, classes), n_examples=kept.size,
                                  n_resamples=config.n_resamples, confidence=config.confidence, seed=config.seed)
        metrics[name + CLASS_MEAN] = {**class_mean.to_dict(), **extra, "classes": int(np.unique(classes).size)}
    return metrics


def per_query_values(table: pa.Table, task_provenance: dict[str, Any]) -> dict[str, tuple[list[object], np.ndarray]]:
    """Each defined query's value of every metric, keyed by uuid, so runs on the same gallery pair query by query.

    A ``_class_mean`` metric's value of a query is U x value / (C x n_c) (U queries, C classes, n_c queries of
    its class), so the mean over queries is exactly the stored class mean.
    """
    k, rank = task_provenance.get("k"), task_provenance.get("rank")
    if k is None or rank is None or table.num_rows == 0:
        return {}
    defined = table.column("defined").to_numpy(zero_copy_only=False).astype(bool)
    keys = [u for u, d in zip(table.column("uuid").to_pylist(), defined, strict=True) if d]
    if not keys:
        return {}
    classes = np.unique(np.asarray(table.column("true_label").to_pylist(), dtype=object)[defined].astype(str),
                        return_inverse=True)[1]
    class_share = len(keys) / ((int(classes.max()) + 1) * np.bincount(classes)[classes])
    out: dict[str, tuple[list[object], np.ndarray]] = {}
    for column, name in metric_names(int(k), rank).items():
        values = table.column(column).to_numpy(zero_copy_only=False).astype(np.float64)[defined]
        out[name] = (keys, values)
        out[name + CLASS_MEAN] = (keys, values * class_share)
    return out


def retrieval_task_metrics(predictions: Predictions) -> dict[str, dict[str, object]]:
    """``map_<rank>``, ``map@<k>_<rank>``, ``mrr_<rank>``, ``precision@<k>_<rank>``, ``recall@<k>_<rank>`` and
    each one's ``_class_mean``; empty when no query in the table is defined (a breakdown value may have none)."""
    return retrieval_summary(predictions.table, predictions.info["k"], predictions.info["rank"])
