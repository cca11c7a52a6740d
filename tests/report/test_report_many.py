"""A report of many runs: a progress line on stderr once it takes a while, and the gallery photos that several runs
share decoded once (runs on the same examples show many of the same photos)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("jinja2", reason="reports need jinja2 (the report extra)")
pytest.importorskip("matplotlib", reason="reports need matplotlib (the report extra)")

from cladebench.evaluate.record import RunRecord
from cladebench.report import render, write_report
from cladebench.report.sections import ordered_sections
from cladebench.report.thumbnails import read_photos
from helpers.checkpoint_runs import deep_checkpoint_runs


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three copies of one real zero-shot run (with predictions and a dataset of photos)."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("many")
    deep_checkpoint_runs(root, {"zs": []})
    out = []
    for i in range(3):
        shutil.copytree(root / "zs", root / f"copy-{i}")
        out.append(root / f"copy-{i}")
    return out


def test_a_slow_report_says_what_it_is_making_on_stderr(copies, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(render, "PROGRESS_AFTER", 0.0)  # as if the report had already taken long
    write_report(copies, tmp_path / "r.html", progress=True)
    lines = capsys.readouterr().err.splitlines()
    sections = ordered_sections()
    assert lines[0].startswith(f"report: 3 runs: {sections[0].name} (1 of {len(sections)} sections) (")
    assert len(lines) == len(sections) + 2 and lines[-2].startswith("report: the answer (")
    assert lines[-1].startswith("report: writing the page (")
    write_report(copies, tmp_path / "quiet.html")  # progress off (the library's default)
    monkeypatch.setattr(render, "PROGRESS_AFTER", 3600.0)
    write_report(copies, tmp_path / "fast.html", progress=True)  # on, but done before it would speak
    assert capsys.readouterr().err == ""


def test_photos_shown_by_several_runs_are_read_once(copies) -> None:
    record = RunRecord.read(copies[0] / "run.json")
    dataset = record.provenance["dataset"]
    uuids = [str(u) for u in record.predictions(copies[0] / "run.json").column("uuid").to_pylist()[:5]]
    cache: dict = {}
    first, note = read_photos(dataset["uri"], dataset["version"], uuids, cache)
    assert note is None and set(first) == set(uuids) and all(p.thumbnail for p in first.values())
    moved = Path(dataset["uri"]).with_name("moved.lance")
    shutil.move(dataset["uri"], moved)  # the dataset is not read again for the next run's same photos
    try:
        again, note = read_photos(dataset["uri"], dataset["version"], uuids[1:], cache)
        assert note is None and again == {u: first[u] for u in uuids[1:]}
        _, note = read_photos(dataset["uri"], dataset["version"], uuids[1:])  # without the report's cache
        assert note.startswith("photos not available")
    finally:
        shutil.move(moved, dataset["uri"])
