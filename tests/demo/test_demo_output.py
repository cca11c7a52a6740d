"""`cladebench demo --out`: what the demo replaces (a previous demo, finished or killed), and what it refuses.

The demo's steps are replaced by none here: what is under test is the output folder, not the steps (test_demo.py
runs them all)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cladebench.cli import main
from cladebench.curate import staging
from cladebench.curate.staging import MARKER_NAME, read_marker
from cladebench.demo import run as demo_run


@pytest.fixture
def no_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_run, "DEMO_STEPS", {})


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


# --- a rerun interrupted while it replaced the previous demo ---------------------------------------------


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped): the run that was interrupted."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _as_if_exited(folder: Path) -> None:
    """Rewrite a marker of this process as a process that has exited would have left it."""
    marker = read_marker(folder)
    (folder / MARKER_NAME).write_text(json.dumps({**marker, "pid": _dead_pid()}))


def test_a_ctrl_c_while_the_previous_demo_is_removed_leaves_nothing_a_rerun_refuses(
        tmp_path: Path, no_steps: None, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "demo"
    assert _demo(out) == 0
    (out / "first-run.txt").write_text("x")
    real_rmtree = shutil.rmtree

    def interrupted(path: Path, *args: object, **kwargs: object) -> None:
        # A removal stopped midway, at its worst: the marker and summary already gone, the rest still there.
        for name in (MARKER_NAME, "summary.json"):
            (Path(path) / name).unlink(missing_ok=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(staging.shutil, "rmtree", interrupted)
    assert _demo(out) == 130
    monkeypatch.setattr(staging.shutil, "rmtree", real_rmtree)
    # The demo's folder is whole: the previous one was moved aside in one rename before its removal began.
    assert read_marker(out)["writer"] == "demo" and not (out / "first-run.txt").exists()
    leftovers = staging.staging_folders(out)
    assert len(leftovers) == 1
    _as_if_exited(leftovers[0])
    assert _demo(out) == 0
    assert (out / "summary.json").is_file() and staging.staging_folders(out) == []


def test_a_rerun_killed_between_setting_aside_and_writing_is_put_back_then_replaced(tmp_path: Path,
                                                                                    no_steps: None) -> None:
    out = tmp_path / "demo"
    assert _demo(out) == 0
    # As a run killed right after its rename leaves it: the previous demo inside a staging folder, no demo folder.
    aside = tmp_path / f".demo{staging.STAGING_TAG}{_dead_pid()}-abc"
    aside.mkdir()
    out.rename(aside / staging.PREVIOUS_NAME)
    (aside / MARKER_NAME).write_text(json.dumps({"writer": "demo", "pid": _dead_pid(),
                                                 "host": socket.gethostname()}))
    assert _demo(out) == 0
    assert read_marker(out)["writer"] == "demo" and (out / "summary.json").is_file()
    assert staging.staging_folders(out) == []


def test_a_user_folder_is_refused_in_one_line_and_left_as_it_was(tmp_path: Path, no_steps: None,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    (out / "nested").mkdir(parents=True)
    (out / "nested" / "data.csv").write_text("a,b\n")
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert _demo(out) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "is not an output of `cladebench demo`" in error
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    assert staging.staging_folders(out) == []
