"""How far two float32 computations of the same number may fall apart: the tolerances the benches check by.

A bench compares a library path with another computation of the same quantity (a loop, a dense path) that sums in
another order, in another precision or in other blocks. Their difference is rounding, and its size follows from
float32's unit roundoff ``u = 2**-24`` and the length of each sum: a sum of ``n`` terms of size at most 1 is off by
at most ``n u`` in the worst case, and by about ``sqrt(n) u`` in practice (rounding errors are independent and
cancel; Higham and Mary, "A New Approach to Probabilistic Rounding Error Analysis", SIAM J. Sci. Comput. 2019).
The benches take the ``sqrt(n) u`` form, with a factor of 4 for headroom: the worst case (``n u``: 3e-5 for one
512-wide dot product, 3e-3 once multiplied by a logit scale of 100) would let a real bug through.

- A dot product of two unit vectors of width ``d``: ``4 sqrt(d) u``.
- A logit, ``scale`` times that dot product: ``scale`` times as much (two computations each off by that: twice).
- A softmax probability ``p = exp(l_i) / sum_j exp(l_j)``: logits each moved by at most ``e`` move ``p`` by a factor
  within ``exp(+-2e)``, so by ``2 e p <= 2 e``; the denominator's float32 sum of ``n`` terms adds ``4 sqrt(n) u``.
- A rolled-up probability (a sum of such probabilities over a taxon's species, at most 1 in all): the same bound,
  the sum's own ``4 sqrt(m) u`` included in the ``sqrt(n)`` term (``m <= n``).
"""

from __future__ import annotations

import math

import numpy as np

UNIT_ROUNDOFF = float(np.finfo(np.float32).eps) / 2
"""float32's unit roundoff, 2**-24 (about 6.0e-8)."""

HEADROOM = 4.0
"""The factor on ``sqrt(n) u``: the probabilistic bound holds with probability near 1 for a factor of a few."""


def sum_error(terms: int) -> float:
    """Error of a float32 sum of ``terms`` numbers of size at most 1 (a dot product of unit vectors, a sum of
    probabilities), in practice: ``HEADROOM * sqrt(terms) * u``."""
    return HEADROOM * math.sqrt(max(terms, 1)) * UNIT_ROUNDOFF


def probability_tolerance(dim: int, scale: float, terms: int) -> float:
    """Largest difference two float32 computations of one softmax probability (or a sum of them) may show: logits
    of ``scale`` times a ``dim``-wide dot product of unit vectors, each computation's logits off by
    ``scale * sum_error(dim)`` (so ``2 *`` that between them, moving ``p`` by twice that again), and a denominator
    summed over ``terms`` labels in float32."""
    logits_apart = 2 * scale * sum_error(dim)
    return 2 * logits_apart + sum_error(terms)


__all__ = ["HEADROOM", "UNIT_ROUNDOFF", "probability_tolerance", "sum_error"]
