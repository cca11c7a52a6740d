"""The bootstrap and the repeated-runs interval refuse bad values alike (one check in metrics.intervals)."""

from __future__ import annotations

import numpy as np
import pytest

from cladebench.metrics import bootstrap_ci, mean_std_ci


@pytest.mark.parametrize("estimate", [lambda v: bootstrap_ci(v, n_resamples=10), mean_std_ci])
def test_empty_two_dimensional_and_nan_values_are_refused(estimate) -> None:
    with pytest.raises(ValueError, match=r"values must be a non-empty 1-D array, got shape \(0,\)"):
        estimate(np.array([]))
    with pytest.raises(ValueError, match=r"got shape \(2, 2\)"):
        estimate(np.ones((2, 2)))
    with pytest.raises(ValueError, match="values contain NaN"):
        estimate(np.array([1.0, np.nan]))
    assert estimate([0, 1, 1, 0]).value == 0.5  # a list of 0/1 hits is taken as floats
