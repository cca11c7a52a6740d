"""A panel: one metric over categories (groups, ranks, breakdown values) for several series (runs), as a table
and, in HTML, a bar chart with interval whiskers drawn from the same numbers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cladebench.evaluate.selection import LEFT_OUT
from cladebench.metrics import display_scale
from cladebench.report.formatting import estimate_value, format_interval, format_value


@dataclass(frozen=True)
class PanelSeries:
    """One series of a panel: a label, the metrics it reads from, and its metric name per category."""

    label: str
    """Legend and column name (a run's name, or run and condition)."""
    metrics: Mapping[str, object]
    """Metric name -> stored estimate (a run record's metrics)."""
    names: Sequence[str | None]
    """Full metric name per category; None where the series has no value there."""


@dataclass(frozen=True)
class PanelCell:
    """One value of a panel's table."""

    metric: str
    value: str
    interval: str
    n: object
    note: str | None = None
    """Why there is no value, where the run says (a challenge group the task left out, with the task's reason)."""


@dataclass(frozen=True)
class Panel:
    """A table (categories x series) and, when drawn, its chart."""

    title: str
    categories: tuple[str, ...]
    series: tuple[str, ...]
    rows: tuple[tuple[PanelCell | None, ...], ...]
    """One row per category, one cell per series."""
    chart: str | None
    """SVG data URI of the bar chart, or None (Markdown, or nothing to draw)."""


def _cell(metrics: Mapping[str, Any], name: str | None) -> PanelCell | None:
    if name is None:
        return None
    estimate = metrics.get(name)
    if estimate is None:
        return None
    left_out = estimate.get(LEFT_OUT)
    return PanelCell(metric=name, value=format_value(name, estimate), interval=format_interval(name, estimate),
                     n=estimate.get("n"), note=f"left out: {left_out}" if left_out else None)


def _scaled(metrics: Mapping[str, Any], name: str | None, key: str) -> float:
    if name is None:
        return math.nan
    estimate = metrics.get(name)
    if estimate is None:
        return math.nan
    raw = estimate_value(estimate) if key == "value" else estimate.get(key)
    if not isinstance(raw, (int, float)) or not math.isfinite(raw):
        return math.nan
    return display_scale(name)[0] * float(raw)


def make_panel(title: str, metric: str, categories: Sequence[str], series: Sequence[PanelSeries], *,
               chart: bool) -> Panel:
    """The panel of ``metric`` (a base name, for the axis label and scale) over ``categories``."""
    rows = tuple(tuple(_cell(s.metrics, s.names[i]) for s in series) for i in range(len(categories)))
    uri = None
    if chart and any(cell is not None for row in rows for cell in row):
        from cladebench.report.plots import Series, bar_chart

        drawn = [Series(label=s.label, values=[_scaled(s.metrics, n, "value") for n in s.names],
                        lows=[_scaled(s.metrics, n, "low") for n in s.names],
                        highs=[_scaled(s.metrics, n, "high") for n in s.names]) for s in series]
        _, unit = display_scale(metric)
        values = [v for entry in drawn for v in (*entry.values, *(entry.highs or ())) if math.isfinite(v)]
        percent = unit == "%" and values and min(values) >= 0
        uri = bar_chart(list(categories), drawn, ylabel=f"{metric} ({unit})" if unit else metric,
                        ylim=(0.0, max(100.0, max(values))) if percent else None)
    return Panel(title=title, categories=tuple(categories), series=tuple(s.label for s in series), rows=rows,
                 chart=uri)
