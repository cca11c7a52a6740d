"""The demo's report as a person reads it (issue 45 item 3): a few screens at 1,280 px with the details folded,
never wider than a 390 px phone (each table row a block of labelled cells there), pooled runs explained where they
appear; and the cell labels that make the phone layout, escaped like every data string."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cladebench.report.narrow import STACKS, label_table_cells
from helpers.devtools import browser

SCREENS_AT_1280 = 15
"""Most screens (page height / 900 px) the demo's report may be at 1,280 px."""


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from cladebench.cli import main

    out = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["demo", "--out", str(out), "--images", "192", "--pairs", "16"]) == 0
    return out / "report.html"


@pytest.mark.slow
def test_the_demo_report_is_a_few_screens_and_fits_a_phone(demo_report: Path) -> None:
    page = demo_report.read_text()
    assert page.count('<details class="fold">') >= 5 and "pooled summary run scores" in page
    with browser() as chromium:
        wide = chromium.open(demo_report.resolve().as_uri(), width=1280, height=900)
        height = chromium.evaluate("document.documentElement.scrollHeight", wide)
        assert height / 900 <= SCREENS_AT_1280, f"{height / 900:.1f} screens"
        folded = chromium.evaluate("[...document.querySelectorAll('details.fold:not([open]) > summary h2')]"
                                   ".map(h => h.textContent)", wide)
        assert "Provenance" in folded and "Accuracy by taxonomic rank" in folded
        pooled = chromium.evaluate("[...document.querySelectorAll('#leaderboard .note.pooled')]"
                                   ".map(p => p.getBoundingClientRect().height)", wide)
        assert pooled and all(h > 0 for h in pooled)  # said, visibly, beside the pooled runs' numbers
        assert chromium.problems(wide) == []
        phone = chromium.open(demo_report.resolve().as_uri(), width=390, height=844)
        chromium.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)", phone)
        assert chromium.evaluate("document.documentElement.scrollWidth", phone) <= 390
        sideways = chromium.evaluate("""[...document.querySelectorAll('body *')].filter(e => e.clientWidth > 0
            && (e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > 391)).map(e => e.tagName)""",
                                     phone)
        assert sideways == []
        rows = chromium.evaluate("""[...document.querySelectorAll('table.leaderboard')].map(t =>
            getComputedStyle(t.querySelector('tbody tr')).display)""", phone)
        assert rows and set(rows) == {"block"}


def test_each_body_cell_is_labelled_by_its_column_and_data_stays_escaped() -> None:
    hostile = "&lt;td onclick=x&gt;A&amp;B&quot;"
    page = (f'<table class="t"><thead><tr><th>run</th><th>{hostile}</th></tr></thead>'
            f'<tbody><tr><th scope="row">[1]</th><td class="v">{hostile}</td></tr></tbody></table>'
            '<table class="facts"><tr><th>key</th><td>value</td></tr></table>')
    out = label_table_cells(page)
    assert f'<table class="t" {STACKS}>' in out and '<th scope="row" data-label="run">' in out
    assert '<td class="v" data-label="&lt;td onclick=x&gt;A&amp;B&#34;">' in out
    assert out.count("<td") == 2 and out.endswith('<table class="facts"><tr><th>key</th><td>value</td></tr></table>')


def test_a_table_whose_cells_span_columns_is_left_as_it_is() -> None:
    page = '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td colspan="2">x</td></tr></tbody></table>'
    assert label_table_cells(page) == page


def test_calibration_draws_a_small_panel_per_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight groups: eight panels on shared axes (four to a row), each titled by its group and ECE."""
    pytest.importorskip("matplotlib")
    import numpy as np

    from cladebench.report import plots

    drawn: list[object] = []
    monkeypatch.setattr(plots, "svg_data_uri", lambda figure: drawn.append(figure) or "data:")
    rng = np.random.default_rng(0)
    curves = [(f"Group{i} (ECE 0.1{i})", np.linspace(0.05, 0.95, 10), rng.uniform(0, 1, 10), [5] * 9 + [0])
              for i in range(7)]
    plots.reliability_small_multiples(curves, title="[1] demo")
    figure: Any = drawn[0]
    visible = [axes for axes in figure.axes if axes.get_visible()]
    assert [axes.get_title() for axes in visible] == [label for label, *_ in curves]
    assert len(figure.axes) == 8 and visible[0].get_shared_x_axes().joined(visible[0], visible[6])
