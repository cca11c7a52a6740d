"""The canonical schema: the columns every benchmark's Lance dataset follows, and how embedding columns are typed.

One module owns the shape of a row, so that readers, writers and the README's schema table all take it from
here rather than spelling a type again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from cladebench.errors import SchemaError
from cladebench.taxonomy import RANK_COLUMNS

SCHEMA_VERSION = "2"
"""Version 2: ``species`` holds the binomial (version 1 held the epithet; see :mod:`cladebench.store.species`)."""
SCHEMA_METADATA_KEY = b"cladebench.schema_version"
EMBEDDING_PREFIX = "emb_"
GROUP_SUFFIX = "_group"
EMBEDDING_SIDECAR = "embedding_models.json"


@dataclass(frozen=True)
class ColumnSpec:
    """One column of the canonical schema."""

    name: str
    """Column name."""
    type: pa.DataType
    """Arrow type the column is stored as."""
    required: bool
    """Whether a table must bring this column; optional columns are added as nulls when absent."""
    doc: str
    """What the column holds; the README's schema table is written from these."""


CANONICAL_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("uuid", pa.string(), True, "Unique id of the example (row); non-null, unique, no newline."),
    ColumnSpec("image", pa.large_binary(), True, "Encoded image bytes, exactly as fetched or rendered."),
    ColumnSpec("image_format", pa.string(), False, "Format of `image`: `jpeg`, `webp`, `png`, ..."),
    *(
        ColumnSpec(c, pa.string(), False,
                   "Species binomial, `Genus epithet` (`Peromyscus maniculatus`), with an infraspecific part "
                   "when the row names one; the epithet alone only when the genus is unknown." if c == "species"
                   else f"Name at rank {c}; null when unknown.")
        for c in RANK_COLUMNS
    ),
    ColumnSpec("scientific_name", pa.string(), False, "\"Genus species\", or the deepest known name."),
    ColumnSpec("common_name", pa.string(), False, "Vernacular name, when known."),
    ColumnSpec("taxon_id", pa.int64(), False, "Taxon id in the source taxonomy (iNaturalist for iNat data)."),
    ColumnSpec("latitude", pa.float64(), False, "Decimal degrees, WGS84, in [-90, 90]."),
    ColumnSpec("longitude", pa.float64(), False, "Decimal degrees, WGS84, in [-180, 180]."),
    ColumnSpec("observed_on", pa.date32(), False, "Date the organism was observed."),
    ColumnSpec("source_dataset", pa.string(), False, "Where the row came from (`inaturalist`, `eol`, ...)."),
    ColumnSpec("source_id", pa.string(), False, "Id in the source (observation or photo id); split grouping key."),
    ColumnSpec("source_url", pa.string(), False, "URL of the source record or image."),
    ColumnSpec("license_name", pa.string(), False, "License of the image (`cc-by-nc`, `cc0`, ...)."),
    ColumnSpec("license_link", pa.string(), False, "URL of the license text."),
    ColumnSpec("attribution", pa.string(), False, "Attribution string the license requires."),
    ColumnSpec("seen_in_training", pa.list_(pa.string()), False,
               "Ids of models whose training data contained this image."),
)
CANONICAL_BY_NAME: dict[str, ColumnSpec] = {c.name: c for c in CANONICAL_COLUMNS}
REQUIRED_COLUMNS: tuple[str, ...] = tuple(c.name for c in CANONICAL_COLUMNS if c.required)
CANONICAL_SCHEMA = pa.schema(
    [pa.field(c.name, c.type, nullable=not c.required) for c in CANONICAL_COLUMNS],
    metadata={SCHEMA_METADATA_KEY: SCHEMA_VERSION.encode()},
)


def canonical_fields(*names: str) -> list[pa.Field]:
    """Arrow fields of the named canonical columns, typed as the canonical schema types them (a required one is
    non-nullable), for the tables that carry canonical columns among their own: a reader's schema, the entries of
    an ``organisms`` column. Their types are then spelled once, here.

    Example:
        >>> [(f.name, str(f.type), f.nullable) for f in canonical_fields("uuid", "taxon_id")]
        [('uuid', 'string', False), ('taxon_id', 'int64', True)]
    """
    return [pa.field(name, CANONICAL_BY_NAME[name].type, nullable=not CANONICAL_BY_NAME[name].required)
            for name in names]

# Casts that cannot lose information; anything else is a schema error rather than a silent change.
LOSSLESS_CASTS: dict[pa.DataType, tuple[pa.DataType, ...]] = {
    pa.string(): (pa.large_string(), pa.string_view()),
    pa.large_binary(): (pa.binary(), pa.binary_view()),
    pa.int64(): (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32()),
    pa.float64(): (pa.float16(), pa.float32(), pa.int8(), pa.int16(), pa.int32()),
    # Timestamps are not here: casting one to a date drops the time of day (and, for zoned ones, shifts the day).
    pa.date32(): (pa.date64(),),
    pa.list_(pa.string()): (pa.list_(pa.large_string()), pa.large_list(pa.string())),
}


# --- embedding columns ---------------------------------------------------------------------------


def embedding_type(dim: int) -> pa.DataType:
    """Arrow type of an ``emb_*`` column: ``FixedSizeList<float32>[dim]``."""
    return pa.list_(pa.float32(), dim)


def embedding_field(key: str, dim: int, metadata: Mapping[str, object]) -> pa.Field:
    """An ``emb_<key>`` field whose metadata names the model (``model`` is required).

    Values are stored as JSON strings when they are not strings already, so lists and numbers
    (norm statistics, versions) survive the round trip through Arrow's bytes-only metadata.
    """
    name = key if key.startswith(EMBEDDING_PREFIX) else EMBEDDING_PREFIX + key
    meta = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}
    meta["dim"] = str(dim)
    if not meta.get("model"):
        raise SchemaError(f"embedding column {name!r}: field metadata must name the 'model'")
    return pa.field(name, embedding_type(dim), metadata=meta)


def embedding_metadata(field: pa.Field) -> dict[str, Any]:
    """Decode an ``emb_*`` field's metadata; JSON values come back as Python objects."""
    out: dict[str, object] = {}
    for key, value in (field.metadata or {}).items():
        text = value.decode()
        try:
            # Numbers, booleans, lists and objects were JSON-encoded by embedding_field.
            decoded = json.loads(text)
        except json.JSONDecodeError:
            decoded = text
        out[key.decode()] = decoded if isinstance(decoded, (int, float, bool, list, dict)) else text
    return out


def embedding_columns(schema: pa.Schema) -> list[str]:
    """Names of the embedding columns in a schema."""
    return [f.name for f in schema if f.name.startswith(EMBEDDING_PREFIX)]


def group_columns(schema: pa.Schema) -> list[str]:
    """Names of the grouping columns (``*_group``, e.g. ``challenge_group``, ``cryptic_group``)."""
    return [f.name for f in schema if f.name.endswith(GROUP_SUFFIX)]


def describe_type(t: pa.DataType) -> str:
    return str(t)


def is_string_type(t: pa.DataType) -> bool:
    """Whether ``t`` holds text (``string``, ``large_string`` or ``string_view``): what a uuid column must be."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
