"""iNat Co-Observed's file format: the columns and organism fields each field is read from, and the tables it gives.

Why apart: a file is checked (metadata only) before any row is read, so a bad file fails before anything is
written; the pass over the rows (:mod:`~cladebench.benchmarks.coobserved.source.pairs`) then reads each field from
the column recorded here.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from cladebench import store
from cladebench.curate.sources import parquet_files
from cladebench.errors import CladebenchError, SchemaError
from cladebench.taxonomy import RANK_COLUMNS, Rank

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
    *store.canonical_fields("taxon_id", *RANK_COLUMNS, "scientific_name", "common_name"),
    pa.field("observation_url", pa.string()),
    pa.field("taxon_url", pa.string()),
    pa.field("quality_grade", pa.string()),
    pa.field("species_in_tol200m", pa.bool_()),
])
"""One entry of ``organisms``: the fields of ``synthetic.ORGANISM_TYPE`` first (the per-organism canonical columns,
their types read from the store's schema), then iNat Co-Observed's own."""

READ_SCHEMA = pa.schema([
    *store.canonical_fields("uuid", *RANK_COLUMNS, "scientific_name", "common_name", "taxon_id", "latitude",
                            "longitude", "observed_on", "source_dataset", "source_id", "source_url", "license_name",
                            "license_link", "attribution"),
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


def parse_divergence_rank(value: object) -> str:
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
class SourceFile:
    """One Parquet file: which of its columns (and organism fields) each field is read from."""

    path: Path
    columns: dict[str, str | None]
    """Field -> the file's column, or ``None`` when absent."""
    organism_fields: dict[str, str | None]
    """Organism field -> the struct's field, or ``None`` when absent."""
    image_in_struct: bool

    def read_columns(self, images: bool) -> list[str]:
        return [c for f, c in self.columns.items() if c is not None and (images or f != "image")]

    def describe(self) -> dict[str, object]:
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


def open_file(path: Path) -> SourceFile:
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
    organisms = columns["organisms"]
    assert organisms is not None  # a required column: checked above
    struct = _organism_struct(path, organisms, schema)
    present = {struct.field(i).name for i in range(struct.num_fields)}
    organism_fields = {f: next((a for a in aliases if a in present), None) for f, aliases in ORGANISM_ALIASES.items()}
    missing = [f for f in RANK_COLUMNS if organism_fields[f] is None]
    if missing:
        raise SchemaError(f"{path}: column {columns['organisms']!r}: organisms lack field(s) "
                          f"{', '.join(_aliases(ORGANISM_ALIASES, f) for f in missing)}; they have "
                          f"{[struct.field(i).name for i in range(struct.num_fields)]}")
    return SourceFile(path, columns, organism_fields, image_in_struct)

