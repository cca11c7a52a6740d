"""Charts drawn with matplotlib's ``Figure`` API (no pyplot: no GUI backend, no global state) as SVG data URIs.

SVG keeps the charts sharp at any zoom and small; text is drawn as glyph outlines
(``svg.fonttype = "path"``), so the page looks the same without the fonts, and the SVG is shown
through ``<img src="data:image/svg+xml;base64,...">``, where a browser never runs a script, so a taxon or
model name drawn into a chart can do nothing but be drawn. ``text.parse_math`` is off: a name with two
dollar signs is text, not a formula (and never a mathtext parse error). Output is deterministic (fixed
hash salt, no date), so the same runs give the same page.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

STYLE: dict[str, Any] = {
    "svg.fonttype": "path",
    "svg.hashsalt": "cladebench-report",
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.3,
    "figure.dpi": 100,
}
"""matplotlib settings of every chart."""

LABEL_CHARACTERS = 40
"""Category and legend labels longer than this are cut with an ellipsis (the tables beside show them whole)."""


@dataclass(frozen=True)
class Series:
    """One run's (or condition's) values over a chart's categories; NaN where it has none."""

    label: str
    """Legend entry."""
    values: Sequence[float]
    """Bar heights, one per category."""
    lows: Sequence[float] | None = None
    """Lower ends of the intervals (whiskers), on the same scale; None for no whiskers."""
    highs: Sequence[float] | None = None
    """Upper ends of the intervals."""


def shorten(text: str, limit: int = LABEL_CHARACTERS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextmanager
def _figure(width: float, height: float) -> Iterator[Any]:
    """A figure made without pyplot: no global state, no GUI backend, nothing to close."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(STYLE):
        yield Figure(figsize=(width, height))


def svg_data_uri(figure: Any) -> str:
    """The figure as an SVG ``data:`` URI."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _whiskers(series: Series, values: np.ndarray) -> np.ndarray | None:
    if series.lows is None or series.highs is None:
        return None
    lows = np.asarray(series.lows, dtype=float)
    highs = np.asarray(series.highs, dtype=float)
    below = np.where(np.isfinite(lows) & np.isfinite(values), values - lows, 0.0)
    above = np.where(np.isfinite(highs) & np.isfinite(values), highs - values, 0.0)
    return np.vstack([np.maximum(below, 0.0), np.maximum(above, 0.0)])


def bar_chart(categories: Sequence[str], series: Sequence[Series], *, ylabel: str, title: str = "",
              ylim: tuple[float, float] | None = None) -> str:
    """Grouped bars, one group per category and one bar per series, with interval whiskers; an SVG data URI."""
    n_categories, n_series = len(categories), max(len(series), 1)
    width = min(11.0, max(4.0, 0.9 + n_categories * (0.35 + 0.28 * n_series)))
    with _figure(width, 3.2) as figure:
        axes = figure.add_subplot()
        x = np.arange(n_categories)
        bar = 0.8 / n_series
        for i, entry in enumerate(series):
            values = np.asarray(entry.values, dtype=float)
            axes.bar(x + (i - (n_series - 1) / 2) * bar, np.nan_to_num(values), bar * 0.95,
                     yerr=_whiskers(entry, values), capsize=2, label=shorten(entry.label),
                     error_kw={"elinewidth": 0.8, "alpha": 0.8})
        axes.set_xticks(x, [shorten(c, 24) for c in categories], rotation=30 if n_categories > 4 else 0,
                        ha="right" if n_categories > 4 else "center")
        axes.set_ylabel(ylabel)
        if ylim is not None:
            axes.set_ylim(*ylim)
        if title:
            axes.set_title(shorten(title, 80))
        if len(series) > 1:
            axes.legend(fontsize=8, frameon=False)
        return svg_data_uri(figure)


def reliability_diagram(curves: Sequence[tuple[str, Sequence[float], Sequence[float], Sequence[int]]], *,
                        title: str = "") -> str:
    """Accuracy against mean confidence per bin, one line per curve, beside the diagonal of perfect calibration.

    ``curves``: (label, mean confidence per bin, accuracy per bin, images per bin); empty bins are NaN
    and skipped. Marker area grows with the images in the bin, so a point made of three images does not
    look like one made of three hundred.
    """
    with _figure(4.4, 4.0) as figure:
        axes = figure.add_subplot()
        axes.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8, label="perfectly calibrated")
        for label, confidence, accuracy, counts in curves:
            confidence, accuracy = np.asarray(confidence, float), np.asarray(accuracy, float)
            counts = np.asarray(counts, float)
            keep = counts > 0
            line = axes.plot(confidence[keep], accuracy[keep], marker="", linewidth=1.0, label=shorten(label))[0]
            axes.scatter(confidence[keep], accuracy[keep], s=12 + 60 * np.sqrt(counts[keep] / counts.max()),
                         color=line.get_color(), zorder=3)
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1)
        axes.set_xlabel("top-1 probability (mean in bin)")
        axes.set_ylabel("top-1 accuracy in bin")
        axes.grid(True, axis="both", alpha=0.3)
        if title:
            axes.set_title(shorten(title, 60))
        axes.legend(fontsize=7, frameon=False, loc="upper left")
        return svg_data_uri(figure)


def histogram(series: Sequence[tuple[str, Sequence[float]]], *, bins: Sequence[float], xlabel: str,
              title: str = "") -> str:
    """Overlaid step histograms of per-unit values (per-query AP), one per series."""
    with _figure(5.5, 3.0) as figure:
        axes = figure.add_subplot()
        for label, values in series:
            axes.hist(np.asarray(values, float), bins=np.asarray(bins, float), histtype="step", linewidth=1.4,
                      label=shorten(label))
        axes.set_xlabel(xlabel)
        axes.set_ylabel("queries")
        if title:
            axes.set_title(shorten(title, 80))
        if len(series) > 1:
            axes.legend(fontsize=8, frameon=False)
        return svg_data_uri(figure)
