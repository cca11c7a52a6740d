"""The pass over iNat Co-Observed rows: each published row mapped to a stored row, with the checks that span rows.

Why apart: it is the mapping the package docstring describes (organisms, divergence rank, provenance), used both
by the readers and by the build's first pass, which checks every row before any download.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from cladebench.benchmarks.coobserved.source.columns import (
    MAX_LISTED_MISMATCHES,
    READ_SCHEMA,
    SOURCE_DATASET,
    SourceFile,
    parse_divergence_rank,
    row_uuid,
)
from cladebench.curate.sources import parquet_batches
from cladebench.curate.sources.rows import (
    Row,
    boolean_or_none,
    coordinates,
    integer_or_none,
    number_or_none,
    text_or_none,
)
from cladebench.curate.sources.values import parse_license, parse_observed_on
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank, divergence_rank


def _coordinates(row: Mapping[str, object], file: SourceFile, where: Row) -> tuple[float | None, float | None]:
    names = (file.columns["latitude"] or "latitude", file.columns["longitude"] or "longitude")
    latitude = number_or_none(row.get("latitude"), names[0], where)
    longitude = number_or_none(row.get("longitude"), names[1], where)
    return coordinates(latitude, longitude, where, names)


ROW_COUNTS: tuple[str, ...] = (
    "divergence_rank_mismatch", "missing_date", "missing_coordinates", "missing_license", "unrecognised_license",
    "attribution_from_license", "without_attribution", "organism_species_normalised", "organism_without_species",
    "organism_scientific_name_from_lineage",
)
"""Counts every pass reports (organisms counted one by one, the rest per row)."""
IMAGE_COUNTS: tuple[str, ...] = (
    "image_embedded", "image_fetched", "image_fetch_failed", "unknown_image_format", "image_sha256_differs",
)
"""Counts a pass that reads the images reports too."""


@dataclass
class CoObservedStats:
    """What a pass over iNat Co-Observed files saw; filled while the batches stream."""

    files: list[dict[str, object]] = field(default_factory=list)
    """Per file: its name, the column each field was read from, and the absent columns and organism fields."""
    rows: int = 0
    """Rows read (after ``limit``)."""
    divergence_ranks: Counter[str] = field(default_factory=Counter)
    """Rows per published divergence rank (normalised)."""
    counts: Counter[str] = field(default_factory=Counter)
    """Rows (or organisms) with a missing, derived or suspicious value, by kind."""
    unrecognised_licenses: Counter[str] = field(default_factory=Counter)
    """Raw ``license`` values :func:`parse_license` did not recognise, with their row counts."""
    mismatches: list[dict[str, object]] = field(default_factory=list)
    """The first :data:`MAX_LISTED_MISMATCHES` rows whose published divergence rank differs from the lineages'."""
    images: bool = False
    """Whether the pass read the images (and so reports :data:`IMAGE_COUNTS`)."""

    def as_dict(self) -> dict[str, object]:
        keys = (*ROW_COUNTS, *(IMAGE_COUNTS if self.images else ()))
        return {
            "files": list(self.files),
            "rows": self.rows,
            "divergence_ranks": {r: self.divergence_ranks[r] for r in RANK_COLUMNS if self.divergence_ranks[r]},
            **{k: self.counts[k] for k in keys},
            "unrecognised_licenses": dict(self.unrecognised_licenses.most_common()),
            "divergence_rank_mismatches": list(self.mismatches),
        }


class PairPass:
    """Rows mapped one by one, with the checks that span rows (a photo id once across all files)."""

    def __init__(self, stats: CoObservedStats) -> None:
        self.stats = stats
        self.photo_at: dict[int, str] = {}

    def _organism(self, value: object, index: int, file: SourceFile, where: Row) -> tuple[dict[str, Any], Lineage]:
        column = file.columns["organisms"]
        if not isinstance(value, Mapping):
            raise where.error(f"{column}[{index}]", f"{value!r} is not an organism")

        def get(name: str) -> tuple[object, str]:
            source = file.organism_fields[name]
            return (None if source is None else value.get(source)), f"{column}[{index}].{source or name}"

        def text(name: str) -> str | None:
            raw, label = get(name)
            return text_or_none(raw, label, where)

        species_raw = text("species")
        taxon_id = integer_or_none(*get("taxon_id"), where)
        lineage = Lineage(tuple(text(c) for c in RANK_COLUMNS), common_name=text("common_name"), taxon_id=taxon_id)
        if lineage.deepest_rank is None:
            raise where.error(f"{column}[{index}]", "no rank is named; every organism has a lineage")
        species = lineage.names[Rank.SPECIES]
        if species_raw is not None and species != species_raw.strip():
            self.stats.counts["organism_species_normalised"] += 1
        if species is None:
            self.stats.counts["organism_without_species"] += 1
        scientific_name = text("scientific_name")
        if scientific_name is None:
            scientific_name = lineage.scientific_name
            self.stats.counts["organism_scientific_name_from_lineage"] += 1
        record = {
            "observation_uuid": text("observation_uuid"), "taxon_id": taxon_id,
            **dict(zip(RANK_COLUMNS, lineage.names, strict=True)),
            "scientific_name": scientific_name, "common_name": lineage.common_name,
            "observation_url": text("observation_url"), "taxon_url": text("taxon_url"),
            "quality_grade": text("quality_grade"),
            "species_in_tol200m": boolean_or_none(*get("species_in_tol200m"), where),
        }
        return record, lineage

    def _organisms(self, row: Mapping[str, object], file: SourceFile,
                   where: Row) -> tuple[list[dict[str, object]], str | None]:
        """The two organisms and the rank at which their lineages part (``None`` when they do not)."""
        column = file.columns["organisms"]
        assert column is not None  # a required column
        value = row["organisms"]
        if not isinstance(value, list) or len(value) != 2:
            found = ("null" if value is None else repr(value) if not isinstance(value, list)
                     else f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}")
            raise where.error(column, f"expected a list of exactly two organisms, found {found}")
        (first, first_lineage), (second, second_lineage) = (
            self._organism(v, i, file, where) for i, v in enumerate(value))
        recomputed = divergence_rank(first_lineage, second_lineage)
        return [first, second], None if recomputed is None else recomputed.column

    def _photo_id(self, row: Mapping[str, object], file: SourceFile, where: Row) -> int:
        column = file.columns["photo_id"] or "photo_id"
        photo_id = integer_or_none(row["photo_id"], column, where)
        if photo_id is None or photo_id < 0:
            raise where.error(column, f"{row['photo_id']!r} is not a photo id; every row has one")
        first = self.photo_at.setdefault(photo_id, where.here())
        if first != where.here():
            raise where.error(column, f"photo {photo_id} is already at {first}; a photo is one row")
        return photo_id

    def _provenance(self, row: Mapping[str, object], file: SourceFile, where: Row) -> dict[str, object]:
        license_raw = text_or_none(row["license"], file.columns["license"] or "license", where)
        photo_license = parse_license(license_raw)
        observer_name = text_or_none(row.get("observer_name"), file.columns["observer_name"] or "observer_name", where)
        attribution = text_or_none(row.get("attribution"), file.columns["attribution"] or "attribution", where)
        if attribution is None and photo_license is not None and observer_name and observer_name.strip():
            attribution = photo_license.attribution(observer_name.strip())
            self.stats.counts["attribution_from_license"] += 1
        link = text_or_none(row.get("license_url"), file.columns["license_url"] or "license_url", where)
        if link is None and photo_license is not None:
            link = photo_license.link
        counts = self.stats.counts
        counts["missing_license"] += license_raw is None
        if license_raw is not None and photo_license is None:
            counts["unrecognised_license"] += 1
            self.stats.unrecognised_licenses[license_raw] += 1
        counts["without_attribution"] += attribution is None
        return {
            "license_name": None if photo_license is None else photo_license.code, "license_link": link,
            "attribution": attribution, "license_raw": license_raw, "observer_name": observer_name,
        }

    def record(self, row: Mapping[str, object], file: SourceFile, where: Row) -> dict[str, object]:
        """The stored row for one photo; counts what is missing or does not agree."""
        photo_id = self._photo_id(row, file, where)
        organisms, recomputed = self._organisms(row, file, where)
        try:
            published = parse_divergence_rank(row["divergence_rank"])
        except ValueError as exc:
            raise where.error(file.columns["divergence_rank"] or "divergence_rank", str(exc)) from None
        self.stats.divergence_ranks[published] += 1
        if recomputed != published:
            self.stats.counts["divergence_rank_mismatch"] += 1
            if len(self.stats.mismatches) < MAX_LISTED_MISMATCHES:
                self.stats.mismatches.append({"file": where.path.name, "row": where.number, "photo_id": photo_id,
                                              "published": published, "recomputed": recomputed})
        try:
            observed_on = parse_observed_on(row["observed_on"])
        except ValueError as exc:
            raise where.error(file.columns["observed_on"] or "observed_on", str(exc)) from None
        latitude, longitude = _coordinates(row, file, where)
        self.stats.counts["missing_date"] += observed_on is None
        self.stats.counts["missing_coordinates"] += latitude is None

        def text(name: str) -> str | None:
            return text_or_none(row.get(name), file.columns[name] or name, where)

        return {
            "uuid": row_uuid(photo_id),
            **dict.fromkeys((*RANK_COLUMNS, "scientific_name", "common_name", "taxon_id")),
            "latitude": latitude, "longitude": longitude, "observed_on": observed_on,
            "source_dataset": SOURCE_DATASET, "source_id": str(photo_id), "source_url": text("image_url"),
            **self._provenance(row, file, where),
            "organisms": organisms, "divergence_rank": published, "divergence_rank_recomputed": recomputed,
            "kingdom_pair": text("kingdom_pair"), "class_pair": text("class_pair"),
            "photo_id": photo_id, "photo_uuid": text("photo_uuid"), "photo_page_url": text("photo_page_url"),
            "image_url_medium": text("image_url_medium"),
            "observer_id": integer_or_none(row.get("observer_id"), file.columns["observer_id"] or "observer_id", where),
            "observer_login": text("observer_login"),
            "positional_accuracy_m": number_or_none(row.get("positional_accuracy_m"),
                                             file.columns["positional_accuracy_m"] or "positional_accuracy_m", where),
            "n_photos_sharing_observation_pair": integer_or_none(
                row.get("n_photos_sharing_observation_pair"),
                file.columns["n_photos_sharing_observation_pair"] or "n_photos_sharing_observation_pair", where),
            "in_tol200m": boolean_or_none(row.get("in_tol200m"), file.columns["in_tol200m"] or "in_tol200m", where),
            "published_image_sha256": text("image_sha256"),
        }

    def batch(self, batch: pa.RecordBatch, file: SourceFile, first_row: int) -> pa.Table:
        """A Parquet batch as stored rows without images."""
        values = {name: batch.column(name).to_pylist() for name in batch.schema.names if name != "image"}
        columns: dict[str, list[object]] = {f.name: [] for f in READ_SCHEMA}
        for i in range(batch.num_rows):
            row = {name: column[i] for name, column in values.items()}
            record = self.record(row, file, Row.at_index(file.path, first_row + i))
            for name, column in columns.items():
                column.append(record[name])
        self.stats.rows += batch.num_rows
        return pa.table(columns, schema=READ_SCHEMA)


def scan(files: list[SourceFile], *, images: bool, batch_rows: int,
          limit: int | None) -> Iterator[tuple[SourceFile, int, pa.RecordBatch]]:
    """Each file's batches in order, with the 0-based index of the batch's first row; at most ``limit`` rows."""
    left = limit
    for file in files:
        first_row = 0
        for batch in parquet_batches(file.path, batch_rows=batch_rows, columns=file.read_columns(images)):
            if left is not None:
                if left <= 0:
                    return
                batch = batch.slice(0, left)
                left -= batch.num_rows
            renamed = batch.rename_columns(
                [next(f for f, c in file.columns.items() if c == name) for name in batch.schema.names])
            yield file, first_row, renamed
            first_row += batch.num_rows



__all__ = ["IMAGE_COUNTS", "ROW_COUNTS", "CoObservedStats", "PairPass", "scan"]
