"""Raw sources a benchmark is built from: one module per source, each reading its files into canonical rows.

A source module knows one published format (its columns, its quirks, where its images live) and
offers two things: a reader that turns the source's metadata files into an Arrow table in the
canonical schema (without images, so it is fast and testable offline), and a builder that fetches
the images and writes a Lance dataset. The registry below names them, so the CLI and scripts look a
source up by name without importing every source (and its dependencies) up front.

A benchmark family registers its source from its own folder (:mod:`cladebench.benchmarks`); a folder of your
own images registers here.

Example:
    >>> get_source("images").reader
    'build_images_dataset'
    >>> try:
    ...     get_source("imgs")
    ... except Exception as error:
    ...     print(str(error).split(";")[0])
    unknown source 'imgs'
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import importlib
import io
import json
import os
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from cladebench.errors import CladebenchError, SchemaError, UnknownNameError, reading
from cladebench.registry import Registry

if TYPE_CHECKING:
    import pyarrow as pa  # annotations only: `load SOURCE --help` reads the registry below


@dataclass(frozen=True)
class Source:
    """Where a source's reader and builder live; imported only when used."""

    name: str
    """Registry name (``crypticbio``)."""
    module: str
    """Module that implements it."""
    reader: str
    """Function ``(path, ...) -> pyarrow.Table`` of canonical rows without images."""
    builder: str
    """Function ``(path, out, ...) -> report`` that fetches images and writes a Lance dataset."""
    doc: str
    """One line on what the source is."""
    config_name: str
    """Its load config class in :mod:`cladebench.curate.sources.load_config` (``cladebench load <name>``)."""

    def config(self) -> type:
        """The frozen config of ``cladebench load <name>``: the source's own options only."""
        return getattr(importlib.import_module("cladebench.curate.sources.load_config"), self.config_name)

    def load(self, attribute: str) -> Callable[..., object]:
        """The named function of the source's module."""
        return getattr(importlib.import_module(self.module), attribute)

    def read(self, *args: object, **kwargs: object) -> object:
        return self.load(self.reader)(*args, **kwargs)

    def build(self, *args: object, **kwargs: object) -> Any:
        return self.load(self.builder)(*args, **kwargs)


# --- what every source module does the same way -------------------------------------------------


def parquet_files(parquet_paths: str | Path | Iterable[str | Path], *, what: str) -> list[Path]:
    """The files to read: the paths given, and every ``*.parquet`` under each directory given, sorted by path.

    A directory is searched at every depth, because a Hugging Face Hub snapshot keeps its files in ``data/``
    (``data/test-00000-of-00004.parquet``) or in one folder per config or split; hidden files and folders
    (``.cache/``, the Hub client's download state, ``.git/``) are left out. An error names ``what`` when there
    are no files or a path given is missing, and names the folders when a folder given holds two copies of one
    file (the same name and size in two places: two snapshots downloaded side by side), whose rows would all
    be read twice.
    """
    given = [parquet_paths] if isinstance(parquet_paths, (str, Path)) else list(parquet_paths)
    paths: list[Path] = []
    for item in map(Path, given):
        if item.is_dir():
            paths.extend(_parquet_under(item))
        else:
            paths.append(item)
    if not paths:
        raise CladebenchError(f"no {what} Parquet files in {[str(p) for p in given]} (searched at every depth, "
                              "hidden folders left out)")
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise CladebenchError(f"{what} Parquet file(s) not found: {missing}")
    special = [str(p) for p in paths if not p.is_file()]
    if special:
        raise CladebenchError(f"{what} Parquet path(s) that are not regular files (a pipe or a device): {special}")
    _refuse_copies(paths, what)
    return paths


def _refuse_copies(paths: list[Path], what: str) -> None:
    seen: dict[tuple[str, int], Path] = {}
    for path in paths:
        first = seen.setdefault((path.name, path.stat().st_size), path)
        if first != path:
            common = Path(os.path.commonpath([first, path]))
            folders = [str(common / p.relative_to(common).parts[0]) for p in (first, path)]
            raise CladebenchError(f"{first} and {path} are two copies of one {what} file (same name and size): "
                                  f"{folders[0]} and {folders[1]} look like two downloads of the same files; "
                                  "give one of them")


def parquet_batches(path: Path, *, batch_rows: int, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The record batches of one Parquet file, one row group in memory at a time; a file that cannot be read (a
    corrupt page, a truncated file, gone meanwhile) is one line naming it (:func:`cladebench.errors.reading`),
    wherever in the file the damage is. Only the reading is covered: what the caller does with a batch is not."""
    import pyarrow.parquet as pq

    with reading(path):
        # pre_buffer (pyarrow's default) keeps every column chunk read for the reader's life: a whole shard
        # (hundreds of MB) would stay in memory. Without it memory stays at one row group.
        batches = pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=batch_rows, columns=columns)
    while True:
        with reading(path):
            batch = next(batches, None)
        if batch is None:
            return
        yield batch


def check_out_apart(out: str | Path, inputs: Iterable[object]) -> None:
    """A :class:`~cladebench.errors.UsageError` when ``out`` is, is inside or holds a local input (the files or
    folders read, the download store): a dataset written there would sit among the files it was made from, and
    a later read of that folder would find it. Remote URIs and objects that are not paths are skipped.

    Then a :class:`~cladebench.errors.CladebenchError` when ``out`` exists and is not an empty folder: checked
    before any download, which can take hours, rather than by the write after it.
    """
    from cladebench.paths import TAKEN, WRONG_KIND, check_not_an_input, write_refusal

    local = []
    for item in inputs:
        if isinstance(item, (str, Path)) and "://" not in str(item):
            local.append(Path(item))
        elif item is not None and not isinstance(item, (str, Path)):
            root = getattr(item, "root", None)  # a DownloadStore
            if isinstance(root, Path):
                local.append(root)
    out = Path(out)
    check_not_an_input(out, local)
    if write_refusal(out, folder=True, overwrite=False) in (TAKEN, WRONG_KIND):
        raise CladebenchError(f"{out} already exists; choose another output path or remove it")


def first_bad_utf8(path: str | Path) -> tuple[int, int, int]:
    """(line, byte offset, byte value) of the first byte of ``path`` that is not UTF-8.

    Read in blocks; the bytes of a character cut by a block's end are carried into the next block, and the
    file's end counts as an end of input, so a file cut inside a character names that character's first byte.
    """
    offset, line, pending = 0, 1, b""  # offset: where ``pending`` starts in the (decompressed) text
    with _open_bytes(path) as handle:
        while True:
            block = handle.read(1 << 20)
            data, final = pending + block, not block
            try:
                _, consumed = codecs.utf_8_decode(data, "strict", final)
            except UnicodeDecodeError as exc:
                return line + data.count(b"\n", 0, exc.start), offset + exc.start, data[exc.start]
            line += data.count(b"\n", 0, consumed)
            offset += consumed
            pending = data[consumed:]
            if final:
                return line, offset, 0


GZIP_MAGIC = b"\x1f\x8b"
"""The first bytes of a gzip file, whatever its name."""


def _open_bytes(path: str | Path) -> gzip.GzipFile | io.BufferedReader:
    """``path``'s bytes, decompressed when it is gzip (sniffed, not by name: ``.csv`` files arrive compressed)."""
    with open(path, "rb") as probe:
        compressed = probe.read(2) == GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else open(path, "rb")


@contextlib.contextmanager
def open_text(path: str | Path, error: type[CladebenchError] = SchemaError) -> Iterator[IO[str]]:
    """A text file (CSV, TSV) for reading as UTF-8, gzip or not, inside :func:`utf8_errors`; a gzip file that
    ends early or is corrupt is ``error`` naming the file."""
    try:
        with utf8_errors(path, error), _open_bytes(path) as raw, \
                io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as handle:
            yield handle
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise error(f"cannot read {path}: a gzip file that is cut short or damaged ({exc})") from None


@contextlib.contextmanager
def utf8_errors(path: str | Path, error: type[CladebenchError] = SchemaError) -> Iterator[None]:
    """Turn a decoding failure while reading ``path`` into one line naming the line and the byte, as ``error``
    (a :class:`~cladebench.errors.SchemaError` by default: a source file the tool was given is malformed)."""
    try:
        yield
    except UnicodeDecodeError:
        line, offset, byte = first_bad_utf8(path)
        raise error(f"{path}: line {line}: not UTF-8 text (byte {byte:#04x} at offset {offset}); "
                    "save the file as UTF-8") from None


def input_paths(paths: str | Path | Iterable[str | Path] | None) -> list[str | Path]:
    """One path or many, as a list (for :func:`check_out_apart`)."""
    if paths is None:
        return []
    return [paths] if isinstance(paths, (str, Path)) else [p for p in paths if isinstance(p, (str, Path))]


def _parquet_under(folder: Path) -> list[Path]:
    """Every ``*.parquet`` file under ``folder``, hidden files and folders left out, sorted by path."""
    found: list[Path] = []
    for root, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if not name.startswith(".")]
        found.extend(Path(root) / name for name in files if name.endswith(".parquet") and not name.startswith("."))
    return sorted(found)


def with_stats(table: pa.Table, key: bytes, stats: Mapping[str, object]) -> pa.Table:
    """The table with a reader's counts kept in its schema metadata under ``key`` (read back by :func:`stats_of`)."""
    return table.replace_schema_metadata({key: json.dumps(stats, default=str).encode()})


def stats_of(table: pa.Table, key: bytes) -> dict[str, object]:
    """The counts a reader kept in the table's schema metadata under ``key``; empty when there are none."""
    raw = (table.schema.metadata or {}).get(key)
    return {} if raw is None else json.loads(raw)


def unknown_format_notes(stats: Mapping[str, Any], rows: int) -> list[str]:
    """The line a load prints when rows hold image bytes in no format the tool recognises (an HTML error page
    or random bytes saved as a photo): they are written, and every later decode of them fails, so a person
    hears of it now, not from a failures table after an hour of embedding. Empty when there are none."""
    unknown = int(stats.get("unknown_image_format") or 0)
    if not unknown:
        return []
    return [f"{unknown:,} of {rows:,} rows hold image bytes in no known image format (an HTML page, random bytes?): "
            "they are written with a null image_format, and decoding them will fail"]


def failures_path_for(out: str | Path) -> Path:
    """Where the failures of a build into ``out`` go: ``<out>.failures.parquet``, beside the dataset."""
    out = Path(out)
    return out.with_name(out.name + ".failures.parquet")


SOURCES: Registry[Source] = Registry("source")
"""Registry of sources by name."""


def register(source: Source) -> Source:
    """Add a source to :data:`SOURCES`."""
    return SOURCES.add(source.name, source)


FAMILIES_MODULE = "cladebench.benchmarks"
"""The package whose import registers the benchmark families' sources and builders (from their folders); this
layer is below it and never imports it. The CLI imports it before any lookup; a script must too."""

Registered = TypeVar("Registered")


def look_up_registered(registry: Registry[Registered], name: str) -> Registered:
    """``registry.get_named(name)``; while :data:`FAMILIES_MODULE` is not imported, an unknown name also says to
    import it (``get_builder("crypticbio")`` in a fresh interpreter is not a typo)."""
    try:
        return registry.get_named(name)
    except UnknownNameError as error:
        if FAMILIES_MODULE in sys.modules:
            raise
        raise UnknownNameError(f"{error} The benchmark families register their {registry.kind}s when "
                               f"{FAMILIES_MODULE} is imported: `import {FAMILIES_MODULE}` first") from None


def get_source(name: str) -> Source:
    """Look a source up by name; an unknown name lists the known ones and the closest (and, before
    ``import cladebench.benchmarks``, says that the families' sources come with it: :func:`look_up_registered`)."""
    return look_up_registered(SOURCES, name)


register(Source(
    "images", "cladebench.curate.sources.images.build", "build_images_dataset", "build_images_dataset",
    "your own images: a folder per taxon, a table of paths or URLs (CSV, TSV, Parquet, a Hugging Face dataset), "
    "WebDataset shards or a Darwin Core Archive (a GBIF download); labels resolved offline to taxa",
    "ImagesLoadConfig",
))
