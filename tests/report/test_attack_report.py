"""What the demo's report showed at 1,400 px that the layout tests did not catch: a reliability diagram's legend
drawn over its curves."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cladebench.report import plots

pytest.importorskip("matplotlib")


def test_reliability_legend_covers_no_curve(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight challenge groups (the demo's): the legend sits beside the axes, not over the curves in them."""
    drawn: list[Any] = []
    monkeypatch.setattr(plots, "svg_data_uri", lambda figure: drawn.append(figure) or "data:")
    rng = np.random.default_rng(0)
    curves = [(f"Group{i} (ECE 0.1{i})", np.linspace(0.05, 0.95, 10), rng.uniform(0, 1, 10), [5] * 10)
              for i in range(8)]
    plots.reliability_diagram(curves, title="[1] demo")
    figure = drawn[0]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(figure).get_renderer()
    axes = figure.axes[0]
    legend = axes.get_legend()
    assert legend is not None and len(legend.get_texts()) == 9
    assert not legend.get_window_extent(renderer).overlaps(axes.get_window_extent(renderer))
