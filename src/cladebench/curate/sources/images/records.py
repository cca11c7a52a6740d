"""One image as a source gives it, before its label is resolved: where it is, its bytes or where to get them.

Why a module: every reader (folder, table, shards, archive) yields the same record, so resolution, downloads,
the card and the write are written once for all of them.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cladebench.errors import CladebenchError

_NAMESPACE = uuid.UUID("5b1c7c52-3f0e-4d43-9a59-6c1b2f0e8a11")
"""UUID-5 namespace of the rows of ``load images``: the same source gives the same uuids."""


@dataclass
class ImageRecord:
    """One image of a source, with what the source says about it."""

    key: str
    """Stable id of the image within the source (a relative path, a table row's path or URL, a shard and key); the
    row's uuid is made from it."""
    where: str
    """Where a person finds it, for the failures table (``labels.csv row 3``, ``shard-0.tar key 000017``)."""
    label: str | None = None
    """The name to resolve (a folder's name, a scientific name, the deepest rank the source gives)."""
    ranks: dict[str, str] = field(default_factory=dict)
    """Rank columns the source gives itself (``kingdom`` .. ``species``), kept when the label does not resolve."""
    values: dict[str, Any] = field(default_factory=dict)
    """Canonical columns the source gives (``latitude``, ``license_name``, ``attribution``, ``source_id``, ...)."""
    image: bytes | None = None
    """The image's bytes, when the source holds them (shards, Parquet with an Image feature)."""
    path: Path | None = None
    """A local file to read, when the source points to one."""
    url: str | None = None
    """An http(s) URL to fetch through the downloader, when the source points to one."""
    set_null: list[str] = field(default_factory=list)
    """Fields the source gives but that could not be read (a latitude of 95), left null and counted in the card."""
    problem: tuple[str, str] | None = None
    """(reason, detail) when the record cannot become a row (no image given, an unreadable value)."""


_SPECIAL = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
            (stat.S_ISSOCK, "a socket"))


def special_kind(mode: int) -> str | None:
    """What a file of this ``st_mode`` is when it is not a regular file or a folder (``a named pipe``), else None:
    such a file is never read, since a pipe blocks its reader and a device never ends."""
    return next((name for test, name in _SPECIAL if test(mode)), None)


def refuse_special(path: Path, what: str = "a source") -> None:
    """A :class:`~cladebench.errors.CladebenchError` when ``path`` is a special file (see :func:`special_kind`)."""
    try:
        kind = special_kind(os.stat(path).st_mode)
    except OSError:
        return  # missing or unreadable: the reader's own message says which
    if kind is not None:
        raise CladebenchError(f"{path}: {kind}, not a regular file or folder; {what} is not read from it")


def read_local(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (a link followed once); ``ValueError`` saying why not
    when it is a special file or larger (the size it has, or grows to while read), ``OSError`` when unreadable."""
    kind = special_kind(os.stat(path).st_mode)  # before opening: opening a pipe waits for its writer
    if kind is not None:
        raise ValueError(f"{path}: {kind}, not a regular file")
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:  # swapped since the stat: no wait
        kind = special_kind(os.fstat(handle.fileno()).st_mode)
        if kind is not None:
            raise ValueError(f"{path}: {kind}, not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OverflowError(f"{path}: over the cap of {max_bytes:,} bytes")
    return data


class Uuids:
    """Row uuids from record keys: a UUID-5 of the source kind and the key, its occurrence number mixed in when a
    key repeats (a table that lists one photo twice), so a rerun gives the same uuids in the same order."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.seen: Counter[str] = Counter()

    def __call__(self, key: str) -> str:
        self.seen[key] += 1
        name = f"{self.kind}:{key}" if self.seen[key] == 1 else f"{self.kind}:{key}#{self.seen[key]}"
        return str(uuid.uuid5(_NAMESPACE, name))


__all__ = ["ImageRecord", "Uuids", "read_local", "refuse_special", "special_kind"]
