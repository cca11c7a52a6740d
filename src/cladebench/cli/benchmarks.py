"""The verb ``benchmarks``: every named benchmark, its tasks, where it is published, its pinned release, and
whether its data is here (mirrored under ``$CLADEBENCH_MIRROR``, built in the cache, or opened remotely), and on
stderr what in ``$CLADEBENCH_MIRROR`` is not read as a mirror (a misspelt folder, a file in a benchmark's place).

It reads the registry and looks at folders; it opens no dataset and sends no request, so it answers offline and
at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cladebench.cli.verbs import verb
from cladebench.console import warn
from cladebench.environment import variable


@dataclass(frozen=True)
class BenchmarksConfig:
    """List the named benchmarks: name, tasks, source, pinned release, and whether each is built or mirrored here."""

    json: bool = False
    """Print JSON instead of a table."""


def benchmark_rows() -> list[dict[str, object]]:
    """One row per benchmark, as the verb prints them."""
    from cladebench.benchmarks import BENCHMARKS, MIRROR_ENV

    root = variable(MIRROR_ENV)
    mirror_root = Path(root).expanduser() if root else None
    return [{"name": name, "tasks": list(b.tasks), "source": b.source,
             "release": b.release, "here": b.availability(mirror_root),
             "description": b.description} for name, b in BENCHMARKS.items()]


def mirror_notes() -> list[str]:
    """What in ``$CLADEBENCH_MIRROR`` will not be read as a mirror (a root that is not a folder, a folder that names
    no benchmark, a file in a benchmark's place), so a misspelt mirror is not silently passed over for the published
    source."""
    import difflib

    from cladebench.benchmarks import BENCHMARKS, MIRROR_ENV

    root = variable(MIRROR_ENV)
    if not root:
        return []
    folder = Path(root).expanduser()
    if not folder.is_dir():
        return [f"{MIRROR_ENV}={root}: no such folder; every benchmark is read from its published source"]
    notes = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.name in BENCHMARKS:
            if not entry.is_dir():
                notes.append(f"{MIRROR_ENV}: {entry.name} is a file, not a mirror folder; {entry.name} is read from "
                             "its published source")
            continue
        if entry.is_dir():
            close = difflib.get_close_matches(entry.name.lower(), list(BENCHMARKS), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            notes.append(f"{MIRROR_ENV}: folder {entry.name} names no benchmark{hint}; it is not read")
    return notes


@verb("benchmarks", BenchmarksConfig, "the named benchmarks: tasks, source, pinned release, built or mirrored here")
def _benchmarks(config: BenchmarksConfig) -> int:
    rows = benchmark_rows()
    for note in mirror_notes():  # on stderr: the table (or JSON) on stdout stays as it is
        warn(f"note: {note}")
    if config.json:
        print(json.dumps(rows, indent=2))
        return 0
    columns = ("name", "tasks", "release", "here", "source")
    shown = {"release": lambda v: v or "unpinned", "tasks": ", ".join}
    cells = [[shown.get(c, str)(r[c]) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return 0
