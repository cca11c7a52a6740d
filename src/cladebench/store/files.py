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
    without write permission, a read-only file system, a link to nothing (the output or a folder above it); with
    ``folder``, also a ``path`` that is a file.

    Probes the folder the output will be created in (``path`` itself when it is an existing folder, else its
    nearest existing ancestor) by making and removing a hidden folder there; nothing else is touched.
    """
    target = Path(path)
    for link in (target, *target.parents):  # else "file exists" (or a loop) when the output is made, after the work
        if link.is_symlink() and not link.exists():
            raise CladebenchError(f"{link} is a symbolic link to {os.readlink(link)}, which leads nowhere (a missing "
                                  "path or a loop): remove the link or choose another path")
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
