"""CrypticBio benchmark CSVs into canonical rows, and their photos fetched into a Lance dataset.

CrypticBio (Manolache et al., 2025; Hugging Face ``gmanolache/CrypticBio``) collects *cryptic*
species: species people confuse with each other, mined from iNaturalist misidentifications, with
GBIF research-grade metadata. Its four benchmark subsets (Common, CommonUnseen, Endangered, Invasive)
ship as CSVs of one format under ``CrypticBio-Benchmark/``::

    scientificName,year,month,day,decimalLatitude,decimalLongitude,url,kingdom,phylum,class,order,family,genus,vernacularName

What the format does, as checked on CrypticBio-Common (15,801 rows, 158 species, 100 photos each and
one with 101), and what this reader makes of it:

- ``year``, ``month``, ``day`` are floats (``2018.0``). Together they are ``observed_on``; when any
  part is missing the date is null and counted. A part that is not a whole number, or a date that
  does not exist, is an error naming the file, the row (1 = the first row after the header; see
  :mod:`cladebench.curate.sources.rows`) and the field.
- ``order`` is empty for every squamate: CrypticBio files Squamata under ``class``. The lineage keeps
  ``class = "Squamata"`` and a null ``order`` rather than inventing Reptilia (see
  :func:`cladebench.taxonomy.Lineage.from_row`, which does all the name parsing).
- ``vernacularName`` is a Python list literal, preferred name first: ``common_name`` is the first,
  ``vernacular_names`` keeps all of them in order.
- A few rows have no coordinates (4 in Common): they are kept, with null latitude and longitude.
  Coordinates outside [-90, 90] / [-180, 180] are errors.
- ``url`` is an iNaturalist open-data photo (``.../photos/<photo id>/original.jpg``) or an
  observation.org photo (``https://observation.org/photos/<photo id>.jpg``); extensions vary in case.

Columns this reader adds to the canonical ones:

- ``taxonomic_group``: the ``class`` value as given. CrypticBio reports results per taxonomic group,
  and its seven groups are exactly these values (Aves, Gastropoda, Agaricomycetes, Insecta,
  Magnoliopsida, Arachnida, Squamata), Squamata included because it sits in ``class``.
- ``cryptic_group``: the row's species and the species it is confused with, ``[anchor, *confusables]``,
  from an optional lookup TSV (``anchor<TAB>species,species,...``, as ``small_lookup_cryptic_group.tsv``).
  A list, not a joined string, because its use is as a label set: zero-shot among a species and its
  look-alikes. An anchor with an empty confusable set has a group of one; a species the lookup does
  not name has a null group (counted), as have all rows when no lookup is given.

Identity and provenance:

- ``source_dataset`` is ``crypticbio-<subset>`` (``crypticbio-common``, ``crypticbio-common-unseen``),
  the subset taken from the file name unless given.
- ``source_id`` is the photo id with its host, ``inaturalist/photos/99353780`` or
  ``observation.org/photos/45369181`` (the two hosts number photos independently), or the URL itself
  when it matches neither pattern. ``source_url`` is the URL.
- ``uuid`` is a UUID-5 of the row's own source key (the photo's ``source_id``), so a rebuild gives the
  same uuids and the same fingerprint, and so do two copies of one file under other names or folders (the
  file's name, which names the subset, is no part of it); a URL repeated within a file gets its occurrence
  number mixed in.
- ``license_name``, ``license_link`` and ``attribution`` are null: the CSV carries no license. The
  photos are individually licensed on iNaturalist and observation.org; filling these in needs their
  APIs, which this offline reader does not call.

Example:
    >>> subset_name("CrypticBio-CommonUnseen.csv")
    'common-unseen'
    >>> photo_source_id("https://inaturalist-open-data.s3.amazonaws.com/photos/99353780/original.jpg")
    'inaturalist/photos/99353780'
"""

from __future__ import annotations

import ast
import calendar
import datetime
import re
import uuid as uuidlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from cladebench import store
from cladebench.curate.fetch import DownloadConfig, DownloadReport, DownloadStore, download
from cladebench.curate.sources import check_out_apart, failures_path_for, open_text, stats_of, with_stats
from cladebench.curate.sources.rows import (
    Row,
    coordinates,
    csv_records,
    number_from_text,
    required_text,
    whole_number_from_text,
)
from cladebench.errors import CladebenchError, SchemaError
from cladebench.paths import atomic_write_parquet
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Lineage, Rank

CSV_COLUMNS: tuple[str, ...] = (
    "scientificName", "year", "month", "day", "decimalLatitude", "decimalLongitude", "url",
    "kingdom", "phylum", "class", "order", "family", "genus", "vernacularName",
)
SOURCE_PREFIX = "crypticbio"
READ_STATS_KEY = b"cladebench.crypticbio"
"""Schema-metadata key of the reader's counts (rows, missing dates, missing coordinates, ...)."""

PHOTO_HOSTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("inaturalist/photos", re.compile(r"^https?://[^/]*inaturalist[^/]*/photos/(\d+)/", re.IGNORECASE)),
    ("observation.org/photos", re.compile(r"^https?://(?:[^/]+\.)?observation\.org/photos/(\d+)\.", re.IGNORECASE)),
)
"""URL pattern of each photo host -> the prefix of its ``source_id``; the group is the photo id."""

READ_SCHEMA = pa.schema([
    *store.canonical_fields("uuid", *RANK_COLUMNS, "scientific_name", "common_name", "latitude", "longitude",
                            "observed_on", "source_dataset", "source_id", "source_url", "license_name", "license_link",
                            "attribution"),
    pa.field("vernacular_names", pa.list_(pa.string())),
    pa.field("taxonomic_group", pa.string()),
    pa.field("cryptic_group", pa.list_(pa.string())),
])
"""Columns of :func:`read_crypticbio` (the canonical ones without images, then the CrypticBio extras)."""


def subset_name(path: str | Path) -> str:
    """``CrypticBio-CommonUnseen.csv`` -> ``common-unseen``; other names are lower-cased and hyphenated."""
    stem = Path(path).stem
    stem = re.sub(r"^crypticbio[-_ ]?", "", stem, flags=re.IGNORECASE) or stem
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", stem)
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-")


def photo_source_id(url: str) -> str:
    """The photo id with its host (``inaturalist/photos/<id>``), or the URL when no host pattern matches."""
    for prefix, pattern in PHOTO_HOSTS:
        match = pattern.match(url)
        if match:
            return f"{prefix}/{match.group(1)}"
    return url


def _group(anchor: str, names: Iterable[str]) -> tuple[str, ...]:
    """``(anchor, *confusables)``: blanks, repeats and the anchor itself dropped, order kept."""
    members = [anchor]
    for name in (n.strip() for n in names):
        if name and name not in members:
            members.append(name)
    return tuple(members)


def read_cryptic_lookup(path: str | Path) -> dict[str, tuple[str, ...]]:
    """Read an ``anchor<TAB>species,species,...`` TSV into anchor -> ``(anchor, *confusables)``.

    Confusables keep their order; blanks, repeats and the anchor itself are dropped. An anchor listed
    twice with different sets, or a line that is not two tab-separated fields, is an error.
    """
    groups: dict[str, tuple[str, ...]] = {}
    _check_input_file(path, "--lookup", "the cryptic-group lookup (anchor<TAB>species,...)")
    with open_text(path) as handle:
        for line_number, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            anchor = fields[0].strip()
            if len(fields) != 2 or not anchor:
                raise SchemaError(
                    f"{path}: line {line_number}: expected 'anchor<TAB>species,species,...', found {line[:120]!r}"
                )
            group = _group(anchor, fields[1].split(","))
            if groups.get(anchor, group) != group:
                raise SchemaError(f"{path}: line {line_number}: anchor {anchor!r} is listed again with another group")
            groups[anchor] = group
    return groups


def _check_input_file(path: str | Path, option: str, what: str) -> None:
    """A missing input, or a folder where a file goes, is one line naming it (not a traceback)."""
    path = Path(path)
    if path.is_dir():
        raise CladebenchError(f"{option} {path} is a folder; give {what}")
    if not path.exists():
        raise CladebenchError(f"{option} {path}: no such file")
    if not path.is_file():  # a FIFO or a device: reading it would wait for a writer, or never end
        raise CladebenchError(f"{option} {path} is not a regular file (a pipe or a device); give {what}")


# --- one row -------------------------------------------------------------------------------------


def _observed_on(record: Mapping[str, str], row: Row) -> datetime.date | None:
    """The date from float parts; ``None`` when any part is missing. An impossible date names its field."""
    year, month, day = (whole_number_from_text(record, f, row) for f in ("year", "month", "day"))
    if year is None or month is None or day is None:
        return None
    if not datetime.MINYEAR <= year <= datetime.MAXYEAR:
        raise row.error("year", f"{record['year']!r} is not a year")
    if not 1 <= month <= 12:
        raise row.error("month", f"{record['month']!r} is not a month (1-12)")
    last = calendar.monthrange(year, month)[1]
    if not 1 <= day <= last:
        raise row.error("day", f"{record['day']!r} is not a day of {year}-{month:02d} (1-{last})")
    return datetime.date(year, month, day)


def _coordinates(record: Mapping[str, str], row: Row) -> tuple[float | None, float | None]:
    names = ("decimalLatitude", "decimalLongitude")
    latitude, longitude = (number_from_text(record, name, row) for name in names)
    return coordinates(latitude, longitude, row, names, shown=(record[names[0]], record[names[1]]))


def _vernacular_names(record: Mapping[str, str], row: Row) -> list[str] | None:
    """All vernacular names in order; the list literal is parsed here, the preferred name by the Lineage."""
    text = (record["vernacularName"] or "").strip()
    if not text:
        return None
    if not text.startswith("["):
        return [text]
    try:
        names = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise row.error("vernacularName", f"{text[:80]!r} is not a list of names") from None
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise row.error("vernacularName", f"{text[:80]!r} is not a list of names")
    return [n.strip() for n in names if n.strip()]


class _Rows:
    """Column lists filled row by row, and the counts the reader reports."""

    def __init__(self) -> None:
        self.columns: dict[str, list[object]] = {f.name: [] for f in READ_SCHEMA}
        self.counts: Counter[str] = Counter()

    def add(self, **values: object) -> None:
        for name, column in self.columns.items():
            column.append(values.get(name))


_TAXON_FIELDS = ("kingdom", "phylum", "class", "order", "family", "genus", "scientificName", "vernacularName")


class _Taxa:
    """Lineage and vernacular names per distinct taxon cell values: a benchmark has ~100 species and
    ~100x as many rows, and parsing the list literal once per row dominated the read time."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, ...], tuple[Lineage, list[str] | None]] = {}
        self._lineages: dict[str, tuple[tuple[str | None, ...], Row]] = {}

    def get(self, record: Mapping[str, str], row: Row) -> tuple[Lineage, list[str] | None]:
        key = tuple(record[f] for f in _TAXON_FIELDS)
        if key not in self._seen:
            names = _vernacular_names(record, row)  # first, so a bad literal is an error naming its row
            lineage = Lineage.from_row(dict(zip(_TAXON_FIELDS, key, strict=True)))
            self._check(record, lineage, row)
            self._seen[key] = (lineage, names)
        return self._seen[key]

    def _check(self, record: Mapping[str, str], lineage: Lineage, row: Row) -> None:
        """A label must mean one taxon: a binomial outside the row's genus, or one scientific name under two
        lineages, would make rows of one name disagree on every rank a task reads."""
        scientific = record["scientificName"].strip()
        binomial = Lineage.from_row({"scientificName": scientific})[Rank.SPECIES]
        genus = lineage[Rank.GENUS]
        if binomial is not None and genus is not None and binomial.split()[0] != genus:
            raise row.error("scientificName", f"{scientific!r} is not in the row's genus {genus!r}")
        ranks = lineage.names[:Rank.SPECIES]
        first, first_row = self._lineages.setdefault(scientific, (ranks, row))
        differs = next((r for r in RANKS[:Rank.SPECIES] if first[r] != ranks[r]), None)
        if differs is not None:
            raise row.error("scientificName", f"{scientific!r} is filed under {differs.column} {ranks[differs]!r} "
                            f"here and under {first[differs]!r} at row {first_row.number}; a name has one lineage")


def _add_row(rows: _Rows, record: Mapping[str, str], row: Row, source_dataset: str,
             lookup: Mapping[str, tuple[str, ...]] | None, url_seen: Counter[str], taxa: _Taxa) -> None:
    scientific_name = required_text(record, "scientificName", row, what="CrypticBio row")
    url = required_text(record, "url", row, what="CrypticBio row")
    observed_on = _observed_on(record, row)
    latitude, longitude = _coordinates(record, row)
    lineage, vernacular_names = taxa.get(record, row)
    occurrence = url_seen[url]
    url_seen[url] += 1
    source_id = photo_source_id(url)
    repeat = url_seen["\0" + source_id]  # two URLs of one photo (sizes) are one source key: told apart too
    url_seen["\0" + source_id] += 1
    identity = f"crypticbio|{source_id}" + (f"|{repeat}" if repeat else "")
    cryptic_group = None if lookup is None else lookup.get(scientific_name)
    flags = {
        "missing_date": observed_on is None,
        "missing_coordinates": latitude is None,
        "without_species": lineage[Rank.SPECIES] is None,
        "without_cryptic_group": lookup is not None and cryptic_group is None,
        "repeated_url": occurrence > 0,
    }
    rows.counts.update(name for name, hit in flags.items() if hit)
    rows.add(
        uuid=str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, identity)),
        **dict(zip(RANK_COLUMNS, lineage.names, strict=True)),
        scientific_name=scientific_name, common_name=lineage.common_name,
        latitude=latitude, longitude=longitude, observed_on=observed_on,
        source_dataset=source_dataset, source_id=source_id, source_url=url,
        vernacular_names=None if vernacular_names is None else list(vernacular_names),
        taxonomic_group=lineage[Rank.CLASS],
        cryptic_group=None if cryptic_group is None else list(cryptic_group),
    )


def read_crypticbio(path: str | Path, *, lookup: str | Path | Mapping[str, Sequence[str]] | None = None,
                    subset: str | None = None) -> pa.Table:
    """Read a CrypticBio benchmark CSV: every row, in file order, as canonical columns without images.

    ``lookup`` is a cryptic-group TSV path or an anchor -> group mapping (see :func:`read_cryptic_lookup`);
    ``subset`` overrides the name taken from the file name. Counts of rows, missing dates and
    coordinates, and rows without a cryptic group are in the schema metadata (see :func:`read_stats`).
    Any bad value is a :class:`SchemaError` naming the file, the row (1 = the first after the header) and the
    field.
    """
    path = Path(path)
    _check_input_file(path, "CSV", "a CrypticBio benchmark CSV (e.g. CrypticBio-Common.csv)")
    source_dataset = f"{SOURCE_PREFIX}-{subset or subset_name(path)}"
    groups = _lookup(lookup)
    rows = _Rows()
    url_seen: Counter[str] = Counter()
    taxa = _Taxa()
    for row, record in csv_records(path, CSV_COLUMNS, what="a CrypticBio benchmark CSV"):
        _add_row(rows, record, row, source_dataset, groups, url_seen, taxa)
    table = pa.table(rows.columns, schema=READ_SCHEMA)
    stats = {
        "file": path.name, "source_dataset": source_dataset, "rows": table.num_rows,
        "lookup": None if lookup is None else (Path(lookup).name if isinstance(lookup, (str, Path)) else "mapping"),
        **{k: rows.counts[k] for k in ("missing_date", "missing_coordinates", "without_species",
                                        "without_cryptic_group", "repeated_url")},
    }
    return with_stats(table, READ_STATS_KEY, stats)


def _lookup(lookup: str | Path | Mapping[str, Sequence[str]] | None) -> dict[str, tuple[str, ...]] | None:
    if lookup is None:
        return None
    if isinstance(lookup, (str, Path)):
        return read_cryptic_lookup(lookup)
    return {anchor: _group(anchor, members) for anchor, members in lookup.items()}


def read_stats(table: pa.Table) -> dict[str, object]:
    """The counts :func:`read_crypticbio` recorded in the table's schema metadata."""
    return stats_of(table, READ_STATS_KEY)


# --- building the dataset ------------------------------------------------------------------------


@dataclass(frozen=True)
class CrypticBioBuild:
    """What a build wrote and what it could not fetch."""

    dataset_path: Path
    """The Lance dataset."""
    failures_path: Path
    """Parquet of rows whose image could not be fetched, beside the dataset (written even when empty)."""
    rows: int
    """Rows read from the CSV (after ``limit``)."""
    written: int
    """Rows in the dataset."""
    failed_by_reason: dict[str, int]
    """Rows left out, by download failure reason."""
    download: DownloadReport
    """The downloader's full report."""
    read_stats: dict[str, object]
    """The reader's counts (missing dates, coordinates, cryptic groups) over the whole CSV, before ``limit``."""

    @property
    def failed(self) -> int:
        return self.rows - self.written


_BATCH_ROWS = 128  # rows (images of a few MB each) held in memory at once while writing


def _image_batches(table: pa.Table, report: DownloadReport) -> Iterator[pa.Table]:
    """Fetched rows with their bytes, read from the download store a batch at a time."""
    uuids = table.column("uuid").to_pylist()
    for start in range(0, table.num_rows, _BATCH_ROWS):
        keys = uuids[start:start + _BATCH_ROWS]
        keep = [k in report.downloaded for k in keys]
        if not any(keep):
            continue
        chunk = table.slice(start, _BATCH_ROWS).filter(pa.array(keep))
        entries = [report.downloaded[k] for k in keys if k in report.downloaded]
        images = [report.store.read_verified(entry) for entry in entries]
        chunk = chunk.append_column(pa.field("image", pa.large_binary(), nullable=False),
                                    pa.array(images, pa.large_binary()))
        chunk = chunk.append_column("image_format", pa.array([e.image_format for e in entries], pa.string()))
        yield chunk.append_column("image_sha256", pa.array([e.sha256 for e in entries], pa.string()))


def _failure_rows(table: pa.Table, report: DownloadReport) -> pa.Table:
    """The download failures joined to their CSV rows (``row``: 1 = the first after the header; species, group)."""
    index = {u: i for i, u in enumerate(table.column("uuid").to_pylist())}
    columns = ("source_url", "scientific_name", "taxonomic_group")
    values = {c: table.column(c).to_pylist() for c in columns}
    rows = []
    for failure in report.failures:
        i = index[failure.key]
        rows.append({"row": i + 1, "uuid": failure.key, **{c: values[c][i] for c in columns},
                     "reason": failure.reason, "detail": failure.detail, "status": failure.status,
                     "exception": failure.exception, "attempts": failure.attempts})
    schema = pa.schema([("row", pa.int64()), ("uuid", pa.string()), *((c, pa.string()) for c in columns),
                        ("reason", pa.string()), ("detail", pa.string()), ("status", pa.int32()),
                        ("exception", pa.string()), ("attempts", pa.int32())])
    return pa.Table.from_pylist(rows, schema=schema)


def build_crypticbio_dataset(
    csv_path: str | Path,
    out: str | Path,
    *,
    lookup: str | Path | Mapping[str, Sequence[str]] | None = None,
    download_config: DownloadConfig | None = None,
    limit: int | None = None,
    download_dir: str | Path | DownloadStore | None = None,
    subset: str | None = None,
) -> CrypticBioBuild:
    """Read a CrypticBio CSV, fetch its photos, and write a Lance dataset at ``out`` (a local path).

    Rows whose photo cannot be fetched are left out of the dataset and listed, with the reason, in
    :func:`failures_path_for` ``(out)``; the returned report counts them. The dataset is written in
    one commit after every download has settled, so a failed or interrupted build leaves no dataset
    behind, and a rerun resumes the downloads from ``download_dir`` (default: the cladebench cache,
    ``downloads/``). ``limit`` keeps the first rows of the file (for trials). ``out`` must not exist yet.
    """
    out = Path(out)
    check_out_apart(out, [csv_path, lookup, download_dir])
    store.check_writable(out)  # a read-only folder is found now, not after the downloads
    if limit is not None and limit < 0:
        raise CladebenchError(f"limit must be non-negative, got {limit}")
    table = read_crypticbio(csv_path, lookup=lookup, subset=subset)
    if limit is not None:
        table = table.slice(0, limit)
    if table.num_rows == 0:
        raise CladebenchError(f"{csv_path}: no rows to build a dataset from")
    if download_dir is None:
        from cladebench.cache import cache_dir

        download_dir = cache_dir("downloads")
    items = zip(table.column("uuid").to_pylist(), table.column("source_url").to_pylist(), strict=True)
    report = download(items, download_dir, download_config)
    failures_path = failures_path_for(out)
    failures = _failure_rows(table, report)
    if not report.downloaded:
        atomic_write_parquet(failures_path, failures)
        raise CladebenchError(f"no photo of the {table.num_rows} rows could be fetched ({report.summary()}); "
                              f"the reasons are in {failures_path}")
    store.write_dataset(_image_batches(table, report), out)
    atomic_write_parquet(failures_path, failures)
    return CrypticBioBuild(
        dataset_path=out, failures_path=failures_path, rows=table.num_rows, written=len(report.downloaded),
        failed_by_reason=report.failed_by_reason, download=report, read_stats=read_stats(table),
    )


__all__ = [
    "CSV_COLUMNS",
    "READ_SCHEMA",
    "CrypticBioBuild",
    "build_crypticbio_dataset",
    "failures_path_for",
    "photo_source_id",
    "read_cryptic_lookup",
    "read_crypticbio",
    "read_stats",
    "subset_name",
]
