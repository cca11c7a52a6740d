"""The one staged-output commit every builder, the demo and the demo model use: what it may replace, what it
refuses, and what a killed run leaves for the next to clean."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cladebench.curate import staging as output
from cladebench.curate.staging import (
    MARKER_NAME,
    PREVIOUS_NAME,
    OutputTarget,
    check_not_an_input,
    check_replaceable,
    clean_leftovers,
    prepare_in_place,
    read_marker,
    staged_output,
    staging_folders,
)
from cladebench.errors import CladebenchError, UsageError

WRITER = "build example"


def _build(out: Path, rows: str, **options) -> Path:
    with staged_output(OutputTarget(out, writer=WRITER, **options)) as staging:
        (staging / "rows.txt").write_text(rows)
    return out


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def _fake_staging(out: Path, writer: str, pid: int, host: str | None = None) -> Path:
    """A staging folder as a run killed mid-build leaves it."""
    import socket

    staging = out.parent / f".{out.name}{output.STAGING_TAG}{pid}-abc"
    (staging / output.WORK_NAME).mkdir(parents=True)
    (staging / output.WORK_NAME / "build.duckdb").write_bytes(b"x" * 100)
    (staging / MARKER_NAME).write_text(json.dumps({"writer": writer, "pid": pid,
                                                   "host": host or socket.gethostname()}))
    return staging



# --- what --overwrite may replace ----------------------------------------------------------------


def test_a_build_is_marked_and_replaces_only_its_own_previous_output(tmp_path: Path) -> None:
    out = _build(tmp_path / "out", "first")
    assert read_marker(out)["writer"] == WRITER and (out / "rows.txt").read_text() == "first"
    with pytest.raises(CladebenchError, match="already exists and is not empty") as refused:
        _build(out, "second")
    assert refused.value.exit_code == 1 and (out / "rows.txt").read_text() == "first"
    _build(out, "second", overwrite=True)
    assert (out / "rows.txt").read_text() == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging, no previous output left
    assert not (out / PREVIOUS_NAME).exists()


def test_a_users_folder_is_never_replaced(tmp_path: Path) -> None:
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    (precious / "figures").mkdir()
    (precious / "figures" / "a.png").write_text("png")
    before = _tree(precious)
    with pytest.raises(CladebenchError, match="is not an output of `cladebench build example`") as refused:
        _build(precious, "rows", overwrite=True)
    assert refused.value.exit_code == 1 and "\n" not in str(refused.value)
    assert _tree(precious) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis"]


def test_overwrite_refuses_what_the_writer_did_not_write_and_names_it(tmp_path: Path) -> None:
    out = _build(tmp_path / "out", "first")
    assert read_marker(out)["contents"] == ["rows.txt"]
    (out / "notes.txt").write_text("my notes")
    (out / "mine.lance" / "data").mkdir(parents=True)
    (out / "mine.lance" / "data" / "a.lance").write_bytes(b"rows")
    before = _tree(out)
    with pytest.raises(CladebenchError, match=r"mine\.lance, notes\.txt") as refused:
        _build(out, "second", overwrite=True)
    assert refused.value.exit_code == 1 and "\n" not in str(refused.value)
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    (out / "notes.txt").unlink()
    shutil.rmtree(out / "mine.lance")
    _build(out, "second", overwrite=True)
    assert (out / "rows.txt").read_text() == "second"


def _build_nested(out: Path, **options) -> Path:
    """An output with a subfolder of files and a Lance dataset inside it, as ``build coobserved`` and ``build
    finegrained`` write them."""
    with staged_output(OutputTarget(out, writer=WRITER, **options)) as staging:
        (staging / "data" / "table.lance" / "_versions").mkdir(parents=True)
        (staging / "data" / "table.lance" / "_versions" / "1.manifest").write_text("v1")
        (staging / "data" / "rows.parquet").write_text("rows")
        (staging / "README.md").write_text("card")
    return out


def test_overwrite_refuses_a_users_file_inside_a_folder_the_writer_wrote(tmp_path: Path) -> None:
    out = _build_nested(tmp_path / "out")
    (out / "data" / "notes.txt").write_text("my notes")
    (out / "data" / "mine").mkdir()
    (out / "data" / "mine" / "a.csv").write_text("a")
    before = _tree(out)
    with pytest.raises(CladebenchError, match=r"holds data/mine, data/notes\.txt, which") as refused:
        _build_nested(out, overwrite=True)
    assert refused.value.exit_code == 1 and "\n" not in str(refused.value)
    assert _tree(out) == before
    (out / "data" / "notes.txt").unlink()
    shutil.rmtree(out / "data" / "mine")
    # a Lance dataset is its own: the files a later version adds (an embedding column) are the output's
    (out / "data" / "table.lance" / "_versions" / "2.manifest").write_text("v2")
    _build_nested(out, overwrite=True)
    assert sorted(_tree(out)) == [MARKER_NAME, "README.md", "data/rows.parquet",
                                  "data/table.lance/_versions/1.manifest"]


def test_a_marker_listing_only_top_level_names_vouches_for_what_is_below_them(tmp_path: Path) -> None:
    out = _build_nested(tmp_path / "out")
    marker = read_marker(out)
    marker["contents"] = ["README.md", "data"]  # as markers were written before nested files were listed
    (out / MARKER_NAME).write_text(json.dumps(marker))
    (out / "data" / "extra.txt").write_text("from an older version")
    _build_nested(out, overwrite=True)
    assert not (out / "data" / "extra.txt").exists()


def test_a_run_whose_output_place_is_taken_mid_commit_says_so_and_leaves_the_other(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    out = _build(tmp_path / "out", "old")
    real_rename = os.rename
    renames: list[object] = []

    def rename(source, target) -> None:
        real_rename(source, target)
        renames.append(target)
        if len(renames) == 1:  # the previous output is set aside: another run with --overwrite commits now
            monkeypatch.setattr(os, "rename", real_rename)
            _build(out, "theirs", overwrite=True)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(CladebenchError, match="while this build was committing") as refused:
        _build(out, "mine", overwrite=True)
    assert refused.value.exit_code == 1 and "\n" not in str(refused.value)
    assert (out / "rows.txt").read_text() == "theirs" and read_marker(out)["writer"] == WRITER


def test_a_marker_without_contents_is_replaced_whole_as_before(tmp_path: Path) -> None:
    out = _build(tmp_path / "out", "first")
    marker = read_marker(out)
    del marker["contents"]
    (out / MARKER_NAME).write_text(json.dumps(marker))
    (out / "extra.txt").write_text("from an older version")
    _build(out, "second", overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [MARKER_NAME, "rows.txt"]


def test_another_commands_output_is_not_replaced(tmp_path: Path) -> None:
    other = tmp_path / "other"
    with staged_output(OutputTarget(other, writer="build other")) as staging:
        (staging / "rows.txt").write_text("theirs")
    with pytest.raises(CladebenchError, match="names `cladebench build other`"):
        _build(other, "mine", overwrite=True)
    assert (other / "rows.txt").read_text() == "theirs"


def test_a_file_or_a_link_at_out_is_refused_even_with_overwrite(tmp_path: Path) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    with pytest.raises(CladebenchError, match="is not a folder") as refused:
        _build(file, "rows", overwrite=True)
    assert refused.value.exit_code == 1 and file.read_text() == "mine"
    target = _build(tmp_path / "real", "first")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(CladebenchError, match="symbolic link"):
        _build(link, "second", overwrite=True)
    assert (target / "rows.txt").read_text() == "first" and link.is_symlink()


def test_an_empty_folder_is_fine_without_overwrite(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    assert (_build(tmp_path / "out", "rows") / "rows.txt").read_text() == "rows"


def test_a_failed_build_leaves_the_previous_output_and_no_staging(tmp_path: Path) -> None:
    out = _build(tmp_path / "out", "first")
    with pytest.raises(RuntimeError, match="midway"), staged_output(OutputTarget(out, writer=WRITER,
                                                                                 overwrite=True)) as staging:
        (staging / "rows.txt").write_text("half")
        raise RuntimeError("midway")
    assert _tree(out) == {MARKER_NAME: (out / MARKER_NAME).read_text(), "rows.txt": "first"}
    assert staging_folders(out) == []


# --- an output is never an input -----------------------------------------------------------------


def test_an_output_overlapping_an_input_is_a_usage_error(tmp_path: Path) -> None:
    export = tmp_path / "data" / "export"
    export.mkdir(parents=True)
    (export / "photos.csv").write_text("rows")
    for out, relation in ((export, "is the input"), (export / "built", "is inside the input"),
                          (tmp_path / "data", "contains the input"), (tmp_path, "contains the input")):
        with pytest.raises(UsageError, match=relation) as refused:
            _build(out, "rows", overwrite=True, inputs=(export,))
        assert refused.value.exit_code == 2
    assert (export / "photos.csv").read_text() == "rows" and sorted(p.name for p in export.iterdir()) == [
        "photos.csv"]
    check_not_an_input(tmp_path / "data" / "built", [export, None])  # a sibling is fine


def test_a_link_does_not_hide_an_overlap(tmp_path: Path) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (tmp_path / "alias").symlink_to(export)
    with pytest.raises(UsageError, match="is inside the input"):
        check_not_an_input(tmp_path / "alias" / "out", [export])


# --- writing where one cannot --------------------------------------------------------------------


def test_an_output_that_cannot_be_created_is_one_line_exit_1(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CladebenchError, match="cannot write") as refused:
        _build(tmp_path / "file" / "out", "rows")
    assert refused.value.exit_code == 1 and "\n" not in str(refused.value)
    with pytest.raises(CladebenchError, match="cannot write"):
        prepare_in_place(OutputTarget(tmp_path / "file" / "out", writer=WRITER))


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="permissions do not bind root")
def test_a_read_only_parent_is_one_line_exit_1(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(CladebenchError, match="cannot write"):
            _build(locked / "out", "rows")
        with pytest.raises(CladebenchError, match="cannot write"):
            prepare_in_place(OutputTarget(locked, writer=WRITER))
    finally:
        locked.chmod(0o755)


# --- what killed runs leave ----------------------------------------------------------------------


def _run_killed(script: str, tmp_path: Path) -> None:
    """Run ``script`` in a fresh interpreter that kills itself with SIGKILL (kill -9) where the script says."""
    code = textwrap.dedent(script)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == -9, result.stderr


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_staging_folder_of_a_killed_build_is_cleaned_by_the_rerun(tmp_path: Path) -> None:
    _run_killed("""
        import os, signal
        from pathlib import Path
        from cladebench.curate.staging import OutputTarget, staged_output, work_dir
        with staged_output(OutputTarget(Path("out"), writer="build example")) as staging:
            (work_dir(staging) / "build.duckdb").write_bytes(b"x" * 1000)
            os.kill(os.getpid(), signal.SIGKILL)
    """, tmp_path)
    [left] = staging_folders(tmp_path / "out")
    assert (left / ".work" / "build.duckdb").is_file() and not (tmp_path / "out").exists()
    _build(tmp_path / "out", "rows")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (tmp_path / "out" / "rows.txt").read_text() == "rows"


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_build_killed_between_its_two_renames_gets_its_previous_output_back(tmp_path: Path) -> None:
    _build(tmp_path / "out", "first")
    _run_killed("""
        import os, signal
        from pathlib import Path
        from cladebench.curate import staging as output
        renames = []
        real_rename = os.rename
        def rename(source, destination):
            renames.append(destination)
            if len(renames) == 2:  # the previous output is in the staging folder; the new one not yet in place
                os.kill(os.getpid(), signal.SIGKILL)
            real_rename(source, destination)
        output.os.rename = rename
        with output.staged_output(output.OutputTarget(Path("out"), writer="build example", overwrite=True)) as s:
            (s / "rows.txt").write_text("second")
    """, tmp_path)
    assert not (tmp_path / "out").exists()
    [left] = staging_folders(tmp_path / "out")
    assert (left / PREVIOUS_NAME / "rows.txt").read_text() == "first"
    assert clean_leftovers(tmp_path / "out", WRITER) == [left]
    assert (tmp_path / "out" / "rows.txt").read_text() == "first"  # put back, not lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_killed_removal_of_the_replaced_output_is_finished_by_the_next_run(tmp_path: Path) -> None:
    out = _build(tmp_path / "out", "first")
    (out / PREVIOUS_NAME).mkdir()
    (out / PREVIOUS_NAME / "rows.txt").write_text("older")
    marker = json.loads((out / MARKER_NAME).read_text())
    (out / MARKER_NAME).write_text(json.dumps({**marker, "pid": _dead_pid()}))
    _build(out, "second", overwrite=True)
    assert not (out / PREVIOUS_NAME).exists() and (out / "rows.txt").read_text() == "second"


def test_only_a_dead_runs_own_staging_folders_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    dead = _fake_staging(out, WRITER, _dead_pid())
    alive = _fake_staging(out, WRITER, os.getppid())  # a running process (pytest's parent)
    other_writer = _fake_staging(out, "build other", _dead_pid())
    other_host = _fake_staging(out, WRITER, dead_pid := _dead_pid(), host="another-machine")
    unmarked = out.parent / f".{out.name}{output.STAGING_TAG}{dead_pid}-nomarker"
    unmarked.mkdir()
    (unmarked / "part").write_text("?")
    assert clean_leftovers(out, WRITER) == [dead]
    assert not dead.exists()
    for kept in (alive, other_writer, other_host, unmarked):
        assert kept.is_dir()


# --- in place (the demo) -------------------------------------------------------------------------


def test_in_place_marks_first_and_replaces_only_its_own(tmp_path: Path) -> None:
    out = prepare_in_place(OutputTarget(tmp_path / "demo", writer="demo"))
    assert read_marker(out)["writer"] == "demo"
    (out / "half.lance").mkdir()  # a run killed midway: no summary yet, but the marker says whose it is
    prepare_in_place(OutputTarget(out, writer="demo", overwrite=True))
    assert [p.name for p in out.iterdir()] == [MARKER_NAME]
    (out / "mine.txt").write_text("x")
    (out / MARKER_NAME).unlink()
    with pytest.raises(CladebenchError, match="is not an output of `cladebench demo`"):
        prepare_in_place(OutputTarget(out, writer="demo", overwrite=True))
    assert (out / "mine.txt").read_text() == "x"
    legacy = OutputTarget(out, writer="demo", overwrite=True, legacy=lambda folder: (folder / "mine.txt").is_file())
    prepare_in_place(legacy)
    assert [p.name for p in out.iterdir()] == [MARKER_NAME]


def test_a_commit_the_filesystem_refuses_is_exit_1_and_keeps_the_previous_output(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    out = _build(tmp_path / "out", "first")

    def refuse(source, destination):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(output.os, "rename", refuse)
    with pytest.raises(CladebenchError, match="cannot put the output in place") as refused:
        _build(out, "second", overwrite=True)
    assert refused.value.exit_code == 1 and "\n" not in str(refused.value)
    assert (out / "rows.txt").read_text() == "first" and staging_folders(out) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="permissions do not bind root")
def test_a_read_only_previous_output_is_refused_before_the_build(tmp_path: Path) -> None:
    out = _build(tmp_path / "out", "first")
    out.chmod(0o555)
    try:
        with pytest.raises(CladebenchError, match="read-only"):
            check_replaceable(OutputTarget(out, writer=WRITER, overwrite=True))
    finally:
        out.chmod(0o755)


def test_a_failed_commit_never_removes_the_previous_output(tmp_path: Path, monkeypatch) -> None:
    out = _build(tmp_path / "out", "first")
    real_rename, calls = os.rename, []

    def flaky(source, destination):
        calls.append(destination)
        if len(calls) in (2, 3):  # the new output cannot go in place, nor (at once) the previous one back
            raise OSError(5, "Input/output error")
        real_rename(source, destination)

    monkeypatch.setattr(output.os, "rename", flaky)
    with pytest.raises(CladebenchError, match="cannot put the output in place"):
        _build(out, "second", overwrite=True)
    assert (out / "rows.txt").read_text() == "first" and staging_folders(out) == []
