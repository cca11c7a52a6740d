"""Image + place and season: zero-shot probabilities fused with a spatiotemporal prior (task ``geo``).

CrypticBio scores look-alike species with and without the observation's location and date; GeoCLIP and
iNaturalist's geo model show how much a place adds to a photo. This task measures that gain honestly on a
benchmark's own rows:

1. **Rows.** The rows ``where`` selects that have image embeddings (as zero-shot); the label set is their taxa
   at ``rank`` (or a label file), exactly as :mod:`cladebench.tasks.zeroshot` builds it, and the image
   probabilities are zero-shot's (:func:`~cladebench.tasks.common.classify` against the label texts).
2. **Split** (:func:`assign_parts`). Each observation group (``prior_group_key``: ``source_id`` by default,
   so the photos of one observation stay together) goes to *fit*, *validation* or *test* by a seeded hash of
   its key, in the ``prior_split`` proportions. A hash, not a shuffle: a group's part does not depend on which
   other rows are present. Instead of a fit share, the prior may be counted from ``prior_fit_where`` rows
   and/or another dataset (``prior_dataset``, e.g. an iNaturalist export of the same region); evaluated rows
   whose uuid or group occurs among those fit rows are then left out and counted, and the rest split into
   validation and test. The record says which source fitted the prior.
3. **Prior** (:mod:`cladebench.tasks.geo.prior`): smoothed counts of the fit rows on an equal-area grid times a
   circular season term, p(label | cell, season). Only fit rows are counted, never validation or test rows.
4. **Fusion** (:data:`FUSIONS`): ``product`` is ``log p ∝ a log p_image + (1 - a) log p_prior`` with ``a``
   chosen on the validation rows (grid over [0, 1], best top-1, ties to the larger ``a``), then applied to the
   test rows once; ``embedding_sum`` adds a stored location embedding (``prior_location_column``, e.g.
   ``loc_emb_taxabind``, in the image-text space as TaxaBind trains it) to each unit image vector before the
   zero-shot classification, and needs neither the prior nor ``a``; it scores the same test rows.

Predictions are one row per test image: image-only and fused predictions and correctness, and the prior's
fallback reason (no place, no date, both: the available factor, or a uniform prior, is used). Metrics:
top-1 of both with Wilson intervals, the paired difference fused - image with a paired (observation-group)
bootstrap interval and p-value, the chosen ``a``, and the share of test rows per fallback reason.

The pieces live in one module per job: :mod:`~cladebench.tasks.geo.config`, :mod:`~cladebench.tasks.geo.split`
(:func:`~cladebench.tasks.geo.split.assign_parts`), :mod:`~cladebench.tasks.geo.prior` (the prior itself) and
:mod:`~cladebench.tasks.geo.fusion` (:data:`~cladebench.tasks.geo.fusion.FUSIONS`); this module runs the task
and computes its metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cladebench.errors import CladebenchError, SchemaError
from cladebench.metrics import (
    accuracy,
    define_metric,
    lca_heights,
    paired_bootstrap,
    severity_metrics,
)
from cladebench.metrics.hierarchy import label_hierarchy, severity_units
from cladebench.tasks.common import (
    PlannedLabelSet,
    Predictions,
    score_labels,
    selected_label_set,
    text_image_column,
)
from cladebench.tasks.geo.config import AUTO_GROUP_KEY, DATE, LATITUDE, LONGITUDE, GeoPriorConfig
from cladebench.tasks.geo.fusion import FUSIONS, FusionInputs, location_column, reason_counts
from cladebench.tasks.geo.prior import (
    unusable_locations,
    usable_location,
)
from cladebench.tasks.geo.split import Place, group_values, label_indices, naming_columns, plan_split, resolve_group_key
from cladebench.taxonomy import Rank, lineages_from_table

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder


PAIRED_RESAMPLES = 10_000
"""Bootstrap resamples for the fused - image interval (seeded, so a rerun gives the same interval)."""


# --- the task --------------------------------------------------------------------------------------


def _read_columns(dataset: lance.LanceDataset, config: GeoPriorConfig, group_key: str) -> list[str]:
    names = dataset.schema.names
    wanted = ["uuid", *naming_columns(names), *(c for c in (LATITUDE, LONGITUDE, DATE) if c in names)]
    if group_key not in ("auto", "uuid"):
        if group_key not in names:
            raise SchemaError(f"prior_group_key {group_key!r} is not a column of {dataset.uri}")
        wanted.append(group_key)
    elif group_key == "auto" and AUTO_GROUP_KEY in names:
        wanted.append(AUTO_GROUP_KEY)
    if config.candidates:
        if config.candidates not in names:
            raise SchemaError(f"--candidates {config.candidates!r}: no such column in {dataset.uri}")
        wanted.append(config.candidates)
    if config.prior_fusion == "embedding_sum":
        wanted.append(location_column(names, config.prior_location_column))
    return list(dict.fromkeys(wanted))


def geo_label_set(dataset: lance.LanceDataset, config: GeoPriorConfig) -> PlannedLabelSet:
    """The run's label set (the selected rows' taxa, fit rows included, or ``--labels``), decided before any model
    loads: the evaluation plan asks, once per group."""
    return selected_label_set(dataset, where=config.where, rank=config.rank, name_style=config.name_style,
                              labels=config.labels)


def geo(dataset: lance.LanceDataset, encoder: Encoder, config: GeoPriorConfig, *,
        label_set: PlannedLabelSet | None = None) -> Predictions:
    """Image-only and place/season-fused predictions of the test rows; see the module docstring. ``label_set``:
    the one the evaluation plan decided (:func:`geo_label_set`); a direct call decides it the same way."""
    from cladebench.store.embeddings import valid_embeddings

    fuse = FUSIONS.get_named(config.prior_fusion)
    rank = Rank.parse(config.rank)
    column, meta = text_image_column(dataset, encoder, config.column, task="geo")
    rows, vectors = valid_embeddings(dataset, column, where=config.where,
                                     columns=_read_columns(dataset, config, config.prior_group_key),
                                     dim=getattr(encoder, "dim", None))
    if rows.num_rows == 0:
        raise CladebenchError(f"no rows with embeddings in {column!r} match the filter {config.where!r}")
    lineages = lineages_from_table(rows.select(naming_columns(rows.column_names)))
    planned = label_set if label_set is not None else geo_label_set(dataset, config)
    labels = planned.labels
    if len(labels) < 2:
        raise CladebenchError(f"the geo task needs at least 2 labels at rank {rank.column}; found {len(labels)}")
    group_key = resolve_group_key(rows, config.prior_group_key, dataset.schema.names)
    split = plan_split(dataset, rows, labels, group_key, config)
    evaluated = np.concatenate([split.validation, split.test])
    rows, vectors = rows.take(pa.array(evaluated)), vectors[evaluated]
    lineages = [lineages[i] for i in evaluated]
    targets = label_indices(lineages, labels)

    scores = score_labels(encoder, vectors, rows, labels, rank, config)
    texts, label_vectors, scale, allowed, candidate_counts, image_probs = (
        scores.texts, scores.label_vectors, scores.scale, scores.allowed, scores.candidate_counts, scores.probs)
    nv = split.validation.size
    outcome = fuse(FusionInputs(
        config=config, rows=rows, image_vectors=vectors, image_probs=image_probs, label_vectors=label_vectors,
        scale=scale, allowed=allowed, targets=targets, n_validation=nv, split=split))

    test_targets = targets[nv:]
    image = image_probs[nv:].argmax(axis=1)
    groups = group_values(rows, group_key)[nv:]
    extra = dict(outcome.columns)
    if "pred_prior_index" in extra:
        extra["pred_prior"] = [texts[j] for j in extra.pop("pred_prior_index")]
    table = pa.table({
        "uuid": rows.column("uuid").slice(nv),
        "split_group": pa.array([str(g) for g in groups], pa.string()),
        "true_label": [texts[t] if t >= 0 else None for t in test_targets],
        "pred_image": [texts[j] for j in image],
        "pred_fused": [texts[j] for j in outcome.fused],
        "scored": test_targets >= 0,
        "correct_image": (image == test_targets) & (test_targets >= 0),
        "correct_fused": (outcome.fused == test_targets) & (test_targets >= 0),
        "prior_fallback": pa.array(outcome.fallback, pa.string()),
        **extra,
    })
    measured, hierarchy = label_hierarchy(labels.lineages, rank, "the label set's lineages (" + str(
        config.labels or "the benchmark's rank columns") + ")")
    if not hierarchy["absent"]:  # each test row's LCA height of truth and image-only, and fused, top-1
        heights = lca_heights(measured, test_targets, np.stack([image, outcome.fused], axis=1), rank)
        unscored = test_targets < 0
        for index, kind in enumerate(KINDS):
            table = table.append_column(f"lca_height_{kind}", pa.array(heights[:, index], pa.int8(), mask=unscored))
    place = Place.of(rows.slice(nv))
    info = {
        "column": column,
        "embedding_metadata": meta,
        "rank": rank.column,
        "name_style": config.name_style,
        "templates": config.templates,
        "logit_scale": scale,
        "logit_scale_source": "learned" if config.logit_scale == "learned" else "fixed",
        "label_set": {"rank": rank.column, "size": len(labels), "sha256": planned.sha256,
                      "taxa_sha256": planned.taxa_sha256,
                      "source": config.labels or "the benchmark's taxa (all selected rows, fit rows included)",
                      "unscored_rows": int((test_targets < 0).sum())},
        "where": config.where,
        "candidates": None if config.candidates is None else {"column": config.candidates, **(candidate_counts or {})},
        "fusion": config.prior_fusion,
        "hierarchy": hierarchy,
        "split": split.info,
        "test_fallbacks": reason_counts(outcome.fallback),
        "test_rows_with_place": int(usable_location(place.latitudes, place.longitudes).sum()),
        "test_rows_without_place": unusable_locations(place.latitudes, place.longitudes),
        **outcome.info,
    }
    return Predictions(table=table, labels=texts, info=info)


# --- metrics ---------------------------------------------------------------------------------------


def _definitions() -> None:
    define_metric("image_top1", "share of scored test images whose zero-shot top label (image alone) is the true "
                  "label; Wilson score interval")
    define_metric("fused_top1", "share of scored test images whose fused top label (image with place and season) is "
                  "the true label; Wilson score interval")
    define_metric("fused_minus_image", "fused_top1 - image_top1 on the same test images; paired percentile "
                  "bootstrap over observation groups (split_group), two-sided bootstrap p-value")
    define_metric("image_weight", "weight a of log p_image in a log p_image + (1 - a) log p_prior, chosen on the "
                  "validation rows (highest top-1, ties to the larger a); no interval")
    define_metric("prior_fallback", "share of test images whose prior lacked place and/or date (the reason is in the "
                  "name): the available factor, or a uniform prior, was used; Wilson score interval")


_definitions()


def _bools(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=bool)


def geo_metrics(predictions: Predictions) -> dict[str, dict[str, object]]:
    """Top-1 image-only and fused, their paired difference, the chosen weight, fallback shares, and each top-1's
    mistake severity and hdist@1 (:mod:`cladebench.metrics.hierarchy`)."""
    table, info = predictions.table, predictions.info
    rank = info["rank"]
    scored = _bools(table, "scored")
    image, fused = _bools(table, "correct_image")[scored], _bools(table, "correct_fused")[scored]
    metrics: dict[str, dict[str, object]] = {
        f"image_top1_{rank}": accuracy(image).to_dict(),
        f"fused_top1_{rank}": accuracy(fused).to_dict(),
    }
    if scored.any():
        groups = np.asarray(table.column("split_group").to_pylist(), dtype=object)[scored]
        paired = paired_bootstrap(fused, image, groups=groups, n_resamples=PAIRED_RESAMPLES)
        metrics[f"fused_minus_image_{rank}"] = {
            "value": paired.difference, "low": paired.low, "high": paired.high, "n": paired.n,
            "p_value": paired.p_value, "confidence": paired.confidence, "interval": paired.method,
            "n_resamples": paired.n_resamples, "seed": paired.seed}
    if info.get("image_weight") is not None:
        validation = info.get("validation", {})
        metrics["image_weight"] = {"value": float(info["image_weight"]), "low": None, "high": None,
                                   "n": int(validation.get("scored", 0)),
                                   "interval": "none: chosen on the validation rows"}
    for kind in KINDS:  # mistake severity and hdist@1 of each top-1 (no top-5 is kept: no hdist@5)
        heights = _heights(table, kind, scored)
        metrics.update(severity_metrics(heights, None, _bools(table, f"correct_{kind}")[scored], rank,
                                        n_labels=len(predictions.labels) or None, hierarchy=info.get("hierarchy"),
                                        prefix=f"{kind}_", ranked=False))
    reasons = np.asarray(table.column("prior_fallback").to_pylist(), dtype=object)
    for reason in sorted(set(reasons.tolist()) - {"none"}):
        metrics[f"prior_fallback_{reason}"] = accuracy(reasons == reason).to_dict()
    return metrics


def per_image_values(table: pa.Table, task_provenance: dict[str, object]) -> dict[str, tuple[object, ...]]:
    """Each scored test image's 0/1 correctness, image-only and fused, keyed by uuid, so runs pair image by image."""
    rank = task_provenance.get("rank", "species")
    scored = _bools(table, "scored")
    uuids = [u for u, s in zip(table.column("uuid").to_pylist(), scored, strict=True) if s]
    out: dict[str, tuple[object, ...]] = {
        f"{kind}_top1_{rank}": (uuids, _bools(table, f"correct_{kind}")[scored].astype(np.float64)) for kind in KINDS}
    for kind in KINDS:
        heights = _heights(table, kind, scored)
        if heights is not None:
            out[f"{kind}_hdist1_{rank}"] = (uuids, heights.astype(np.float64))
            out[f"{kind}_mistake_severity_{rank}"] = severity_units(uuids, heights,
                                                                     _bools(table, f"correct_{kind}")[scored])
    return out


KINDS = ("image", "fused")
"""The two predictions of every test row: the image alone, and fused with place and season."""


def _heights(table: pa.Table, kind: str, scored: np.ndarray) -> np.ndarray | None:
    """The scored rows' LCA heights of truth and the ``kind`` top-1, or None where the predictions lack them."""
    column = f"lca_height_{kind}"
    if column not in table.column_names:
        return None
    return table.column(column).fill_null(-1).to_numpy(zero_copy_only=False)[scored]
