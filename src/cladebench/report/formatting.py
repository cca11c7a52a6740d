"""How numbers and names from run records are written in a report, the same way in every section and format.

Values follow :func:`cladebench.metrics.display_scale` (shares as percentages, INQUIRE's AP as stored),
with two decimals and the interval in brackets, exactly as ``cladebench eval`` prints them, so a number
in a report can be found again in a terminal log. Formatted numbers are returned as
:class:`markupsafe.Markup`: they hold digits, signs, brackets and units only, so they are safe as they
are in HTML and in Markdown, and the Markdown escaping (which would turn ``[`` into ``\\[``) leaves them alone.

Example:
    >>> estimate = {"value": 0.125, "low": 0.05, "high": 0.2625, "n": 40}
    >>> print(format_value("Peromyscus/top1_species", estimate), format_interval("top1_species", estimate))
    12.50% [5.00, 26.25]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from markupsafe import Markup

from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.metrics import display_scale

MISSING = "n/a"
"""Written where a metric has no value (NaN, or not reported by a run)."""

def split_metric(name: str) -> tuple[str, str]:
    """``("GROUP", "metric")`` for ``GROUP/metric``; ``("", name)`` for a pooled metric."""
    prefix, _, base = name.rpartition(GROUP_SEPARATOR)
    return prefix, base


def is_breakdown(prefix: str) -> bool:
    """Whether a metric prefix is a breakdown (``column=value``) rather than a challenge group."""
    return "=" in prefix


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def estimate_value(estimate: Mapping[str, object] | None) -> float | None:
    """The point value of a stored estimate, or None when it has none (missing, NaN)."""
    value = None if estimate is None else estimate.get("value")
    return float(value) if _finite(value) else None


def format_value(metric: str, estimate: Mapping[str, object] | None) -> Markup:
    """``12.50%``: the value scaled for display with its unit, or ``n/a``."""
    value = estimate_value(estimate)
    if value is None:
        return Markup(MISSING)
    scale, unit = display_scale(metric)
    return Markup(f"{scale * value:.2f}{unit}")


def format_interval(metric: str, estimate: Mapping[str, Any] | None) -> Markup:
    """``[10.00, 15.00]``: the interval on the same scale (no unit, as ``eval`` prints it), or empty; empty too
    beside an undefined value (a Wilson interval over no image is [0, 100], which says nothing of it)."""
    if estimate is None or estimate_value(estimate) is None \
            or not (_finite(estimate.get("low")) and _finite(estimate.get("high"))):
        return Markup("")
    scale, _ = display_scale(metric)
    return Markup(f"[{scale * estimate['low']:.2f}, {scale * estimate['high']:.2f}]")


def format_number(value: object, digits: int = 3) -> Markup:
    """A plain number (an ECE, a probability, a score) with ``digits`` decimals, or ``n/a``."""
    return Markup(f"{float(value):.{digits}f}") if _finite(value) else Markup(MISSING)


def format_count(value: object) -> Markup:
    """An integer count with thousands separators, or ``n/a``."""
    return Markup(f"{int(value):,}") if isinstance(value, int) and not isinstance(value, bool) else Markup(MISSING)


def short_hash(digest: object, length: int = 12) -> str:
    """The first ``length`` characters of a hex digest (the full one is kept in a title attribute)."""
    return str(digest)[:length] if digest else MISSING
