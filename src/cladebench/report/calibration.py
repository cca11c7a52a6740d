"""Calibration of zero-shot top-1 probabilities: reliability bins and expected calibration error (ECE).

A model is calibrated when, among the images it gives a top-1 probability near p, a share p is right.
The top-1 probabilities of the scored images are put in :data:`BINS` equal-width bins
((0, 0.1], (0.1, 0.2], ..., with 0 in the first); per bin, the mean top-1 probability (confidence) and
the share of top-1 hits (accuracy) are compared. ECE is the image-weighted mean gap,
``ECE = sum_b (n_b / n) |accuracy_b - confidence_b|`` (Guo et al. 2017, "On Calibration of Modern Neural
Networks"; Naeini et al. 2015): 0 for a perfectly calibrated model, at most 1.

Example (two images at 0.95, both right; two at 0.55, one right: each bin is 0.05 off):
    >>> result = reliability(np.array([0.95, 0.95, 0.55, 0.55]), np.array([True, True, True, False]))
    >>> round(result.ece, 3), result.counts.tolist()
    (0.05, [0, 0, 0, 0, 0, 2, 0, 0, 0, 2])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BINS = 10
"""Equal-width bins of the top-1 probability."""

ECE_DEFINITION = (f"expected calibration error: the top-1 probabilities of the scored images in {BINS} equal-width "
                  "bins ((0, 0.1], ..., (0.9, 1]); ECE = sum over bins of (images in bin / images) x |top-1 accuracy "
                  "in bin - mean top-1 probability in bin| (Guo et al. 2017); 0 is perfectly calibrated")


@dataclass(frozen=True)
class Reliability:
    """Per-bin confidence and accuracy of a set of predictions, and their ECE."""

    edges: np.ndarray
    """Bin edges, BINS + 1 values from 0 to 1."""
    confidence: np.ndarray
    """Mean top-1 probability per bin (NaN for an empty bin)."""
    accuracy: np.ndarray
    """Share of top-1 hits per bin (NaN for an empty bin)."""
    counts: np.ndarray
    """Images per bin."""
    ece: float
    """Expected calibration error (NaN with no image)."""
    n: int
    """Images."""


def bin_index(confidence: np.ndarray, bins: int = BINS) -> np.ndarray:
    """Bin of each probability: bin b holds (edge b, edge b+1], and 0 goes to the first bin.

    Found among the edges themselves (``np.linspace``), not by ``ceil(p * bins)``: 0.3 * 10 is
    3.0000000000000004 in floating point, which would put a probability of exactly 0.3 one bin too high.
    """
    edges = np.linspace(0.0, 1.0, bins + 1)
    confidence = np.clip(np.asarray(confidence, dtype=np.float64), 0.0, 1.0)
    return np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, bins - 1)


def reliability(confidence: np.ndarray, correct: np.ndarray, bins: int = BINS) -> Reliability:
    """Reliability bins and ECE of top-1 probabilities ``confidence`` against 0/1 ``correct``."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if confidence.shape != correct.shape or confidence.ndim != 1:
        raise ValueError(f"confidence and correct must be aligned 1-D arrays, got {confidence.shape} and "
                         f"{correct.shape}")
    index = bin_index(confidence, bins)
    counts = np.bincount(index, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = np.bincount(index, weights=confidence, minlength=bins) / counts
        accuracy = np.bincount(index, weights=correct, minlength=bins) / counts
    n = int(confidence.size)
    gaps = np.where(counts > 0, np.abs(np.nan_to_num(accuracy) - np.nan_to_num(mean_confidence)), 0.0)
    ece = float((counts * gaps).sum() / n) if n else float("nan")
    return Reliability(edges=np.linspace(0.0, 1.0, bins + 1), confidence=mean_confidence, accuracy=accuracy,
                       counts=counts, ece=ece, n=n)
