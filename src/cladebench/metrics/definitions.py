"""What each metric means: the registry of definition texts that run records carry.

Why a module of its own: every metric module (intervals, classification, retrieval) and every task that
names its own metrics registers a definition here, and run records read them back, so a reader knows
exactly what was computed. Where a definition differs from a peer's reference on purpose, its text says so.
"""

from __future__ import annotations

from cladebench.registry import Registry

METRIC_DEFINITIONS: Registry[str] = Registry("metric")
"""Registry: metric name -> its exact definition, recorded in every run record that reports it."""


def define_metric(name: str, definition: str) -> str:
    """Register a metric's definition (idempotent for the same text)."""
    existing = METRIC_DEFINITIONS.get(name)
    if existing is not None and existing != definition:
        raise ValueError(f"metric {name!r} defined twice with different texts")
    METRIC_DEFINITIONS.add(name, definition)
    return name
