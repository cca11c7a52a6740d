"""Two builders of one benchmark dataset for the build-race test, each run in a process of its own (spawned): the
first holds its build open until told to finish, the second tries to build the same dataset meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cladebench.benchmarks.base import build_once


def build_held(path: str, started: Any, release: Any) -> None:
    """Build ``path`` (a folder ``first`` inside), saying when the build has begun and finishing when released."""

    def build(out: Path) -> None:
        (out / "first").mkdir(parents=True)
        started.set()
        release.wait(60)

    build_once(Path(path), build)


def build_second(path: str) -> None:
    """Build ``path`` with a folder ``second`` inside, unless it is there already."""
    build_once(Path(path), lambda out: (out / "second").mkdir(parents=True))
