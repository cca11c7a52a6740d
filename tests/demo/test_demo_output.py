"""`cladebench demo --out`: what the demo replaces (a previous demo, finished or killed), and what it refuses.

The demo's steps are replaced by none here: what is under test is the output folder, not the steps (test_demo.py
runs them all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cladebench import demo
from cladebench.cli import main
from cladebench.curate.staging import MARKER_NAME, read_marker


@pytest.fixture
def no_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "DEMO_STEPS", {})


def _demo(out: Path, *options: str) -> int:
    return main(["demo", "--out", str(out), "--images", "8", "--pairs", "2", *options])


def test_the_demo_folder_is_marked_first(tmp_path: Path, no_steps: None) -> None:
    assert _demo(tmp_path / "demo") == 0
    assert read_marker(tmp_path / "demo")["writer"] == "demo"
    assert (tmp_path / "demo" / "summary.json").is_file()


def test_overwrite_replaces_a_demo_killed_midway(tmp_path: Path, no_steps: None) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / MARKER_NAME).write_text(json.dumps({"writer": "demo", "pid": 1, "host": "h"}))
    (out / "fine-grained.lance").mkdir()  # half-written, and no summary.json: killed before the end
    assert _demo(out) == 0  # a previous demo is replaced as the command is written, no --overwrite needed
    assert not (out / "fine-grained.lance").exists() and (out / "summary.json").is_file()


def test_the_demo_reruns_as_written(tmp_path: Path, no_steps: None) -> None:
    out = tmp_path / "demo"
    assert _demo(out) == 0
    (out / "left-by-the-first-run.txt").write_text("x")
    assert _demo(out) == 0 and _demo(out) == 0
    assert not (out / "left-by-the-first-run.txt").exists() and read_marker(out)["writer"] == "demo"


def test_a_user_folder_is_refused_with_or_without_overwrite(tmp_path: Path, no_steps: None) -> None:
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    assert _demo(out) == 1 and _demo(out, "--overwrite") == 1
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]


def test_overwrite_replaces_a_demo_from_before_markers(tmp_path: Path, no_steps: None) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"cladebench_version": "0.1", "steps": {}}))
    (out / "old.lance").mkdir()
    assert _demo(out, "--overwrite") == 0
    assert not (out / "old.lance").exists() and read_marker(out)["writer"] == "demo"


def test_overwrite_refuses_a_folder_with_someone_elses_summary(tmp_path: Path, no_steps: None,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "summary.json").write_text('{"accuracy": 0.9}')
    assert _demo(out, "--overwrite") == 1
    assert "is not an output of `cladebench demo`" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["summary.json"]


def test_an_output_path_that_is_a_file_or_under_one_is_exit_1(tmp_path: Path, no_steps: None,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "demo.txt"
    file.write_text("mine")
    assert _demo(file, "--overwrite") == 1
    assert "is not a folder" in capsys.readouterr().err and file.read_text() == "mine"
    assert _demo(file / "demo") == 1
    error = capsys.readouterr().err
    assert "cannot write" in error and error.count("\n") == 1
