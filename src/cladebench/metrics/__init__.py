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

Beyond single proportions: class-balanced scores (:func:`balanced_accuracy`, :func:`macro_f1`), percentile
bootstrap intervals over examples or groups of examples (:func:`bootstrap_ci`), paired differences between two
runs on the same examples (:func:`paired_bootstrap`; many pairs at once: :func:`paired_bootstraps`), Holm's
correction when several differences are tested at once (:func:`holm`), and mean +- t-interval over repeated runs
(:func:`mean_std_ci`).

This package ``__init__`` presents the public API on purpose: callers import ``from cladebench.metrics import
accuracy``. The code lives in one module per job: :mod:`~cladebench.metrics.definitions` (the definition
registry), :mod:`~cladebench.metrics.intervals` (Wilson, bootstrap, paired, Holm, t-intervals),
:mod:`~cladebench.metrics.classification` (top-k, balanced accuracy, macro-F1), :mod:`~cladebench.metrics.display`
(how values are printed), :mod:`~cladebench.metrics.hierarchy` (LCA heights, mistake severity, hierarchical
distance@k) and :mod:`~cladebench.metrics.retrieval` (INQUIRE's AP, nDCG, MRR; imported by name).
Modules inside the package import their siblings directly, never this ``__init__``.
"""

from __future__ import annotations

from cladebench.metrics.classification import balanced_accuracy, macro_f1, top_k_hits, top_k_undefined
from cladebench.metrics.definitions import METRIC_DEFINITIONS, define_metric
from cladebench.metrics.display import (
    DISPLAY_SCALES,
    LOWER_IS_BETTER,
    display_scale,
    lower_is_better,
    register_display,
    signed,
)
from cladebench.metrics.hierarchy import (
    HEIGHT_COLUMN,
    TOP_HEIGHTS_COLUMN,
    hierarchy_summary,
    lca_height,
    lca_heights,
    severity_metrics,
)
from cladebench.metrics.intervals import (
    CHUNK_ELEMENTS,
    PAIRED_P_VALUE,
    PERCENTILE_BOOTSTRAP,
    T_INTERVAL,
    WILSON,
    Estimate,
    HolmResult,
    PairedComparison,
    RepeatedEstimate,
    Statistic,
    accuracy,
    bootstrap_ci,
    holm,
    mean_std_ci,
    paired_bootstrap,
    paired_bootstraps,
    wilson_interval,
)

__all__ = [
    "CHUNK_ELEMENTS", "DISPLAY_SCALES", "HEIGHT_COLUMN", "LOWER_IS_BETTER", "METRIC_DEFINITIONS", "PAIRED_P_VALUE",
    "PERCENTILE_BOOTSTRAP", "TOP_HEIGHTS_COLUMN", "T_INTERVAL", "WILSON", "Estimate", "HolmResult",
    "PairedComparison", "RepeatedEstimate", "Statistic", "accuracy", "balanced_accuracy", "bootstrap_ci",
    "define_metric", "display_scale", "hierarchy_summary", "holm", "lca_height", "lca_heights", "lower_is_better",
    "macro_f1", "mean_std_ci", "paired_bootstrap", "paired_bootstraps", "register_display", "severity_metrics",
    "signed", "top_k_hits", "top_k_undefined", "wilson_interval",
]
