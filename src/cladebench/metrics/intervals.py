"""Intervals and tests for numbers measured on examples: Wilson, bootstrap, paired bootstrap, Holm, t-intervals.

Why a module of its own: every task reports its numbers with an interval, and two runs are compared on the
same examples; the statistics that do this are one cohesive piece, shared by classification, retrieval and
the tasks, and tested against statsmodels and scipy.

Example:
    >>> import numpy as np
    >>> estimate = accuracy(np.array([True, True, False, True]))
    >>> round(estimate.value, 2), [round(x, 4) for x in (estimate.low, estimate.high)]
    (0.75, [0.3006, 0.9544])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

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

    def to_dict(self) -> dict[str, object]:
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
    z = NormalDist().inv_cdf(1.0 - (1.0 - confidence) / 2.0)  # the standard library's: scipy costs 2 s to import
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0 (or n) successes the bound is exactly 0 (or 1), but the two terms cancel only up to rounding: a
    # bound of -3.5e-18 would print as "-0.00". A probability's bound is clipped into [0, 1] here, once.
    low = 0.0 if successes == 0 else max(0.0, float(centre - half))
    high = 1.0 if successes == n else min(1.0, float(centre + half))
    return low, high


def accuracy(correct: np.ndarray, confidence: float = 0.95) -> Estimate:
    """Share of true values in a boolean array, with its Wilson interval."""
    correct = np.asarray(correct, dtype=bool)
    n = int(correct.size)
    k = int(correct.sum())
    low, high = wilson_interval(k, n, confidence)
    return Estimate(value=k / n if n else float("nan"), low=low, high=high, n=n, successes=k, confidence=confidence)


# --- bootstrap -----------------------------------------------------------------------------------

Statistic = Callable[[np.ndarray], float | np.ndarray]
"""A statistic of resampled data, given as example multiplicities: an array of shape (batch, n) whose row
``r`` says how many times each example occurs in resample ``r``; returns one value per row.

Multiplicities instead of index arrays because resampling groups gives resamples of different
lengths, while multiplicities keep one shape; any statistic of a multiset of examples (a mean,
balanced accuracy, macro-F1) is a function of them. ``balanced_accuracy(y_true, y_pred, weights=w)``
is one.
"""

CHUNK_ELEMENTS = 1 << 22
"""Resamples are drawn in chunks of about this many matrix cells (32 MiB of int64), bounding memory for any n."""

PERCENTILE_BOOTSTRAP = ("percentile bootstrap: the statistic recomputed on resamples drawn with replacement, "
                        "interval between its (1-c)/2 and (1+c)/2 quantiles (linear interpolation)")


def _chunks(n_resamples: int, row_cells: int) -> Iterator[int]:
    rows = max(1, CHUNK_ELEMENTS // max(row_cells, 1))
    for start in range(0, n_resamples, rows):
        yield min(rows, n_resamples - start)


def _unit_draws(rng: np.random.Generator, n_units: int, n_resamples: int) -> Iterator[np.ndarray]:
    """Chunks of resamples as indices (shape (chunk, n_units)) of ``n_units`` units drawn with replacement."""
    for rows in _chunks(n_resamples, n_units):
        yield rng.integers(0, n_units, size=(rows, n_units))


def _unit_multiplicities(rng: np.random.Generator, n_units: int, n_resamples: int) -> Iterator[np.ndarray]:
    """The resamples of :func:`_unit_draws` as multiplicities: how often each unit was drawn, as floats."""
    for drawn in _unit_draws(rng, n_units, n_resamples):
        rows = drawn.shape[0]
        flat = (np.arange(rows)[:, None] * n_units + drawn).ravel()
        yield np.bincount(flat, minlength=rows * n_units).reshape(rows, n_units).astype(np.float64)


def _group_codes(groups: np.ndarray | None, n: int) -> tuple[np.ndarray, int]:
    """Each example's resampling unit (its group, or itself) as a code, and the number of units."""
    if groups is None:
        return np.arange(n), n
    groups = np.asarray(groups)
    if groups.shape != (n,):
        raise ValueError(f"groups must give one group per example ({n}), got shape {groups.shape}")
    _, codes = np.unique(groups, return_inverse=True)
    return codes, int(codes.max()) + 1


class _Units(NamedTuple):
    """A vector of per-example values summed per resampling unit: what a bootstrap of its mean draws from."""

    sums: np.ndarray
    """Sum of the values of each unit."""
    sizes: np.ndarray
    """Examples in each unit (floats)."""
    kinds: np.ndarray
    """The distinct (sum, size) pairs, one per row."""
    frequency: np.ndarray
    """How many units each kind has."""

    @property
    def few_kinds(self) -> bool:
        """True when so few distinct units exist that drawing the count of each kind beats drawing units."""
        return self.kinds.shape[0] * 4 <= self.sums.size


def _units(values: np.ndarray, groups: np.ndarray | None) -> _Units:
    codes, n_units = _group_codes(groups, values.size)
    sums = np.bincount(codes, weights=values, minlength=n_units)
    sizes = np.bincount(codes, minlength=n_units).astype(np.float64)
    kinds, frequency = np.unique(np.stack([sums, sizes], axis=1), axis=0, return_counts=True)
    return _Units(sums, sizes, kinds, frequency)


def _kind_replicates(units: _Units, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    n_units = units.sums.size
    replicates = []
    for rows in _chunks(n_resamples, units.kinds.shape[0]):
        counts = rng.multinomial(n_units, units.frequency / n_units, size=rows).astype(np.float64)
        replicates.append((counts @ units.kinds[:, 0]) / (counts @ units.kinds[:, 1]))
    return np.concatenate(replicates)


def _mean_replicates_many(vectors: Sequence[_Units], n_resamples: int, seed: int) -> list[np.ndarray]:
    """Bootstrap replicates of the mean of each vector, each exactly as :func:`_mean_replicates` with a generator
    seeded by ``seed`` gives them.

    A generator seeded alike draws the same units for every vector of the same number of units, so those
    vectors share one draw per block of resamples (resamples x units, bounded by :data:`CHUNK_ELEMENTS`) and
    each is gathered from it: comparing many runs on many metrics costs one draw per block, not one per pair.
    """
    out: list[np.ndarray | None] = [None] * len(vectors)
    by_size: dict[int, list[int]] = {}
    for index, units in enumerate(vectors):
        if units.few_kinds:
            out[index] = _kind_replicates(units, n_resamples, np.random.default_rng(seed))
        else:
            by_size.setdefault(units.sums.size, []).append(index)
    for n_units, members in by_size.items():
        pieces: dict[int, list[np.ndarray]] = {index: [] for index in members}
        for drawn in _unit_draws(np.random.default_rng(seed), n_units, n_resamples):
            for index in members:  # one gather per vector: memory stays one block whatever the count
                units = vectors[index]
                pieces[index].append(units.sums[drawn].sum(axis=1) / units.sizes[drawn].sum(axis=1))
        for index in members:
            out[index] = np.concatenate(pieces[index])
    return [replicates for replicates in out if replicates is not None]


def _mean_replicates(values: np.ndarray, groups: np.ndarray | None, n_resamples: int, seed: int) -> np.ndarray:
    """Bootstrap replicates of the mean of ``values``, resampling examples or whole groups.

    A resample of groups has mean sum(group sums) / sum(group sizes), the mean over the examples it
    holds. Units with the same (sum, size) are interchangeable, so when few distinct units exist (0/1
    correctness: two kinds of example; a paired difference of 0/1 scores: three) the counts of each kind
    are drawn directly from a multinomial: the same distribution as drawing indices, at a cost that does
    not grow with n. Otherwise units are drawn by index and gathered, several times faster than counting them.
    """
    return _mean_replicates_many([_units(values, groups)], n_resamples, seed)[0]


def _statistic_replicates(statistic: Statistic, n: int, groups: np.ndarray | None, n_resamples: int,
                          rng: np.random.Generator) -> np.ndarray:
    codes, n_units = _group_codes(groups, n)
    replicates = []
    if groups is None:
        for weights in _unit_multiplicities(rng, n, n_resamples):
            replicates.append(np.asarray(statistic(weights), dtype=np.float64))
    else:
        for rows in _chunks(n_resamples, n):  # chunked by example count: the weights passed on are (rows, n)
            for unit_counts in _unit_multiplicities(rng, n_units, rows):
                replicates.append(np.asarray(statistic(unit_counts[:, codes]), dtype=np.float64))
    return np.concatenate(replicates)


def _checked_values(values: object) -> np.ndarray:
    """The per-example (or per-repetition) values as float64: a non-empty 1-D array without NaN, or a ValueError."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, got shape {values.shape}")
    if np.isnan(values).any():
        raise ValueError("values contain NaN")
    return values


def _check_settings(n_resamples: int, confidence: float) -> None:
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")


def _percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    low, high = np.quantile(replicates, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return float(low), float(high)


def bootstrap_ci(values_or_statistic: np.ndarray | Statistic, *, n_examples: int | None = None,
                 groups: np.ndarray | None = None, n_resamples: int = 10_000, confidence: float = 0.95,
                 seed: int = 0) -> Estimate:
    """Percentile bootstrap interval of a statistic over examples (Efron & Tibshirani 1993, ch. 13).

    ``values_or_statistic`` is either per-example values (the statistic is their mean: accuracy from
    0/1 correctness, mean reciprocal rank...) or a :data:`Statistic` of example multiplicities, for
    statistics that are not means (``lambda w: macro_f1(y_true, y_pred, weights=w)``); then
    ``n_examples`` says how many examples there are. The point estimate is the statistic on all
    examples once each; the interval is the (1-c)/2 and (1+c)/2 quantiles of ``n_resamples`` recomputed
    values, equal in distribution to ``scipy.stats.bootstrap(method="percentile")``.

    ``groups`` (one label per example) resamples whole groups instead of examples: the cluster
    bootstrap, for examples that are not independent (several images of one observation, several
    queries against one gallery). Ignoring such dependence makes intervals too narrow.
    """
    _check_settings(n_resamples, confidence)
    if callable(values_or_statistic):
        n = len(groups) if n_examples is None and groups is not None else n_examples
        if n is None or n < 1:
            raise ValueError("a statistic needs n_examples (or groups) to say how many examples there are")
        value = float(np.asarray(values_or_statistic(np.ones((1, n))))[0])
        replicates = _statistic_replicates(values_or_statistic, n, groups, n_resamples,
                                            np.random.default_rng(seed))
    else:
        values = _checked_values(values_or_statistic)
        n = values.size
        value = float(values.mean())
        replicates = _mean_replicates(values, groups, n_resamples, seed)
    low, high = _percentile_interval(replicates, confidence)
    unit = "examples" if groups is None else f"{_group_codes(groups, n)[1]} groups"
    return Estimate(value=value, low=low, high=high, n=n, confidence=confidence,
                    interval=f"{PERCENTILE_BOOTSTRAP}; {n_resamples} resamples of {unit}, seed {seed}")


PAIRED_P_VALUE = ("two-sided percentile bootstrap p-value: 2 x min((1 + #{d* <= 0}), (1 + #{d* >= 0})) / (B + 1), "
                  "capped at 1, over the B resampled differences d*")


@dataclass(frozen=True)
class PairedComparison:
    """Difference of two runs' mean per-example scores on the same examples, with its bootstrap CI and p-value."""

    difference: float
    """mean(a) - mean(b)."""
    low: float
    """Lower end of the percentile interval of the difference."""
    high: float
    """Upper end of the percentile interval of the difference."""
    p_value: float
    """Two-sided p-value for "no difference" (see :data:`PAIRED_P_VALUE`)."""
    n: int
    """Number of paired examples."""
    n_resamples: int
    """Bootstrap resamples drawn."""
    confidence: float = 0.95
    """Confidence level of the interval."""
    seed: int = 0
    """Seed of the resampling."""
    method: str = f"paired {PERCENTILE_BOOTSTRAP}; {PAIRED_P_VALUE}"
    """How the interval and the p-value were computed."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def paired_bootstrap(a: np.ndarray, b: np.ndarray, *, groups: np.ndarray | None = None, n_resamples: int = 10_000,
                     confidence: float = 0.95, seed: int = 0) -> PairedComparison:
    """Paired bootstrap of mean(a) - mean(b) for two runs scored on the same, aligned examples.

    Each resample draws examples (or ``groups``) with replacement and takes the same draw for both
    runs, so what the examples share (an easy image is easy for both) cancels: the interval is much
    narrower than one from two independent intervals, and honest about which differences are noise
    (Koehn 2004; the paired bootstrap of BioBench). The interval is the percentile interval of the
    resampled differences d*. The p-value is the equal-tailed one that matches it,
    p = min(1, 2 min(1 + #{d* <= 0}, 1 + #{d* >= 0}) / (B + 1)): the smallest 1 - c at which the
    percentile interval would exclude 0, with the +1 that keeps a Monte-Carlo p-value from being 0
    (Davison & Hinkley 1997, sec. 4.2; North et al. 2002). Two identical runs give every d* = 0 and p = 1.
    """
    return paired_bootstraps([(a, b)], groups=[groups], n_resamples=n_resamples, confidence=confidence,
                             seed=seed)[0]


def paired_bootstraps(pairs: Sequence[tuple[np.ndarray, np.ndarray]], *,
                      groups: Sequence[np.ndarray | None] | None = None, n_resamples: int = 10_000,
                      confidence: float = 0.95, seed: int = 0) -> list[PairedComparison]:
    """:func:`paired_bootstrap` of many pairs at once (several runs against one reference, on several metrics).

    Each result equals that of :func:`paired_bootstrap` on its pair alone; pairs with the same number of units
    share each block of drawn resamples, so the work grows with the pairs' gathers, not their draws.
    """
    _check_settings(n_resamples, confidence)
    groups = list(groups) if groups is not None else [None] * len(pairs)
    if len(groups) != len(pairs):
        raise ValueError(f"groups must give one entry per pair ({len(pairs)}), got {len(groups)}")
    differences = []
    for a, b in pairs:
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if a.ndim != 1 or a.shape != b.shape or a.size == 0:
            raise ValueError(f"a and b must be non-empty aligned 1-D arrays, got shapes {a.shape} and {b.shape}")
        if np.isnan(a).any() or np.isnan(b).any():
            raise ValueError("scores contain NaN")
        differences.append(a - b)
    all_replicates = _mean_replicates_many([_units(d, g) for d, g in zip(differences, groups, strict=True)],
                                           n_resamples, seed)
    out = []
    for difference, replicates in zip(differences, all_replicates, strict=True):
        low, high = _percentile_interval(replicates, confidence)
        at_or_below = 1 + int(np.count_nonzero(replicates <= 0.0))
        at_or_above = 1 + int(np.count_nonzero(replicates >= 0.0))
        p_value = min(1.0, 2.0 * min(at_or_below, at_or_above) / (n_resamples + 1))
        out.append(PairedComparison(difference=float(difference.mean()), low=low, high=high, p_value=p_value,
                                    n=difference.size, n_resamples=n_resamples, confidence=confidence, seed=seed))
    return out


# --- several tests at once -----------------------------------------------------------------------


class HolmResult(NamedTuple):
    """Holm-adjusted p-values and which hypotheses are rejected, in the order of the input."""

    adjusted: np.ndarray
    """Adjusted p-values: reject hypothesis i at level alpha when adjusted[i] <= alpha."""
    reject: np.ndarray
    """Boolean: rejected at the given alpha, family-wise error rate controlled."""


def holm(p_values: np.ndarray, alpha: float = 0.05) -> HolmResult:
    """Holm-Bonferroni step-down correction (Holm 1979) of m p-values.

    With p-values sorted ascending, p_(1) <= ... <= p_(m), the adjusted value of p_(i) is
    max over j <= i of min(1, (m - j + 1) p_(j)); hypotheses are rejected in that order while
    p_(i) <= alpha / (m - i + 1), and none after the first that is not. It controls the chance of any
    false "holds" among several comparisons against one reference, under any dependence between them,
    and rejects at least what Bonferroni rejects. Equal to statsmodels
    ``multipletests(p, alpha, method="holm")``.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"p_values must be 1-D, got shape {p.shape}")
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    sorted_p = p[order]
    multipliers = np.arange(m, 0, -1)
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(sorted_p * multipliers))
    # Compare p against alpha / multiplier (not adjusted p against alpha) as statsmodels does, so a p-value
    # sitting exactly on a boundary falls on the same side in both.
    passes = sorted_p <= alpha / multipliers
    first_failure = int(np.argmin(passes)) if not passes.all() else m
    reject_sorted = np.arange(m) < first_failure
    adjusted = np.empty(m)
    reject = np.empty(m, dtype=bool)
    adjusted[order] = adjusted_sorted
    reject[order] = reject_sorted
    return HolmResult(adjusted=adjusted, reject=reject)


# --- repeated runs -------------------------------------------------------------------------------

T_INTERVAL = "Student t interval of the mean: mean +- t_{(1+c)/2, n-1} * std / sqrt(n), std with ddof=1"


@dataclass(frozen=True)
class RepeatedEstimate:
    """Mean, spread and interval of a number measured in several independent repetitions of a run."""

    value: float
    """Mean over repetitions."""
    std: float
    """Sample standard deviation (ddof=1); NaN for a single repetition."""
    low: float
    """Lower end of the t-interval of the mean; NaN when undefined."""
    high: float
    """Upper end of the t-interval of the mean; NaN when undefined."""
    n: int
    """Number of repetitions."""
    confidence: float = 0.95
    """Confidence level of the interval."""
    interval: str = T_INTERVAL
    """How the interval was computed, or why there is none."""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def mean_std_ci(values: np.ndarray, confidence: float = 0.95) -> RepeatedEstimate:
    """Mean, sample std and t-interval of the mean over repeated runs (few-shot draws, training seeds).

    The interval is mean +- t_{(1+c)/2, n-1} s / sqrt(n): it treats the repetitions as independent
    draws of a roughly normal quantity, and with the 3-10 repetitions usual here it is much wider
    than a normal interval would be, as it should be. It describes the spread over repetitions
    (which support set was drawn), not the uncertainty from the finite test set; report both.

    One repetition has no spread: std, low and high are NaN and ``interval`` says so, rather than a
    zero-width interval that would read as certainty. Identical repetitions do give a zero-width interval.
    """
    _check_settings(1, confidence)
    values = _checked_values(values)
    n = values.size
    mean = float(values.mean())
    if n == 1:
        nan = float("nan")
        return RepeatedEstimate(value=mean, std=nan, low=nan, high=nan, n=1, confidence=confidence,
                                interval="undefined: a single repetition has no spread (std and interval are NaN)")
    std = float(values.std(ddof=1))
    from scipy import stats  # here, not at import: most commands never need Student's t

    half = float(stats.t.ppf((1.0 + confidence) / 2.0, df=n - 1)) * std / np.sqrt(n)
    return RepeatedEstimate(value=mean, std=std, low=float(mean - half), high=float(mean + half), n=n,
                            confidence=confidence)
