"""How an image + place/season run is set up (:class:`GeoPriorConfig`), checked when it is made, and the columns
and names the geo task reads.

Why a module of its own: the split, the fusions and the task all read it, so it sits below them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

from cladebench.config import at_least, at_most, non_negative, positive
from cladebench.errors import UsageError
from cladebench.tasks.configs import TextLabelConfig

EARTH_RADIUS_KM = 6371.0088
"""Mean Earth radius (IUGG), the sphere the grid's areas are measured on."""
MIN_CELL_KM = 5.0
"""Smallest cell side accepted, km: the count matrices keep one row per cell of the whole sphere (about
510 million km² / cell_km², 20 million rows at 5 km), so smaller cells would exhaust memory rather than help."""
LATITUDE, LONGITUDE, DATE = "latitude", "longitude", "observed_on"
"""The canonical columns the prior reads (see :mod:`cladebench.store`)."""

MAX_CELL_KM = math.pi * EARTH_RADIUS_KM
"""Largest cell side accepted, km: pole to pole (about 20,015 km). A larger cell is the whole sphere, one cell
with no geography in it, and its area (side squared) overflows a float long before the side does."""
AUTO_GROUP_KEY = "source_id"
"""Column ``prior_group_key="auto"`` uses when the rows have values in it (else each image is its own group)."""
LOCATION_EMBEDDING_PREFIX = "loc_emb_"
"""Prefix of location-embedding columns that ``prior_location_column=None`` looks for."""
PARTS = ("fit", "validation", "test")
"""The parts of the split, in the order of ``prior_split``."""


@dataclass(frozen=True)
class GeoPriorConfig(TextLabelConfig):
    """How an image + place/season run is set up; every field is recorded in the run record. The zero-shot fields
    (rank .. labels) mean what they mean for the zeroshot task."""
    TASK: ClassVar[str] = "geo"

    SHOWN: ClassVar[tuple[str, ...]] = ("rank", "prior_fusion", "prior_cell_km", "prior_dataset")
    """The fields `cladebench eval geo --help` lists as options (:data:`cladebench.config.SHOWN`)."""

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
        super().__post_init__()
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
        at_most("--prior-season-bins", self.prior_season_bins, 366, "one bin per day of the year")
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

    def candidates_column(self) -> str | None:
        return self.candidates

    def group_keys(self) -> dict[str, str]:
        return {"--prior-group-key": self.prior_group_key}

    def label_source(self) -> str | None:
        return self.labels

    def location_embedding(self) -> tuple[str | None, bool]:
        return self.prior_location_column, self.prior_fusion == "embedding_sum"

    def prior_fit(self) -> tuple[str | None, str | None]:
        return self.prior_fit_where, self.prior_dataset
