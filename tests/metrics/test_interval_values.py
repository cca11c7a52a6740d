"""The bootstrap and the repeated-runs interval refuse bad values alike (one check in metrics.intervals); the
Wilson interval stays inside [0, 1]."""

from __future__ import annotations

import numpy as np
import pytest

from cladebench.metrics import bootstrap_ci, mean_std_ci
from cladebench.metrics.intervals import wilson_interval


@pytest.mark.parametrize("estimate", [lambda v: bootstrap_ci(v, n_resamples=10), mean_std_ci])
def test_empty_two_dimensional_and_nan_values_are_refused(estimate) -> None:
    with pytest.raises(ValueError, match=r"values must be a non-empty 1-D array, got shape \(0,\)"):
        estimate(np.array([]))
    with pytest.raises(ValueError, match=r"got shape \(2, 2\)"):
        estimate(np.ones((2, 2)))
    with pytest.raises(ValueError, match="values contain NaN"):
        estimate(np.array([1.0, np.nan]))
    assert estimate([0, 1, 1, 0]).value == 0.5  # a list of 0/1 hits is taken as floats


def test_the_wilson_interval_never_leaves_zero_to_one() -> None:
    """At 0 of n (or n of n) the formula's two terms cancel only up to rounding: a bound of -3.5e-18 printed as
    "-0.00". The bound is a probability, so it is clipped where it is computed."""
    for n in range(1, 400):
        for successes in range(n + 1):
            low, high = wilson_interval(successes, n)
            assert 0.0 <= low <= high <= 1.0, (successes, n, low, high)
        assert wilson_interval(0, n)[0] == 0.0 and wilson_interval(n, n)[1] == 1.0
        assert f"{wilson_interval(0, n)[0]:.2f}" == "0.00"
