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
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa

from cladebench import store
from cladebench.config import at_least, non_negative, positive
from cladebench.errors import CladebenchError, SchemaError, UsageError, unknown_name
from cladebench.metrics import accuracy, define_metric, paired_bootstrap, register_display
from cladebench.tasks.common import (
    LabelSet,
    Predictions,
    candidate_mask,
    classify,
    label_set,
    label_set_from_file,
    logit_scale_of,
    text_image_column,
)
from cladebench.tasks.geo.prior import (
    EARTH_RADIUS_KM,
    MIN_CELL_KM,
    PriorSettings,
    choose_image_weight,
    embedding_sum,
    fit_prior,
    fused_argmax,
    image_weight_grid,
    log_probabilities,
    usable_location,
    year_fractions,
)
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder

LATITUDE, LONGITUDE, DATE = "latitude", "longitude", "observed_on"

MAX_CELL_KM = math.pi * EARTH_RADIUS_KM
"""Largest cell side accepted, km: pole to pole (about 20,015 km). A larger cell is the whole sphere, one cell
with no geography in it, and its area (side squared) overflows a float long before the side does."""
"""The canonical columns the prior reads (see :mod:`cladebench.store`)."""
AUTO_GROUP_KEY = "source_id"
"""Column ``prior_group_key="auto"`` uses when the rows have values in it (else each image is its own group)."""
LOCATION_EMBEDDING_PREFIX = "loc_emb_"
"""Prefix of location-embedding columns that ``prior_location_column=None`` looks for."""
PARTS = ("fit", "validation", "test")
"""The parts of the split, in the order of ``prior_split``."""
PAIRED_RESAMPLES = 10_000
"""Bootstrap resamples for the fused - image interval (seeded, so a rerun gives the same interval)."""


@dataclass(frozen=True)
class GeoPriorConfig:
    """How an image + place/season run is set up; every field is recorded in the run record. The zero-shot fields
    (rank .. labels) mean what they mean for the zeroshot task."""

    rank: str = "species"
    """Rank of the labels: the benchmark's taxa at this rank form the label set."""
    name_style: str = "taxon"
    """Label strings: sci, com, taxon, taxon_com or mixed (scientific with common name)."""
    templates: str = "bioclip"
    """Template set (bioclip, photo, openai-imagenet, raw) or one template containing {c}."""
    logit_scale: str = "learned"
    """'learned' (the model's own scale) or a number (CLIP_benchmark uses 100)."""
    column: str | None = None
    """Embedding column with the images' vectors; by default the one whose metadata names the model."""
    where: str | None = None
    """SQL filter selecting the evaluated rows."""
    candidates: str | None = None
    """Column with each row's candidate species (e.g. cryptic_group): classify among them only, with and
    without the prior."""
    labels: str | None = None
    """Label set file instead of the benchmark's taxa (see the zeroshot task)."""
    prior_fusion: Literal["product", "embedding_sum"] = "product"
    """product: a log p_image + (1 - a) log p_prior, a chosen on validation; embedding_sum: unit image vector plus
    unit location embedding (prior_location_column), then zero-shot."""
    prior_cell_km: float = 100.0
    """Side of an equal-area grid cell of the prior, km."""
    prior_neighbourhood_km: float = 500.0
    """Side of the coarser cells a cell's counts are smoothed towards, km."""
    prior_season_bins: int = 12
    """Day-of-year bins on the circle."""
    prior_alpha: float = 5.0
    """Dirichlet pseudo-observations of each smoothing level (cell -> neighbourhood -> global; label season ->
    overall season)."""
    prior_split: tuple[float, ...] = (0.5, 0.25, 0.25)
    """Shares of observation groups for fit, validation and test; with prior_fit_where or prior_dataset the fit
    share is ignored and the evaluated rows are split validation:test."""
    prior_group_key: str = "auto"
    """Column whose equal values are one observation, kept in one part of the split and resampled together:
    'auto' (source_id when present, else each image), 'uuid', or a column."""
    prior_seed: int = 0
    """Seed of the split (and of nothing else)."""
    prior_fit_where: str | None = None
    """SQL selecting the rows whose metadata fit the prior (in prior_dataset if given, else in this dataset)
    instead of a fit share of the evaluated rows; they need no image embeddings."""
    prior_dataset: str | None = None
    """Another dataset whose observations (all, or those prior_fit_where selects) fit the prior."""
    prior_weight_steps: int = 21
    """Number of image weights a in [0, 1] tried on validation (21: steps of 0.05)."""
    prior_location_column: str | None = None
    """Location-embedding column for embedding_sum; by default the one column named loc_emb_*."""

    def __post_init__(self) -> None:
        for option, km in (("--prior-cell-km", self.prior_cell_km),
                           ("--prior-neighbourhood-km", self.prior_neighbourhood_km)):
            positive(option, km)
            if km < MIN_CELL_KM:
                raise UsageError(f"{option} must be at least {MIN_CELL_KM:g} km (the grid keeps a row per cell of "
                                 f"the whole sphere), got {km:g}")
            if km > MAX_CELL_KM:
                raise UsageError(f"{option} must be at most {MAX_CELL_KM:,.0f} km (pole to pole: a larger cell is the "
                                 f"whole sphere), got {km:g}")
        at_least("--prior-season-bins", self.prior_season_bins, 1)
        positive("--prior-alpha", self.prior_alpha)
        split = tuple(self.prior_split)
        if len(split) != 3:
            raise UsageError(f"--prior-split takes three shares (fit, validation, test), got "
                             f"{' '.join(map(str, split))}")
        for share in split:
            non_negative("--prior-split", share)
        if sum(split) <= 0:
            raise UsageError(f"--prior-split shares must not all be zero, got {' '.join(map(str, split))}")
        at_least("--prior-seed", self.prior_seed, 0)
        at_least("--prior-weight-steps", self.prior_weight_steps, 2)


# --- the split -------------------------------------------------------------------------------------


def assign_parts(groups: Sequence[str], fractions: Sequence[float], seed: int) -> np.ndarray:
    """Part index (into ``fractions``) of each row: a seeded SHA-256 of its group, read as a number in [0, 1),
    falls into the part whose cumulative share it lies under. Rows of one group share a part; a group's part
    depends only on the seed and its key."""
    shares = np.asarray(fractions, dtype=np.float64)
    if shares.ndim != 1 or (shares < 0).any() or shares.sum() <= 0:
        raise CladebenchError(f"split shares must be non-negative and not all zero, got {list(fractions)}")
    bounds = np.cumsum(shares / shares.sum())
    codes, inverse = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    draws = np.array([int.from_bytes(hashlib.sha256(f"{seed}\x00{g}".encode()).digest()[:8], "big") / 2.0**64
                      for g in codes])
    part = np.minimum(np.searchsorted(bounds, draws, side="right"), len(shares) - 1)
    return part[inverse]


def resolve_group_key(table: pa.Table, key: str, names: Sequence[str]) -> str:
    """The group column the split uses: ``auto`` is source_id when the rows have values in it, else uuid."""
    if key == "auto":
        present = AUTO_GROUP_KEY in table.column_names and table.column(AUTO_GROUP_KEY).null_count < table.num_rows
        return AUTO_GROUP_KEY if present else "uuid"
    if key != "uuid" and key not in names:
        raise SchemaError(f"prior_group_key {key!r} is not a column of the dataset")
    return key


def group_values(table: pa.Table, key: str) -> np.ndarray:
    """Each row's group as a string; a row without one is its own group (its uuid)."""
    uuids = np.asarray(table.column("uuid").to_pylist(), dtype=object)
    if key == "uuid" or key not in table.column_names:
        return uuids
    values = np.asarray(table.column(key).cast(pa.string()).to_pylist(), dtype=object)
    missing = np.array([v is None for v in values], dtype=bool)
    values[missing] = np.array(["\x00uuid:" + u for u in uuids[missing]], dtype=object)
    return values


@dataclass(frozen=True)
class Place:
    """Where and when each row was observed (NaN where unknown)."""

    latitudes: np.ndarray
    """Decimal degrees."""
    longitudes: np.ndarray
    """Decimal degrees."""
    fractions: np.ndarray
    """Place in the year, in [0, 1) (:func:`cladebench.tasks.geo.prior.year_fractions`)."""

    @classmethod
    def of(cls, table: pa.Table) -> Place:
        n = table.num_rows

        def floats(name: str) -> np.ndarray:
            if name not in table.column_names:
                return np.full(n, np.nan)
            return np.asarray(table.column(name).cast(pa.float64()).fill_null(np.nan).to_numpy(), dtype=np.float64)

        fractions = year_fractions(table.column(DATE)) if DATE in table.column_names else np.full(n, np.nan)
        return cls(floats(LATITUDE), floats(LONGITUDE), fractions)

    def take(self, index: np.ndarray) -> Place:
        return Place(self.latitudes[index], self.longitudes[index], self.fractions[index])


@dataclass(frozen=True)
class Split:
    """Which evaluated rows validate and test, and the fit observations of the prior."""

    validation: np.ndarray
    """Indices of validation rows among the evaluated rows."""
    test: np.ndarray
    """Indices of test rows among the evaluated rows."""
    fit_labels: np.ndarray
    """Label index of each fit observation (-1: its taxon is not in the label set)."""
    fit_place: Place
    """Where and when each fit observation was made."""
    info: dict[str, Any]
    """The split's description for the run record."""


def _label_indices(lineages: Sequence[Lineage], labels: LabelSet) -> np.ndarray:
    index = {key: i for i, key in enumerate(labels.taxa)}
    rank = labels.rank
    return np.array([index.get(lin.key(rank), -1) if lin.names[rank] else -1 for lin in lineages], dtype=np.int64)


def _naming(names: Sequence[str]) -> list[str]:
    return [c for c in (*RANK_COLUMNS, "scientific_name", "common_name") if c in names]


def _part_counts(parts: np.ndarray, groups: np.ndarray, chosen: Sequence[int]) -> dict[str, dict[str, int]]:
    return {PARTS[p]: {"rows": int((parts == p).sum()), "groups": int(np.unique(groups[parts == p]).size)}
            for p in chosen}


def plan_split(dataset: lance.LanceDataset, rows: pa.Table, labels: LabelSet, group_key: str,
               config: GeoPriorConfig) -> Split:
    """The validation and test rows and the prior's fit observations (see the module docstring)."""
    if len(config.prior_split) != 3:
        raise CladebenchError(f"prior_split takes three shares (fit, validation, test), got {config.prior_split}")
    groups = group_values(rows, group_key)
    lineages = [Lineage.from_row(r) for r in rows.select(_naming(rows.column_names)).to_pylist()]
    separate = config.prior_dataset is not None or config.prior_fit_where is not None
    base = {"seed": config.prior_seed, "sampling_unit": group_key, "group_key": config.prior_group_key,
            "shares": list(config.prior_split)}
    if not separate:
        parts = assign_parts(groups, config.prior_split, config.prior_seed)
        fit = np.flatnonzero(parts == 0)
        info = {**base, "kind": "seeded SHA-256 of each observation group into fit / validation / test",
                "prior_fit_source": "fit share of the evaluated rows", **_part_counts(parts, groups, (0, 1, 2))}
        split = Split(np.flatnonzero(parts == 1), np.flatnonzero(parts == 2),
                      _label_indices([lineages[i] for i in fit], labels), Place.of(rows).take(fit), info)
    else:
        fit_dataset = store.open_dataset(config.prior_dataset) if config.prior_dataset else dataset
        names = fit_dataset.schema.names
        wanted = ["uuid", *_naming(names), *(c for c in (LATITUDE, LONGITUDE, DATE) if c in names)]
        if group_key != "uuid" and group_key in names:
            wanted.append(group_key)
        fit_rows = store.read(fit_dataset, columns=wanted, where=config.prior_fit_where)
        if fit_rows.num_rows == 0:
            raise CladebenchError(f"no fit rows for the prior: {config.prior_fit_where!r} selects nothing in "
                                  f"{fit_dataset.uri}")
        fit_groups = set(group_values(fit_rows, group_key).tolist())
        fit_uuids = set(fit_rows.column("uuid").to_pylist())
        uuids = rows.column("uuid").to_pylist()
        overlap = np.array([u in fit_uuids or g in fit_groups for u, g in zip(uuids, groups, strict=True)], dtype=bool)
        parts = assign_parts(groups, (0.0, *config.prior_split[1:]), config.prior_seed)
        parts[overlap] = -1
        fit_lineages = [Lineage.from_row(r) for r in fit_rows.select(_naming(fit_rows.column_names)).to_pylist()]
        info = {**base, "kind": "seeded SHA-256 of each observation group into validation / test",
                "prior_fit_source": {"dataset": config.prior_dataset or "the evaluated dataset",
                                     "where": config.prior_fit_where, "rows": fit_rows.num_rows},
                "excluded_as_in_fit_set": int(overlap.sum()), **_part_counts(parts, groups, (1, 2))}
        split = Split(np.flatnonzero(parts == 1), np.flatnonzero(parts == 2), _label_indices(fit_lineages, labels),
                      Place.of(fit_rows), info)
    for name, index in (("validation", split.validation), ("test", split.test)):
        if index.size == 0:
            raise CladebenchError(f"the split left no {name} rows ({split.info}); evaluate more observations or "
                                  "change prior_split")
    return split


# --- fusions ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FusionInputs:
    """What every fusion gets: the evaluated rows (validation first, then test) and their image scores."""

    config: GeoPriorConfig
    """The run's settings."""
    rows: pa.Table
    """Evaluated rows, validation rows then test rows."""
    image_vectors: np.ndarray
    """Raw image embeddings of those rows."""
    image_probs: np.ndarray
    """Zero-shot probabilities of those rows (rows x labels)."""
    label_vectors: np.ndarray
    """Unit text embeddings of the labels."""
    scale: float
    """Logit scale of the zero-shot classification."""
    allowed: np.ndarray | None
    """Candidate mask (rows x labels), or None for every label."""
    targets: np.ndarray
    """True label index per row (-1: not in the label set)."""
    n_validation: int
    """The first n_validation rows validate, the rest test."""
    split: Split
    """The split, with the prior's fit observations."""


@dataclass(frozen=True)
class FusionOutcome:
    """A fusion's predictions on the test rows."""

    fused: np.ndarray
    """Fused label index per test row."""
    fallback: list[str]
    """Per test row, why it lacked information (``none`` when it had everything)."""
    columns: dict[str, Any]
    """Further prediction columns (per test row)."""
    info: dict[str, Any]
    """What the fusion chose and counted, for the run record."""


def _counts(reasons: Sequence[str]) -> dict[str, int]:
    return dict(sorted(Counter(reasons).items()))


def product_fusion(inputs: FusionInputs) -> FusionOutcome:
    """Geometric mixture of image and prior probabilities, the image weight chosen on validation rows."""
    config, nv = inputs.config, inputs.n_validation
    settings = PriorSettings(cell_km=config.prior_cell_km, neighbourhood_km=config.prior_neighbourhood_km,
                             season_bins=config.prior_season_bins, alpha=config.prior_alpha)
    n_labels = inputs.image_probs.shape[1]
    fit = inputs.split.fit_place
    prior = fit_prior(inputs.split.fit_labels, fit.latitudes, fit.longitudes, fit.fractions, n_labels=n_labels,
                      settings=settings)
    place = Place.of(inputs.rows)
    prior_probs, reasons = prior.probabilities(place.latitudes, place.longitudes, place.fractions)
    test_targets = inputs.targets[nv:]
    true_prior = [float(prior_probs[nv + i, t]) if t >= 0 else None for i, t in enumerate(test_targets)]
    log_image, log_prior = log_probabilities(inputs.image_probs), log_probabilities(prior_probs)
    del prior_probs  # rows x labels: one such matrix fewer held at a time
    allowed = inputs.allowed
    val_allowed, test_allowed = (None, None) if allowed is None else (allowed[:nv], allowed[nv:])
    weights = image_weight_grid(config.prior_weight_steps)
    chosen, top1 = choose_image_weight(log_image[:nv], log_prior[:nv], inputs.targets[:nv], weights, val_allowed)
    fused = fused_argmax(log_image[nv:], log_prior[nv:], chosen, test_allowed)
    prior_only = fused_argmax(log_image[nv:], log_prior[nv:], 0.0, test_allowed)
    info = {"image_weight": chosen, "prior": prior.describe(),
            "validation": {"rows": nv, "scored": int((inputs.targets[:nv] >= 0).sum()),
                           "weights": [float(w) for w in weights], "top1": [float(v) for v in top1],
                           "fallbacks": _counts(reasons[:nv])}}
    return FusionOutcome(fused=fused, fallback=reasons[nv:], columns={"pred_prior_index": prior_only,
                                                                         "prior_true_prob": true_prior}, info=info)


def location_column(dataset_names: Sequence[str], configured: str | None) -> str:
    """The location-embedding column: the configured one, else the single ``loc_emb_*`` column."""
    if configured is not None:
        if configured not in dataset_names:
            raise SchemaError(f"prior_location_column {configured!r} is not a column of the dataset")
        return configured
    found = [n for n in dataset_names if n.startswith(LOCATION_EMBEDDING_PREFIX)]
    if len(found) != 1:
        raise CladebenchError(f"embedding_sum needs one location-embedding column ({LOCATION_EMBEDDING_PREFIX}*); "
                              f"found {found or 'none'}: pass prior_location_column")
    return found[0]


def vector_column(column: pa.ChunkedArray | pa.Array, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(present, vectors) of a list column: rows with a vector of length ``dim``; zeros elsewhere."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    present = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    vectors = np.zeros((len(values), dim), dtype=np.float32)
    if present.any():
        kept = values.filter(pa.array(present))
        flat = kept.flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        if flat.size != len(kept) * dim:
            raise SchemaError(f"location embeddings are not all {dim}-dimensional like the image embeddings")
        vectors[present] = flat.reshape(-1, dim)
    return present, vectors


def embedding_sum_fusion(inputs: FusionInputs) -> FusionOutcome:
    """Zero-shot on unit image + unit location embedding (TaxaBind-style); rows without one stay image-only."""
    nv = inputs.n_validation
    column = inputs.config.prior_location_column or location_column(inputs.rows.column_names, None)
    present, location = vector_column(inputs.rows.column(column), inputs.image_vectors.shape[1])
    summed = embedding_sum(inputs.image_vectors[nv:], location[nv:], present[nv:])
    allowed = None if inputs.allowed is None else inputs.allowed[nv:]
    probs = classify(summed, inputs.label_vectors, inputs.scale, allowed)
    reasons = ["none" if p else "no_location_embedding" for p in present[nv:]]
    return FusionOutcome(fused=probs.argmax(axis=1), fallback=reasons, columns={},
                         info={"location_column": column, "image_weight": None})


FUSIONS: dict[str, Callable[[FusionInputs], FusionOutcome]] = {
    "product": product_fusion,
    "embedding_sum": embedding_sum_fusion,
}
"""Fusion name -> function of the evaluated rows' image scores to the test rows' fused predictions."""


# --- the task --------------------------------------------------------------------------------------


def _read_columns(dataset: lance.LanceDataset, config: GeoPriorConfig, group_key: str) -> list[str]:
    names = dataset.schema.names
    wanted = ["uuid", *_naming(names), *(c for c in (LATITUDE, LONGITUDE, DATE) if c in names)]
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


def geo(dataset: lance.LanceDataset, encoder: Encoder, config: GeoPriorConfig) -> Predictions:
    """Image-only and place/season-fused predictions of the test rows; see the module docstring."""
    from cladebench.models import class_text_embeddings
    from cladebench.store.embeddings import valid_embeddings

    if config.prior_fusion not in FUSIONS:
        raise unknown_name("fusion", config.prior_fusion, FUSIONS)
    rank = Rank.parse(config.rank)
    column, meta = text_image_column(dataset, encoder, config.column, task="geo")
    rows, vectors = valid_embeddings(dataset, column, where=config.where,
                                     columns=_read_columns(dataset, config, config.prior_group_key),
                                     dim=getattr(encoder, "dim", None))
    if rows.num_rows == 0:
        raise CladebenchError(f"no rows with embeddings in {column!r} match the filter {config.where!r}")
    lineages = [Lineage.from_row(r) for r in rows.select(_naming(rows.column_names)).to_pylist()]
    labels = label_set_from_file(config.labels, rank, lineages) if config.labels else label_set(lineages, rank)
    if len(labels) < 2:
        raise CladebenchError(f"the geo task needs at least 2 labels at rank {rank.column}; found {len(labels)}")
    group_key = resolve_group_key(rows, config.prior_group_key, dataset.schema.names)
    split = plan_split(dataset, rows, labels, group_key, config)
    evaluated = np.concatenate([split.validation, split.test])
    rows, vectors = rows.take(pa.array(evaluated)), vectors[evaluated]
    lineages = [lineages[i] for i in evaluated]
    targets = _label_indices(lineages, labels)

    texts = labels.texts(config.name_style)
    label_vectors = class_text_embeddings(encoder, texts, config.templates)
    scale = logit_scale_of(config, encoder)
    allowed, candidate_counts = None, None
    if config.candidates:
        if rank != Rank.SPECIES:
            raise CladebenchError("--candidates lists species, so it needs --rank species")
        allowed, candidate_counts = candidate_mask(rows.column(config.candidates).to_pylist(), labels)
    image_probs = classify(vectors, label_vectors, scale, allowed)
    nv = split.validation.size
    outcome = FUSIONS[config.prior_fusion](FusionInputs(
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
    place = Place.of(rows.slice(nv))
    info = {
        "column": column,
        "embedding_metadata": meta,
        "rank": rank.column,
        "name_style": config.name_style,
        "templates": config.templates,
        "logit_scale": scale,
        "logit_scale_source": "learned" if config.logit_scale == "learned" else "fixed",
        "label_set": {"rank": rank.column, "size": len(labels), "sha256": labels.digest(config.name_style),
                      "source": config.labels or "the benchmark's taxa (all selected rows, fit rows included)",
                      "unscored_rows": int((test_targets < 0).sum())},
        "where": config.where,
        "candidates": None if config.candidates is None else {"column": config.candidates, **candidate_counts},
        "fusion": config.prior_fusion,
        "split": split.info,
        "test_fallbacks": _counts(outcome.fallback),
        "test_rows_with_place": int(usable_location(place.latitudes, place.longitudes).sum()),
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
    register_display(r"image_weight", 1.0, "")


_definitions()


def _bools(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=bool)


def geo_metrics(predictions: Predictions) -> dict[str, dict[str, Any]]:
    """Top-1 image-only and fused, their paired difference, the chosen weight, and fallback shares."""
    table, info = predictions.table, predictions.info
    rank = info["rank"]
    scored = _bools(table, "scored")
    image, fused = _bools(table, "correct_image")[scored], _bools(table, "correct_fused")[scored]
    metrics: dict[str, dict[str, Any]] = {
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
    reasons = np.asarray(table.column("prior_fallback").to_pylist(), dtype=object)
    for reason in sorted(set(reasons.tolist()) - {"none"}):
        metrics[f"prior_fallback_{reason}"] = accuracy(reasons == reason).to_dict()
    return metrics


def per_image_values(table: pa.Table, task_provenance: dict[str, Any]) -> dict[str, tuple[list[Any], np.ndarray]]:
    """Each scored test image's 0/1 correctness, image-only and fused, keyed by uuid, so runs pair image by image."""
    rank = task_provenance.get("rank", "species")
    scored = _bools(table, "scored")
    uuids = [u for u, s in zip(table.column("uuid").to_pylist(), scored, strict=True) if s]
    return {f"{kind}_top1_{rank}": (uuids, _bools(table, f"correct_{kind}")[scored].astype(np.float64))
            for kind in ("image", "fused")}
