"""Reading iNat Co-Observed files as stored rows, with their images when asked: the readers and their batches.

Why apart: the readers stream the pass of :mod:`~cladebench.benchmarks.coobserved.source.pairs` and add the image
columns, from the embedded bytes or from photos a build fetched (:mod:`~cladebench.benchmarks.coobserved.source.build`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.benchmarks.coobserved.source.columns import (
    DEFAULT_BATCH_ROWS,
    IMAGE_FIELDS,
    READ_STATS_KEY,
    SourceFile,
    open_file,
    parquet_paths_of,
    read_schema,
)
from cladebench.benchmarks.coobserved.source.pairs import CoObservedStats, PairPass, scan
from cladebench.curate.fetch import DownloadReport
from cladebench.curate.sources import stats_of, with_stats
from cladebench.curate.sources.rows import Row
from cladebench.errors import CladebenchError
from cladebench.images import sniff_format


def embedded_images(batch: pa.RecordBatch, file: SourceFile) -> list[bytes | None]:
    """The image bytes of each row; ``None`` where the row has none (null or empty)."""
    if "image" not in batch.schema.names:
        return [None] * batch.num_rows
    column = batch.column("image")
    images = pc.struct_field(column, "bytes") if file.image_in_struct else column
    return [body or None for body in images.to_pylist()]


class Fetched:
    """Photos fetched for rows without image bytes: the download report, read with a SHA-256 check."""

    def __init__(self, report: DownloadReport | None) -> None:
        self.report = report
        self.failed = set() if report is None else {f.key for f in report.failures}

    def get(self, key: str) -> bytes | None:
        if self.report is None or key not in self.report.downloaded:
            return None
        return self.report.store.read_verified(self.report.downloaded[key])


def with_images(table: pa.Table, batch: pa.RecordBatch, file: SourceFile, first_row: int, fetched: Fetched,
                 stats: CoObservedStats) -> pa.Table:
    """The rows with their image columns after ``uuid``; rows whose photo could not be fetched left out."""
    uuids = table.column("uuid").to_pylist()
    urls = table.column("source_url").to_pylist()
    published = table.column("published_image_sha256").to_pylist()
    keep: list[bool] = []
    bodies: list[bytes] = []
    for i, body in enumerate(embedded_images(batch, file)):
        if body is not None:
            stats.counts["image_embedded"] += 1
        else:
            body = fetched.get(uuids[i])
            if body is None and uuids[i] in fetched.failed:
                stats.counts["image_fetch_failed"] += 1
                keep.append(False)
                continue
            if body is None:
                problem = ("no image bytes; build_inat_coobserved fetches it from its image URL" if urls[i]
                           else "no image bytes and no image URL to fetch it from")
                raise Row.at_index(file.path, first_row + i).error(file.columns["image"] or "image", problem)
            stats.counts["image_fetched"] += 1
        keep.append(True)
        bodies.append(body)
    if not all(keep):
        table = table.filter(pa.array(keep))
        published = [p for p, k in zip(published, keep, strict=True) if k]
    formats = [sniff_format(b[:16]) for b in bodies]
    digests = [hashlib.sha256(b).hexdigest() for b in bodies]
    stats.counts["unknown_image_format"] += sum(f is None for f in formats)
    stats.counts["image_sha256_differs"] += sum(p is not None and p.lower() != d
                                                for p, d in zip(published, digests, strict=True))
    table = table.add_column(1, IMAGE_FIELDS[0], pa.array(bodies, pa.large_binary()))
    table = table.add_column(2, IMAGE_FIELDS[1], pa.array(formats, pa.string()))
    return table.add_column(3, IMAGE_FIELDS[2], pa.array(digests, pa.string()))


def open_files(parquet_paths: str | Path | Iterable[str | Path], stats: CoObservedStats) -> list[SourceFile]:
    files = [open_file(p) for p in parquet_paths_of(parquet_paths)]
    stats.files.extend(f.describe() for f in files)
    return files


def check_batching(batch_rows: int, limit: int | None) -> None:
    if batch_rows < 1:
        raise CladebenchError(f"batch_rows must be positive, got {batch_rows}")
    if limit is not None and limit < 0:
        raise CladebenchError(f"limit must be non-negative, got {limit}")


def batches(files: list[SourceFile], stats: CoObservedStats, *, images: bool, batch_rows: int, limit: int | None,
             fetched: Fetched) -> Iterator[pa.Table]:
    pair_pass = PairPass(stats)
    stats.images = images
    for file, first_row, batch in scan(files, images=images, batch_rows=batch_rows, limit=limit):
        table = pair_pass.batch(batch, file, first_row)
        yield with_images(table, batch, file, first_row, fetched, stats) if images else table


def iter_inat_coobserved_batches(
    parquet_paths: str | Path | Iterable[str | Path],
    *,
    images: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    limit: int | None = None,
    stats: CoObservedStats | None = None,
) -> Iterator[pa.Table]:
    """Stream iNat Co-Observed files as stored rows, at most ``batch_rows`` at a time, in file order.

    ``images`` adds ``image``, ``image_format`` and ``image_sha256``; without them the image column is
    not even read. With them, a row without image bytes is an error (:func:`build_inat_coobserved`
    fetches such photos). ``limit`` keeps the first rows; ``stats``, when given, is filled as the
    batches go. Every file's columns are checked before the first batch is yielded.
    """
    check_batching(batch_rows, limit)
    stats = stats if stats is not None else CoObservedStats()
    files = open_files(parquet_paths, stats)
    yield from batches(files, stats, images=images, batch_rows=batch_rows, limit=limit, fetched=Fetched(None))


def read_inat_coobserved(
    parquet_paths: str | Path | Iterable[str | Path],
    *,
    images: bool = False,
    limit: int | None = None,
) -> pa.Table:
    """Read iNat Co-Observed files into one table of stored rows (the mapping is in the module docstring).

    Without ``images`` (the default, as for every source reader) the photos are not read. The counts,
    the divergence-rank mismatches and the columns each field came from are in the schema metadata
    (:func:`read_stats`).
    """
    stats = CoObservedStats()
    tables = list(iter_inat_coobserved_batches(parquet_paths, images=images, limit=limit, stats=stats,
                                               batch_rows=DEFAULT_BATCH_ROWS if images else 4096))
    table = pa.concat_tables(tables) if tables else read_schema(images=images).empty_table()
    return with_stats(table, READ_STATS_KEY, stats.as_dict())


def read_stats(table: pa.Table) -> dict[str, object]:
    """The counts :func:`read_inat_coobserved` recorded in the table's schema metadata."""
    return stats_of(table, READ_STATS_KEY)



__all__ = ["Fetched", "check_batching", "embedded_images", "iter_inat_coobserved_batches", "open_files",
           "read_inat_coobserved", "read_stats"]
