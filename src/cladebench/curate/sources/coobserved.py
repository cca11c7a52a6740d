"""iNat Co-Observed: iNaturalist photos that show two organisms of different species, as pair rows in a Lance dataset.

iNat Co-Observed (Hugging Face ``dcher95/inat-coobserved``, Parquet, 5,996 rows) collects photos that
iNaturalist observers attached to two observations of different species. One row is one photo; its
``organisms`` list holds the two organisms, each with a seven-rank lineage, and ``divergence_rank``
names the broadest rank at which the two lineages part. Steered lineage completion conditions on it:
the image and one organism's lineage down to that rank, the rest of the lineage to be predicted.

The columns the Hub's dataset viewer shows for the published files::

    photo_id, photo_uuid, image, image_url, image_url_medium, photo_page_url, width, height, image_format,
    image_sha256, license, license_url, attribution, observer_id, observer_login, observer_name,
    observed_on, latitude, longitude, positional_accuracy_m, divergence_rank, kingdom_pair, class_pair,
    n_photos_sharing_observation_pair, organisms, in_tol200m, source

and in each ``organisms`` entry ``observation_uuid``, ``observation_url``, ``taxon_id``, ``taxon_url``,
the seven ranks, ``scientific_name``, ``quality_grade`` and ``species_in_tol200m``. The reader is
written against those names and accepts the aliases in :data:`COLUMN_ALIASES` and
:data:`ORGANISM_ALIASES` (``inat_photo_id``, ``date``, ``lat``/``lon``, ``cls``, ...); the first alias
present wins, and the column each field was read from is recorded per file in the read stats.

How a published row becomes a stored row (the store's co-observed shape, as
:meth:`cladebench.synthetic.World.pair_table` writes it):

- ``uuid`` is a UUID-5 of the photo id in :data:`UUID_NAMESPACE` (:func:`row_uuid`), so a rebuild gives
  the same uuids and the same fingerprint. A photo id that repeats is an error naming both rows.
- ``image`` is the image's bytes, unchanged: the ``bytes`` of an HF image struct, or a binary column.
  ``image_format`` is sniffed from the bytes (:func:`cladebench.images.sniff_format`; an unknown
  signature gives null and is counted), ``image_sha256`` is the SHA-256 of the stored bytes, and the
  published ``image_sha256`` stays in ``published_image_sha256`` (rows where they differ are counted:
  the published hash may describe the original photo rather than the embedded copy).
- A row without image bytes is fetched from its ``image_url`` by :func:`build_inat_coobserved`
  (with :func:`cladebench.curate.fetch.download`); a photo that cannot be fetched leaves its row out and
  is listed with the reason in ``<out>.failures.parquet``. Without a URL, such a row is an error.
- The canonical per-organism columns (ranks, ``scientific_name``, ``common_name``, ``taxon_id``) are
  null: a row is a photo of two organisms. ``organisms`` is a list of exactly two structs of
  :data:`ORGANISM_TYPE`, whose first fields are those of ``synthetic.ORGANISM_TYPE``. ``species`` is the
  lower-case epithet, as in the store: a binomial in the published ``species`` is split by
  :class:`cladebench.taxonomy.Lineage`'s rules (counted). ``scientific_name`` is kept as published;
  when it is null it is the lineage's (counted). An organism with no rank named is an error.
- ``divergence_rank`` is the published value as a rank name (``kingdom`` .. ``species``, any case,
  ``cls`` accepted); anything else, or null, is an error. It is compared with
  :func:`cladebench.taxonomy.divergence_rank` of the two lineages: the recomputed rank is always stored
  in ``divergence_rank_recomputed`` (null when the lineages do not differ), and a mismatch is counted
  and listed in the read stats, never silently replaced.
- ``kingdom_pair`` and ``class_pair`` are kept as published (``Animalia + Animalia``).
- ``license_name`` is iNaturalist's code parsed from ``license`` by
  :func:`cladebench.curate.sources.inquire.parse_license`; the raw value stays in ``license_raw``; a value it
  does not recognise gives null and is counted. ``license_link`` is the published ``license_url``, or
  the parsed license's link when that is absent.
- ``attribution`` is the published one, verbatim; when it is missing it is iNaturalist's rule applied
  to the license and ``observer_name`` (counted), or null when either is unknown (counted).
- ``observed_on`` is the calendar date (:func:`cladebench.curate.sources.inquire.parse_observed_on`).
  ``latitude``/``longitude`` NaN or null become null (counted); one without the other, or a value out
  of range, is an error.
- ``source_dataset`` is ``inat-coobserved``, ``source_id`` the photo id, ``source_url`` the image URL.
- Extra columns: ``divergence_rank_recomputed``, ``kingdom_pair``, ``class_pair``, ``photo_id``,
  ``photo_uuid``, ``photo_page_url``, ``image_url_medium``, ``license_raw``, ``observer_id``,
  ``observer_login``, ``observer_name``, ``positional_accuracy_m``,
  ``n_photos_sharing_observation_pair``, ``in_tol200m``, ``published_image_sha256``; each is null when
  its file lacks the column (the absent columns are listed per file in the read stats).

Required columns: ``photo_id``, ``organisms``, ``divergence_rank``, ``license``, ``observed_on``,
``latitude``, ``longitude``, and ``image`` or ``image_url``; required in each organism: the seven
ranks. A missing one is a :class:`SchemaError` naming the file and the column (and the columns it
has), found before anything is written. A bad value names the file, the 0-based row of the Parquet
file and the field. A build is committed only at its end, so an error leaves nothing at ``out``.

Example:
    >>> row_uuid(4047) == row_uuid("4047")
    True
    >>> parse_divergence_rank("Phylum"), parse_divergence_rank("cls")
    ('phylum', 'class')
"""

from __future__ import annotations

import hashlib
import math
import os
import uuid as uuidlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cladebench import store
from cladebench.curate.fetch import DownloadConfig, DownloadReport, DownloadStore, download
from cladebench.curate.sources import (
    check_out_apart,
    failures_path_for,
    input_paths,
    parquet_files,
    stats_of,
    with_stats,
)
from cladebench.curate.sources.inquire import parse_license, parse_observed_on
from cladebench.errors import CladebenchError, SchemaError
from cladebench.images import sniff_format
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank, divergence_rank

SOURCE_DATASET = "inat-coobserved"
UUID_NAMESPACE = uuidlib.uuid5(uuidlib.NAMESPACE_URL, "https://huggingface.co/datasets/dcher95/inat-coobserved")
"""Namespace of the rows' UUID-5s; fixed, so uuids do not depend on where the files lie."""
READ_STATS_KEY = b"cladebench.coobserved"
"""Schema-metadata key of a reader's counts."""
DEFAULT_BATCH_ROWS = 128
"""Rows held at once while streaming a Parquet file (the embedded photos are at most 500 px wide)."""
MAX_LISTED_MISMATCHES = 50
"""Divergence-rank mismatches listed one by one in the stats; all of them are counted."""

COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "photo_id": ("photo_id", "inat_photo_id", "photoID"),
    "organisms": ("organisms",),
    "divergence_rank": ("divergence_rank",),
    "license": ("license", "license_code", "license_name"),
    "observed_on": ("observed_on", "date", "observation_date", "eventDate"),
    "latitude": ("latitude", "lat", "decimalLatitude"),
    "longitude": ("longitude", "lon", "lng", "decimalLongitude"),
    "image": ("image", "image_bytes"),
    "image_url": ("image_url", "photo_url", "url", "original_url"),
    "kingdom_pair": ("kingdom_pair",),
    "class_pair": ("class_pair",),
    "attribution": ("attribution",),
    "license_url": ("license_url", "license_link"),
    "photo_uuid": ("photo_uuid",),
    "photo_page_url": ("photo_page_url",),
    "image_url_medium": ("image_url_medium", "medium_url"),
    "image_sha256": ("image_sha256",),
    "observer_id": ("observer_id", "user_id"),
    "observer_login": ("observer_login", "user_login"),
    "observer_name": ("observer_name", "observer", "user_name", "rights_holder"),
    "positional_accuracy_m": ("positional_accuracy_m", "positional_accuracy"),
    "n_photos_sharing_observation_pair": ("n_photos_sharing_observation_pair",),
    "in_tol200m": ("in_tol200m",),
}
"""Field -> the column names it is read from, first present wins."""
REQUIRED_COLUMNS: tuple[str, ...] = (
    "photo_id", "organisms", "divergence_rank", "license", "observed_on", "latitude", "longitude",
)
"""Fields every file must have; ``image`` or ``image_url`` is required too."""

ORGANISM_ALIASES: dict[str, tuple[str, ...]] = {
    "observation_uuid": ("observation_uuid", "uuid"),
    "taxon_id": ("taxon_id", "taxonID", "inat_taxon_id"),
    "kingdom": ("kingdom",),
    "phylum": ("phylum",),
    "class": ("class", "cls", "class_"),
    "order": ("order", "order_"),
    "family": ("family",),
    "genus": ("genus",),
    "species": ("species", "specific_epithet", "specificEpithet"),
    "scientific_name": ("scientific_name", "scientificName"),
    "common_name": ("common_name", "vernacular_name", "preferred_common_name"),
    "observation_url": ("observation_url",),
    "taxon_url": ("taxon_url",),
    "quality_grade": ("quality_grade",),
    "species_in_tol200m": ("species_in_tol200m", "in_tol200m"),
}
"""Organism field -> the struct field names it is read from, first present wins."""

ORGANISM_TYPE = pa.struct([
    pa.field("observation_uuid", pa.string()),
    pa.field("taxon_id", pa.int64()),
    *(pa.field(c, pa.string()) for c in RANK_COLUMNS),
    pa.field("scientific_name", pa.string()),
    pa.field("common_name", pa.string()),
    pa.field("observation_url", pa.string()),
    pa.field("taxon_url", pa.string()),
    pa.field("quality_grade", pa.string()),
    pa.field("species_in_tol200m", pa.bool_()),
])
"""One entry of ``organisms``: the fields of ``synthetic.ORGANISM_TYPE`` first, then iNat Co-Observed's own."""

READ_SCHEMA = pa.schema([
    pa.field("uuid", pa.string(), nullable=False),
    *(pa.field(c, pa.string()) for c in RANK_COLUMNS),
    pa.field("scientific_name", pa.string()),
    pa.field("common_name", pa.string()),
    pa.field("taxon_id", pa.int64()),
    pa.field("latitude", pa.float64()),
    pa.field("longitude", pa.float64()),
    pa.field("observed_on", pa.date32()),
    pa.field("source_dataset", pa.string()),
    pa.field("source_id", pa.string()),
    pa.field("source_url", pa.string()),
    pa.field("license_name", pa.string()),
    pa.field("license_link", pa.string()),
    pa.field("attribution", pa.string()),
    pa.field("organisms", pa.list_(ORGANISM_TYPE)),
    pa.field("divergence_rank", pa.string()),
    pa.field("divergence_rank_recomputed", pa.string()),
    pa.field("kingdom_pair", pa.string()),
    pa.field("class_pair", pa.string()),
    pa.field("photo_id", pa.int64()),
    pa.field("photo_uuid", pa.string()),
    pa.field("photo_page_url", pa.string()),
    pa.field("image_url_medium", pa.string()),
    pa.field("license_raw", pa.string()),
    pa.field("observer_id", pa.int64()),
    pa.field("observer_login", pa.string()),
    pa.field("observer_name", pa.string()),
    pa.field("positional_accuracy_m", pa.float64()),
    pa.field("n_photos_sharing_observation_pair", pa.int64()),
    pa.field("in_tol200m", pa.bool_()),
    pa.field("published_image_sha256", pa.string()),
])
"""Columns of a row without its image (:func:`read_inat_coobserved`)."""
IMAGE_FIELDS = (
    pa.field("image", pa.large_binary(), nullable=False),
    pa.field("image_format", pa.string()),
    pa.field("image_sha256", pa.string()),
)
"""The image columns put right after ``uuid`` when images are read."""


def row_uuid(photo_id: int | str) -> str:
    """The stored uuid of a photo: UUID-5 of its decimal id in :data:`UUID_NAMESPACE`."""
    return str(uuidlib.uuid5(UUID_NAMESPACE, str(int(photo_id))))


def parse_divergence_rank(value: Any) -> str:
    """A divergence rank as its rank name (``kingdom`` .. ``species``); anything else raises ValueError."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{value!r} is not a rank name (kingdom, phylum, class, order, family, genus, species)")
    try:
        return Rank.parse(value).column
    except CladebenchError:
        raise ValueError(f"{value!r} is not a rank name (kingdom, phylum, class, order, family, genus, "
                         "species)") from None


def read_schema(*, images: bool) -> pa.Schema:
    """Columns of a batch: :data:`READ_SCHEMA`, with :data:`IMAGE_FIELDS` after ``uuid`` when ``images``."""
    if not images:
        return READ_SCHEMA
    return pa.schema([READ_SCHEMA.field("uuid"), *IMAGE_FIELDS, *list(READ_SCHEMA)[1:]])


def parquet_paths_of(parquet_paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """The files to read: the paths given, or every ``*.parquet`` under a directory given, at any depth (the Hub's
    ``data/`` layout nests them; :func:`cladebench.curate.sources.parquet_files`)."""
    return parquet_files(parquet_paths, what="iNat Co-Observed")


# --- one file, checked before anything is read -----------------------------------------------------


@dataclass(frozen=True)
class _File:
    """One Parquet file: which of its columns (and organism fields) each field is read from."""

    path: Path
    columns: dict[str, str | None]
    """Field -> the file's column, or ``None`` when absent."""
    organism_fields: dict[str, str | None]
    """Organism field -> the struct's field, or ``None`` when absent."""
    image_in_struct: bool

    def read_columns(self, images: bool) -> list[str]:
        return [c for f, c in self.columns.items() if c is not None and (images or f != "image")]

    def describe(self) -> dict[str, Any]:
        return {
            "file": self.path.name,
            "columns": {f: c for f, c in self.columns.items() if c is not None},
            "absent_columns": [f for f, c in self.columns.items() if c is None],
            "absent_organism_fields": [f for f, c in self.organism_fields.items() if c is None],
        }


def _aliases(names: Mapping[str, tuple[str, ...]], field_name: str) -> str:
    aliases = names[field_name]
    return repr(field_name) + (f" (or {', '.join(repr(a) for a in aliases if a != field_name)})"
                               if len(aliases) > 1 else "")


def _organism_struct(path: Path, column: str, schema: pa.Schema) -> pa.StructType:
    list_type = schema.field(column).type
    if not (pa.types.is_list(list_type) or pa.types.is_large_list(list_type)) or \
            not pa.types.is_struct(list_type.value_type):
        raise SchemaError(f"{path}: column {column!r}: expected a list of structs (one per organism), "
                          f"found {list_type}")
    return list_type.value_type


def _open_file(path: Path) -> _File:
    """Check a file's schema (metadata only) so that a bad file fails before any batch is read."""
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise SchemaError(f"{path}: not a readable Parquet file: {exc}") from None
    names = set(schema.names)
    columns = {f: next((a for a in aliases if a in names), None) for f, aliases in COLUMN_ALIASES.items()}
    missing = [f for f in REQUIRED_COLUMNS if columns[f] is None]
    if missing:
        raise SchemaError(f"{path}: not an iNat Co-Observed Parquet file: missing column(s) "
                          f"{', '.join(_aliases(COLUMN_ALIASES, f) for f in missing)}; it has {schema.names}")
    if columns["image"] is None and columns["image_url"] is None:
        raise SchemaError(f"{path}: not an iNat Co-Observed Parquet file: no image column "
                          f"({_aliases(COLUMN_ALIASES, 'image')}) and no image URL column "
                          f"({_aliases(COLUMN_ALIASES, 'image_url')}); it has {schema.names}")
    image_in_struct = False
    if columns["image"] is not None:
        image_type = schema.field(columns["image"]).type
        image_in_struct = pa.types.is_struct(image_type)
        if image_in_struct and image_type.get_field_index("bytes") < 0:
            raise SchemaError(f"{path}: column {columns['image']!r} is a struct without a 'bytes' field ({image_type})")
        if not image_in_struct and not (pa.types.is_binary(image_type) or pa.types.is_large_binary(image_type)):
            raise SchemaError(f"{path}: column {columns['image']!r}: expected struct<bytes, path> or binary, "
                              f"found {image_type}")
    struct = _organism_struct(path, columns["organisms"], schema)
    present = {struct.field(i).name for i in range(struct.num_fields)}
    organism_fields = {f: next((a for a in aliases if a in present), None) for f, aliases in ORGANISM_ALIASES.items()}
    missing = [f for f in RANK_COLUMNS if organism_fields[f] is None]
    if missing:
        raise SchemaError(f"{path}: column {columns['organisms']!r}: organisms lack field(s) "
                          f"{', '.join(_aliases(ORGANISM_ALIASES, f) for f in missing)}; they have "
                          f"{[struct.field(i).name for i in range(struct.num_fields)]}")
    return _File(path, columns, organism_fields, image_in_struct)


# --- values ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    """A row's place in its file, for error messages a person can act on."""

    path: Path
    row: int

    def error(self, field_name: str, problem: str) -> SchemaError:
        return SchemaError(f"{self.path}: row {self.row} (0-based row), field {field_name!r}: {problem}")

    def here(self) -> str:
        return f"{self.path.name} row {self.row}"


def _text(value: Any, field_name: str, where: _Where) -> str | None:
    """Text as written; null and empty text are null; anything else is an error."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise where.error(field_name, f"{value!r} is not text")
    return value


def _integer(value: Any, field_name: str, where: _Where) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise where.error(field_name, f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise where.error(field_name, f"{value!r} is not an integer")


def _number(value: Any, field_name: str, where: _Where) -> float | None:
    """A float; null and NaN are null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.error(field_name, f"{value!r} is not a number")
    return None if math.isnan(value) else float(value)


def _boolean(value: Any, field_name: str, where: _Where) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise where.error(field_name, f"{value!r} is not true or false")


def _coordinates(row: Mapping[str, Any], file: _File, where: _Where) -> tuple[float | None, float | None]:
    names = {f: file.columns[f] or f for f in ("latitude", "longitude")}
    latitude = _number(row.get("latitude"), names["latitude"], where)
    longitude = _number(row.get("longitude"), names["longitude"], where)
    if (latitude is None) != (longitude is None):
        missing = "latitude" if latitude is None else "longitude"
        raise where.error(names[missing], "missing while the other coordinate is given")
    for name, value, bound in (("latitude", latitude, 90.0), ("longitude", longitude, 180.0)):
        if value is not None and not -bound <= value <= bound:
            raise where.error(names[name], f"{value!r} is outside [-{bound:g}, {bound:g}]")
    return latitude, longitude


# --- the pass over the files -----------------------------------------------------------------------


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

    files: list[dict[str, Any]] = field(default_factory=list)
    """Per file: its name, the column each field was read from, and the absent columns and organism fields."""
    rows: int = 0
    """Rows read (after ``limit``)."""
    divergence_ranks: Counter[str] = field(default_factory=Counter)
    """Rows per published divergence rank (normalised)."""
    counts: Counter[str] = field(default_factory=Counter)
    """Rows (or organisms) with a missing, derived or suspicious value, by kind."""
    unrecognised_licenses: Counter[str] = field(default_factory=Counter)
    """Raw ``license`` values :func:`parse_license` did not recognise, with their row counts."""
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    """The first :data:`MAX_LISTED_MISMATCHES` rows whose published divergence rank differs from the lineages'."""
    images: bool = False
    """Whether the pass read the images (and so reports :data:`IMAGE_COUNTS`)."""

    def as_dict(self) -> dict[str, Any]:
        keys = (*ROW_COUNTS, *(IMAGE_COUNTS if self.images else ()))
        return {
            "files": list(self.files),
            "rows": self.rows,
            "divergence_ranks": {r: self.divergence_ranks[r] for r in RANK_COLUMNS if self.divergence_ranks[r]},
            **{k: self.counts[k] for k in keys},
            "unrecognised_licenses": dict(self.unrecognised_licenses.most_common()),
            "divergence_rank_mismatches": list(self.mismatches),
        }


class _PairPass:
    """Rows mapped one by one, with the checks that span rows (a photo id once across all files)."""

    def __init__(self, stats: CoObservedStats) -> None:
        self.stats = stats
        self.photo_at: dict[int, str] = {}

    def _organism(self, value: Any, index: int, file: _File, where: _Where) -> tuple[dict[str, Any], Lineage]:
        column = file.columns["organisms"]
        if not isinstance(value, Mapping):
            raise where.error(f"{column}[{index}]", f"{value!r} is not an organism")

        def get(name: str) -> tuple[Any, str]:
            source = file.organism_fields[name]
            return (None if source is None else value.get(source)), f"{column}[{index}].{source or name}"

        def text(name: str) -> str | None:
            raw, label = get(name)
            return _text(raw, label, where)

        species_raw = text("species")
        taxon_id = _integer(*get("taxon_id"), where)
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
            "species_in_tol200m": _boolean(*get("species_in_tol200m"), where),
        }
        return record, lineage

    def _organisms(self, row: Mapping[str, Any], file: _File, where: _Where) -> tuple[list[dict[str, Any]], str | None]:
        """The two organisms and the rank at which their lineages part (``None`` when they do not)."""
        column = file.columns["organisms"]
        value = row["organisms"]
        if not isinstance(value, list) or len(value) != 2:
            found = ("null" if value is None else repr(value) if not isinstance(value, list)
                     else f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}")
            raise where.error(column, f"expected a list of exactly two organisms, found {found}")
        (first, first_lineage), (second, second_lineage) = (
            self._organism(v, i, file, where) for i, v in enumerate(value))
        recomputed = divergence_rank(first_lineage, second_lineage)
        return [first, second], None if recomputed is None else recomputed.column

    def _photo_id(self, row: Mapping[str, Any], file: _File, where: _Where) -> int:
        column = file.columns["photo_id"] or "photo_id"
        photo_id = _integer(row["photo_id"], column, where)
        if photo_id is None or photo_id < 0:
            raise where.error(column, f"{row['photo_id']!r} is not a photo id; every row has one")
        first = self.photo_at.setdefault(photo_id, where.here())
        if first != where.here():
            raise where.error(column, f"photo {photo_id} is already at {first}; a photo is one row")
        return photo_id

    def _provenance(self, row: Mapping[str, Any], file: _File, where: _Where) -> dict[str, Any]:
        license_raw = _text(row["license"], file.columns["license"] or "license", where)
        photo_license = parse_license(license_raw)
        observer_name = _text(row.get("observer_name"), file.columns["observer_name"] or "observer_name", where)
        attribution = _text(row.get("attribution"), file.columns["attribution"] or "attribution", where)
        if attribution is None and photo_license is not None and observer_name and observer_name.strip():
            attribution = photo_license.attribution(observer_name.strip())
            self.stats.counts["attribution_from_license"] += 1
        link = _text(row.get("license_url"), file.columns["license_url"] or "license_url", where)
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

    def record(self, row: Mapping[str, Any], file: _File, where: _Where) -> dict[str, Any]:
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
                self.stats.mismatches.append({"file": where.path.name, "row": where.row, "photo_id": photo_id,
                                              "published": published, "recomputed": recomputed})
        try:
            observed_on = parse_observed_on(row["observed_on"])
        except ValueError as exc:
            raise where.error(file.columns["observed_on"] or "observed_on", str(exc)) from None
        latitude, longitude = _coordinates(row, file, where)
        self.stats.counts["missing_date"] += observed_on is None
        self.stats.counts["missing_coordinates"] += latitude is None

        def text(name: str) -> str | None:
            return _text(row.get(name), file.columns[name] or name, where)

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
            "observer_id": _integer(row.get("observer_id"), file.columns["observer_id"] or "observer_id", where),
            "observer_login": text("observer_login"),
            "positional_accuracy_m": _number(row.get("positional_accuracy_m"),
                                             file.columns["positional_accuracy_m"] or "positional_accuracy_m", where),
            "n_photos_sharing_observation_pair": _integer(
                row.get("n_photos_sharing_observation_pair"),
                file.columns["n_photos_sharing_observation_pair"] or "n_photos_sharing_observation_pair", where),
            "in_tol200m": _boolean(row.get("in_tol200m"), file.columns["in_tol200m"] or "in_tol200m", where),
            "published_image_sha256": text("image_sha256"),
        }

    def batch(self, batch: pa.RecordBatch, file: _File, first_row: int) -> pa.Table:
        """A Parquet batch as stored rows without images."""
        values = {name: batch.column(name).to_pylist() for name in batch.schema.names if name != "image"}
        columns: dict[str, list[Any]] = {f.name: [] for f in READ_SCHEMA}
        for i in range(batch.num_rows):
            row = {name: column[i] for name, column in values.items()}
            record = self.record(row, file, _Where(file.path, first_row + i))
            for name, column in columns.items():
                column.append(record[name])
        self.stats.rows += batch.num_rows
        return pa.table(columns, schema=READ_SCHEMA)


def _scan(files: list[_File], *, images: bool, batch_rows: int,
          limit: int | None) -> Iterator[tuple[_File, int, pa.RecordBatch]]:
    """Each file's batches in order, with the 0-based row of the batch's first row; at most ``limit`` rows."""
    import pyarrow.parquet as pq

    left = limit
    for file in files:
        first_row = 0
        # pre_buffer (pyarrow's default) keeps every column chunk read for the reader's life: without it
        # memory stays at one row group.
        parquet = pq.ParquetFile(file.path, pre_buffer=False)
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=file.read_columns(images)):
            if left is not None:
                if left <= 0:
                    return
                batch = batch.slice(0, left)
                left -= batch.num_rows
            renamed = batch.rename_columns(
                [next(f for f, c in file.columns.items() if c == name) for name in batch.schema.names])
            yield file, first_row, renamed
            first_row += batch.num_rows


def _embedded_images(batch: pa.RecordBatch, file: _File) -> list[bytes | None]:
    """The image bytes of each row; ``None`` where the row has none (null or empty)."""
    if "image" not in batch.schema.names:
        return [None] * batch.num_rows
    column = batch.column("image")
    images = pc.struct_field(column, "bytes") if file.image_in_struct else column
    return [body or None for body in images.to_pylist()]


class _Fetched:
    """Photos fetched for rows without image bytes: the download report, read with a SHA-256 check."""

    def __init__(self, report: DownloadReport | None) -> None:
        self.report = report
        self.failed = set() if report is None else {f.key for f in report.failures}

    def get(self, key: str) -> bytes | None:
        if self.report is None or key not in self.report.downloaded:
            return None
        entry = self.report.downloaded[key]
        body = self.report.store.read_bytes(entry)
        if hashlib.sha256(body).hexdigest() != entry.sha256:
            raise CladebenchError(f"{self.report.store.object_path(entry.sha256)} does not match its SHA-256; "
                                  "the download cache is damaged: delete that file and build again")
        return body


def _with_images(table: pa.Table, batch: pa.RecordBatch, file: _File, first_row: int, fetched: _Fetched,
                 stats: CoObservedStats) -> pa.Table:
    """The rows with their image columns after ``uuid``; rows whose photo could not be fetched left out."""
    uuids = table.column("uuid").to_pylist()
    urls = table.column("source_url").to_pylist()
    published = table.column("published_image_sha256").to_pylist()
    keep: list[bool] = []
    bodies: list[bytes] = []
    for i, body in enumerate(_embedded_images(batch, file)):
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
                raise _Where(file.path, first_row + i).error(file.columns["image"] or "image", problem)
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


def _open_files(parquet_paths: str | Path | Iterable[str | Path], stats: CoObservedStats) -> list[_File]:
    files = [_open_file(p) for p in parquet_paths_of(parquet_paths)]
    stats.files.extend(f.describe() for f in files)
    return files


def _check_batching(batch_rows: int, limit: int | None) -> None:
    if batch_rows < 1:
        raise CladebenchError(f"batch_rows must be positive, got {batch_rows}")
    if limit is not None and limit < 0:
        raise CladebenchError(f"limit must be non-negative, got {limit}")


def _batches(files: list[_File], stats: CoObservedStats, *, images: bool, batch_rows: int, limit: int | None,
             fetched: _Fetched) -> Iterator[pa.Table]:
    pair_pass = _PairPass(stats)
    stats.images = images
    for file, first_row, batch in _scan(files, images=images, batch_rows=batch_rows, limit=limit):
        table = pair_pass.batch(batch, file, first_row)
        yield _with_images(table, batch, file, first_row, fetched, stats) if images else table


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
    _check_batching(batch_rows, limit)
    stats = stats if stats is not None else CoObservedStats()
    files = _open_files(parquet_paths, stats)
    yield from _batches(files, stats, images=images, batch_rows=batch_rows, limit=limit, fetched=_Fetched(None))


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


def read_stats(table: pa.Table) -> dict[str, Any]:
    """The counts :func:`read_inat_coobserved` recorded in the table's schema metadata."""
    return stats_of(table, READ_STATS_KEY)


# --- building the dataset --------------------------------------------------------------------------


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
    stats: dict[str, Any]
    """Counts of missing, derived and mismatching values, per divergence rank, per file (:class:`CoObservedStats`)."""
    fetch: DownloadReport | None
    """The downloader's report when some photos had to be fetched, else ``None``."""

    @property
    def failed(self) -> int:
        return self.read - self.rows

    @property
    def failed_by_reason(self) -> dict[str, int]:
        return {} if self.fetch is None else self.fetch.failed_by_reason


FAILURES_SCHEMA = pa.schema([
    ("file", pa.string()), ("row", pa.int64()), ("uuid", pa.string()), ("photo_id", pa.int64()),
    ("source_url", pa.string()), ("reason", pa.string()), ("detail", pa.string()), ("status", pa.int32()),
    ("exception", pa.string()), ("attempts", pa.int32()),
])
"""Columns of the failures file: the row (file, 0-based row, photo id) and the downloader's failure."""


@dataclass(frozen=True)
class _Wanted:
    """A row without image bytes: where it is and where its photo is."""

    file: str
    row: int
    photo_id: int
    url: str


def _rows_to_fetch(files: list[_File], *, batch_rows: int, limit: int | None) -> tuple[dict[str, _Wanted], int]:
    """Every row checked (so a bad value fails before any download): the rows without image bytes, and
    the number of rows read."""
    wanted: dict[str, _Wanted] = {}
    pair_pass = _PairPass(CoObservedStats())
    for file, first_row, batch in _scan(files, images=True, batch_rows=batch_rows, limit=limit):
        table = pair_pass.batch(batch, file, first_row)
        uuids, urls = table.column("uuid").to_pylist(), table.column("source_url").to_pylist()
        photo_ids = table.column("photo_id").to_pylist()
        for i, body in enumerate(_embedded_images(batch, file)):
            if body is not None:
                continue
            if not urls[i]:
                raise _Where(file.path, first_row + i).error(
                    file.columns["image"] or "image", "no image bytes and no image URL to fetch it from")
            wanted[uuids[i]] = _Wanted(file.path.name, first_row + i, photo_ids[i], urls[i])
    return wanted, pair_pass.stats.rows


def _failure_rows(wanted: Mapping[str, _Wanted], report: DownloadReport | None) -> pa.Table:
    rows = [] if report is None else [
        {"file": wanted[f.key].file, "row": wanted[f.key].row, "uuid": f.key, "photo_id": wanted[f.key].photo_id,
         "source_url": f.url, "reason": f.reason, "detail": f.detail, "status": f.status,
         "exception": f.exception, "attempts": f.attempts}
        for f in report.failures
    ]
    return pa.Table.from_pylist(rows, schema=FAILURES_SCHEMA)


def _write_parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


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
    _check_batching(batch_rows, limit)
    stats = CoObservedStats()
    files = _open_files(parquet_paths, stats)
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
        _write_parquet(failures, failures_path)
        raise CladebenchError(f"no photo of the {rows_read} rows could be fetched ({report.summary()}); "
                              f"the reasons are in {failures_path}")
    batches = _batches(files, stats, images=True, batch_rows=batch_rows, limit=limit, fetched=_Fetched(report))
    dataset = store.write_dataset(_non_empty(batches), out)
    _write_parquet(failures, failures_path)
    return CoObservedBuild(
        dataset_path=out, failures_path=failures_path, rows=dataset.count_rows(), read=stats.rows,
        fingerprint=store.fingerprint(dataset), stats=stats.as_dict(), fetch=report,
    )


def _non_empty(batches: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """The batches that still have rows once unfetched photos are left out."""
    return (b for b in batches if b.num_rows)


__all__ = [
    "COLUMN_ALIASES",
    "FAILURES_SCHEMA",
    "IMAGE_COUNTS",
    "IMAGE_FIELDS",
    "ORGANISM_ALIASES",
    "ORGANISM_TYPE",
    "READ_SCHEMA",
    "REQUIRED_COLUMNS",
    "ROW_COUNTS",
    "SOURCE_DATASET",
    "UUID_NAMESPACE",
    "CoObservedBuild",
    "CoObservedStats",
    "build_inat_coobserved",
    "failures_path_for",
    "iter_inat_coobserved_batches",
    "parquet_paths_of",
    "parse_divergence_rank",
    "read_inat_coobserved",
    "read_schema",
    "read_stats",
    "row_uuid",
]
