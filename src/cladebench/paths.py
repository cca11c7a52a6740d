"""Where an output may go relative to what a command reads: never onto, into or around an input.

Every verb that writes a folder (the builders, ``demo``, ``load``, ``subset``) checks this before reading
anything: an output equal to an input, inside one or holding one would let ``--overwrite`` delete what is
being read, or a build read its own output. It sits below the store and the builders so both can use it.

Example:
    >>> relation(Path("/data/export/out"), Path("/data/export"))
    'is inside'
    >>> try:
    ...     check_not_an_input(Path("/data/export"), [Path("/data/export/photos.csv")])
    ... except UsageError as refused:
    ...     print(str(refused).split(":")[0])
    --out /data/export contains the input /data/export/photos.csv
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from cladebench.errors import UsageError


def absolute(path: str | Path) -> Path:
    """``path`` made absolute (``~`` expanded) without following symbolic links."""
    return Path(os.path.abspath(Path(path).expanduser()))


def relation(out: Path, source: Path) -> str | None:
    """How ``out`` overlaps ``source`` ("is", "is inside", "contains"), or None when they do not."""
    if out == source:
        return "is"
    if out.is_relative_to(source):
        return "is inside"
    if source.is_relative_to(out):
        return "contains"
    return None


def check_not_an_input(out: str | Path, inputs: Iterable[str | Path | None], out_option: str = "--out") -> None:
    """A :class:`UsageError` when ``out`` is an input, is inside one or contains one (symbolic links followed,
    so a link cannot hide the overlap). ``None`` inputs (options not given) are skipped."""
    out_paths = {absolute(out), absolute(out).resolve()}
    for source in inputs:
        if source is None:
            continue
        for source_path in {absolute(source), absolute(source).resolve()}:
            for out_path in out_paths:
                found = relation(out_path, source_path)
                if found is not None:
                    raise UsageError(f"{out_option} {out} {found} the input {source}: the output must be a "
                                     "folder of its own, apart from what is read")
