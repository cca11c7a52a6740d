"""Zero-shot classification: images against the text embeddings of a label set, from cached image embeddings.

The label set is the benchmark's own taxa at a rank (species by default): every distinct lineage
prefix down to that rank among the evaluated rows, so homonyms in different kingdoms stay apart.
Each label becomes a string in a name style (``taxon``, ``sci``, ``com``, ``taxon_com``), filled into
prompt templates and averaged into one unit vector per label (CLIP's construction, cached on disk).
Image vectors come from an ``emb_*`` column written by ``cladebench embed`` with the same model: they
are stored raw and L2-normalised here.

Logits use the model's learned scale (``logit_scale="learned"``) or a fixed number (CLIP_benchmark
uses 100); softmax probabilities at the label rank are rolled up to every higher rank (segmented sums over
the labels in lineage order, :class:`~cladebench.taxonomy.LineageRuns`), so "genus accuracy" means the genus
with the most probability mass, not the genus of the top species; ``prob_<rank>`` is that mass. Each scored row
also carries the LCA heights of its truth and its top-5 labels on the label set's lineages
(:mod:`cladebench.metrics.hierarchy`): how far up the tree each wrong answer meets the truth.

Two paths with the same answers: the dense one holds the images x labels probabilities (and is the only one
that takes ``--candidates``); the streaming one (:mod:`cladebench.tasks.streaming`) scores blocks of images
against blocks of labels and never does, so a tree-of-life label set (``--labels tree-of-life``, a taxonomy
Parquet, or pybioclip's published text embeddings: :mod:`cladebench.tasks.tree_of_life`) runs in memory
bounded by the block sizes. ``--stream auto`` streams those label sets and any run whose probability matrix
would pass :data:`STREAM_ABOVE` entries.

The task returns per-example predictions; metrics are computed from them (:mod:`cladebench.metrics`). What the
tasks share (label sets, embedding-column lookup, vector checks, :func:`~cladebench.tasks.common.classify`) lives
in :mod:`cladebench.tasks.common`; this module holds zero-shot alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cladebench.errors import CladebenchError
from cladebench.metrics import (
    HEIGHT_COLUMN,
    TOP_HEIGHTS_COLUMN,
    accuracy,
    balanced_accuracy,
    bootstrap_ci,
    lca_heights,
    severity_metrics,
    top_k_undefined,
)
from cladebench.metrics.hierarchy import label_hierarchy, severity_units
from cladebench.tasks.common import (
    NAMING_COLUMNS,
    LabelSet,
    PlannedLabelSet,
    Predictions,
    check_candidates_column,
    check_vectors,
    logit_scale_of,
    score_labels,
    selected_label_set,
    text_image_column,
)
from cladebench.tasks.configs import ZeroShotConfig
from cladebench.tasks.streaming import stream_scores, top_k_indices
from cladebench.tasks.tree_of_life import check_source, complete_from_labels, is_tree_of_life_source, load_source
from cladebench.taxonomy import (
    Lineage,
    Rank,
    lineage_runs,
    lineages_from_table,
    lookalike_labels,
    parse_within,
    per_lineage,
)

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder


STREAM_ABOVE = 50_000_000
"""With ``--stream auto``, images x labels above which a run streams: 200 MB of float32 probabilities, whose
top-5 lists would allocate three times as much again on the dense path."""


def zero_shot_label_set(dataset: lance.LanceDataset, config: ZeroShotConfig) -> PlannedLabelSet | None:
    """The run's label set, decided from the selection before any model loads (the evaluation plan asks, once per
    group); None for a tree-of-life set, whose labels come with the text vectors the model's run loads."""
    if is_tree_of_life_source(config.labels):
        return None
    return selected_label_set(dataset, where=config.where, rank=config.rank, name_style=config.name_style,
                              labels=config.labels, within=config.within)


def zero_shot(dataset: lance.LanceDataset, encoder: Encoder, config: ZeroShotConfig, *,
              label_set: PlannedLabelSet | None = None) -> Predictions:
    """Run zero-shot classification over the dataset's rows with embeddings; see the module docstring.

    ``label_set``: the label set the evaluation plan decided (:func:`zero_shot_label_set`); without it (a direct
    call) it is decided here the same way."""
    from cladebench.store.embeddings import valid_embeddings

    rank = Rank.parse(config.rank)
    column, meta = text_image_column(dataset, encoder, config.column, task="zero-shot")
    if config.candidates:
        check_candidates_column(dataset, config.candidates)
    naming = [c for c in NAMING_COLUMNS if c in dataset.schema.names]
    wanted = list(dict.fromkeys(("uuid", *naming, *((config.candidates,) if config.candidates else ()))))
    rows, image_vectors = valid_embeddings(dataset, column, where=config.where, columns=wanted,
                                           dim=getattr(encoder, "dim", None))
    lineages = lineages_from_table(rows.select(naming))
    check_vectors(image_vectors, rows.column("uuid").to_pylist(), column)
    within = None if config.within is None else parse_within(config.within)
    if within is not None:
        keep = np.array(per_lineage(lineages, lambda lin: lin.names[within[0]] == within[1]), dtype=bool)
        if not keep.any():
            raise CladebenchError(f"no evaluated row has {within[0].column} = {within[1]!r}")
        rows, image_vectors = rows.filter(pa.array(keep)), image_vectors[keep]
        lineages = [lin for lin, k in zip(lineages, keep, strict=True) if k]
    if not lineages:
        raise CladebenchError(f"no rows with embeddings in {column!r} match the filter {config.where!r}")
    source = None
    if is_tree_of_life_source(config.labels):
        check_source(str(config.labels), rank)
        source = load_source(str(config.labels), encoder, config.name_style, config.templates)
        labels = source.labels
        lineages, completed = complete_from_labels(lineages, labels)
    else:
        planned = label_set if label_set is not None else zero_shot_label_set(dataset, config)
        assert planned is not None  # None only for a tree-of-life source
        labels = planned.labels
    if len(labels) < 2:
        raise CladebenchError(f"zero-shot needs at least 2 labels at rank {rank.column}; found {len(labels)}")
    # Only the evaluated rows' taxa are looked up: no dict over a tree-of-life set's million labels.
    index = labels.index_of(lineages)  # case ignored, as label sets are de-duplicated
    targets = np.array(per_lineage(lineages, lambda lin: index.get(lin.match_key(rank), -1) if lin.names[rank]
                                   else -1), dtype=np.int64)
    runs = lineage_runs(labels.lineages, rank)  # labels are in lineage order: every taxon a run of labels
    streamed = source is not None or config.stream == "always" or (
        config.stream == "auto" and not config.candidates and len(targets) * len(labels) > STREAM_ABOVE)
    if streamed:
        texts = labels.texts(config.name_style)
        scale = logit_scale_of(config, encoder)
        if source is not None:
            vectors = source.vectors
            if vectors.shape[1] != image_vectors.shape[1]:
                raise CladebenchError(f"--labels {config.labels}: text vectors {vectors.shape[1]} wide, image vectors "
                                      f"in {column!r} {image_vectors.shape[1]}: they come from different models")
        else:
            from cladebench.models import class_text_embeddings

            vectors = class_text_embeddings(encoder, texts, config.templates)
        device = str(getattr(encoder, "device", "cpu"))  # a model on a GPU: score there too
        result = stream_scores(image_vectors, vectors, len(labels), scale, k=5, targets=targets, runs=runs,
                               image_block=config.image_block, label_block=config.label_block,
                               device=device if device.startswith("cuda") else None)
        order, top_probs, true_probs = result.top_labels, result.top_probs, result.true_probs
        rolled = result.rolled
        allowed, candidate_counts = None, None
    else:
        scores = score_labels(encoder, image_vectors, rows, labels, rank, config)
        texts, scale, allowed, candidate_counts, probs = (scores.texts, scores.scale, scores.allowed,
                                                          scores.candidate_counts, scores.probs)
        order = top_k_indices(probs, 5)
        top_probs = np.take_along_axis(probs, order, axis=1)
        true_probs = np.where(targets >= 0, probs[np.arange(len(targets)), np.maximum(targets, 0)], np.nan)
        rolled = runs.top(probs)
    reachable = (np.ones(len(targets), dtype=bool) if allowed is None
                 else allowed[np.arange(len(targets)), np.maximum(targets, 0)])
    # Hits read off the top labels (a stable descending order, as top_k_hits defines them), on either path; with
    # --candidates, a true label outside the row's candidates (probability 0) is never a hit.
    hit = (order == targets[:, None]) & ((targets >= 0) & reachable)[:, None]
    correct_top1, correct_top5 = hit[:, 0], hit.any(axis=1)
    # Built as Arrow arrays, not a Python list per row: the columns of a 100,000-image run are then milliseconds.
    text_array = pa.array(texts, pa.string())
    unscored = targets < 0
    width = order.shape[1]
    offsets = pa.array(np.arange(0, order.size + 1, width, dtype=np.int32))
    columns: dict[str, object] = {
        "uuid": rows.column("uuid"),
        "true_label": text_array.take(pa.array(targets, pa.int64(), mask=unscored)),
        "pred_label": text_array.take(pa.array(order[:, 0], pa.int64())),
        # Classes are taxa, not strings: two taxa may read alike (a shared common name), so scores per class
        # (balanced accuracy) count label indices.
        "true_index": pa.array(targets, pa.int64(), mask=unscored),
        "pred_index": pa.array(order[:, 0], pa.int64()),
        "top5_labels": pa.ListArray.from_arrays(offsets, text_array.take(pa.array(order.ravel(), pa.int64()))),
        "top5_probs": pa.ListArray.from_arrays(offsets, pa.array(np.asarray(top_probs, np.float64).ravel())),
        "true_prob": pa.array(np.asarray(true_probs, np.float64), pa.float64(), mask=unscored),
        "scored": targets >= 0,
        "correct_top1": correct_top1,
        "correct_top5": correct_top5,
    }
    scored_ranks = [rank.column]
    for rank_runs in reversed(runs.ranks):  # kingdom first, as the columns have always been
        higher = rank_runs.rank
        if not rank_runs.taxa:  # no label names this rank (the dataset lacks its column): nothing to roll up to
            continue
        taxon_index = {key: j for j, key in enumerate(rank_runs.taxa)}

        def true_taxon(lin: Lineage, higher: Rank = higher, taxon_index: dict = taxon_index) -> int:
            return taxon_index.get(lin.key(higher), -1) if lin.names[higher] else -1

        true_taxa = np.array(per_lineage(lineages, true_taxon))
        predicted, mass = rolled[higher]
        names = rank_runs.labels
        columns[f"pred_{higher.column}"] = pa.array(names, pa.string()).take(pa.array(predicted, pa.int64()))
        columns[f"prob_{higher.column}"] = np.asarray(mass, dtype=np.float64)
        columns[f"correct_{higher.column}"] = (predicted == true_taxa) & (true_taxa >= 0)
        columns[f"scored_{higher.column}"] = true_taxa >= 0
        scored_ranks.append(higher.column)
    measured, hierarchy = label_hierarchy(labels.lineages, rank, "the label set's lineages (" + str(
        config.labels or "the benchmark's rank columns") + ")")
    if not hierarchy["absent"]:
        heights = lca_heights(measured, targets, order, rank)
        columns[HEIGHT_COLUMN] = pa.array(heights[:, 0], pa.int8(), mask=unscored)
        columns[TOP_HEIGHTS_COLUMN] = pa.ListArray.from_arrays(offsets, pa.array(heights.ravel(), pa.int8()),
                                                               mask=pa.array(unscored))
    table = pa.table(columns)
    if source is not None:
        label_sha256, taxa_sha256 = source.labels.digest(config.name_style), source.labels.taxa_digest()
    else:
        assert planned is not None  # a label set unless the labels are a tree-of-life source
        label_sha256, taxa_sha256 = planned.sha256, planned.taxa_sha256
    info = {
        "column": column,
        "embedding_metadata": meta,
        "rank": rank.column,
        "scored_ranks": scored_ranks,
        "name_style": config.name_style,
        "templates": config.templates,
        "logit_scale": scale,
        "logit_scale_source": "learned" if config.logit_scale == "learned" else "fixed",
        "label_set": {"rank": rank.column, "size": len(labels), "sha256": label_sha256, "taxa_sha256": taxa_sha256,
                      # labels a reader cannot tell apart: other scripts' look-alike letters, or one text for
                      # several taxa (a shared common name); each is still its own class
                      "lookalikes": lookalike_labels(texts) if source is None else [],
                      "shared_texts": sorted(t for t, c in Counter(texts).items() if c > 1) if source is None else [],
                      "source": config.labels or "the benchmark's taxa", "unscored_rows": int((targets < 0).sum()),
                      **({"vectors": source.source, "rows_completed_from_labels": completed}
                         if source is not None else {})},
        "hierarchy": hierarchy,
        "scoring": ({"path": "streamed", "image_block": config.image_block, "label_block": config.label_block}
                    if streamed else {"path": "dense"}),
        "within": config.within,
        "where": config.where,
        "candidates": None if config.candidates is None else {
            "column": config.candidates, **(candidate_counts or {}),
            "rows_whose_truth_is_not_a_candidate": int(((targets >= 0) & ~reachable).sum())},
    }
    if rank == Rank.SPECIES:
        inspection = genus_only_inspection(rows.column("uuid").to_pylist(), lineages, order[:, 0], top_probs[:, 0],
                                           labels, texts)
        if inspection is not None:
            info["inspection"] = inspection
    return Predictions(table=table, labels=texts, info=info)


def genus_only_inspection(uuids: Sequence[str], lineages: Sequence[Lineage], top_labels: np.ndarray,
                          top_probs: np.ndarray, labels: LabelSet, texts: Sequence[str], *,
                          review: int = 20) -> dict[str, object] | None:
    """What a person needs to look at for rows labelled only to genus (camera-trap Peromyscus).

    Such rows have no species truth, so they are never scored for species accuracy; instead: how the
    model spreads them over species, how often its top species lies in the labelled genus, and the
    ``review`` images it is least sure of (lowest top probability), for an expert to identify. ``top_labels``
    and ``top_probs`` are each row's most probable label and its probability (dense or streamed alike).
    """
    genus_only = np.array(per_lineage(lineages, lambda lin: lin.names[Rank.SPECIES] is None
                                      and lin.names[Rank.GENUS] is not None), dtype=bool)
    if not genus_only.any():
        return None
    rows = np.flatnonzero(genus_only)
    top = np.asarray(top_labels)[rows]
    top_prob = np.asarray(top_probs)[rows]
    same_genus = np.array([labels.lineages[t].names[Rank.GENUS] == lineages[r].names[Rank.GENUS]
                           for r, t in zip(rows.tolist(), top.tolist(), strict=True)], dtype=np.bool_)
    counts: dict[str, int] = {}
    for t in top:
        counts[texts[t]] = counts.get(texts[t], 0) + 1
    least = np.argsort(top_prob, kind="stable")[:review]
    return {
        "genus_only_rows": int(rows.size),
        "predicted_species": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "predicted_genus_is_labelled_genus": accuracy(same_genus).to_dict(),
        "least_certain": [{"uuid": uuids[rows[i]], "genus": lineages[rows[i]].names[Rank.GENUS],
                           "predicted": texts[top[i]], "probability": float(top_prob[i])} for i in least],
    }


BALANCED_ACCURACY_RESAMPLES = 2000
"""Bootstrap resamples for the balanced-accuracy interval (seeded, so a rerun gives the same interval)."""


def _class_codes(table: pa.Table, scored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The scored rows' true and predicted classes as codes: label indices where the predictions carry them (two
    taxa that read alike stay two classes), else the label strings of predictions written before they did."""
    if "true_index" in table.column_names and "pred_index" in table.column_names:
        truth = table.column("true_index").fill_null(-1).to_numpy(zero_copy_only=False)
        return truth[scored], table.column("pred_index").to_numpy(zero_copy_only=False)[scored]
    labels = np.asarray(table.column("true_label").to_pylist() + table.column("pred_label").to_pylist(), dtype=object)
    codes = np.unique(labels.astype(str), return_inverse=True)[1]
    return codes[: table.num_rows][scored], codes[table.num_rows:][scored]


def zero_shot_metrics(predictions: Predictions) -> dict[str, dict[str, object]]:
    """top-1 and top-5 at the label rank and rolled-up top-1 at every higher rank, with Wilson intervals; mistake
    severity and hierarchical distance@1/@5 (:mod:`cladebench.metrics.hierarchy`) with bootstrap intervals.

    Only examples whose true taxon is in the label set at that rank are scored; the count is reported.
    """
    table = predictions.table
    scored = np.asarray(table.column("scored"), dtype=bool)
    rank = predictions.info["rank"]
    top5 = accuracy(np.asarray(table.column("correct_top5"))[scored]).to_dict()
    undefined = top_k_undefined(5, len(predictions.labels)) if predictions.labels else None
    if undefined:
        top5.update(value=None, low=None, high=None, reason=undefined)
    metrics = {
        f"top1_{rank}": accuracy(np.asarray(table.column("correct_top1"))[scored]).to_dict(),
        f"top5_{rank}": top5,
    }
    if scored.sum() > 1:
        # Balanced accuracy: long-tailed test sets let common species dominate top-1; the interval is a
        # percentile bootstrap over images (not binomial: the statistic is a mean of per-class recalls).
        truth, predicted = _class_codes(table, scored)
        metrics[f"balanced_accuracy_{rank}"] = bootstrap_ci(
            lambda w: balanced_accuracy(truth, predicted, weights=w), n_examples=int(scored.sum()),
            n_resamples=BALANCED_ACCURACY_RESAMPLES).to_dict()
    for higher in predictions.info["scored_ranks"][1:]:
        mask = np.asarray(table.column(f"scored_{higher}"), dtype=bool)
        metrics[f"top1_{higher}"] = accuracy(np.asarray(table.column(f"correct_{higher}"))[mask]).to_dict()
    heights, top_heights = scored_heights(table, scored)
    metrics.update(severity_metrics(heights, top_heights, np.asarray(table.column("correct_top1"))[scored], rank,
                                    n_labels=len(predictions.labels) or None,
                                    hierarchy=predictions.info.get("hierarchy")))
    return metrics


def scored_heights(table: pa.Table, scored: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The scored rows' top-1 LCA heights (n,) and top-5 ones (n, width), or None for predictions without them
    (written before they were, or with no lineage to measure on)."""
    if HEIGHT_COLUMN not in table.column_names:
        return None, None
    heights = table.column(HEIGHT_COLUMN).fill_null(-1).to_numpy(zero_copy_only=False)[scored]
    if TOP_HEIGHTS_COLUMN not in table.column_names:
        return heights, None
    lists = table.filter(pa.array(scored)).column(TOP_HEIGHTS_COLUMN).combine_chunks()
    flat = lists.flatten().to_numpy(zero_copy_only=False)
    return heights, flat.reshape(len(lists), -1) if len(lists) else flat.reshape(0, 0)


def per_image_values(table: pa.Table, task_provenance: dict[str, object]) -> dict[str, tuple[object, ...]]:
    """Each scored image's hierarchical distances and its part of the mistake severity (its height and whether it
    is a mistake: :func:`~cladebench.metrics.hierarchy.severity_units`), keyed by uuid, so `compare` pairs two runs
    image by image on them (top-k hits pair through their own columns)."""
    rank = task_provenance.get("rank", "species")
    scored = np.asarray(table.column("scored"), dtype=bool)
    heights, top_heights = scored_heights(table, scored)
    if heights is None:
        return {}
    uuids = [u for u, s in zip(table.column("uuid").to_pylist(), scored, strict=True) if s]
    out: dict[str, tuple[object, ...]] = {f"hdist1_{rank}": (uuids, heights.astype(np.float64))}
    if top_heights is not None and top_heights.shape[1] >= 5:
        out[f"hdist5_{rank}"] = (uuids, top_heights[:, :5].mean(axis=1))
    out[f"mistake_severity_{rank}"] = severity_units(uuids, heights, np.asarray(table.column("correct_top1"))[scored])
    return out
