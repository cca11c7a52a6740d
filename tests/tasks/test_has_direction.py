"""One test of "has this vector a direction?" for few-shot's reader, retrieval and zero-shot's check."""

from __future__ import annotations

import numpy as np

from cladebench.tasks.common import has_direction


def test_zeros_and_non_finite_norms_have_no_direction() -> None:
    vectors = np.array([[3, 4], [0, 0], [np.nan, 1], [np.inf, 0], [1e-30, 0], [1e20, 1e20]], dtype=np.float32)
    assert has_direction(vectors).tolist() == [True, False, False, False, True, True]


def test_float32_is_judged_in_float32() -> None:
    """Zero-shot scores in float32: a norm that overflows there (or underflows to zero) has no direction, though
    float64 gives it one."""
    vectors = np.array([[3, 4], [1e-30, 0], [1e20, 1e20]], dtype=np.float32)
    assert has_direction(vectors, dtype=np.float32).tolist() == [True, False, False]
