"""``load images``: read the source twice as a stream, resolve its labels, fetch its URLs, write one dataset.

1. The output is checked and a staging folder made beside it (:func:`cladebench.curate.skeleton.run_build`)
   before anything is read; a Ctrl-C or an error anywhere removes it and leaves ``--out`` as it was.
2. A first pass over the source collects the distinct labels and the URLs (embedded images are not kept).
3. The labels are resolved against the backbone in one read of it (:mod:`cladebench.taxonomy.resolve`).
4. The URLs are fetched through the downloader (deadlines, retries, resumable from the download store: a rerun
   after a Ctrl-C fetches only what is missing); a URL that fails is a failures row, not an abort.
5. A second pass turns each record into a canonical row a batch at a time: its bytes from the source, its
   file or the download store, each decoded once as every consumer will (a truncated JPEG is left out as
   ``undecodable``); its taxon columns from its label (:mod:`.labels`); its ``image_sha256``, by which a photo
   byte-identical to one already written (a copy in two folders, a table listing one path twice) is counted
   and kept or, with ``--duplicates drop``, left out naming the first. The rows go to a Lance dataset in one
   commit, written in the staging folder, which then becomes ``--out`` with the card (``README.md``),
   ``left_out.parquet`` (:mod:`cladebench.store.left_out`), ``resolution.json`` and ``load.json`` in it.

Memory holds a batch of rows, the distinct labels, the URLs' keys and one hash per image, never the images of
the whole source.

Why a module: the one place that orders the other modules' work.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from cladebench.curate.fetch import DownloadConfig, DownloadItem, DownloadReport, download
from cladebench.curate.skeleton import Built, Run, run_build
from cladebench.curate.sources.images.card import ImagesLoadSummary, render_card
from cladebench.curate.sources.images.columns import license_columns, parse_overrides
from cladebench.curate.sources.images.kinds import ImageSource, open_source
from cladebench.curate.sources.images.labels import EXTRA_COLUMNS, taxon_columns
from cladebench.curate.sources.images.records import ImageRecord, Uuids, read_local
from cladebench.curate.staging import OutputTarget
from cladebench.errors import CladebenchError, UsageError
from cladebench.store.left_out import LEFT_OUT_FILE, left_out_table
from cladebench.store.schema import CANONICAL_COLUMNS, canonical_fields
from cladebench.taxonomy.resolve import backbone_path, resolve_labels

WRITER = "load images"
"""The output's marker names this writer; ``--overwrite`` replaces only such a folder."""
FAILURES_NAME = LEFT_OUT_FILE
BATCH_ROWS = 64
"""Rows (images of a few MB each) held in memory at once while writing."""
_FAILURE_SCHEMA = pa.schema([("key", pa.string()), ("stage", pa.string()),
                             ("where", pa.string()), ("uuid", pa.string()), ("source_label", pa.string()),
                             ("location", pa.string()), ("reason", pa.string()), ("detail", pa.string())])
_CANONICAL = [c.name for c in CANONICAL_COLUMNS if c.name not in ("uuid", "image")]
HASH_COLUMN = "image_sha256"
"""Each row's SHA-256 of its image bytes (hex): byte-identical photos share it."""
DUPLICATES = ("keep", "drop")
"""What ``--duplicates`` does with a photo byte-identical to one already written: keep it (counted), or leave it
out as a ``duplicate_image`` failure naming the first."""
_OPTIONAL_EXTRAS = ("split_folder",)
"""Columns only some sources give (the folders above a taxon's folder); written when any record has them."""


def _limited(records: Iterator[ImageRecord], limit: int | None) -> Iterator[ImageRecord]:
    for number, record in enumerate(records):
        if limit is not None and number >= limit:
            return
        yield record


def _problem(record: ImageRecord) -> tuple[str, str] | None:
    """Why ``record`` cannot become a row, or None; a record with neither a label nor a rank (an empty cell) is
    one: a row without any name could be neither listed in the card nor scored."""
    if record.problem is None and record.label is None:
        record.problem = ("no_label", "no scientific name or rank is given")
    return record.problem


def _row_schema(extras: Sequence[str]) -> pa.Schema:
    return pa.schema([*canonical_fields("uuid", "image", *_CANONICAL),
                      *(pa.field(name, pa.string()) for name in (*EXTRA_COLUMNS, HASH_COLUMN, *extras))])


class _Writer:
    """The second pass: records to row batches, failures and counts gathered on the way."""

    def __init__(self, source: ImageSource, summary: ImagesLoadSummary, report: DownloadReport | None,
                 extras: Sequence[str], limit: int | None, download_config: DownloadConfig,
                 defaults: dict[str, Any], duplicates: str = "keep") -> None:
        from cladebench.curate.fetch.checks import IMAGE_CHECKS

        self.source, self.summary, self.resolutions = source, summary, summary.resolutions
        self.report, self.limit = report, limit
        self.schema = _row_schema(extras)
        self.failures: list[dict[str, object]] = []
        self.download_failures = {f.key: f for f in report.failures} if report is not None else {}
        self.check = IMAGE_CHECKS.get_named(download_config.image_check)
        self.max_bytes = download_config.max_bytes
        """A local file larger than this is left out unread, as the downloader leaves out a larger body."""
        self.defaults = defaults
        """Values for the rows whose source gives none (``--license``, ``--attribution``)."""
        self.duplicates = duplicates
        self.first_with: dict[str, str] = {}
        """Image SHA-256 -> where the first row with those bytes is in the source."""

    def fail(self, record: ImageRecord, uuid: str | None, reason: str, detail: str, stage: str = "fetch") -> None:
        """Leave the record out at ``stage`` (:data:`cladebench.store.left_out.STAGES`) for ``reason``."""
        from cladebench.images import HEIF_EXTRA

        self.summary.failed_by_reason[reason] += 1
        self.summary.heif_unread += HEIF_EXTRA in detail
        location = record.url or (str(record.path) if record.path is not None else None)
        self.failures.append({"key": uuid or record.where, "stage": stage, "where": record.where, "uuid": uuid,
                              "source_label": record.label, "location": location, "reason": reason,
                              "detail": detail})

    def image_of(self, record: ImageRecord, uuid: str) -> bytes | None:
        """The record's bytes, checked; None (and a failure) when there are none to write."""
        from cladebench.images import ImageDecodeError, ImageTooLargeError

        if record.image is not None:
            data = record.image
        elif record.url is not None:
            if self.report is None or uuid not in self.report.downloaded:
                failure = self.download_failures.get(uuid)
                self.fail(record, uuid, failure.reason if failure else "not_fetched",
                          failure.detail if failure else "not fetched")
                return None
            return self.report.store.read_verified(self.report.downloaded[uuid])  # checked by the downloader
        elif record.path is not None:
            try:
                size = record.path.stat().st_size
                if size > self.max_bytes:  # a video listed beside the photos: not read whole into memory
                    self.fail(record, uuid, "too_large", f"{record.path}: {size:,} bytes, over the cap of "
                                                         f"{self.max_bytes:,} bytes")
                    return None
                data = read_local(record.path, self.max_bytes)
            except OverflowError as exc:  # it grew while read
                self.fail(record, uuid, "too_large", str(exc))
                return None
            except ValueError as exc:  # a named pipe would block the load, a device read until memory ran out
                self.fail(record, uuid, "not_a_regular_file", str(exc))
                return None
            except OSError as exc:
                self.fail(record, uuid, "missing_file" if isinstance(exc, FileNotFoundError) else "unreadable_file",
                          f"{record.path}: {exc.strerror or exc}")
                return None
        else:
            self.fail(record, uuid, "no_image", "no image given", "read")
            return None
        try:
            self.check(data)
        except ImageDecodeError as exc:  # the downloader's reasons, for the same refusals
            self.fail(record, uuid, "too_many_pixels" if isinstance(exc, ImageTooLargeError) else "undecodable",
                      exc.reason, "screen")
            return None
        return data

    def batches(self) -> Iterator[pa.RecordBatch]:
        uuids = Uuids(self.source.kind)
        rows: list[dict[str, object]] = []
        for record in _limited(self.source.records(images=True), self.limit):
            uuid = uuids(record.key)
            problem = _problem(record)
            if problem is not None:
                self.fail(record, uuid, *problem, "read")
                continue
            data = self.image_of(record, uuid)
            if data is None:
                continue
            digest = hashlib.sha256(data).hexdigest()
            first = self.first_with.get(digest)
            if first is None:
                self.first_with[digest] = record.where
            else:
                self.summary.duplicates += 1
                if self.duplicates == "drop":
                    self.fail(record, uuid, "duplicate_image", f"the same bytes as {first}, which is written",
                              "check")
                    continue
            rows.append({**self.row(record, uuid, data), HASH_COLUMN: digest})
            if len(rows) >= BATCH_ROWS:
                yield pa.RecordBatch.from_pylist(rows, schema=self.schema)
                rows = []
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=self.schema)

    def row(self, record: ImageRecord, uuid: str, data: bytes) -> dict[str, Any]:
        from cladebench.images import image_format

        values = dict(record.values)
        if not values.get("license_name"):
            values.update({k: v for k, v in self.defaults.items() if k.startswith("license")})
        values["attribution"] = values.get("attribution") or self.defaults.get("attribution")
        row = {**values, **taxon_columns(record, self.resolutions), "uuid": uuid, "image": data,
               "image_format": image_format(data), "source_dataset": values.get("source_dataset") or "own-images"}
        row["source_id"] = row.get("source_id") or record.key
        summary = self.summary
        summary.written += 1
        summary.rows_by_status[row["label_status"]] += 1
        if record.label is not None:
            summary.rows_by_label[record.label] += 1
        summary.licenses[row.get("license_name") or "none"] += 1
        summary.without_attribution += not row.get("attribution")
        summary.values_set_null.update(record.set_null)
        return row


def _defaults(license: str | None, attribution: str | None) -> dict[str, object]:
    defaults: dict[str, object] = {"attribution": attribution}
    if license is not None:
        defaults["license_name"], defaults["license_link"] = license_columns(license)
    return defaults


def _lift(dataset_dir: Path, folder: Path) -> None:
    """Move a Lance dataset's entries up into ``folder`` (its paths inside are relative, so it stays whole)."""
    for entry in dataset_dir.iterdir():
        os.rename(entry, folder / entry.name)
    dataset_dir.rmdir()


@dataclass(frozen=True)
class _Read:
    """The first pass: the source, its summary so far, the URLs to fetch and the optional columns present."""

    source: ImageSource
    summary: ImagesLoadSummary
    items: list[DownloadItem]
    extras: list[str]


@dataclass(frozen=True)
class ImagesLoad:
    """``load images`` as the skeleton's stages (:class:`cladebench.curate.skeleton.Builder`); the fields are
    :func:`build_images_dataset`'s arguments."""

    path: Path
    out: Path
    kind: str = "auto"
    columns: Sequence[str] = ()
    images_dir: Path | None = None
    taxonomy: Path | None = None
    limit: int | None = None
    download_dir: Path | None = None
    download_config: DownloadConfig = field(default_factory=DownloadConfig)
    license: str | None = None
    attribution: str | None = None
    overwrite: bool = False
    duplicates: str = "keep"
    writer = WRITER

    def __post_init__(self) -> None:
        if self.duplicates not in DUPLICATES:
            raise UsageError(f"duplicates must be one of {', '.join(DUPLICATES)}, got {self.duplicates!r}")

    @property
    def progress(self) -> bool:
        return self.download_config.progress

    def target(self) -> OutputTarget:
        inputs = tuple(p for p in (self.path, self.images_dir, self.taxonomy, self.download_dir) if p is not None)
        return OutputTarget(self.out, writer=WRITER, overwrite=self.overwrite, inputs=inputs)

    def read(self, run: Run) -> _Read:
        backbone = backbone_path(self.taxonomy)
        source = open_source(self.path, self.kind, parse_overrides(self.columns), self.images_dir)
        labels: set[str] = set()
        extras: set[str] = set()
        items, rows = [], 0
        uuids = Uuids(source.kind)
        for record in _limited(source.records(images=False), self.limit):
            rows += 1
            uuid = uuids(record.key)
            if _problem(record) is None and record.label is not None:  # a record without a label has a problem
                labels.add(record.label)
            if record.problem is None and record.url is not None:
                items.append(DownloadItem(uuid, record.url))
            extras.update(k for k in record.values if k in _OPTIONAL_EXTRAS)
        run.count(rows)
        summary = ImagesLoadSummary(dataset_path=self.out, failures_path=self.out / FAILURES_NAME, kind=source.kind,
                                    source=str(self.path), backbone=str(backbone), source_notes=source.notes,
                                    rows=rows, duplicates_kept=self.duplicates == "keep")
        summary.resolutions = resolve_labels(labels, backbone, authorship=True)
        return _Read(source, summary, items, sorted(extras))

    def choose(self, read: _Read, run: Run) -> _Read:
        run.count(read.summary.rows)  # every record is a row to be; the second pass leaves out what cannot be one
        return read

    def write(self, read: _Read, run: Run) -> Built[ImagesLoadSummary]:
        from cladebench import store

        summary, report = read.summary, None
        if read.items:
            report = download(read.items, run.downloads(self.download_dir), self.download_config)
            summary.download = report
        writer = _Writer(read.source, summary, report, read.extras, self.limit, self.download_config,
                         _defaults(self.license, self.attribution), self.duplicates)
        batches = writer.batches()
        first = next(batches, None)
        if first is None:
            reasons = ", ".join(f"{n:,} {r}" for r, n in summary.failed_by_reason.most_common())
            raise CladebenchError(f"{self.path}: no image could be loaded ({summary.rows:,} records read; "
                                  f"{reasons or 'none found'}); nothing was written")
        dataset_dir = run.staging / ".dataset"
        store.write_dataset(itertools.chain([first], batches), dataset_dir)
        run.count(summary.written)
        _lift(dataset_dir, run.staging)
        failures = pa.Table.from_pylist(writer.failures, schema=_FAILURE_SCHEMA)
        (run.staging / "resolution.json").write_text(json.dumps(summary.resolution_records(), indent=1) + "\n",
                                                     encoding="utf-8")
        return Built(summary, left_out_table(failures, key="key", stage=failures.column("stage").to_pylist()),
                     lambda lines: render_card(summary, lines), record_name="load.json")


def build_images_dataset(path: str | Path, out: str | Path, *, kind: str = "auto", columns: Sequence[str] = (),
                         images_dir: str | Path | None = None, taxonomy: str | Path | None = None,
                         limit: int | None = None, download_dir: str | Path | None = None,
                         download_config: DownloadConfig | None = None, license: str | None = None,
                         attribution: str | None = None, overwrite: bool = False,
                         duplicates: str = "keep") -> ImagesLoadSummary:
    """Load the images of ``path`` into a Lance dataset at ``out`` (see the module docstring); ``license`` and
    ``attribution`` stand in for the rows whose source names none; ``duplicates`` (:data:`DUPLICATES`) says what
    becomes of a photo byte-identical to one written before it."""
    def optional(value: str | Path | None) -> Path | None:
        return None if value is None else Path(value)

    return run_build(ImagesLoad(Path(path), Path(out), kind, tuple(columns), optional(images_dir), optional(taxonomy),
                                limit, optional(download_dir), download_config or DownloadConfig(), license,
                                attribution, overwrite, duplicates))


__all__ = ["DUPLICATES", "FAILURES_NAME", "HASH_COLUMN", "WRITER", "ImagesLoad", "build_images_dataset"]
