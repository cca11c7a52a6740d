"""INQUIRE-Rerank's Parquet shards as rerank rows, streamed into a Lance dataset a batch at a time.

Why apart: the shards hold every candidate's photo (about 1.7 GB for the test split), so they are read a batch
at a time, checked across rows (one text per query id, one candidate per image) and written as they stream;
the mapping of a shard row to a stored row is in :mod:`cladebench.benchmarks.inquire.source`.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cladebench import store
from cladebench.benchmarks.inquire.source.columns import (
    DEFAULT_BATCH_ROWS,
    IMAGE_FIELDS,
    OTHER_SPLIT_WORDS,
    READ_STATS_KEY,
    RERANK_COLUMNS,
    RERANK_OPTIONAL_COLUMNS,
    RERANK_SCHEMA,
    SOURCE_DATASET,
    UUID_NAMESPACE,
    rerank_schema,
)
from cladebench.benchmarks.inquire.source.queries import LineageCache, lineage_values, query_ids_by_text
from cladebench.curate.sources import (
    check_out_apart,
    input_paths,
    parquet_batches,
    parquet_files,
    unknown_format_notes,
    with_stats,
)
from cladebench.curate.sources.rows import Row, coordinates, integer, number_or_none, text_or_none
from cladebench.curate.sources.values import SPLIT_NAMES, folder_of, parse_license, parse_observed_on, split_from_name
from cladebench.errors import CladebenchError, SchemaError
from cladebench.images import sniff_format


@dataclass
class RerankStats:
    """What a pass over INQUIRE-Rerank shards saw; filled while the batches stream."""

    files: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)
    """Files found in a directory given but not read: their names name a split INQUIRE-Rerank does not have."""
    rows_by_split: Counter[str] = field(default_factory=Counter)
    candidates: Counter[tuple[str, int]] = field(default_factory=Counter)
    """Candidates per (split, query_id)."""
    positives: Counter[tuple[str, int]] = field(default_factory=Counter)
    """Relevant candidates per (split, query_id)."""
    counts: Counter[str] = field(default_factory=Counter)
    """Rows with a missing or unusable value, by kind (``missing_date``, ``unrecognised_license``, ...)."""
    unrecognised_licenses: Counter[str] = field(default_factory=Counter)
    """Raw ``license`` values :func:`parse_license` did not recognise, with their row counts."""

    def as_dict(self) -> dict[str, object]:
        per_query = list(self.candidates.values())
        return {
            "files": list(self.files),
            "skipped_files": list(self.skipped_files),
            "rows": sum(self.rows_by_split.values()),
            "rows_by_split": dict(sorted(self.rows_by_split.items())),
            "queries": len(self.candidates),
            "positives": sum(self.positives.values()),
            "candidates_per_query": {"min": min(per_query, default=0), "max": max(per_query, default=0)},
            "queries_without_positive": sum(1 for key in self.candidates if not self.positives[key]),
            **dict(sorted(self.counts.items())),
            "unrecognised_licenses": dict(self.unrecognised_licenses.most_common()),
        }


def parquet_paths_of(parquet_paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """Every Parquet file given, or under a directory given at any depth (a Hub snapshot keeps its shards in
    ``data/``), sorted; :func:`shard_paths` leaves out those that are not INQUIRE-Rerank splits."""
    return parquet_files(parquet_paths, what="INQUIRE-Rerank")


def _names_other_split(path: Path) -> bool:
    words = set(re.split(r"[^a-z]+", path.name.lower()))
    return split_from_name(path) is None and bool(words & set(OTHER_SPLIT_WORDS))


def shard_paths(parquet_paths: str | Path | Iterable[str | Path], *, split: str | None = None
                ) -> tuple[list[Path], list[Path]]:
    """The shards to read and the files skipped, for the paths given (files, or directories searched at every depth).

    A file found in a directory whose name names a split INQUIRE-Rerank does not have (``train-*``, see
    :data:`OTHER_SPLIT_WORDS`) is skipped, unless ``split`` says which split to read every file as. A file
    given by name is always read (and must then name its split, or ``split`` must be given).
    """
    given = [parquet_paths] if isinstance(parquet_paths, (str, Path)) else list(parquet_paths)
    read: list[Path] = []
    skipped: list[Path] = []
    for item in map(Path, given):
        found = parquet_paths_of(item)
        if item.is_dir() and split is None:
            skipped.extend(p for p in found if _names_other_split(p))
            found = [p for p in found if not _names_other_split(p)]
        read.extend(found)
    if not read:
        raise CladebenchError(f"no INQUIRE-Rerank Parquet files in {[str(p) for p in given]}: only "
                              f"{[p.name for p in skipped]}, which name a split INQUIRE-Rerank does not have "
                              "(its splits are validation and test)")
    return read, skipped


@dataclass(frozen=True)
class _Shard:
    """One Parquet file, checked: its split and the columns to read."""

    path: Path
    split: str
    columns: tuple[str, ...]
    optional: dict[str, str | None]
    """Extra column -> the shard column it is read from, or ``None``."""
    image_in_struct: bool


def _open_shard(path: Path, split: str | None, fill_query_ids: bool) -> _Shard:
    """Check a shard's schema (metadata only, no data read) so a bad file fails before any write."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise SchemaError(f"{path}: not a readable Parquet file: {exc}") from None
    names = set(schema.names)
    required = [*RERANK_COLUMNS, *([] if fill_query_ids else ["query_id"])]
    missing = [c for c in required if c not in names]
    if missing:
        hint = (" (give the INQUIRE query CSVs, with --queries or queries= from Python, to take the query ids from "
                "them)" if missing == ["query_id"] else "")
        raise SchemaError(f"{path}: not an INQUIRE-Rerank Parquet file: missing column(s) {missing}{hint}; "
                          f"it has {schema.names}")
    image_type = schema.field("image").type
    in_struct = pa.types.is_struct(image_type)
    if in_struct and image_type.get_field_index("bytes") < 0:
        raise SchemaError(f"{path}: column 'image' is a struct without a 'bytes' field ({image_type})")
    if not in_struct and not (pa.types.is_binary(image_type) or pa.types.is_large_binary(image_type)):
        raise SchemaError(f"{path}: column 'image': expected struct<bytes, path> or binary, found {image_type}")
    split = split or split_from_name(path)
    if split is None:
        raise SchemaError(f"{path}: cannot tell the split from the file name; name it validation-*.parquet or "
                          "test-*.parquet (or pass split='val' or 'test' from Python)")
    optional = {extra: next((s for s in sources if s in names), None)
                for extra, sources in RERANK_OPTIONAL_COLUMNS.items()}
    columns = [*RERANK_COLUMNS, *(["query_id"] if "query_id" in names else []),
               *(s for s in optional.values() if s is not None)]
    return _Shard(path, split, tuple(columns), optional, in_struct)



def _coordinates(latitude: object, longitude: object, where: Row) -> tuple[float | None, float | None]:
    """iNat24 writes an unknown location as NaN: null, like a missing one."""
    return coordinates(number_or_none(latitude, "latitude", where), number_or_none(longitude, "longitude", where),
                       where)


def _image_column(batch: pa.RecordBatch, shard: _Shard, first_row: int) -> tuple[pa.Array, list[str | None]]:
    column = batch.column("image")
    images = pc.struct_field(column, "bytes") if shard.image_in_struct else column
    empty = pc.or_kleene(pc.is_null(images), pc.equal(pc.binary_length(images), 0))
    bad = pc.indices_nonzero(empty)
    if len(bad):
        row = first_row + bad[0].as_py()
        raise Row.at_index(shard.path, row).error(
            "image", "no image bytes; every INQUIRE-Rerank candidate must have its photo")
    heads = pc.binary_slice(images, 0, 16).to_pylist()  # the signature is all sniffing needs
    return images.cast(pa.large_binary()), [sniff_format(h) for h in heads]


def _provenance(row: Mapping[str, object], where: Row) -> dict[str, Any]:
    """License, link and attribution from ``license`` and ``rights_holder`` (never guessed: null when unknown)."""
    license_raw = text_or_none(row["license"], "license", where)
    photo_license = parse_license(license_raw)
    holder = row["rights_holder"].strip() if isinstance(row["rights_holder"], str) else ""
    return {
        "license_name": None if photo_license is None else photo_license.code,
        "license_link": None if photo_license is None else photo_license.link,
        "attribution": photo_license.attribution(holder) if photo_license is not None and holder else None,
        "license_raw": license_raw, "rights_holder": text_or_none(row["rights_holder"], "rights_holder", where),
    }



class _RerankPass:
    """One pass over the shards: rows mapped one by one, with the checks that span rows.

    Candidates must be unique per (split, query, image), and a query id must keep one text, because
    both are what a per-query metric groups on; the first occurrence is remembered to name it.
    """

    def __init__(self, stats: RerankStats, query_ids: Mapping[str, int] | None) -> None:
        self.stats = stats
        self.query_ids = query_ids or {}
        self.candidate_at: dict[tuple[str, int, int], str] = {}
        self.query_at: dict[tuple[str, int], tuple[str, str]] = {}
        self.lineages = LineageCache()

    def _query(self, row: Mapping[str, object], split: str, where: Row) -> tuple[str, int]:
        query = row["query"]
        if not isinstance(query, str) or not query.strip():
            raise where.error("query", f"{query!r} is not a query text")
        if "query_id" in row:
            query_id = integer(row["query_id"], "query_id", where)
        elif query in self.query_ids:
            query_id = self.query_ids[query]
        else:
            raise where.error("query", f"{query!r} is not a query text of the queries given, so it has no query id")
        here = where.here()
        first_text, first_where = self.query_at.setdefault((split, query_id), (query, here))
        if first_text != query:
            raise where.error("query", f"{query!r} differs from {first_text!r}, the text of query {query_id} at "
                                       f"{first_where}")
        return query, query_id

    def _candidate(self, row: Mapping[str, object], split: str, query_id: int, where: Row) -> tuple[int, str]:
        image_id = integer(row["inat24_image_id"], "inat24_image_id", where)
        here = where.here()
        first = self.candidate_at.setdefault((split, query_id, image_id), here)
        if first != here:
            raise where.error("inat24_image_id", f"image {image_id} is already a candidate of {split} query "
                                                 f"{query_id} ({first})")
        file_name = row["inat24_file_name"]
        if not isinstance(file_name, str) or not file_name:
            raise where.error("inat24_file_name", f"{file_name!r} is not an iNat24 file name")
        return image_id, file_name

    def record(self, row: Mapping[str, object], shard: _Shard, where: Row) -> dict[str, object]:
        """The stored row for one candidate; counts what is missing."""
        query, query_id = self._query(row, shard.split, where)
        relevant = row["relevant"]
        if relevant is None or relevant not in (0, 1):
            raise where.error("relevant", f"{relevant!r} is not 0 or 1")
        image_id, file_name = self._candidate(row, shard.split, query_id, where)
        latitude, longitude = _coordinates(row["latitude"], row["longitude"], where)
        try:
            observed_on = parse_observed_on(row["date"])
        except ValueError as exc:
            raise where.error("date", str(exc)) from None
        provenance = _provenance(row, where)
        found = self.lineages.get(folder_of(file_name))
        extras = {name: row.get(source) if source else None for name, source in shard.optional.items()}
        species_id = extras["inat24_species_id"]
        if species_id is not None:
            species_id = integer(species_id, shard.optional["inat24_species_id"] or "inat24_species_id", where)
        self._count(shard.split, query_id, bool(relevant), {
            "missing_date": observed_on is None,
            "missing_coordinates": latitude is None,
            "missing_license": provenance["license_raw"] is None,
            "unrecognised_license": provenance["license_raw"] is not None and provenance["license_name"] is None,
            "missing_rights_holder": not (provenance["rights_holder"] or "").strip(),
            "without_attribution": provenance["attribution"] is None,
            "without_lineage": found is None,
        }, provenance["license_raw"])
        return {
            "uuid": str(uuidlib.uuid5(UUID_NAMESPACE, f"{shard.split}/{query_id}/{image_id}")),
            **lineage_values(None if found is None else found[1]),
            "latitude": latitude, "longitude": longitude, "observed_on": observed_on,
            "source_dataset": SOURCE_DATASET, "source_id": str(image_id), **provenance,
            "split": shard.split, "query_id": query_id, "query": query, "relevant": bool(relevant),
            "clip_score": number_or_none(row["clip_score"], "clip_score", where),
            "supercategory": text_or_none(row["supercategory"], "supercategory", where),
            "category": text_or_none(row["category"], "category", where),
            "iconic_group": text_or_none(row["iconic_group"], "iconic_group", where),
            "inat24_image_id": image_id, "inat24_file_name": file_name,
            "location_uncertainty": number_or_none(extras["location_uncertainty"], "location_uncertainty", where),
            "inat24_species_id": species_id, "inat24_species_name": text_or_none(
                extras["inat24_species_name"], shard.optional["inat24_species_name"] or "inat24_species_name", where),
        }

    def _count(self, split: str, query_id: int, relevant: bool, flags: Mapping[str, bool],
               license_raw: str | None) -> None:
        self.stats.counts.update(name for name, hit in flags.items() if hit)
        if flags["unrecognised_license"] and license_raw is not None:
            self.stats.unrecognised_licenses[license_raw] += 1
        self.stats.candidates[(split, query_id)] += 1
        self.stats.positives[(split, query_id)] += int(relevant)

    def batch(self, batch: pa.RecordBatch, shard: _Shard, first_row: int, images: bool) -> pa.Table:
        """A Parquet batch as a rerank table (with the image columns after ``uuid`` when ``images``)."""
        values = {name: batch.column(name).to_pylist() for name in shard.columns if name != "image"}
        columns: dict[str, list[object]] = {f.name: [] for f in RERANK_SCHEMA}
        for i in range(batch.num_rows):
            row = {name: column[i] for name, column in values.items()}
            record = self.record(row, shard, Row.at_index(shard.path, first_row + i))
            for name, column in columns.items():
                column.append(record[name])
        table = pa.table(columns, schema=RERANK_SCHEMA)
        if images:
            image_bytes, formats = _image_column(batch, shard, first_row)
            self.stats.counts["unknown_image_format"] += sum(f is None for f in formats)
            table = table.add_column(1, IMAGE_FIELDS[0], image_bytes)
            table = table.add_column(2, IMAGE_FIELDS[1], pa.array(formats, pa.string()))
        self.stats.rows_by_split[shard.split] += batch.num_rows
        return table


def iter_inquire_rerank_batches(
    parquet_paths: str | Path | Iterable[str | Path],
    *,
    split: str | None = None,
    queries: pa.Table | str | Path | Sequence[str | Path] | None = None,
    images: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    stats: RerankStats | None = None,
    splits: Sequence[str] = (),
) -> Iterator[pa.Table]:
    """Stream INQUIRE-Rerank shards as canonical tables of at most ``batch_rows`` rows, in file order.

    Memory stays bounded by one batch (and one Parquet row group), whatever the size of the split.
    ``images`` adds ``image`` and ``image_format``; without them the image column is not even read.
    ``split`` overrides the split taken from each file name; ``queries`` (a table from
    :func:`read_inquire_queries` or query CSV paths) supplies ``query_id`` for shards without it.
    ``stats``, when given, is filled as the batches go. Every shard's columns are checked before the
    first batch is yielded. A directory is searched at every depth (the Hub's ``data/`` layout); which of its
    files are read is :func:`shard_paths`'s rule.
    """
    if batch_rows < 1:
        raise CladebenchError(f"batch_rows must be positive, got {batch_rows}")
    if split is not None and split not in SPLIT_NAMES.values():
        raise CladebenchError(f"unknown split {split!r}; INQUIRE's splits are 'val' and 'test'")
    query_ids = None if queries is None else query_ids_by_text(queries)
    paths, skipped = shard_paths(parquet_paths, split=split)
    shards = [_open_shard(p, split, query_ids is not None) for p in paths]
    absent = [s for s in splits if s not in {shard.split for shard in shards}]
    if absent:
        words = [next((word for word, name in SPLIT_NAMES.items() if name == s), s) for s in absent]
        raise CladebenchError(f"no {' or '.join(f'{word}-*.parquet' for word in words)} shard in "
                              f"{[str(p) for p in input_paths(parquet_paths)]}: it holds only "
                              f"{sorted({shard.path.name for shard in shards})}")
    stats = stats if stats is not None else RerankStats()
    stats.skipped_files.extend(str(p) for p in skipped)
    rerank_pass = _RerankPass(stats, query_ids)
    for shard in shards:
        stats.files.append(shard.path.name)
        columns = [c for c in shard.columns if images or c != "image"]
        first_row = 0
        for batch in parquet_batches(shard.path, batch_rows=batch_rows, columns=columns):
            yield rerank_pass.batch(batch, shard, first_row, images)
            first_row += batch.num_rows


def read_inquire_rerank(
    parquet_paths: str | Path | Iterable[str | Path],
    *,
    split: str | None = None,
    queries: pa.Table | str | Path | Sequence[str | Path] | None = None,
    images: bool = False,
) -> pa.Table:
    """Read INQUIRE-Rerank shards into one table of rerank rows (see the module docstring for the mapping).

    Without ``images`` (the default, as for every source reader) the photos are not read, so a whole
    split reads in seconds; with them the table holds every image in memory (the test split is
    about 1.7 GB), which is why :func:`build_inquire_rerank` streams instead. The counts are in the
    schema metadata (:func:`read_stats`).
    """
    stats = RerankStats()
    tables = list(iter_inquire_rerank_batches(parquet_paths, split=split, queries=queries, images=images,
                                              batch_rows=DEFAULT_BATCH_ROWS if images else 4096, stats=stats))
    table = pa.concat_tables(tables) if tables else rerank_schema(images=images).empty_table()
    return with_stats(table, READ_STATS_KEY, stats.as_dict())



@dataclass(frozen=True)
class InquireRerankBuild:
    """What a build of INQUIRE-Rerank wrote."""

    dataset_path: Path
    """The Lance dataset."""
    rows: int
    """Rows written: one per (query, candidate)."""
    fingerprint: str
    """SHA-256 of the uuids in row order (:func:`cladebench.store.fingerprint`)."""
    stats: dict[str, Any]
    """Splits, queries, positives, candidates per query, and counts of missing or unrecognised values."""

    @property
    def notes(self) -> list[str]:
        """What a person should know about the build beyond its row count: the files it did not read, and rows
        whose image bytes are in no known format."""
        skipped = self.stats.get("skipped_files") or []
        notes = unknown_format_notes(self.stats, self.rows)
        if not skipped:
            return notes
        return [f"skipped {len(skipped)} file(s) whose names name a split INQUIRE-Rerank does not have (its splits "
                f"are validation and test): {', '.join(Path(f).name for f in skipped)}", *notes]


def build_inquire_rerank(
    parquet_paths: str | Path | Iterable[str | Path],
    out: str | Path,
    *,
    split: str | None = None,
    queries: pa.Table | str | Path | Sequence[str | Path] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    splits: Sequence[str] = (),
) -> InquireRerankBuild:
    """Write INQUIRE-Rerank shards (files, or a directory of them) to a Lance dataset at ``out``.

    The shards stream through :func:`cladebench.store.write_dataset` a batch at a time, so memory
    stays bounded. Every shard's columns are checked before a byte is written; a bad value found
    later aborts the write and, the dataset being committed only at the end, leaves nothing at
    ``out``. ``out`` must not exist yet. ``splits`` (``"val"``, ``"test"``) must each have a shard among the
    files, or nothing is written and the error names the files found (a mirror without its test shards).
    """
    out = Path(out)
    check_out_apart(out, [*input_paths(parquet_paths),
                          *(input_paths(queries) if not isinstance(queries, pa.Table) else [])])
    stats = RerankStats()
    batches = iter_inquire_rerank_batches(parquet_paths, split=split, queries=queries, images=True,
                                          batch_rows=batch_rows, stats=stats, splits=splits)
    dataset = store.write_dataset(batches, out)
    return InquireRerankBuild(dataset_path=out, rows=dataset.count_rows(), fingerprint=store.fingerprint(dataset),
                              stats=stats.as_dict())


__all__ = ["InquireRerankBuild", "RerankStats", "build_inquire_rerank", "iter_inquire_rerank_batches",
           "parquet_paths_of", "read_inquire_rerank", "shard_paths"]
