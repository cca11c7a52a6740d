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
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

STYLE: dict[RcKeyType, object] = {
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


def svg_data_uri(figure: Figure) -> str:
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


BREAKS = " |/_-,;"
"""Characters after which a category label may wrap onto a new line (``Animalia|Plantae``, ``class=Aves``)."""
MAX_LINES = 3
"""Most lines a wrapped category label takes; a label that needs more is drawn rotated on one line."""
ROTATIONS = (30, 45, 90)
"""Angles tried, in order, when the wrapped labels do not fit side by side: the first at which no two labels meet."""
CHARACTER_WIDTH = 0.62
"""Width of an average character of the chart font, in font sizes (DejaVu Sans), to choose where to wrap."""
MISSING_LABEL = "n/a"
"""Drawn at the place of a bar whose value is undefined or missing: a gap, never a bar of height 0."""


def wrap_label(text: str, width: int, max_lines: int = MAX_LINES) -> str | None:
    """``text`` on lines of at most ``width`` characters, broken only after one of :data:`BREAKS`; None when it
    needs more than ``max_lines`` lines or has a piece longer than ``width`` that cannot be broken."""
    text = " ".join(str(text).split())
    pieces, current = [], ""
    for char in text:
        current += char
        if char in BREAKS:
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    lines: list[str] = []
    for piece in pieces:
        if lines and len((lines[-1] + piece).rstrip()) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    lines = [line.strip() for line in lines]
    if len(lines) > max_lines or any(len(line) > width for line in lines):
        return None
    return "\n".join(lines)


LEGEND_CHARACTERS = 30
"""Legend entries beside a bar chart wrap at word breaks onto lines of about this many characters."""


def legend_label(text: str) -> str:
    """A run's name for a legend beside the axes: wrapped at word breaks (three lines at most), else shortened."""
    return wrap_label(shorten(text, 3 * LEGEND_CHARACTERS), LEGEND_CHARACTERS) or shorten(text)


def _renderer(figure: Figure) -> RendererBase:
    """A renderer to measure text with (Agg's: the same font metrics the SVG's glyph outlines are drawn with)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return FigureCanvasAgg(figure).get_renderer()


def _labels_overlap(axes: Axes, renderer: RendererBase, gap: float = 2.0) -> bool:
    """Whether two neighbouring x tick labels (drawn level) come closer than ``gap`` pixels."""
    boxes = sorted((label.get_window_extent(renderer) for label in axes.get_xticklabels() if label.get_text()),
                   key=lambda box: box.x0)
    return any(right.x0 - left.x1 < gap for left, right in itertools.pairwise(boxes))


def _fit_tick_labels(figure: Any, axes: Any, positions: np.ndarray, categories: Sequence[str]) -> None:
    """Category labels that never overlap: level and wrapped at word breaks when they fit so, else rotated on one
    line by the smallest angle of :data:`ROTATIONS` at which neighbours stay apart (parallel labels ``spacing``
    apart are ``spacing * sin(angle)`` apart across their lines, whatever their lengths)."""
    renderer = _renderer(figure)
    font_px = STYLE["font.size"] * figure.dpi / 72
    spacing = axes.get_window_extent(renderer).width / max(len(categories), 1)
    characters = max(4, int(spacing / (CHARACTER_WIDTH * font_px)) - 1)
    wrapped = [wrap_label(shorten(c), characters) for c in categories]
    if all(w is not None for w in wrapped):
        axes.set_xticks(positions, wrapped)
        if not _labels_overlap(axes, renderer):
            return
    line_height = 1.3 * font_px
    rotation = next((angle for angle in ROTATIONS if spacing * np.sin(np.radians(angle)) >= line_height), 90)
    # Rotated labels are anchored at their end, under their tick.
    axes.set_xticks(positions, [shorten(c, 32) for c in categories], rotation=rotation,
                    ha="center" if rotation == 90 else "right", rotation_mode="anchor" if rotation < 90 else "default")


def bar_chart(categories: Sequence[str], series: Sequence[Series], *, ylabel: str, title: str = "",
              ylim: tuple[float, float] | None = None) -> str:
    """Grouped bars, one group per category and one bar per series, with interval whiskers; an SVG data URI.

    A value that is NaN (undefined, or not reported) is no bar: its place is marked :data:`MISSING_LABEL`, so it
    cannot be read as 0. Bars have ids ``bar-SERIES-CATEGORY`` and the marks ``missing-SERIES-CATEGORY`` (both
    numbered from 0) in the SVG, for whoever checks a chart against its table.
    """
    n_categories, n_series = len(categories), max(len(series), 1)
    longest = max((len(shorten(c)) for c in categories), default=0)
    # Room per category: the bars, and enough for a short label level (long ones wrap or rotate).
    per_category = max(0.35 + 0.28 * n_series, min(longest, 14) * 0.075)
    width = min(11.0, max(4.0, 0.9 + n_categories * per_category))
    # Many categories: at least one line of text per category, so even labels at 90 degrees do not touch.
    width = max(width, 0.9 + n_categories * 0.2)
    with _figure(width, 3.2) as figure:
        axes = figure.add_subplot()
        x = np.arange(n_categories)
        bar = 0.8 / n_series
        low, high = ylim if ylim is not None else (0.0, 1.0)
        for i, entry in enumerate(series):
            values = np.asarray(entry.values, dtype=float)
            defined = np.isfinite(values)
            offsets = x + (i - (n_series - 1) / 2) * bar
            whiskers = _whiskers(entry, values)
            container = axes.bar(offsets[defined], values[defined], bar * 0.95,
                                 yerr=None if whiskers is None else whiskers[:, defined], capsize=2,
                                 label=legend_label(entry.label), error_kw={"elinewidth": 0.8, "alpha": 0.8})
            for patch, category in zip(container.patches, np.flatnonzero(defined), strict=True):
                patch.set_gid(f"bar-{i}-{category}")
            for category in np.flatnonzero(~defined):
                axes.text(offsets[category], 0.02, MISSING_LABEL, transform=axes.get_xaxis_transform(),
                          rotation=90, ha="center", va="bottom", fontsize=7, color="#5f6b73",
                          gid=f"missing-{i}-{category}")
        axes.set_xlim(-0.5, n_categories - 0.5)
        axes.set_ylabel(ylabel)
        if ylim is not None:
            axes.set_ylim(low, high)
        if title:
            axes.set_title(shorten(title, 80))
        if len(series) > 1:  # beside the axes, where it covers no bar
            axes.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        _fit_tick_labels(figure, axes, x, categories)
        return svg_data_uri(figure)


def reliability_diagram(curves: Sequence[tuple[str, ArrayLike, ArrayLike, ArrayLike]], *,
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
        # Beside the axes, where it covers no curve (a curve per challenge group fills the upper left).
        axes.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        return svg_data_uri(figure)


SMALL_MULTIPLES_PER_ROW = 4
"""Panels per row of a small-multiples figure: four fit the report's 1,200 px column and read on a phone."""


def reliability_small_multiples(curves: Sequence[tuple[str, ArrayLike, ArrayLike, ArrayLike]], *,
                                title: str = "") -> str:
    """One small reliability diagram per curve (a challenge group), on shared axes: eight overlaid curves in one
    plot cannot be told apart, eight panels side by side can. ``curves`` as :func:`reliability_diagram` takes them."""
    columns = min(SMALL_MULTIPLES_PER_ROW, len(curves))
    rows = -(-len(curves) // columns)
    with _figure(1.9 * columns + 0.4, 1.9 * rows + 0.5) as figure:
        grid = figure.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)
        for panel, axes in enumerate(grid.flat):
            if panel >= len(curves):
                axes.set_visible(False)
                continue
            label = curves[panel][0]
            x, y, n = (np.asarray(values, float) for values in curves[panel][1:])
            keep = n > 0
            axes.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.7)
            axes.plot(x[keep], y[keep], linewidth=1.0, color="#2f6f4f")
            if keep.any():
                axes.scatter(x[keep], y[keep], s=6 + 30 * np.sqrt(n[keep] / n.max()), color="#2f6f4f", zorder=3)
            axes.set_xlim(0, 1)
            axes.set_ylim(0, 1)
            axes.set_title(shorten(label, 28), fontsize=7)
            axes.tick_params(labelsize=6)
            axes.grid(True, alpha=0.3)
        figure.supxlabel("top-1 probability (mean in bin)", fontsize=7)
        figure.supylabel("top-1 accuracy in bin", fontsize=7)
        if title:
            figure.suptitle(shorten(title, 60), fontsize=8)
        return svg_data_uri(figure)


def histogram(series: Sequence[tuple[str, ArrayLike]], *, bins: Sequence[float], xlabel: str,
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
