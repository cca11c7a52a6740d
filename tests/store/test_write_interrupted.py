"""A Ctrl-C while ``store.write_dataset`` streams rows into Lance: the process ends as an interrupt (its own
handler runs, exit 130), never aborted by Lance's reading thread calling into a shutting-down interpreter, and
the folder it started is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cladebench
from cladebench import store
from cladebench.errors import DatasetNotFoundError

_CHILD = """
import sys, time
from pathlib import Path
import pyarrow as pa
from cladebench import store

def batches():
    for i in range(100_000):
        if i == 3:
            Path(sys.argv[2]).write_text("writing")
        time.sleep(0.02)  # a batch being made (images read and decoded) when the Ctrl-C comes
        yield pa.RecordBatch.from_pylist([{"uuid": f"u{i}", "image": b"x" * 100, "species": "Bufo bufo"}])

try:
    store.write_dataset(batches(), sys.argv[1])
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_ctrl_c_mid_write_exits_as_an_interrupt_and_leaves_no_dataset(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(cladebench.__file__).parents[1])}
    for attempt in range(3):  # the abort came on about half of the interrupts
        out, started = tmp_path / f"out{attempt}.lance", tmp_path / f"started{attempt}"
        process = subprocess.Popen([sys.executable, "-c", _CHILD, str(out), str(started)], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=120)
        assert (process.returncode, output.strip()) == (130, "interrupted")
        assert not out.exists()
        with pytest.raises(DatasetNotFoundError):
            store.open_dataset(out)
