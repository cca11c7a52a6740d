"""WebDataset tar shards: ``key.jpg`` with ``key.txt``, ``key.json`` or ``key.cls`` beside it.

The layout of the TreeOfLife training sets and of ``webdataset``'s ``ShardWriter``: the members of one sample
share a key (the member's name up to the first dot of its base name) and lie next to each other in the tar. A
sample's image is its first member with an image suffix; its label comes from ``sci.txt`` or
``scientific_name.txt``, else ``txt``, else the ``json``'s mapped fields (:mod:`.columns`: ``scientificName``,
``license``, ``rightsHolder``, ... as in a table), else ``cls`` (a class number, which resolves to nothing and is
then reported as unresolved; ``-1`` is no label); ``com.txt`` or ``common_name.txt`` is the common name. A
sample's ``source_id`` is its shard and key (``train-000001.tar/000017``: two shards may reuse a key), unless its
``json`` gives a group id.
Shards are streamed (``r|*``: plain or compressed), one sample in memory at a time; a folder is read as its
``*.tar`` (and ``.tar.gz``) files in sorted order.

Why a module: the one kind whose records are assembled from several files.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Self

from cladebench.curate.fetch.config import DownloadConfig
from cladebench.curate.sources.images.columns import map_columns, mapped_values, text
from cladebench.curate.sources.images.folder import IMAGE_SUFFIXES
from cladebench.curate.sources.images.records import ImageRecord, refuse_special
from cladebench.errors import CladebenchError, SchemaError

SHARD_SUFFIXES = (".tar", ".tar.gz", ".tgz")
MAX_MEMBER_BYTES = DownloadConfig.max_bytes
"""A sample's member larger than this is not read, and the sample is left out as ``too_large``: the cap of a
download and of a local file."""
_LABEL_PARTS = ("sci.txt", "scientific_name.txt", "txt")
_COMMON_PARTS = ("com.txt", "common_name.txt")


class _WholeTarInfo(tarfile.TarInfo):
    """A member header that refuses a shard ending where a header should be: ``tarfile`` takes that for the end of
    the archive, so a shard whose copy or download stopped between two members would be read in part, without a
    word. A whole tar ends with a block of zeros."""

    @classmethod
    def fromtarfile(cls, tarfile_: tarfile.TarFile) -> Self:
        try:
            return super().fromtarfile(tarfile_)
        except (tarfile.EmptyHeaderError, tarfile.TruncatedHeaderError):  # type: ignore[attr-defined]
            raise tarfile.ReadError("it ends before its end-of-archive block (a copy or download cut short?)") \
                from None


def shard_files(path: Path) -> list[Path]:
    """The shards of ``path``: itself, or the shard files in a folder, sorted."""
    if path.is_file():
        return [path]
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.name.endswith(SHARD_SUFFIXES) and not p.name.startswith("."))
    raise CladebenchError(f"{path}: no such file or folder")


def _split(name: str) -> tuple[str, str]:
    """(key, part) of a member name: ``dir/000017.sci.txt`` -> (``dir/000017``, ``sci.txt``)."""
    folder, _, base = name.rpartition("/")
    stem, _, part = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), part.lower()


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once: ``json`` keeps the last of two (two ``scientificName``)."""
    keys = [k for k, _ in pairs]
    repeated = next((k for k in keys if keys.count(k) > 1), None)
    if repeated is not None:
        raise _RepeatedKey(f"gives the key {repeated!r} twice; which one holds the value cannot be told")
    return dict(pairs)


class ShardSource:
    """The samples of WebDataset shards, as image records."""

    kind = "webdataset"

    def __init__(self, path: Path, overrides: Mapping[str, str]) -> None:
        self.path = Path(path)
        refuse_special(self.path, "a shard")
        self.shards = shard_files(self.path)
        for shard in self.shards:
            refuse_special(shard, "a shard")
        if not self.shards:
            raise CladebenchError(f"{self.path}: no WebDataset shards ({', '.join(SHARD_SUFFIXES)}) in this folder")
        self.overrides = dict(overrides)
        self.notes: dict[str, object] = {"shards": [str(s) for s in self.shards]}

    def records(self, images: bool = True) -> Iterator[ImageRecord]:
        for shard in self.shards:
            try:
                with tarfile.open(shard, mode="r|*", tarinfo=_WholeTarInfo) as archive:
                    yield from self._samples(shard, archive, images)
            except (tarfile.TarError, EOFError, OSError) as exc:
                raise SchemaError(f"{shard}: not a readable tar shard: {exc}") from None

    def _samples(self, shard: Path, archive: tarfile.TarFile, images: bool) -> Iterator[ImageRecord]:
        key, parts, large = None, {}, {}
        for member in archive:
            if not member.isfile():
                continue
            member_key, part = _split(member.name)
            if member_key != key and key is not None:
                yield self._record(shard, key, parts, large)
                parts, large = {}, {}
            key = member_key
            is_image = "." + part.rsplit(".", 1)[-1] in IMAGE_SUFFIXES
            if member.size > MAX_MEMBER_BYTES:  # a video in the shard: never read whole into memory
                parts[part], large[part] = b"", member.size
                continue
            handle = archive.extractfile(member)
            parts[part] = (handle.read() if (images or not is_image) else b"") if handle is not None else b""
        if key is not None:
            yield self._record(shard, key, parts, large)

    def _record(self, shard: Path, key: str, parts: dict[str, bytes], large: dict[str, int]) -> ImageRecord:
        where = f"{shard.name} key {key}"
        record = ImageRecord(key=f"{shard.name}:{key}", where=where)
        if large:
            part, size = next(iter(large.items()))
            record.problem = ("too_large", f"{key}.{part}: {size:,} bytes, over the cap of {MAX_MEMBER_BYTES:,} bytes")
        image_part = next((p for p in parts if "." + p.rsplit(".", 1)[-1] in IMAGE_SUFFIXES), None)
        meta = parts.get("json")
        if meta is not None:
            try:
                cells = json.loads(meta, object_pairs_hook=_unique_keys)
            except ValueError as exc:
                cells = None
                said = "" if isinstance(exc, _RepeatedKey) else "is not JSON: "
                record.problem = ("bad_metadata", f"{key}.json {said}{exc}")
            if isinstance(cells, dict):
                present = {name: column for name, column in self.overrides.items() if column in cells}
                mapping = map_columns(list(cells), present, where=f"{where}.json")
                mapped = mapped_values(cells, mapping)
                record.label, record.ranks, record.values = mapped.label, mapped.ranks, mapped.values
                record.set_null = mapped.dropped
        label = next((text(parts[p].decode("utf-8", "replace")) for p in _LABEL_PARTS if p in parts), None)
        record.label = label or record.label
        if record.label is None and "cls" in parts:
            number = text(parts["cls"].decode("utf-8", "replace"))
            record.label = None if number == "-1" else number  # -1: "no label", as a ClassLabel's
        common = next((text(parts[p].decode("utf-8", "replace")) for p in _COMMON_PARTS if p in parts), None)
        if common is not None:
            record.values["common_name"] = common
        record.values["source_id"] = record.values.get("source_id") or f"{shard.name}/{key}"
        if image_part is None:
            record.problem = record.problem or ("no_image", f"no image member among {sorted(parts)}")
        else:
            record.image = parts[image_part]
        return record


__all__ = ["SHARD_SUFFIXES", "ShardSource", "shard_files"]
