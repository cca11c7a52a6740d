"""The one folder staging: a whole folder or nothing, removed on any failure, and what a killed run left is
removed by the next run (only where that run is gone)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cladebench.paths import staged_folder

KILLED = """
import os, sys
from cladebench.paths import staged_folder
with staged_folder(sys.argv[1], tag="t") as staging:
    (staging / "half.bin").write_bytes(b"x")
    print(staging, flush=True)
    os.kill(os.getpid(), 9)
"""


def test_a_whole_folder_or_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with staged_folder(out, tag="t") as staging:
        (staging / "a.txt").write_text("a")
        assert not out.exists()
    assert (out / "a.txt").read_text() == "a"
    with pytest.raises(KeyboardInterrupt), staged_folder(tmp_path / "other", tag="t") as staging:
        (staging / "b.txt").write_text("b")
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(OSError), staged_folder(out, tag="t"):  # never over a folder that holds something
        pass
    assert (out / "a.txt").read_text() == "a" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_killed_run_s_folder_is_removed_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "out"
    killed = subprocess.run([sys.executable, "-c", KILLED, str(out)], capture_output=True, text=True, check=False)
    assert killed.returncode == -signal.SIGKILL
    left = Path(killed.stdout.strip())
    assert left.is_dir() and not out.exists()
    with staged_folder(out, tag="t") as staging:
        (staging / "c.txt").write_text("c")
    assert not left.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_folder_staged_on_another_host_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder shared between machines: a pid made elsewhere says nothing here, so its staging is never removed."""
    out = tmp_path / "out"
    killed = subprocess.run([sys.executable, "-c", KILLED, str(out)], capture_output=True, text=True, check=False)
    left = Path(killed.stdout.strip())
    monkeypatch.setattr(socket, "gethostname", lambda: "another-machine")
    with staged_folder(out, tag="t") as staging:
        (staging / "c.txt").write_text("c")
    assert left.is_dir() and (out / "c.txt").read_text() == "c"


KILLED_MID_COMMIT = """
import os, sys
from cladebench.paths import staged_folder
renames = []
real_rename = os.rename
def rename(source, destination):
    renames.append(destination)
    if len(renames) == 2:  # the previous output is inside the staging folder, the new one not yet in place
        os.kill(os.getpid(), 9)
    real_rename(source, destination)
os.rename = rename
with staged_folder(sys.argv[1], tag="t", replace=True) as staging:
    (staging / "rows.txt").write_text("second")
"""


def test_a_replacing_commit_keeps_the_old_output_or_the_new_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with staged_folder(out, tag="t") as staging:
        (staging / "rows.txt").write_text("first")
    with pytest.raises(KeyboardInterrupt), staged_folder(out, tag="t", replace=True) as staging:
        (staging / "rows.txt").write_text("half")
        raise KeyboardInterrupt
    assert (out / "rows.txt").read_text() == "first" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # kill -9 between the two renames: no output at all, until the next run puts the previous one back.
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_COMMIT, str(out)], capture_output=True, text=True,
                            check=False)
    assert killed.returncode == -signal.SIGKILL and not out.exists()
    with pytest.raises(OSError), staged_folder(out, tag="t"):  # cleaned first: the previous output is back
        pass
    assert (out / "rows.txt").read_text() == "first" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with staged_folder(out, tag="t", replace=True) as staging:
        (staging / "rows.txt").write_text("second")
    assert (out / "rows.txt").read_text() == "second" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("target", ["empty", "missing"])
def test_a_symbolic_link_is_refused_before_any_work(tmp_path: Path, target: str) -> None:
    """A link as the output (to an empty folder, or dangling) cannot take the rename: refused in one line naming
    the output as given, before the block runs, the link and its target left as they were."""
    from cladebench.errors import CladebenchError

    (tmp_path / "empty").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / target)
    ran = []
    with pytest.raises(CladebenchError, match=f"^{link} is a symbolic link"), staged_folder(link, tag="t"):
        ran.append(True)
    assert not ran and link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["empty", "link"]
    assert not any((tmp_path / "empty").iterdir())
