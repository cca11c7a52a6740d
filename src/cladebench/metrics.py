"""Metrics computed from per-example predictions, each with its interval and its definition.

Metrics never run inside a task: a task returns one prediction row per example, and the numbers
are computed here from those rows, so the same predictions give the same numbers everywhere (a
report, a paired comparison, a re-analysis a year later). Every metric has a registered definition
string that run records carry, so a reader knows exactly what was computed.

Example:
    >>> import numpy as np
    >>> estimate = accuracy(np.array([True, True, False, True]))
    >>> round(estimate.value, 2), [round(x, 4) for x in (estimate.low, estimate.high)]
    (0.75, [0.3006, 0.9544])
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

METRIC_DEFINITIONS: dict[str, str] = {}
"""Registry: metric name -> its exact definition, recorded in every run record that reports it."""


def define_metric(name: str, definition: str) -> str:
    """Register a metric's definition (idempotent for the same text)."""
    existing = METRIC_DEFINITIONS.get(name)
    if existing is not None and existing != definition:
        raise ValueError(f"metric {name!r} defined twice with different texts")
    METRIC_DEFINITIONS[name] = definition
    return name


WILSON = "Wilson score interval (equal to statsmodels proportion_confint(method='wilson'))"


@dataclass(frozen=True)
class Estimate:
    """A proportion or mean with its interval and what it was computed from."""

    value: float
    """The point estimate."""
    low: float
    """Lower end of the interval."""
    high: float
    """Upper end of the interval."""
    n: int
    """Number of examples."""
    successes: int | None = None
    """Number of successes, for a proportion."""
    confidence: float = 0.95
    """Confidence level of the interval."""
    interval: str = WILSON
    """How the interval was computed."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when ``n`` is 0.

    Preferred over the normal (Wald) interval because it stays inside [0, 1] and keeps its coverage
    near 0 and 1, where benchmark accuracies on small groups often are.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    z = float(stats.norm.isf((1.0 - confidence) / 2.0))
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return float(centre - half), float(centre + half)


def accuracy(correct: np.ndarray, confidence: float = 0.95) -> Estimate:
    """Share of true values in a boolean array, with its Wilson interval."""
    correct = np.asarray(correct, dtype=bool)
    n = int(correct.size)
    k = int(correct.sum())
    low, high = wilson_interval(k, n, confidence)
    return Estimate(value=k / n if n else float("nan"), low=low, high=high, n=n, successes=k, confidence=confidence)


def top_k_hits(scores: np.ndarray, targets: np.ndarray, k: int) -> np.ndarray:
    """Whether each row's target is among its ``k`` highest scores (ties broken toward lower index).

    ``targets`` of -1 mark examples whose true label is not in the label set: never a hit.
    """
    scores = np.asarray(scores)
    targets = np.asarray(targets)
    k = min(k, scores.shape[1])
    top = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return (top == targets[:, None]).any(axis=1) & (targets >= 0)


define_metric("top1", "share of examples whose highest-scoring label is the true label; " + WILSON)
define_metric("top5", "share of examples whose true label is among the 5 highest-scoring labels; " + WILSON)
