"""The verb ``benchmarks``: every named benchmark, its tasks, where it is published, its pinned release, and
whether its data is here (mirrored under ``$CLADEBENCH_MIRROR``, built in the cache, or opened remotely).

It reads the registry and looks at folders; it opens no dataset and sends no request, so it answers offline and
at once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cladebench.cli.verbs import verb


@dataclass(frozen=True)
class BenchmarksConfig:
    """List the named benchmarks: name, tasks, source, pinned release, and whether each is built or mirrored here."""

    json: bool = False
    """Print JSON instead of a table."""


def benchmark_rows() -> list[dict[str, Any]]:
    """One row per benchmark, as the verb prints them."""
    from cladebench.evaluate.benchmarks import BENCHMARKS, MIRROR_ENV

    root = os.environ.get(MIRROR_ENV)
    mirror_root = Path(root).expanduser() if root else None
    return [{"name": name, "tasks": list(b.tasks), "source": b.source,
             "release": b.release, "here": b.availability(mirror_root),
             "description": b.description} for name, b in BENCHMARKS.items()]


@verb("benchmarks", BenchmarksConfig, "the named benchmarks: tasks, source, pinned release, built or mirrored here")
def _benchmarks(config: BenchmarksConfig) -> int:
    rows = benchmark_rows()
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
