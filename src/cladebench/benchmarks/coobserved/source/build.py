"""Building a Lance dataset from iNat Co-Observed files, fetching the photos the files only link to.

Why apart: a build checks every row first, fetches what is missing (:mod:`cladebench.curate.fetch`), lists what
could not be fetched beside the dataset and commits the dataset only at its end; reading needs none of that.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from cladebench import store
from cladebench.benchmarks.coobserved.source.columns import DEFAULT_BATCH_ROWS, SourceFile
from cladebench.benchmarks.coobserved.source.pairs import CoObservedStats, PairPass, scan
from cladebench.benchmarks.coobserved.source.read import Fetched, batches, check_batching, embedded_images, open_files
from cladebench.curate.fetch import DownloadConfig, DownloadReport, DownloadStore, download
from cladebench.curate.sources import check_out_apart, failures_path_for, input_paths, unknown_format_notes
from cladebench.curate.sources.rows import Row
from cladebench.errors import CladebenchError
from cladebench.paths import atomic_write_parquet


@dataclass(frozen=True)
class CoObservedBuild:
    """What a build of iNat Co-Observed wrote, and what it could not fetch."""

    dataset_path: Path
    """The Lance dataset."""
    failures_path: Path
    """Parquet of rows whose photo could not be fetched, beside the dataset (written even when empty)."""
    rows: int
    """Rows written: one per photo."""
    read: int
    """Rows read (after ``limit``); ``read - rows`` were left out for want of their photo."""
    fingerprint: str
    """SHA-256 of the uuids in row order (:func:`cladebench.store.fingerprint`)."""
    stats: dict[str, object]
    """Counts of missing, derived and mismatching values, per divergence rank, per file (:class:`CoObservedStats`)."""
    fetch: DownloadReport | None
    """The downloader's report when some photos had to be fetched, else ``None``."""

    @property
    def failed(self) -> int:
        return self.read - self.rows

    @property
    def notes(self) -> list[str]:
        """What a person should know beyond the row count: rows whose image bytes are in no known format."""
        return unknown_format_notes(self.stats, self.rows)

    @property
    def failed_by_reason(self) -> dict[str, int]:
        return {} if self.fetch is None else self.fetch.failed_by_reason


FAILURES_SCHEMA = pa.schema([
    ("file", pa.string()), ("row", pa.int64()), ("uuid", pa.string()), ("photo_id", pa.int64()),
    ("source_url", pa.string()), ("reason", pa.string()), ("detail", pa.string()), ("status", pa.int32()),
    ("exception", pa.string()), ("attempts", pa.int32()),
])
"""Columns of the failures file: the row (file, 1-based data row, photo id) and the downloader's failure."""


@dataclass(frozen=True)
class _Wanted:
    """A row without image bytes: where it is and where its photo is."""

    file: str
    row: int
    photo_id: int
    url: str


def _rows_to_fetch(files: list[SourceFile], *, batch_rows: int, limit: int | None) -> tuple[dict[str, _Wanted], int]:
    """Every row checked (so a bad value fails before any download): the rows without image bytes, and
    the number of rows read."""
    wanted: dict[str, _Wanted] = {}
    pair_pass = PairPass(CoObservedStats())
    for file, first_row, batch in scan(files, images=True, batch_rows=batch_rows, limit=limit):
        table = pair_pass.batch(batch, file, first_row)
        uuids, urls = table.column("uuid").to_pylist(), table.column("source_url").to_pylist()
        photo_ids = table.column("photo_id").to_pylist()
        for i, body in enumerate(embedded_images(batch, file)):
            if body is not None:
                continue
            if not urls[i]:
                raise Row.at_index(file.path, first_row + i).error(
                    file.columns["image"] or "image", "no image bytes and no image URL to fetch it from")
            wanted[uuids[i]] = _Wanted(file.path.name, Row.at_index(file.path, first_row + i).number, photo_ids[i],
                                     urls[i])
    return wanted, pair_pass.stats.rows


def _failure_rows(wanted: Mapping[str, _Wanted], report: DownloadReport | None) -> pa.Table:
    rows = [] if report is None else [
        {"file": wanted[f.key].file, "row": wanted[f.key].row, "uuid": f.key, "photo_id": wanted[f.key].photo_id,
         "source_url": f.url, "reason": f.reason, "detail": f.detail, "status": f.status,
         "exception": f.exception, "attempts": f.attempts}
        for f in report.failures
    ]
    return pa.Table.from_pylist(rows, schema=FAILURES_SCHEMA)


def build_inat_coobserved(
    parquet_paths: str | Path | Iterable[str | Path],
    out: str | Path,
    *,
    limit: int | None = None,
    download_dir: str | Path | DownloadStore | None = None,
    download_config: DownloadConfig | None = None,
    fetch_missing: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> CoObservedBuild:
    """Write iNat Co-Observed files (files, or a directory of them) to a Lance dataset at ``out``.

    Rows stream through :func:`cladebench.store.write_dataset` a batch at a time, so memory stays
    bounded. When ``fetch_missing`` and the files have an image URL column, a first pass checks every
    row (so a bad value fails before any download) and finds the rows without image bytes; their
    photos are fetched into ``download_dir`` (default: the cladebench cache's ``downloads/``, reused
    across builds), and a photo that cannot be fetched leaves its row out and is listed in
    :func:`failures_path_for` ``(out)``. Without ``fetch_missing`` a row without image bytes is an
    error. The dataset is committed only at the end, so any error leaves nothing at ``out``. ``limit``
    keeps the first rows (for trials); ``out`` must not exist yet.
    """
    out = Path(out)
    check_out_apart(out, [*input_paths(parquet_paths), download_dir])
    check_batching(batch_rows, limit)
    stats = CoObservedStats()
    files = open_files(parquet_paths, stats)
    needs_fetch = fetch_missing and any(f.columns["image_url"] is not None for f in files)
    wanted, rows_read = _rows_to_fetch(files, batch_rows=batch_rows, limit=limit) if needs_fetch else ({}, 0)
    report = None
    if wanted:
        if download_dir is None:
            from cladebench.cache import cache_dir

            download_dir = cache_dir("downloads")
        report = download(((key, w.url) for key, w in wanted.items()), download_dir, download_config)
    failures_path = failures_path_for(out)
    failures = _failure_rows(wanted, report)
    if report is not None and not report.downloaded and len(wanted) == rows_read:
        atomic_write_parquet(failures_path, failures)
        raise CladebenchError(f"no photo of the {rows_read} rows could be fetched ({report.summary()}); "
                              f"the reasons are in {failures_path}")
    stream = batches(files, stats, images=True, batch_rows=batch_rows, limit=limit, fetched=Fetched(report))
    dataset = store.write_dataset(_non_empty(stream), out)
    atomic_write_parquet(failures_path, failures)
    return CoObservedBuild(
        dataset_path=out, failures_path=failures_path, rows=dataset.count_rows(), read=stats.rows,
        fingerprint=store.fingerprint(dataset), stats=stats.as_dict(), fetch=report,
    )


def _non_empty(batches: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """The batches that still have rows once unfetched photos are left out."""
    return (b for b in batches if b.num_rows)



__all__ = ["FAILURES_SCHEMA", "CoObservedBuild", "build_inat_coobserved"]
