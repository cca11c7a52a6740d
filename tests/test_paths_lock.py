"""The one lock: a folder locked itself (no file left), a lock file otherwise; refused at once, after a bounded
wait, or waited for; released when its holder is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cladebench.errors import CladebenchError
from cladebench.paths import held_lock

HOLD = """
import sys, time
from cladebench.paths import held_lock
with held_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder(path: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_a_held_lock_is_refused_waited_for_and_freed_by_a_kill(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ("out" if kind == "folder" else "x.lock")
    if kind == "folder":
        path.mkdir()
    holder = _holder(path)
    try:
        with pytest.raises(CladebenchError, match="busy now"), held_lock(path, wait_s=0, busy="busy now"):
            pass
        started = time.monotonic()
        with pytest.raises(CladebenchError, match="is locked by another process"), held_lock(path, wait_s=0.3):
            pass
        assert time.monotonic() - started >= 0.3
        waited: list[bool] = []
        holder.send_signal(signal.SIGKILL)  # the kernel releases the lock of a killed holder
        with held_lock(path, on_wait=lambda: waited.append(True)):
            pass
    finally:
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # a folder's lock leaves no file beside it
