"""A spatiotemporal prior p(label | place, day of year) counted from observations, and its fusion with images.

Why: many cryptic species that a photo cannot tell apart never meet, or are seen in different months
(CrypticBio pairs look-alikes mined from iNaturalist misidentifications and scores image + location/time;
GeoCLIP and the iNat "geo model" show how much a place adds). This module is the prior and the fusion;
:mod:`cladebench.tasks.geo.task` reads the rows, splits them and scores. Pure numpy/scipy: no dataset, no model.

The prior (all counts come from the *fit* observations only):

- **Place.** An equal-area grid (:class:`EqualAreaGrid`), the "igloo" construction: latitude bands about
  ``cell_km`` tall, each cut into as many equal longitude cells as its area holds cells of ``cell_km``²; then
  the band edges are moved (in ``sin(lat)``, which is area) so that every band holds exactly its cells' share
  of the sphere. Every cell has exactly the same area and is near-square. H3 would do the same but is not a
  dependency; bands of equal ``sin(lat)`` with a fixed cell count per band become slivers near the poles.
  Counts are smoothed hierarchically (Dirichlet back-off, as in MacKay & Peto's hierarchical Dirichlet
  language model): a fine cell is pulled towards the coarser ``neighbourhood_km`` cell around it, which is
  pulled towards the labels' global frequency, each with ``alpha`` pseudo-observations::

      g(s)        = (n(s) + 1) / (N + S)                                  (global, add-one)
      p(s | C)    = (n(s, C) + alpha * g(s))        / (n(C) + alpha)      (coarse cell C)
      p(s | c)    = (n(s, c) + alpha * p(s | C(c))) / (n(c) + alpha)      (fine cell c)

  A cell with many observations speaks for itself; an empty one inherits its neighbourhood, and an
  empty neighbourhood the global frequency. Every label keeps some mass, so a log never meets zero.
- **Season.** Day of year on a circle in ``season_bins`` bins; each label's counts are spread 1/4, 1/2, 1/4
  over the bin and its two neighbours (circularly, so December meets January), then smoothed towards the
  season distribution of all fit observations: ``p(b | s) = (m(s, b) + alpha * q(b)) / (n_t(s) + alpha)``.
- **Together**, assuming place and season independent given the label (naive Bayes),
  ``p(s | c, b) ∝ p(s | c) p(b | s)``, normalised over the labels.

A query row missing a factor keeps the one it has: no place (null or out-of-range coordinates) ->
``p(b | s)`` normalised over labels; no date -> ``p(s | c)``; neither -> uniform. The reason is returned
per row (:data:`FALLBACK_REASONS`), so a caller counts it rather than mixing such rows in silently.

Fusion (:func:`fused_argmax`, :func:`choose_image_weight`): ``log p ∝ a log p_image + (1 - a) log p_prior``,
a geometric mixture; ``a = 1`` is the image alone, ``a = 0`` the prior alone (ties then go to the image's
choice). ``a`` is chosen on validation rows, maximising top-1, ties towards the larger ``a`` (trust the image
unless the prior earns its place). :func:`embedding_sum` is the other route, TaxaBind-style: a location
embedding that lives in the image-text space is added to the image embedding before zero-shot.

Example:
    >>> import numpy as np
    >>> prior = fit_prior(np.array([0, 0, 1]), np.array([10.0, 10.0, -40.0]), np.array([5.0, 5.0, 120.0]),
    ...                   np.array([0.1, 0.1, 0.6]), n_labels=2, settings=PriorSettings(alpha=1.0))
    >>> probs, reasons = prior.probabilities(np.array([10.0, np.nan]), np.array([5.0, np.nan]),
    ...                                      np.array([0.1, np.nan]))
    >>> bool(probs[0, 0] > 0.9), probs[1].tolist(), reasons
    (True, [0.5, 0.5], ['none', 'no_location_no_date'])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import sparse

from cladebench.tasks.geo.config import EARTH_RADIUS_KM, MIN_CELL_KM

FALLBACK_REASONS: dict[tuple[bool, bool], str] = {
    (True, True): "none",
    (False, True): "no_location",
    (True, False): "no_date",
    (False, False): "no_location_no_date",
}
"""(has a usable place, has a date) -> the reason recorded for a query row."""

CHUNK_CELLS = 1 << 22
"""Rows are processed in chunks of about this many (row x label) cells, bounding memory for any size."""


# --- the grid --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EqualAreaGrid:
    """Near-square cells of exactly equal area on the sphere (see the module docstring); ids run band by band
    from the south pole, west to east from longitude -180 within a band."""

    cell_km: float
    """Target side of a cell in km; every cell's area is the sphere's over the number of cells, about
    ``cell_km``²."""
    band_sines: np.ndarray
    """sin(latitude) of the band edges, south to north: band ``b`` holds the points whose sin(latitude) lies in
    [band_sines[b], band_sines[b + 1])."""
    cells_per_band: np.ndarray
    """Number of longitude cells in each band."""
    first_cell: np.ndarray
    """Id of each band's first (westernmost) cell."""

    @classmethod
    def build(cls, cell_km: float) -> EqualAreaGrid:
        if not cell_km > 0:
            raise ValueError(f"cell_km must be positive, got {cell_km}")
        bands = max(1, round(np.pi * EARTH_RADIUS_KM / cell_km))
        heights = np.diff(np.sin(np.linspace(-np.pi / 2, np.pi / 2, bands + 1)))  # equal-latitude bands first
        per_band = np.maximum(1, np.rint(2 * np.pi * EARTH_RADIUS_KM**2 * heights / cell_km**2)).astype(np.int64)
        # Area is linear in sin(latitude): edges at cumulative cell shares make every cell's area equal.
        sines = np.concatenate([[-1.0], -1.0 + 2.0 * np.cumsum(per_band) / per_band.sum()])
        sines[-1] = 1.0
        first = np.concatenate([[0], np.cumsum(per_band)[:-1]]).astype(np.int64)
        return cls(cell_km=float(cell_km), band_sines=sines, cells_per_band=per_band, first_cell=first)

    @property
    def n_cells(self) -> int:
        return int(self.cells_per_band.sum())

    def cell_areas_km2(self) -> np.ndarray:
        """Area of every cell, by id (equal, and summing to the sphere's area)."""
        band_area = 2 * np.pi * EARTH_RADIUS_KM**2 * np.diff(self.band_sines)
        return np.repeat(band_area / self.cells_per_band, self.cells_per_band)

    def cells(self, latitudes: np.ndarray, longitudes: np.ndarray) -> np.ndarray:
        """Cell id of each point in degrees; -1 where a coordinate is missing (NaN) or out of range."""
        lat = np.asarray(latitudes, dtype=np.float64)
        lon = np.asarray(longitudes, dtype=np.float64)
        valid = usable_location(lat, lon)
        sine = np.sin(np.radians(np.where(valid, lat, 0.0)))
        band = np.clip(np.searchsorted(self.band_sines, sine, side="right") - 1, 0, len(self.cells_per_band) - 1)
        per_band = self.cells_per_band[band]
        column = np.floor((np.where(valid, lon, 0.0) + 180.0) / 360.0 * per_band).astype(np.int64)
        column = np.clip(column, 0, per_band - 1)  # longitude 180 is the same meridian as -180's cell edge
        return np.where(valid, self.first_cell[band] + column, -1)

    def describe(self) -> dict[str, object]:
        areas = self.cell_areas_km2()
        return {"cell_km": self.cell_km, "bands": len(self.cells_per_band), "cells": self.n_cells,
                "cell_area_km2": float(areas[0])}


def usable_location(latitudes: np.ndarray, longitudes: np.ndarray) -> np.ndarray:
    """Whether each point has finite coordinates inside [-90, 90] x [-180, 180]."""
    lat = np.asarray(latitudes, dtype=np.float64)
    lon = np.asarray(longitudes, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90.0) & (np.abs(lon) <= 180.0)


def unusable_locations(latitudes: np.ndarray, longitudes: np.ndarray) -> dict[str, int]:
    """Points without a usable location, by reason: a coordinate missing, or outside [-90, 90] x [-180, 180]
    (latitude 999, a sentinel some exports use, is out of range, not missing: said apart)."""
    lat = np.asarray(latitudes, dtype=np.float64)
    lon = np.asarray(longitudes, dtype=np.float64)
    missing = ~(np.isfinite(lat) & np.isfinite(lon))
    out_of_range = ~missing & ~usable_location(lat, lon)
    return {reason: int(count) for reason, count in (("missing", missing.sum()),
                                                     ("out of range", out_of_range.sum())) if count}


# --- season ----------------------------------------------------------------------------------------


def year_fractions(dates: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Each date's place in its own year, in [0, 1): (day of year - 1) / days in that year; NaN where null.

    Dividing by the year's own length keeps 31 December in the last bin of a leap year too.
    """
    if len(dates) == 0:
        return np.zeros(0, dtype=np.float64)
    day = pc.day_of_year(dates).cast(pa.float64())
    length = pc.if_else(pc.is_leap_year(dates), 366.0, 365.0)
    fraction = pc.divide(pc.subtract(day, 1.0), length)
    return np.asarray(fraction.fill_null(np.nan).to_numpy(zero_copy_only=False), dtype=np.float64)


def season_bins(fractions: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin of each year fraction in ``n_bins`` equal bins; -1 where missing (NaN) or outside [0, 1)."""
    fractions = np.asarray(fractions, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(fractions) & (fractions >= 0.0) & (fractions < 1.0)
    bins = np.floor(np.where(valid, fractions, 0.0) * n_bins).astype(np.int64)
    return np.where(valid, np.minimum(bins, n_bins - 1), -1)


def circular_spread(counts: np.ndarray) -> np.ndarray:
    """Counts (rows x bins) spread 1/4, 1/2, 1/4 over each bin and its circular neighbours (totals kept)."""
    if counts.shape[1] < 3:
        return counts.astype(np.float64)
    return 0.5 * counts + 0.25 * np.roll(counts, 1, axis=1) + 0.25 * np.roll(counts, -1, axis=1)


# --- the prior -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PriorSettings:
    """How the prior is counted and smoothed (see the module docstring); recorded with every run."""

    cell_km: float = 100.0
    """Side of a fine grid cell in km (every cell covers the same area, about ``cell_km``²)."""
    neighbourhood_km: float = 500.0
    """Side of the coarser cells a fine cell's counts are smoothed towards."""
    season_bins: int = 12
    """Day-of-year bins on the circle (12: about a month each)."""
    alpha: float = 5.0
    """Dirichlet pseudo-observations at each level of smoothing: how many observations a cell needs before its
    own counts outweigh its neighbourhood's (and a label's season its overall season)."""

    def __post_init__(self) -> None:
        if not self.cell_km >= MIN_CELL_KM or not self.neighbourhood_km >= MIN_CELL_KM:
            raise ValueError(f"cell_km and neighbourhood_km must be at least {MIN_CELL_KM:g} km")
        if self.season_bins < 1:
            raise ValueError(f"season_bins must be at least 1, got {self.season_bins}")
        if not self.alpha > 0:
            raise ValueError(f"alpha must be positive (it keeps every label's probability above 0), got {self.alpha}")


def _cell_counts(cells: np.ndarray, labels: np.ndarray, n_cells: int, n_labels: int) -> sparse.csr_matrix:
    ones = np.ones(cells.size, dtype=np.float64)
    return sparse.csr_matrix((ones, (cells, labels)), shape=(n_cells, n_labels))


@dataclass(frozen=True, eq=False)
class SpatiotemporalPrior:
    """Counts of the fit observations by cell, neighbourhood and season, ready to be queried."""

    settings: PriorSettings
    """How it was counted and smoothed."""
    n_labels: int
    """Size of the label set."""
    grid: EqualAreaGrid
    """The fine grid."""
    neighbourhood: EqualAreaGrid
    """The coarse grid."""
    global_probs: np.ndarray
    """g(s): the labels' add-one-smoothed frequency among all fit observations."""
    cell_counts: sparse.csr_matrix
    """n(s, c): fine cells x labels."""
    neighbourhood_counts: sparse.csr_matrix
    """n(s, C): coarse cells x labels."""
    season_probs: np.ndarray
    """p(b | s): labels x season bins, rows sum to 1."""
    fit_summary: dict[str, int]
    """How many fit observations there were and what each contributed to."""

    def _spatial(self, cells: np.ndarray, coarse: np.ndarray) -> np.ndarray:
        alpha = self.settings.alpha
        counts_c = self.neighbourhood_counts[coarse]
        p_coarse = counts_c.toarray() + alpha * self.global_probs
        p_coarse /= (np.asarray(counts_c.sum(axis=1)).ravel() + alpha)[:, None]
        counts_f = self.cell_counts[cells]
        p_fine = counts_f.toarray() + alpha * p_coarse
        p_fine /= (np.asarray(counts_f.sum(axis=1)).ravel() + alpha)[:, None]
        return p_fine

    def probabilities(self, latitudes: np.ndarray, longitudes: np.ndarray,
                      fractions: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """p(label | place, season) for each query row (float32, rows sum to 1) and its fallback reason.

        ``fractions`` are places in the year (:func:`year_fractions`); NaN coordinates or fractions are missing.
        """
        cells = self.grid.cells(latitudes, longitudes)
        coarse = self.neighbourhood.cells(latitudes, longitudes)
        bins = season_bins(fractions, self.settings.season_bins)
        has_place, has_date = cells >= 0, bins >= 0
        n = cells.size
        out = np.empty((n, self.n_labels), dtype=np.float32)
        step = max(1, CHUNK_CELLS // max(self.n_labels, 1))
        for start in range(0, n, step):
            rows = slice(start, min(n, start + step))
            block = np.ones((rows.stop - rows.start, self.n_labels), dtype=np.float64)
            place = np.flatnonzero(has_place[rows])
            if place.size:
                block[place] = self._spatial(cells[rows][place], coarse[rows][place])
            dated = np.flatnonzero(has_date[rows])
            if dated.size:
                block[dated] *= self.season_probs[:, bins[rows][dated]].T
            block /= block.sum(axis=1, keepdims=True)
            out[rows] = block
        reasons = [FALLBACK_REASONS[(bool(p), bool(d))] for p, d in zip(has_place, has_date, strict=True)]
        return out, reasons

    def describe(self) -> dict[str, object]:
        return {"settings": {"cell_km": self.settings.cell_km, "neighbourhood_km": self.settings.neighbourhood_km,
                             "season_bins": self.settings.season_bins, "alpha": self.settings.alpha},
                "grid": self.grid.describe(), "neighbourhood": self.neighbourhood.describe(),
                "fit": dict(self.fit_summary)}


def fit_prior(labels: np.ndarray, latitudes: np.ndarray, longitudes: np.ndarray, fractions: np.ndarray, *,
              n_labels: int, settings: PriorSettings | None = None) -> SpatiotemporalPrior:
    """Count the fit observations (label index per row, -1 = not in the label set and left out) into a prior.

    A row without a usable place still counts towards the global frequency and its label's season; a row
    without a date still counts towards its cells.
    """
    settings = settings or PriorSettings()
    labels = np.asarray(labels, dtype=np.int64)
    if labels.ndim != 1 or not (labels.shape == np.shape(latitudes) == np.shape(longitudes) == np.shape(fractions)):
        raise ValueError("labels, latitudes, longitudes and fractions must be aligned 1-D arrays")
    if n_labels < 1:
        raise ValueError(f"n_labels must be at least 1, got {n_labels}")
    if labels.size and labels.max() >= n_labels:
        raise ValueError(f"label index {labels.max()} is outside a label set of {n_labels}")
    known = labels >= 0
    grid, neighbourhood = EqualAreaGrid.build(settings.cell_km), EqualAreaGrid.build(settings.neighbourhood_km)
    cells = grid.cells(latitudes, longitudes)
    coarse = neighbourhood.cells(latitudes, longitudes)
    bins = season_bins(fractions, settings.season_bins)
    placed, dated = known & (cells >= 0), known & (bins >= 0)

    label_counts = np.bincount(labels[known], minlength=n_labels).astype(np.float64)
    global_probs = (label_counts + 1.0) / (label_counts.sum() + n_labels)
    season_counts = np.zeros((n_labels, settings.season_bins))
    np.add.at(season_counts, (labels[dated], bins[dated]), 1.0)
    overall = season_counts.sum(axis=0)
    season_overall = (overall + 1.0) / (overall.sum() + settings.season_bins)
    spread = circular_spread(season_counts)
    season_probs = (spread + settings.alpha * season_overall) / (
        season_counts.sum(axis=1, keepdims=True) + settings.alpha)
    return SpatiotemporalPrior(
        settings=settings, n_labels=n_labels, grid=grid, neighbourhood=neighbourhood, global_probs=global_probs,
        cell_counts=_cell_counts(cells[placed], labels[placed], grid.n_cells, n_labels),
        neighbourhood_counts=_cell_counts(coarse[placed], labels[placed], neighbourhood.n_cells, n_labels),
        season_probs=season_probs,
        fit_summary={"observations": int(known.sum()), "outside_label_set": int((~known).sum()),
                     "with_place": int(placed.sum()), "with_date": int(dated.sum()),
                     "occupied_cells": int(np.unique(cells[placed]).size),
                     "labels_observed": int((label_counts > 0).sum())},
    )


# --- fusion ----------------------------------------------------------------------------------------


def log_probabilities(probs: np.ndarray) -> np.ndarray:
    """Natural log of probabilities (float32, a new array), with underflowed zeros floored at the smallest
    normal float so that ``0 x log p`` stays 0 where a weight is 0. Masked-out labels are handled by
    ``allowed``, never by this floor."""
    out = np.maximum(np.asarray(probs, dtype=np.float32), np.finfo(np.float32).tiny)
    return np.log(out, out=out)


def fused_argmax(log_image: np.ndarray, log_prior: np.ndarray, image_weight: float,
                 allowed: np.ndarray | None = None) -> np.ndarray:
    """Index of each row's best label under ``a log p_image + (1 - a) log p_prior`` (a = ``image_weight``).

    ``allowed`` (rows x labels, bool) restricts rows to their candidates. Ties in the fused score go to the
    label the image prefers, then to the lower index, so ``a = 1`` reproduces the image's own argmax and a
    prior-only fusion (``a = 0``) on a row without place or date falls back to the image.
    """
    a = float(image_weight)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"image_weight must lie in [0, 1], got {a}")
    n = log_image.shape[0]
    out = np.empty(n, dtype=np.int64)
    step = max(1, CHUNK_CELLS // max(log_image.shape[1], 1))
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        image = log_image[rows]
        score = np.multiply(image, np.float32(a))
        score += np.float32(1.0 - a) * log_prior[rows]
        if allowed is not None:
            score[~allowed[rows]] = -np.inf
        best = score.argmax(axis=1)
        top = score[np.arange(score.shape[0]), best][:, None]
        # Ties are rare except where a factor is flat, so only those rows are redone, on the image's scores.
        tied = np.flatnonzero(np.count_nonzero(score == top, axis=1) > 1)
        if tied.size:
            best[tied] = np.where(score[tied] == top[tied], image[tied], -np.inf).argmax(axis=1)
        out[rows] = best
    return out


def image_weight_grid(steps: int) -> np.ndarray:
    """``steps`` evenly spaced image weights from 0 to 1 inclusive."""
    if steps < 2:
        raise ValueError(f"the weight grid needs at least 2 steps (0 and 1), got {steps}")
    return np.round(np.linspace(0.0, 1.0, steps), 12)  # 0.15, not 0.15000000000000002, in the record


def choose_image_weight(log_image: np.ndarray, log_prior: np.ndarray, targets: np.ndarray, weights: np.ndarray,
                        allowed: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """The weight ``a`` with the highest top-1 on these (validation) rows, ties to the larger ``a``; and the top-1
    at every weight. ``targets`` of -1 (true label outside the label set) are not scored."""
    scored = np.asarray(targets) >= 0
    if not scored.any():
        raise ValueError("no validation row has its true label in the label set: the weight cannot be chosen")
    rows = np.flatnonzero(scored)
    image, prior = log_image[rows], log_prior[rows]
    mask = None if allowed is None else allowed[rows]
    top1 = np.array([float(np.mean(fused_argmax(image, prior, a, mask) == targets[rows])) for a in weights])
    best = np.flatnonzero(top1 == top1.max())
    return float(weights[best[np.argmax(weights[best])]]), top1


def embedding_sum(image_vectors: np.ndarray, location_vectors: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Unit image vector plus unit location vector, for rows that have a location vector (``present``); the unit
    image vector alone elsewhere. For location encoders trained into the image-text space (TaxaBind binds
    place to the same space as images and text), so the sum is classified against the label texts as is."""
    from cladebench.store.embeddings import normalise_rows

    image = normalise_rows(image_vectors)
    if location_vectors.shape != image.shape:
        raise ValueError(f"location vectors {location_vectors.shape} and image vectors {image.shape} differ in shape: "
                         "they must live in one embedding space")
    present = np.asarray(present, dtype=bool)
    return image + np.where(present[:, None], normalise_rows(location_vectors), 0.0).astype(np.float32)
