"""What the demo's report showed at 1,400 px that the layout tests did not catch: a reliability diagram's legend
drawn over its curves."""

from __future__ import annotations

import json
import re
from pathlib import Path
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


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A zero-shot run of a tiny model kept in a deep checkpoint folder, on a small world with photos."""
    pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from helpers.checkpoint_runs import deep_checkpoint_runs

    root = tmp_path_factory.mktemp("gallery")
    _, model = deep_checkpoint_runs(root, {"run": []})
    return root / "run", model.removeprefix("local-dir:")


def test_a_gallery_names_its_run_by_label_not_by_the_checkpoint_path(tiny_run: tuple[Path, str],
                                                                       tmp_path: Path) -> None:
    from cladebench.cli import main

    run, path = tiny_run
    out = tmp_path / "report.html"
    assert main(["report", str(run), "--out-file", str(out), "--max-gallery", "4"]) == 0
    text = out.read_text()
    before = text.split('<section id="provenance">')[0]
    assert 'class="gallery"' in before
    visible = re.sub(r"<[^>]*>", "", before)  # what a reader sees; a hover title may hold the full id
    assert path not in visible
    assert "tiny-clip: " in visible


@pytest.mark.parametrize("form", ["html", "md"])
def test_few_shot_runs_on_the_same_splits_are_marked_paired_by_query_images(tmp_path: Path, form: str) -> None:
    """Two few-shot runs on the same splits pair query image by query image: the better one is marked best, the
    other tied or worse, each cell says what it was computed on (repetitions, query images, classes), and no cell
    says 'not tested'."""
    from cladebench.cli import main
    from helpers.toy_dataset import write_toy_dataset

    toy = write_toy_dataset(tmp_path / "toy.lance")
    for k in ("1", "3"):
        assert main(["eval", "fewshot", str(toy), "--column", "emb_toy", "--out", str(tmp_path / k), "--group-by",
                     "none", "--shots", "1", "--methods", "knn", "--repetitions", "2", "--knn-k", k]) == 0
    out = tmp_path / f"report.{form}"
    assert main(["report", str(tmp_path / "1"), str(tmp_path / "3"), "--out-file", str(out), "--format", form]) == 0
    board = out.read_text().split("Leaderboard", 1)[1].split("Values and intervals", 1)[0]
    assert "not tested" not in board and "no paired test" not in board
    assert "tied" in board or ("best" in board and "worse" in board)  # best only where a difference holds
    assert "2 reps of 18 query images in all, 3 classes" in board
    assert "paired by query images" in board


def test_a_long_unbroken_label_stays_inside_1400_px(tiny_run: tuple[Path, str], tmp_path: Path) -> None:
    """A label with no break (300 characters) wraps in the runs table, the leaderboard and every heading: nothing
    makes the page wider than a 1,400 px window."""
    from cladebench.cli import main
    from helpers.devtools import browser

    run, _ = tiny_run
    other = tmp_path / "other"
    other.mkdir()
    for name in ("run.json", "predictions.parquet"):
        (other / name).write_bytes((run / name).read_bytes())
    record = json.loads((other / "run.json").read_text())
    record["label"] = "L" * 300
    (other / "run.json").write_text(json.dumps(record))
    out = tmp_path / "report.html"
    assert main(["report", str(run), str(other), "--out-file", str(out), "--max-gallery", "2"]) == 0
    with browser() as chromium:
        tab = chromium.open(out.resolve().as_uri(), width=1400)
        width = chromium.evaluate("document.documentElement.scrollWidth", tab)
        wide = chromium.evaluate("""[...document.querySelectorAll('body *')].filter(e => e.clientWidth > 0
            && e.scrollWidth > e.clientWidth + 1 && !e.closest('.scroll')).map(e => e.tagName)""", tab)
    assert width <= 1400 and wide == []
