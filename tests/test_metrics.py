"""Metrics against independent references: statsmodels for intervals, brute force for top-k."""

from __future__ import annotations

import numpy as np
import pytest

from cladebench.metrics import METRIC_DEFINITIONS, accuracy, top_k_hits, wilson_interval

proportion = pytest.importorskip("statsmodels.stats.proportion")


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_equals_statsmodels(confidence: float) -> None:
    rng = np.random.default_rng(0)
    cases = [(0, 1), (1, 1), (0, 50), (50, 50), (3, 4)] + [
        (int(k), int(n)) for n in rng.integers(1, 5000, size=40) for k in [rng.integers(0, n + 1)]
    ]
    for k, n in cases:
        low, high = wilson_interval(k, n, confidence)
        ref_low, ref_high = proportion.proportion_confint(k, n, alpha=1 - confidence, method="wilson")
        assert low == pytest.approx(ref_low, abs=1e-12) and high == pytest.approx(ref_high, abs=1e-12), (k, n)


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        wilson_interval(5, 4)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_accuracy_estimate() -> None:
    estimate = accuracy(np.array([True] * 30 + [False] * 70))
    assert estimate.value == 0.3 and estimate.n == 100 and estimate.successes == 30
    assert estimate.low < 0.3 < estimate.high
    assert "Wilson" in estimate.interval


def test_top_k_hits_against_brute_force() -> None:
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(200, 17))
    targets = rng.integers(-1, 17, size=200)
    for k in (1, 3, 5, 17, 40):
        hits = top_k_hits(scores, targets, k)
        for i in range(200):
            ranked = sorted(range(17), key=lambda j: -scores[i, j])[: min(k, 17)]
            assert hits[i] == (targets[i] >= 0 and targets[i] in ranked)


def test_definitions_are_registered() -> None:
    assert "Wilson" in METRIC_DEFINITIONS["top1"]
