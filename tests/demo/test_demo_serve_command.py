"""The demo's summary ends by naming the ``cladebench serve`` command for what it made: the fine-grained dataset
and the zero-shot runs on it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from cladebench.demo.summary import summary_lines


def test_the_summary_prints_the_serve_command_for_the_dataset_and_its_runs(tmp_path: Path) -> None:
    runs = {"demo": {"grouped": str(tmp_path / "runs/zs-demo/run.json")},
            "other": {"grouped": str(tmp_path / "runs/zs-other/run.json")}}
    ctx = SimpleNamespace(config=SimpleNamespace(seed=0), out_dir=tmp_path, models=[],
                          summary={"world": {}, "steps": {"zeroshot": {"runs": runs}}, "seconds": 1},
                          dataset_path=lambda name: tmp_path / f"{name}.lance")
    lines = summary_lines(ctx)
    assert f"browse:  cladebench serve {tmp_path / 'fine-grained.lance'} {runs['demo']['grouped']} " \
           f"{runs['other']['grouped']}" in lines


def test_without_runs_the_serve_command_names_the_dataset_alone(tmp_path: Path) -> None:
    ctx = SimpleNamespace(config=SimpleNamespace(seed=0), out_dir=tmp_path, models=[],
                          summary={"world": {}, "steps": {}, "seconds": 1},
                          dataset_path=lambda name: tmp_path / f"{name}.lance")
    assert f"browse:  cladebench serve {tmp_path / 'fine-grained.lance'}" in summary_lines(ctx)
