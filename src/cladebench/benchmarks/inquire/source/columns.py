"""INQUIRE's file formats as this package reads them: the columns each file must have and the tables it gives.

Why apart: the readers of the query and annotation CSVs (:mod:`~cladebench.benchmarks.inquire.source.queries`) and of
the INQUIRE-Rerank shards (:mod:`~cladebench.benchmarks.inquire.source.rerank`) share the lineage columns and the
stats key, and a caller may want a schema without reading a file.
"""

from __future__ import annotations

import uuid as uuidlib

import pyarrow as pa

from cladebench.curate.sources import stats_of
from cladebench.store.schema import canonical_fields
from cladebench.taxonomy import RANK_COLUMNS

SOURCE_DATASET = "inquire-rerank"
UUID_NAMESPACE = uuidlib.uuid5(uuidlib.NAMESPACE_URL, "https://huggingface.co/datasets/evendrow/INQUIRE-Rerank")
"""Namespace of the rerank rows' UUID-5s; fixed, so uuids do not depend on where the files lie."""
READ_STATS_KEY = b"cladebench.inquire"
"""Schema-metadata key of a reader's counts."""
DEFAULT_BATCH_ROWS = 128
"""Rows held at once while streaming a Parquet file; iNat24 photos are ~100 KB, so ~13 MB of images."""

QUERY_COLUMNS: tuple[str, ...] = ("query_id", "query_text", "supercategory", "category", "iconic_group")
ANNOTATION_COLUMNS: tuple[str, ...] = ("query_id", "image_id", "image_path")
RERANK_COLUMNS: tuple[str, ...] = (
    "image", "query", "relevant", "clip_score", "inat24_image_id", "inat24_file_name", "supercategory",
    "category", "iconic_group", "latitude", "longitude", "date", "license", "rights_holder",
)
"""Columns every INQUIRE-Rerank shard must have (``query_id`` too, unless ``queries`` are given)."""
RERANK_OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "location_uncertainty": ("location_uncertainty",),
    "inat24_species_id": ("inat24_species_id", "inat24_category_id"),
    "inat24_species_name": ("inat24_species_name", "inat24_category_name"),
}
"""Extra column -> the shard columns it is taken from, first present wins; null when none is."""

OTHER_SPLIT_WORDS: tuple[str, ...] = ("train",)
"""Split words of Hub file names that are not INQUIRE-Rerank splits. The dataset's card declares ``validation``
and ``test`` only, but its repository's ``data/`` folder has also held ``train-0000N-of-00004.parquet`` shards
from an earlier upload, which a snapshot of the whole repository brings along; a directory's such files are
skipped (and listed in the read stats), never read as a split."""


QUERIES_SCHEMA = pa.schema([
    pa.field("query_id", pa.int64(), nullable=False),
    pa.field("query_text", pa.string(), nullable=False),
    pa.field("supercategory", pa.string()),
    pa.field("category", pa.string()),
    pa.field("iconic_group", pa.string()),
    pa.field("split", pa.string()),
])
"""Columns of :func:`read_inquire_queries`."""


LINEAGE_FIELDS = canonical_fields(*RANK_COLUMNS, "scientific_name")
"""The seven rank columns and ``scientific_name``, as the species folder of an iNat24 path gives them."""

ANNOTATIONS_SCHEMA = pa.schema([
    pa.field("query_id", pa.int64(), nullable=False),
    pa.field("image_id", pa.int64(), nullable=False),
    pa.field("image_path", pa.string(), nullable=False),
    pa.field("inat24_file_name", pa.string(), nullable=False),
    pa.field("inat24_category_id", pa.int64()),
    *LINEAGE_FIELDS,
])
"""Columns of :func:`read_inquire_annotations`."""

RERANK_SCHEMA = pa.schema([
    *canonical_fields("uuid"),
    *LINEAGE_FIELDS,
    *canonical_fields("latitude", "longitude", "observed_on", "source_dataset", "source_id", "license_name",
                      "license_link", "attribution"),
    pa.field("split", pa.string()),
    pa.field("query_id", pa.int64()),
    pa.field("query", pa.string()),
    pa.field("relevant", pa.bool_()),
    pa.field("clip_score", pa.float64()),
    pa.field("supercategory", pa.string()),
    pa.field("category", pa.string()),
    pa.field("iconic_group", pa.string()),
    pa.field("inat24_image_id", pa.int64()),
    pa.field("inat24_file_name", pa.string()),
    pa.field("license_raw", pa.string()),
    pa.field("rights_holder", pa.string()),
    pa.field("location_uncertainty", pa.float64()),
    pa.field("inat24_species_id", pa.int64()),
    pa.field("inat24_species_name", pa.string()),
])
"""Columns of a rerank row without its image (:func:`read_inquire_rerank`)."""
IMAGE_FIELDS = (pa.field("image", pa.large_binary(), nullable=False), pa.field("image_format", pa.string()))
"""The image columns :func:`iter_inquire_rerank_batches` puts right after ``uuid`` when ``images=True``."""


def read_stats(table: pa.Table) -> dict[str, object]:
    """The counts a reader of this package recorded in the table's schema metadata."""
    return stats_of(table, READ_STATS_KEY)


def rerank_schema(*, images: bool) -> pa.Schema:
    """Columns of a rerank batch: :data:`RERANK_SCHEMA`, with the image columns after ``uuid`` when ``images``."""
    if not images:
        return RERANK_SCHEMA
    return pa.schema([RERANK_SCHEMA.field("uuid"), *IMAGE_FIELDS, *list(RERANK_SCHEMA)[1:]])
