"""`compare` pairs two zero-shot runs image by image on mistake severity (a ratio over each run's mistakes) and on
hierarchical distance@k, with the paired interval; lower is better for both."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.evaluate.compare import compare_runs
from cladebench.evaluate.compare_text import format_comparison
from cladebench.evaluate.configs import ZeroShotEvalConfig
from cladebench.evaluate.run import run_eval
from cladebench.synthetic import WorldConfig, make_world
from helpers.embedded import write_embedded


@pytest.fixture(scope="module")
def two_runs(tiny_model: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], list]:
    root = tmp_path_factory.mktemp("compare-severity")
    world = make_world(WorldConfig(seed=1, names="generated", branching=(2, 2, 1, 2, 1, 2, 3)))
    dataset = write_embedded(world.to_table(60, seed=5, image_format="jpeg"), root / "world.lance", tiny_model)
    paths, records = [], []
    for name, templates in (("a", "photo"), ("b", "bioclip")):
        record, path = run_eval(ZeroShotEvalConfig(dataset=str(dataset), model=tiny_model, out=root / name,
                                                   device="cpu", group_by="none", templates=templates))
        paths.append(path)
        records.append(record)
    return paths, records


@pytest.mark.parametrize("metric", ["mistake_severity_species", "hdist1_species", "hdist5_species"])
def test_compare_pairs_severity_image_by_image(two_runs: tuple[list[Path], list], metric: str) -> None:
    paths, records = two_runs
    comparison = compare_runs(paths, metric=metric, n_resamples=2000)
    (entry,) = comparison.metrics
    (difference,) = entry.differences
    stored = [record.metrics[metric]["value"] for record in records]
    # The paired difference is the difference of the stored numbers, on every image both runs scored.
    assert difference.paired.difference == pytest.approx(stored[1] - stored[0])
    assert difference.paired.low <= difference.paired.difference <= difference.paired.high
    assert difference.paired.n == 60 and entry.unit == "images"
    best = comparison.verdicts[0].best
    assert stored[best] == min(stored)  # lower is better on the tree of life
    assert metric in format_comparison(comparison)
