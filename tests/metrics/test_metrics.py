"""Metrics against independent references: statsmodels for intervals and Holm, sklearn for class-balanced scores,
scipy.stats.bootstrap for bootstrap intervals, brute force for top-k and the paired p-value."""

from __future__ import annotations

import numpy as np
import pytest

from cladebench.metrics import (
    METRIC_DEFINITIONS,
    Estimate,
    accuracy,
    balanced_accuracy,
    bootstrap_ci,
    holm,
    macro_f1,
    mean_std_ci,
    paired_bootstrap,
    paired_bootstraps,
    top_k_hits,
    wilson_interval,
)

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


# --- class-balanced scores against sklearn ---------------------------------------------------------

sklearn_metrics = pytest.importorskip("sklearn.metrics")
scipy_stats = pytest.importorskip("scipy.stats")
multitest = pytest.importorskip("statsmodels.stats.multitest")


def _labels(seed: int, n: int = 300, true_classes: int = 12, pred_classes: int = 15) -> tuple[np.ndarray, np.ndarray]:
    """Skewed true labels; predictions right half the time, else any of a larger label set (some only predicted)."""
    rng = np.random.default_rng(seed)
    y_true = rng.choice(true_classes, size=n, p=np.arange(true_classes, 0, -1) / np.arange(true_classes, 0, -1).sum())
    y_pred = np.where(rng.random(n) < 0.5, y_true, rng.integers(0, pred_classes, size=n))
    return y_true, y_pred


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
@pytest.mark.parametrize("seed", range(6))
def test_balanced_accuracy_and_macro_f1_equal_sklearn(seed: int) -> None:
    y_true, y_pred = _labels(seed)
    assert set(y_pred) - set(y_true), "the case must include labels that are only predicted"
    assert balanced_accuracy(y_true, y_pred) == pytest.approx(
        sklearn_metrics.balanced_accuracy_score(y_true, y_pred), abs=1e-12)
    labels = np.union1d(y_true, y_pred)
    assert macro_f1(y_true, y_pred) == pytest.approx(
        sklearn_metrics.f1_score(y_true, y_pred, average="macro", labels=labels, zero_division=0), abs=1e-12)


def test_scores_accept_string_labels() -> None:
    y_true, y_pred = _labels(7)
    names = np.array([f"Genus species{i}" for i in range(20)])
    assert balanced_accuracy(names[y_true], names[y_pred]) == pytest.approx(balanced_accuracy(y_true, y_pred))
    assert macro_f1(names[y_true], names[y_pred]) == pytest.approx(
        sklearn_metrics.f1_score(names[y_true], names[y_pred], average="macro"), abs=1e-12)


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_weighted_scores_equal_sklearn_on_resampled_data() -> None:
    y_true, y_pred = _labels(8, n=80)
    rng = np.random.default_rng(0)
    indices = rng.integers(0, 80, size=(25, 80))
    weights = np.stack([np.bincount(row, minlength=80) for row in indices])
    batch_ba = balanced_accuracy(y_true, y_pred, weights=weights)
    batch_f1 = macro_f1(y_true, y_pred, weights=weights)
    assert batch_ba.shape == (25,) and batch_f1.shape == (25,)
    for row, idx in enumerate(indices):
        t, p = y_true[idx], y_pred[idx]
        assert batch_ba[row] == pytest.approx(sklearn_metrics.balanced_accuracy_score(t, p), abs=1e-12)
        assert batch_f1[row] == pytest.approx(sklearn_metrics.f1_score(t, p, average="macro", zero_division=0),
                                              abs=1e-12)
    # One row of weights: a plain number, as sklearn's sample_weight gives.
    assert balanced_accuracy(y_true, y_pred, weights=weights[0]) == pytest.approx(
        sklearn_metrics.balanced_accuracy_score(y_true, y_pred, sample_weight=weights[0]), abs=1e-12)


def test_scores_reject_misaligned_inputs() -> None:
    with pytest.raises(ValueError):
        balanced_accuracy(np.array([1, 2]), np.array([1]))
    with pytest.raises(ValueError):
        macro_f1(np.array([]), np.array([]))


# --- bootstrap against scipy.stats.bootstrap ---------------------------------------------------------


def _assert_same_interval(estimate: Estimate, reference: object, share_of_width: float) -> None:
    """Equal within Monte-Carlo error: a few standard errors of a percentile endpoint, as a share of the width."""
    ref_low, ref_high = reference.confidence_interval  # type: ignore[attr-defined]
    tolerance = share_of_width * (ref_high - ref_low)
    assert estimate.low == pytest.approx(ref_low, abs=tolerance)
    assert estimate.high == pytest.approx(ref_high, abs=tolerance)


@pytest.mark.parametrize("kind", ["continuous", "binary"])
def test_bootstrap_mean_equals_scipy_percentile(kind: str) -> None:
    rng = np.random.default_rng(3)
    values = rng.gamma(2.0, size=400) if kind == "continuous" else (rng.random(500) < 0.7).astype(float)
    estimate = bootstrap_ci(values, n_resamples=10_000, seed=1)
    reference = scipy_stats.bootstrap((values,), np.mean, n_resamples=10_000, method="percentile",
                                      random_state=np.random.default_rng(2))
    assert estimate.value == pytest.approx(values.mean())
    assert estimate.n == values.size and "percentile bootstrap" in estimate.interval
    _assert_same_interval(estimate, reference, 0.05)


@pytest.mark.parametrize("confidence", [0.8, 0.99])
def test_bootstrap_confidence_level_is_used(confidence: float) -> None:
    values = np.random.default_rng(4).normal(size=300)
    estimate = bootstrap_ci(values, confidence=confidence)
    reference = scipy_stats.bootstrap((values,), np.mean, confidence_level=confidence, method="percentile",
                                      random_state=np.random.default_rng(5))
    _assert_same_interval(estimate, reference, 0.05)


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_bootstrap_statistic_equals_scipy_with_sklearn() -> None:
    y_true, y_pred = _labels(9, n=150, true_classes=6, pred_classes=7)
    estimate = bootstrap_ci(lambda w: balanced_accuracy(y_true, y_pred, weights=w), n_examples=150, seed=3)
    # sklearn is called once per resample, so the reference draws fewer of them and the tolerance is wider.
    reference = scipy_stats.bootstrap(
        (y_true, y_pred), sklearn_metrics.balanced_accuracy_score, paired=True, vectorized=False,
        n_resamples=1_000, method="percentile", random_state=np.random.default_rng(6))
    assert estimate.value == pytest.approx(sklearn_metrics.balanced_accuracy_score(y_true, y_pred))
    _assert_same_interval(estimate, reference, 0.12)


def test_bootstrap_groups_equal_scipy_over_groups() -> None:
    """The cluster bootstrap is the ordinary bootstrap of (group sum, group size) pairs with the ratio statistic."""
    rng = np.random.default_rng(10)
    sizes = rng.integers(1, 8, size=120)
    groups = np.repeat(np.arange(120), sizes)
    group_effect = rng.normal(size=120)
    values = group_effect[groups] + 0.3 * rng.normal(size=groups.size)
    estimate = bootstrap_ci(values, groups=groups, seed=4)
    sums = np.bincount(groups, weights=values)
    reference = scipy_stats.bootstrap(
        (sums, sizes.astype(float)), lambda s, k, axis=-1: s.sum(axis=axis) / k.sum(axis=axis), paired=True,
        n_resamples=10_000, method="percentile", random_state=np.random.default_rng(7))
    assert estimate.value == pytest.approx(values.mean())
    assert "120 groups" in estimate.interval
    _assert_same_interval(estimate, reference, 0.05)
    # Examples of a group are alike here, so treating them as independent understates the uncertainty.
    naive = bootstrap_ci(values, seed=4)
    assert naive.high - naive.low < 0.75 * (estimate.high - estimate.low)


def test_bootstrap_statistic_path_draws_like_the_mean_path() -> None:
    """A mean given as a statistic of multiplicities sees the same resamples as the mean of values (same seed)."""
    rng = np.random.default_rng(11)
    values = rng.normal(size=90)
    groups = rng.integers(0, 30, size=90)
    for group_arg in (None, groups):
        as_values = bootstrap_ci(values, groups=group_arg, n_resamples=3_000, seed=5)
        as_statistic = bootstrap_ci(lambda w: (w @ values) / w.sum(axis=1), n_examples=90, groups=group_arg,
                                    n_resamples=3_000, seed=5)
        assert as_statistic.value == pytest.approx(as_values.value)
        assert as_statistic.low == pytest.approx(as_values.low) and as_statistic.high == pytest.approx(as_values.high)


def test_bootstrap_is_reproducible_and_checks_its_input() -> None:
    values = np.random.default_rng(12).normal(size=50)
    assert bootstrap_ci(values, seed=8) == bootstrap_ci(values, seed=8)
    assert bootstrap_ci(values, seed=8).low != bootstrap_ci(values, seed=9).low
    with pytest.raises(ValueError):
        bootstrap_ci(np.array([]))
    with pytest.raises(ValueError):
        bootstrap_ci(lambda w: w.sum(axis=1))  # no n_examples
    with pytest.raises(ValueError):
        bootstrap_ci(values, groups=np.zeros(3))
    with pytest.raises(ValueError):
        bootstrap_ci(values, confidence=1.5)


# --- paired bootstrap --------------------------------------------------------------------------------


def _correct(rng: np.random.Generator, n: int, rate: float) -> np.ndarray:
    return rng.random(n) < rate


def test_paired_identical_runs_are_tied() -> None:
    correct = _correct(np.random.default_rng(13), 500, 0.7)
    result = paired_bootstrap(correct, correct)
    assert result.difference == 0.0 and result.p_value == 1.0
    assert result.low <= 0.0 <= result.high
    assert result.to_dict()["n"] == 500


def test_paired_planted_difference_is_found() -> None:
    rng = np.random.default_rng(14)
    better, worse = _correct(rng, 500, 0.9), _correct(rng, 500, 0.6)
    result = paired_bootstrap(better, worse)
    assert result.p_value < 0.01
    assert 0.0 < result.low < result.difference < result.high
    assert result.difference == pytest.approx(better.mean() - worse.mean())


def test_paired_interval_equals_scipy_paired_percentile() -> None:
    rng = np.random.default_rng(15)
    a = _correct(rng, 400, 0.72).astype(float)
    b = np.where(rng.random(400) < 0.8, a, 1 - a)  # correlated with a, as two models on the same images are
    result = paired_bootstrap(a, b, seed=2)
    reference = scipy_stats.bootstrap(
        (a, b), lambda x, y, axis=-1: x.mean(axis=axis) - y.mean(axis=axis), paired=True, n_resamples=10_000,
        method="percentile", random_state=np.random.default_rng(8))
    _assert_same_interval(Estimate(result.difference, result.low, result.high, 400), reference, 0.05)


def test_paired_p_value_equals_a_brute_force_bootstrap() -> None:
    a, b = np.zeros(300), np.zeros(300)
    a[:25] = b[25:40] = 1  # 25 examples only a gets right, 15 only b
    a[40:200] = b[40:200] = 1
    result = paired_bootstrap(a, b, n_resamples=20_000, seed=3)
    reference_rng = np.random.default_rng(9)
    draws = np.array([(a[idx] - b[idx]).mean() for idx in reference_rng.integers(0, 300, size=(20_000, 300))])
    below, above = 1 + (draws <= 0).sum(), 1 + (draws >= 0).sum()
    reference_p = min(1.0, 2 * min(below, above) / (draws.size + 1))
    assert 0.02 < reference_p < 0.9, "the case must be neither trivially significant nor trivially tied"
    assert result.p_value == pytest.approx(reference_p, abs=0.02)


def test_many_pairs_at_once_equal_each_pair_alone() -> None:
    """Pairs sharing one draw per block give what each pair gives alone: 0/1 and continuous scores, with and
    without groups, of several lengths."""
    rng = np.random.default_rng(16)
    pairs, groups = [], []
    for n in (40, 40, 40, 300, 300):
        for continuous in (False, True):
            a = rng.random(n) if continuous else (rng.random(n) < 0.7).astype(float)
            pairs.append((a, np.where(rng.random(n) < 0.7, a, rng.random(n))))
            groups.append(rng.integers(0, n // 4, n) if n == 300 and continuous else None)
    together = paired_bootstraps(pairs, groups=groups, n_resamples=3_000, seed=5)
    alone = [paired_bootstrap(a, b, groups=g, n_resamples=3_000, seed=5)
             for (a, b), g in zip(pairs, groups, strict=True)]
    assert together == alone
    assert len({(r.low, r.high) for r in together}) > 1


def test_paired_checks_alignment() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap(np.ones(5), np.ones(4))


# --- Holm against statsmodels ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_holm_equals_statsmodels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 25))
    p_values = rng.random(m) ** 3
    p_values[rng.random(m) < 0.2] = p_values[0]  # ties
    alpha = float(rng.choice([0.01, 0.05, 0.1]))
    result = holm(p_values, alpha)
    reject, adjusted, _, _ = multitest.multipletests(p_values, alpha=alpha, method="holm")
    np.testing.assert_allclose(result.adjusted, adjusted, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(result.reject, reject)


def test_holm_edge_cases() -> None:
    p_values = np.array([0.0, 1.0, 0.025, 0.05])
    result = holm(p_values, 0.05)
    reject, adjusted, _, _ = multitest.multipletests(p_values, alpha=0.05, method="holm")
    np.testing.assert_allclose(result.adjusted, adjusted)
    np.testing.assert_array_equal(result.reject, reject)
    adjusted_single, reject_single = holm(np.array([0.04]))
    assert adjusted_single[0] == 0.04 and reject_single[0]
    with pytest.raises(ValueError):
        holm(np.array([0.5, 1.5]))


# --- repeated runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_mean_std_ci_equals_scipy_t_interval(confidence: float) -> None:
    values = np.random.default_rng(17).normal(0.6, 0.05, size=5)
    estimate = mean_std_ci(values, confidence)
    low, high = scipy_stats.t.interval(confidence, df=4, loc=values.mean(), scale=scipy_stats.sem(values))
    assert estimate.value == pytest.approx(values.mean()) and estimate.std == pytest.approx(values.std(ddof=1))
    assert estimate.low == pytest.approx(low) and estimate.high == pytest.approx(high)
    assert estimate.n == 5 and estimate.to_dict()["confidence"] == confidence


def test_mean_std_ci_single_and_identical_runs() -> None:
    single = mean_std_ci(np.array([0.7]))
    assert single.value == 0.7 and np.isnan(single.std) and np.isnan(single.low) and np.isnan(single.high)
    assert "undefined" in single.interval
    same = mean_std_ci(np.array([0.7, 0.7, 0.7]))
    assert same.std == pytest.approx(0.0, abs=1e-12)
    assert same.low == pytest.approx(0.7) and same.high == pytest.approx(0.7)
    with pytest.raises(ValueError):
        mean_std_ci(np.array([]))


def test_new_definitions_are_registered() -> None:
    assert "sklearn balanced_accuracy_score" in METRIC_DEFINITIONS["balanced_accuracy"]
    assert "2TP/(2TP+FP+FN)" in METRIC_DEFINITIONS["macro_f1"]


def test_a_non_finite_target_score_is_never_a_hit() -> None:
    from cladebench.metrics import top_k_hits

    scores = np.array([[np.nan] * 4, [0.1, np.nan, 0.3, 0.2], [-np.inf, 0.1, -np.inf, 0.5]])
    assert top_k_hits(scores, np.array([0, 1, 0]), 3).tolist() == [False, False, False]
    assert top_k_hits(scores, np.array([0, 2, 3]), 1).tolist() == [False, True, True]
