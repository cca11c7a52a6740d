"""How image scores and place meet: the registry of fusions (:data:`FUSIONS`), product of probabilities with a
weight chosen on validation, or a location embedding added to the image vector.

Why a module of its own: a new fusion is one function registered here; the task only calls it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from cladebench.errors import CladebenchError, SchemaError
from cladebench.registry import Registry
from cladebench.tasks.common import (
    classify,
)
from cladebench.tasks.geo.config import LOCATION_EMBEDDING_PREFIX, GeoPriorConfig
from cladebench.tasks.geo.prior import (
    PriorSettings,
    choose_image_weight,
    embedding_sum,
    fit_prior,
    fused_argmax,
    image_weight_grid,
    log_probabilities,
)
from cladebench.tasks.geo.split import Place, Split

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
    info: dict[str, object]
    """What the fusion chose and counted, for the run record."""


def reason_counts(reasons: Sequence[str]) -> dict[str, int]:
    """How many rows have each fallback reason, by reason."""
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
                           "fallbacks": reason_counts(reasons[:nv])}}
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


FUSIONS: Registry[Callable[[FusionInputs], FusionOutcome]] = Registry("fusion")
FUSIONS.add("product", product_fusion)
FUSIONS.add("embedding_sum", embedding_sum_fusion)
"""Fusion name -> function of the evaluated rows' image scores to the test rows' fused predictions."""
