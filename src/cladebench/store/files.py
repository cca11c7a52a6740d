"""Before and around writing outputs: the writability probe every output gets before any work, and whether a
process that left a staging folder still runs. (Writing a file whole is :func:`cladebench.paths.atomic_write`.)
"""

from __future__ import annotations

import os
import uuid as uuidlib
from pathlib import Path

from cladebench.errors import CladebenchError, environment_error


def check_writable(path: str | Path, *, folder: bool = False) -> None:
    """Refuse, before any work, an output ``path`` that cannot be written: a parent that is a file, a folder
    without write permission, a read-only file system; with ``folder``, also a ``path`` that is a file.

    Probes the folder the output will be created in (``path`` itself when it is an existing folder, else its
    nearest existing ancestor) by making and removing a hidden folder there; nothing else is touched.
    """
    target = Path(path)
    if folder and target.exists() and not target.is_dir():
        raise CladebenchError(f"{target} is a file; the output is a folder: choose another path")
    probe_in = target if target.is_dir() else target.parent
    while not probe_in.exists() and probe_in != probe_in.parent:
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        raise CladebenchError(f"cannot write {target}: {probe_in} is a file, not a folder")
    probe = probe_in / f".cladebench-probe-{os.getpid()}-{uuidlib.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError as exc:
        error = environment_error(OSError(exc.errno, exc.strerror), probe_in)  # the folder, not the probe's name
        raise (error or CladebenchError(f"cannot write in {probe_in}: {exc}")) from None
    probe.rmdir()


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` may still run: only a pid proven gone is dead (this process, another user's, a
    pid of 0 or less, and any on Windows, where probing would terminate it, count as alive). A zombie (killed,
    its exit not yet collected by its parent) is dead: it answers a signal probe but runs nothing, and a folder
    it left would otherwise look busy until its parent exits."""
    if pid == os.getpid() or pid <= 0 or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` is a zombie, where /proc says (Linux); False where it cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 1:].split()[:1] == ["Z"]  # the state follows the command, which may hold ")"
