"""A real Ctrl-C (SIGINT to a ``cladebench load images`` process) at several moments of its Lance write: exit 130
and no output, or, when it came as the work ended, the whole output; never an aborted interpreter ("Fatal Python
error", exit -6), which about one Ctrl-C in ten used to give."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cladebench
from cladebench import store
from cladebench.curate.staging import staging_folders
from helpers.images import picture
from helpers.own_images import write_small_backbone

_PHOTOS = 3 * 60
_DELAYS_S = (0.0, 0.05, 0.1, 0.2, 0.3, 0.45)
"""Seconds after the write phase starts (its ``.dataset`` folder appears) that the Ctrl-C comes."""


def _start(root: Path, out: Path, backbone: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(cladebench.__file__).parents[1]), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "cladebench", "load", "images", str(root), "--out", str(out), "--taxonomy",
               str(backbone)]  # a small backbone: the processes start sooner
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_ctrl_c_during_the_lance_write_exits_130_with_the_output_absent_or_whole(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    for number in range(_PHOTOS):
        folder = root / ("Bufo bufo", "Vulpes vulpes", "Sus scrofa")[number % 3]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{number:04d}.jpg").write_bytes(picture(number, size=(240, 180)))
    outs = [tmp_path / f"out{i}" for i in range(len(_DELAYS_S))]
    backbone = write_small_backbone(tmp_path / "backbone.parquet")
    processes = [_start(root, out, backbone) for out in outs]  # side by side: the whole test in the time of a few loads
    pending = dict(enumerate(processes))
    deadline = time.monotonic() + 120
    writing: dict[int, float] = {}
    while pending and time.monotonic() < deadline:
        now = time.monotonic()
        for i, process in list(pending.items()):
            if process.poll() is not None:
                del pending[i]
            elif i not in writing and any((s / ".dataset").exists() for s in staging_folders(outs[i])):
                writing[i] = now
            elif i in writing and now - writing[i] >= _DELAYS_S[i]:
                process.send_signal(signal.SIGINT)
                del pending[i]
        time.sleep(0.005)
    for process, out in zip(processes, outs, strict=True):
        output, _ = process.communicate(timeout=120)
        last = output.strip().splitlines()[-1] if output.strip() else ""
        assert "Fatal Python error" not in output, output[-2000:]
        if process.returncode == 130:
            assert last == "cladebench load: interrupted" and not out.exists(), output[-2000:]
        else:  # the work was done when the Ctrl-C came (a shell shows -2, death by SIGINT, as 130 too)
            assert process.returncode in (0, -signal.SIGINT), output[-2000:]
            assert store.open_dataset(out).count_rows() == _PHOTOS
        assert not staging_folders(out)
    assert sum(p.returncode == 130 for p in processes) >= len(processes) // 2  # most came during the write
