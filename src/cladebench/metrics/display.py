"""How a metric's value is printed: a registry of name patterns with a multiplier and a unit.

Why a module of its own: the metric modules and tasks that name metrics register how theirs are shown, and
the CLI summary, `compare` and the report all print through :func:`display_scale`, so one metric reads the
same everywhere.
"""

from __future__ import annotations

import re

from cladebench.registry import Registry

DISPLAY_SCALES: Registry[tuple[re.Pattern[str], float, str]] = Registry("metric display pattern")
"""Pattern (over the metric's own name) -> (compiled pattern, multiplier, unit): how values are printed, the first
registered pattern that matches winning. Most metrics are shares in [0, 1] printed as percentages; INQUIRE's AP
and nDCG are already x100 and MRR is printed as is."""


def register_display(pattern: str, multiplier: float, unit: str) -> None:
    """Print metrics whose own name (after any ``GROUP/``) fully matches ``pattern`` as value x multiplier + unit."""
    DISPLAY_SCALES.add(pattern, (re.compile(pattern), multiplier, unit))


def display_scale(name: str) -> tuple[float, str]:
    """(multiplier, unit) for printing metric ``name``: the first registered pattern that matches, else percent."""
    base = name.rsplit("/", 1)[-1]
    for pattern, multiplier, unit in DISPLAY_SCALES.values():
        if pattern.fullmatch(base):
            return multiplier, unit
    return 100.0, "%"


LOWER_IS_BETTER: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in (
    r"(no)?hint_lca_distance", r".*_unparseable", r".*_unusable", r".*named_other", r"prior_fallback_.*",
    r"(.*_)?mistake_severity(_.*)?", r"(.*_)?hdist\d+(_.*)?",
))
"""Metrics (their own name, after any ``GROUP/``) where a smaller value is the better one; every other is
read as higher is better. Only used to say which run is best."""


def signed(value: float) -> str:
    """A difference with its sign and two decimals; one that rounds to zero reads +0.00, never -0.00."""
    return f"{round(value, 2) + 0.0:+.2f}"


def lower_is_better(name: str) -> bool:
    """Whether a smaller value of metric ``name`` (``GROUP/metric`` or ``metric``) is better."""
    base = name.rsplit("/", 1)[-1]
    return any(pattern.fullmatch(base) for pattern in LOWER_IS_BETTER)


# Counts and weights that are not shares, registered here rather than beside the task that computes them: a
# report or `compare` reads run records in a process that never imported that task, and must print them alike.
register_display(r"(no)?hint_depth", 1.0, "")  # lineage completion: ranks completed correctly
register_display(r"(no)?hint_lca_distance", 1.0, "")  # lineage completion: ranks from the truth to the LCA
register_display(r"image_weight", 1.0, "")  # geo: the fused weight a of log p_image
register_display(r"(.*_)?mistake_severity(_.*)?", 1.0, "")  # ranks from the label rank up to the LCA
register_display(r"(.*_)?hdist\d+(_.*)?", 1.0, "")  # mean LCA height of the top-k predictions
