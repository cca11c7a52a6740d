"""The kinds of image source, by name, and which kind a path is when none is named.

``--layout auto`` (the default) looks at the path: a ``.csv``/``.tsv``/``.txt``/``.parquet``/``.arrow`` file is a
table; a ``.zip`` or a folder with a ``meta.xml`` is a Darwin Core Archive; a ``.tar``, ``.tar.gz`` or ``.tgz`` file
is decided by its content (a ``meta.xml`` among its first members: an archive; samples: WebDataset shards), and a
folder of shards without subfolders (other files there are not read) is WebDataset shards; a folder with a
``state.json`` or ``dataset_dict.json`` (what ``datasets``' ``save_to_disk`` writes) or with Parquet files is a
table; any other folder is a folder tree. A file that is none of these is a usage error naming the kinds.

Why a module: the one place that knows the kinds (the ``--layout`` choices of ``load images`` are tested to be these).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Protocol

from cladebench.curate.sources.images.records import ImageRecord, refuse_special
from cladebench.curate.sources.images.shards import SHARD_SUFFIXES
from cladebench.curate.sources.images.table import TABLE_SUFFIXES
from cladebench.errors import CladebenchError, UsageError
from cladebench.registry import Registry


class ImageSource(Protocol):
    """What every reader offers the build."""

    kind: str
    notes: dict[str, object]
    """What the card says of the source (its files, the columns mapped, an archive's rights and citations)."""

    def records(self, images: bool = True) -> Iterator[ImageRecord]:
        """The source's images in a fixed order; ``images=False`` may leave out embedded bytes (a first pass)."""
        ...


Opener = Callable[[Path, Mapping[str, str], "Path | None"], ImageSource]
"""A reader's constructor: ``(path, column overrides, images dir) -> ImageSource``."""
LAYOUTS: Registry[Opener] = Registry("layout")
"""Layout (`load images --layout`) -> its reader's constructor; each imports its module only when used."""


@LAYOUTS.register("folder")
def _folder(path: Path, overrides: Mapping[str, str], images_dir: Path | None) -> ImageSource:
    from cladebench.curate.sources.images.folder import FolderSource

    return FolderSource(path)


@LAYOUTS.register("table")
def _table(path: Path, overrides: Mapping[str, str], images_dir: Path | None) -> ImageSource:
    from cladebench.curate.sources.images.table import TableSource

    return TableSource(path, overrides, images_dir)


@LAYOUTS.register("webdataset")
def _shards(path: Path, overrides: Mapping[str, str], images_dir: Path | None) -> ImageSource:
    from cladebench.curate.sources.images.shards import ShardSource

    return ShardSource(path, overrides)


@LAYOUTS.register("dwca")
def _archive(path: Path, overrides: Mapping[str, str], images_dir: Path | None) -> ImageSource:
    from cladebench.curate.sources.images.archive import ArchiveSource

    return ArchiveSource(path, overrides)


TAR_MEMBERS_LOOKED_AT = 64
"""Members of a tar file read to tell an archive from shards: a Darwin Core Archive lists its ``meta.xml`` among
a handful of files, a shard is samples from its first member on; the rest of a large shard is never read."""


def _tar_kind(path: Path, by_name: str) -> str:
    """A tar file (plain or compressed) by its content: a Darwin Core Archive when a ``meta.xml`` is among its first
    members, WebDataset shards when they are samples (``KEY.EXT`` files, no ``meta.xml``); ``by_name`` (what its
    suffix suggests) when it cannot be read or says neither, so the reader gives its own one-line refusal."""
    import tarfile

    names = []
    try:
        with tarfile.open(path, "r|*") as archive:
            for member in archive:
                names.append(member.name.rsplit("/", 1)[-1])
                if names[-1] == "meta.xml":
                    return "dwca"
                if len(names) >= TAR_MEMBERS_LOOKED_AT:
                    break
    except (tarfile.TarError, OSError, EOFError):
        return by_name
    samples = [n for n in names if "." in n.strip(".")]
    return "webdataset" if samples else by_name


def detect_kind(path: Path) -> str:
    """The kind of ``path`` (see the module docstring)."""
    name = path.name.lower()
    refuse_special(path)
    if path.is_file():
        if name.endswith(TABLE_SUFFIXES):
            return "table"
        if name.endswith((".tar", ".tar.gz", ".tgz")):
            return _tar_kind(path, "dwca" if name.endswith(".tgz") or "dwca" in name else "webdataset")
        if name.endswith(".zip"):
            return "dwca"
        raise UsageError(f"{path}: cannot tell what kind of source this file is; pass --layout "
                         f"({', '.join(LAYOUTS)})")
    if not path.is_dir():
        raise CladebenchError(f"{path}: no such file or folder")
    if (path / "meta.xml").is_file():
        return "dwca"
    entries = [p for p in path.iterdir() if not p.name.startswith(".")]
    if any(p.name.endswith(SHARD_SUFFIXES) for p in entries) and not any(p.is_dir() for p in entries):
        return "webdataset"
    saved = (path / "state.json").is_file() or (path / "dataset_dict.json").is_file()
    if saved or any(p.is_file() and p.suffix == ".parquet" for p in entries) or \
            ((path / "data").is_dir() and any((path / "data").glob("*.parquet"))):
        return "table"
    return "folder"


def open_source(path: Path, kind: str = "auto", overrides: Mapping[str, str] | None = None,
                images_dir: Path | None = None) -> ImageSource:
    """The reader of ``path`` as ``kind`` (``auto``: :func:`detect_kind`)."""
    path = Path(path)
    opener = LAYOUTS.get_named(detect_kind(path) if kind == "auto" else kind)  # an unknown one: exit 2, the known
    return opener(path, overrides or {}, images_dir)


__all__ = ["LAYOUTS", "ImageSource", "detect_kind", "open_source"]
