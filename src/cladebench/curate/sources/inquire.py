"""INQUIRE: its queries, its positive annotations, and INQUIRE-Rerank as canonical rows in a Lance dataset.

INQUIRE (Vendrow et al., "INQUIRE: A Natural World Text-to-Image Retrieval Benchmark", NeurIPS 2024
Datasets and Benchmarks; github.com/inquire-benchmark/INQUIRE) has 250 expert queries over the five
million photos of iNat24. It ships three things, each with a reader here:

**Queries** (``data/inquire/inquire_queries_{val,test}.csv``, 50 and 200 queries)::

    ,query_id,query_text,supercategory,category,iconic_group
    0,3,A mongoose standing upright alert,Behavior,Defensive and Survival Behaviors,Mammals

- The first column is pandas' unnamed index; it is dropped, and a file without it reads the same.
- ``query_text`` is kept exactly as written: INQUIRE feeds it to the text encoder as-is, so a
  trailing space (val query 222 ends in one) or a typographic quote is part of the query.
- ``iconic_group`` is empty for two test queries; empty text cells become null.
- A repeated ``query_id`` is an error naming the file and both rows.

**Annotations** (``data/inquire/inquire_annotations.csv``, about 33k rows, every row a positive)::

    query_id,image_id,image_path
    3,4702270,train/04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo/903be103-....jpg

The species folder is ``<category id>_<Kingdom>_<Phylum>_<Class>_<Order>_<Family>_<Genus>_<epithet>``
(checked on the real excerpt: ``04686_..._Mungos_mungo`` and ``04687_..._Urva_auropunctata``); the
reader splits it into the seven rank columns, ``scientific_name`` and ``inat24_category_id``.

**The iNat24 file key.** The official Fullrank code counts a retrieved image as relevant when
``match['image_path'] + ".jpg" in pos_images``, where ``pos_images`` are the annotation paths and the
retrieval index stores paths without the extension. The key here, ``inat24_file_name``, is therefore
the annotation ``image_path`` verbatim (relative to the iNat24 root, starting ``train/``, ending
``.jpg``), and :func:`inat24_file_key` turns an index path into it by appending ``.jpg`` when it is
missing and changing nothing else, so a string comparison with the key is the official match.
INQUIRE-Rerank's ``inat24_file_name`` is iNat24's own ``file_name``, the same form, so rerank
candidates and annotations join on this column.

**INQUIRE-Rerank** (Hugging Face ``evendrow/INQUIRE-Rerank``; Parquet shards
``validation-*.parquet``, 4,000 rows, and ``test-*.parquet``, 16,000 rows): 100 CLIP-retrieved
iNat24 candidates per query with a relevance label. One stored row per (query, candidate):

- ``uuid`` is a UUID-5 of ``<split>/<query_id>/<inat24_image_id>`` in the namespace
  :data:`UUID_NAMESPACE`, so a rebuild gives the same uuids and the same fingerprint. The same photo
  is a candidate of several queries, so the image id alone would not be unique.
- ``split`` is ``val`` or ``test`` (INQUIRE's names, as in the query files), from the shard's file
  name (``validation-`` and ``val`` give ``val``) unless given.
- ``image`` is the ``image.bytes`` of the HF image struct, unchanged; ``image_format`` is sniffed
  from its first bytes (:func:`cladebench.images.sniff_format`); an unknown signature gives null
  and is counted. A row without image bytes is an error: dropping a candidate would change every
  metric of its query.
- ``observed_on`` is the calendar date written at the start of ``date`` (see :func:`parse_observed_on`
  for the accepted forms); a time of day and a UTC offset are validated but do not shift the date.
- ``latitude``/``longitude`` NaN or null become null (iNat24 leaves them NaN when unknown).
- ``license_name`` is iNaturalist's code (``cc-by-nc``, ``cc0``, ...) parsed from ``license`` in any
  of its usual spellings (:func:`parse_license`); the raw value stays in ``license_raw``. A value
  that is not recognised gives a null ``license_name`` and is counted, never guessed.
- ``attribution`` follows iNaturalist's rule for its open data: ``© <rights holder>, some rights
  reserved (CC-BY-NC)``, or ``<rights holder>, no rights reserved (CC0)``; null when the rights holder
  or the license is unknown (counted).
- ``source_dataset`` is ``inquire-rerank``; ``source_id`` is the iNat24 image id.
- The ranks come from the species folder of ``inat24_file_name``; a file name without one leaves
  them null (counted) rather than failing, because reranking does not need them.
- Extra columns: ``split``, ``query_id``, ``query`` (verbatim), ``relevant`` (bool), ``clip_score``,
  ``supercategory``, ``category``, ``iconic_group``, ``inat24_image_id``, ``inat24_file_name``,
  ``license_raw``, ``rights_holder``, and, null when a revision lacks them, ``location_uncertainty``,
  ``inat24_species_id``, ``inat24_species_name`` (older revisions call the last two
  ``inat24_category_*``).
- ``query_id`` is required unless ``queries`` (the query CSVs or their table) are given: the dataset
  card of one revision lists no ``query_id``, and the official rerank script groups by query text.

Any bad value is a :class:`SchemaError` naming the file, the 0-based row of the Parquet file and the
field; a missing column names the file and the column, and is found before anything is written.

Example:
    >>> inat24_file_key("train/04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo/903be103")
    'train/04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo/903be103.jpg'
    >>> parse_license("CC BY-NC 4.0").attribution("Jane Doe")
    '© Jane Doe, some rights reserved (CC-BY-NC)'
    >>> parse_observed_on("2019-06-23 18:02:00+00:00")
    datetime.date(2019, 6, 23)
"""

from __future__ import annotations

import csv
import datetime
import math
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
from cladebench.curate.sources import check_out_apart, input_paths, parquet_files, stats_of, utf8_errors, with_stats
from cladebench.errors import CladebenchError, SchemaError
from cladebench.images import sniff_format
from cladebench.taxonomy import RANK_COLUMNS, Lineage

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

SPLIT_NAMES: dict[str, str] = {"validation": "val", "val": "val", "test": "test"}
"""Split word in a file name -> INQUIRE's split name."""
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

_LINEAGE_FIELDS = [*(pa.field(c, pa.string()) for c in RANK_COLUMNS), pa.field("scientific_name", pa.string())]

ANNOTATIONS_SCHEMA = pa.schema([
    pa.field("query_id", pa.int64(), nullable=False),
    pa.field("image_id", pa.int64(), nullable=False),
    pa.field("image_path", pa.string(), nullable=False),
    pa.field("inat24_file_name", pa.string(), nullable=False),
    pa.field("inat24_category_id", pa.int64()),
    *_LINEAGE_FIELDS,
])
"""Columns of :func:`read_inquire_annotations`."""

RERANK_SCHEMA = pa.schema([
    pa.field("uuid", pa.string(), nullable=False),
    *_LINEAGE_FIELDS,
    pa.field("latitude", pa.float64()),
    pa.field("longitude", pa.float64()),
    pa.field("observed_on", pa.date32()),
    pa.field("source_dataset", pa.string()),
    pa.field("source_id", pa.string()),
    pa.field("license_name", pa.string()),
    pa.field("license_link", pa.string()),
    pa.field("attribution", pa.string()),
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


# --- names, keys, licenses, dates -----------------------------------------------------------------


def split_from_name(path: str | Path) -> str | None:
    """INQUIRE's split from a file name: ``validation-00000-of-00001.parquet`` and
    ``inquire_queries_val.csv`` give ``val``; ``test-...`` gives ``test``; anything else ``None``."""
    words = re.split(r"[^a-z]+", Path(path).name.lower())
    found = {SPLIT_NAMES[w] for w in words if w in SPLIT_NAMES}
    return found.pop() if len(found) == 1 else None


def inat24_file_key(path: str) -> str:
    """The iNat24 key of a path: ``path`` itself when it ends in ``.jpg``, else ``path + ".jpg"``.

    This is the official Fullrank match (``image_path + ".jpg" in pos_images``) written as a key:
    the key of an annotation path is the path, the key of an index path without its extension is the
    annotation path. Nothing else is normalised, because the official comparison is exact.
    """
    return path if path.endswith(".jpg") else path + ".jpg"


_FOLDER = re.compile(r"^(\d+)_([^_]+(?:_[^_]+){6})$")


def species_folder_lineage(folder: str) -> tuple[int, Lineage]:
    """``04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo`` -> (4686, its lineage).

    Exactly the category id and seven names; anything else is a :class:`ValueError`.
    """
    match = _FOLDER.match(folder)
    if match is None:
        raise ValueError(f"{folder!r} is not an iNat24 species folder "
                         "(<id>_<Kingdom>_<Phylum>_<Class>_<Order>_<Family>_<Genus>_<epithet>)")
    return int(match.group(1)), Lineage.from_names(*match.group(2).split("_"))


def _folder_of(path: str) -> str | None:
    parts = path.split("/")
    return parts[-2] if len(parts) >= 2 else None


_CC_PARTS = ("by", "nc", "sa", "nd")
_LICENSE_WORDS = {"attribution": "by", "noncommercial": "nc", "sharealike": "sa", "noderivs": "nd",
                  "noderivatives": "nd"}
_HYPHENATED_WORDS = {"non-commercial": "noncommercial", "share-alike": "sharealike",
                     "no-derivatives": "noderivatives", "no-derivs": "noderivs"}
"""Words of license names that contain a hyphen, joined before the name is split on hyphens."""
_LICENSE_NOISE = {"cc", "creative", "commons", "license", "licence", "international", "generic", "unported"}
_CC_URL = re.compile(r"creativecommons\.org/(licenses|publicdomain)/([a-z-]+)(?:/(\d+(?:\.\d+)?))?", re.IGNORECASE)
_VERSION = re.compile(r"^\d+(?:\.\d+)?$")


@dataclass(frozen=True)
class InatLicense:
    """A photo license in iNaturalist's vocabulary."""

    code: str
    """``cc0``, ``cc-by``, ``cc-by-nc``, ..., ``all-rights-reserved``: the store's ``license_name``."""
    version: str | None = None
    """License version when the raw value names one (``4.0``)."""

    @property
    def short_name(self) -> str:
        """The abbreviation iNaturalist's attributions print: ``CC-BY-NC``, ``CC0``."""
        return self.code.upper()

    @property
    def link(self) -> str | None:
        """The license text's URL; iNaturalist links its CC licenses to version 4.0 when none is named."""
        if self.code == "all-rights-reserved":
            return None
        if self.code == "cc0":
            return f"https://creativecommons.org/publicdomain/zero/{self.version or '1.0'}/"
        return f"https://creativecommons.org/licenses/{self.code.removeprefix('cc-')}/{self.version or '4.0'}/"

    def attribution(self, name: str) -> str:
        """iNaturalist's attribution for a photo by ``name`` (its open-data README gives the rule)."""
        if self.code == "cc0":
            return f"{name}, no rights reserved (CC0)"
        if self.code == "all-rights-reserved":
            return f"© {name}, all rights reserved"
        return f"© {name}, some rights reserved ({self.short_name})"


def _cc_code(parts: Iterable[str]) -> str | None:
    found = set(parts)
    if "by" not in found or not found <= set(_CC_PARTS) or {"sa", "nd"} <= found:
        return None
    return "cc-" + "-".join(p for p in _CC_PARTS if p in found)


def parse_license(raw: str | None) -> InatLicense | None:
    """iNaturalist's license code from the ways datasets write it; ``None`` when not recognised.

    Accepted: codes (``cc-by-nc``, ``CC-BY-NC``, ``cc_by_nc``), names with or without a version
    (``CC BY-NC 4.0``, ``CC BY-NC-SA``), the COCO-style names of the iNat competition files
    (``Attribution-NonCommercial License``), creativecommons.org URLs, ``CC0`` in its spellings, and
    ``all rights reserved``. Anything else (an integer id, "No known copyright restrictions") is
    ``None``: a license is never guessed.
    """
    text = (raw or "").strip().lower()
    if not text:
        return None
    url = _CC_URL.search(text)
    if url is not None:
        kind, name, version = url.groups()
        if kind.lower() == "publicdomain":
            return InatLicense("cc0", version) if name == "zero" else None
        code = _cc_code(name.split("-"))
        return None if code is None else InatLicense(code, version)
    if text in ("arr", "all rights reserved", "all-rights-reserved", "(c)", "©"):
        return InatLicense("all-rights-reserved")
    for hyphenated, word in _HYPHENATED_WORDS.items():
        text = text.replace(hyphenated, word)
    words = [w for w in re.split(r"[\s_/,()-]+", text) if w]
    if words[:1] == ["cc0"] or words[:2] in (["cc", "0"], ["cc", "zero"]) or \
            text.startswith(("public domain dedication", "no rights reserved")):
        rest = words[1:] if words[:1] == ["cc0"] else words[2:]
        return InatLicense("cc0", next((w for w in rest if _VERSION.match(w)), None))
    version = next((w for w in words if _VERSION.match(w)), None)
    parts = [_LICENSE_WORDS.get(w, w) for w in words if w != version]
    code = _cc_code(p for p in parts if p not in _LICENSE_NOISE)
    return None if code is None else InatLicense(code, version)


_DATE = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):?(\d{2}))?)?$"
)


def parse_observed_on(value: Any) -> datetime.date | None:
    """The observation date from a ``date`` value; ``None`` for null or blank. Other values raise ValueError.

    Accepted text: ``YYYY-MM-DD``, optionally followed by ``T`` or a space and ``HH:MM``,
    ``HH:MM:SS`` or ``HH:MM:SS.fff`` (up to 9 digits), optionally followed by ``Z`` or a UTC offset
    ``±HH:MM`` / ``±HHMM`` (iNat competition files write ``2019-06-23 18:02:00+00:00``). The date
    is the one written; the time and offset must be valid but do not move it, since converting a
    local observation time to another zone would report a day the observer did not record. A
    Parquet ``date`` or ``timestamp`` value gives its own date.
    """
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    text = str(value).strip()
    if not text:
        return None
    match = _DATE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD, optionally with a time and UTC offset)")
    year, month, day, hour, minute, second, offset_hours, offset_minutes = match.groups()
    try:
        date = datetime.date(int(year), int(month), int(day))
    except ValueError as exc:
        raise ValueError(f"{text!r} is not a date that exists ({exc})") from None
    limits = ((hour, 23), (minute, 59), (second, 59), (offset_hours, 23), (offset_minutes, 59))
    if any(part is not None and int(part) > top for part, top in limits):
        raise ValueError(f"{text!r} has a time or UTC offset out of range")
    return date


# --- queries ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    """A row's location in its file, for error messages a person can act on."""

    path: Path
    row: int
    counting: str = "1-based data row"

    def error(self, field_name: str, problem: str) -> SchemaError:
        return SchemaError(f"{self.path}: row {self.row} ({self.counting}), field {field_name!r}: {problem}")


def _integer(value: Any, field_name: str, where: _Where) -> int:
    if isinstance(value, bool):
        raise where.error(field_name, f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = "" if value is None else str(value).strip()
    if not re.fullmatch(r"-?\d+", text):
        raise where.error(field_name, f"{value!r} is not an integer")
    return int(text)


def _text_or_none(value: Any) -> str | None:
    """Empty cells are null; other text is kept exactly."""
    return None if value is None or value == "" else str(value)


def _csv_rows(path: Path, required: Sequence[str], kind: str) -> Iterator[tuple[_Where, dict[str, str]]]:
    """The CSV's rows; bytes that are not UTF-8 and what the csv module refuses (a field over
    ``csv.field_size_limit()``, 131,072 characters by default) are a :class:`SchemaError` naming the line."""
    with utf8_errors(path), open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        try:
            yield from _csv_records(reader, path, required, kind)
        except csv.Error as exc:
            raise SchemaError(f"{path}: line {reader.line_num + 1}: cannot be read as CSV: {exc}") from None


def _csv_records(reader: csv.DictReader, path: Path, required: Sequence[str], kind: str
                 ) -> Iterator[tuple[_Where, dict[str, str]]]:
    header = reader.fieldnames or []
    missing = [c for c in required if c not in header]
    if missing:
        raise SchemaError(f"{path}: not an INQUIRE {kind} CSV: missing column(s) {missing}; header is {header}")
    unknown = [c for c in header if c not in required and c != ""]  # "" is pandas' index column
    if unknown:
        raise SchemaError(f"{path}: unexpected column(s) {unknown} in an INQUIRE {kind} CSV; header is {header}")
    for row_number, record in enumerate(reader, 1):
        if None in record or any(record.get(c) is None for c in required):
            more = "more" if None in record else "fewer"
            raise SchemaError(f"{path}: row {row_number}: {more} fields than the header's {len(header)}")
        yield _Where(path, row_number), record


def read_inquire_queries(path: str | Path, *, split: str | None = None) -> pa.Table:
    """Read an INQUIRE query CSV: every query, in file order, texts exactly as written.

    ``split`` defaults to the one in the file name (``inquire_queries_val.csv`` -> ``val``), null when
    the name has none. A repeated ``query_id`` is a :class:`SchemaError` naming the file and both rows.
    """
    path = Path(path)
    split = split or split_from_name(path)
    columns: dict[str, list[Any]] = {f.name: [] for f in QUERIES_SCHEMA}
    first_row: dict[int, int] = {}
    for where, record in _csv_rows(path, QUERY_COLUMNS, "queries"):
        query_id = _integer(record["query_id"], "query_id", where)
        if query_id in first_row:
            raise where.error("query_id", f"query id {query_id} repeats row {first_row[query_id]}")
        first_row[query_id] = where.row
        if not record["query_text"].strip():
            raise where.error("query_text", "empty; every INQUIRE query has a text")
        columns["query_id"].append(query_id)
        columns["query_text"].append(record["query_text"])
        for name in ("supercategory", "category", "iconic_group"):
            columns[name].append(_text_or_none(record[name]))
        columns["split"].append(split)
    stats = {"file": path.name, "split": split, "rows": len(first_row),
             "without_iconic_group": columns["iconic_group"].count(None)}
    table = pa.table(columns, schema=QUERIES_SCHEMA)
    return with_stats(table, READ_STATS_KEY, stats)


def _query_ids_by_text(queries: pa.Table | str | Path | Sequence[str | Path]) -> dict[str, int]:
    if not isinstance(queries, pa.Table):
        paths = [queries] if isinstance(queries, (str, Path)) else list(queries)
        queries = pa.concat_tables([read_inquire_queries(p) for p in paths])
    by_text: dict[str, int] = {}
    for text, query_id in zip(queries.column("query_text").to_pylist(), queries.column("query_id").to_pylist(),
                              strict=True):
        if by_text.setdefault(text, query_id) != query_id:
            raise SchemaError(f"query text {text!r} has two ids ({by_text[text]} and {query_id}) in the queries given")
    return by_text


# --- annotations -----------------------------------------------------------------------------------


class _Lineages:
    """Lineage per species folder: thousands of rows share a few hundred folders."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, Lineage] | None] = {}

    def get(self, folder: str | None) -> tuple[int, Lineage] | None:
        if folder is None:
            return None
        if folder not in self._seen:
            try:
                self._seen[folder] = species_folder_lineage(folder)
            except ValueError:
                self._seen[folder] = None
        return self._seen[folder]


def _lineage_values(lineage: Lineage | None) -> dict[str, Any]:
    if lineage is None:
        return {**dict.fromkeys(RANK_COLUMNS), "scientific_name": None}
    return {**dict(zip(RANK_COLUMNS, lineage.names, strict=True)), "scientific_name": lineage.scientific_name}


def read_inquire_annotations(path: str | Path) -> pa.Table:
    """Read INQUIRE's annotation CSV (every row a positive) with the iNat24 key and the species' lineage.

    ``inat24_file_name`` is the match key (see :func:`inat24_file_key`); the lineage and
    ``inat24_category_id`` come from the species folder, and a path without one is an error naming
    the file, the 1-based data row and ``image_path``. A (query, image) pair listed twice is kept and
    counted (``repeated_pairs`` in :func:`read_stats`): the official code counts distinct paths.
    """
    path = Path(path)
    columns: dict[str, list[Any]] = {f.name: [] for f in ANNOTATIONS_SCHEMA}
    lineages = _Lineages()
    pairs: Counter[tuple[int, str]] = Counter()
    for where, record in _csv_rows(path, ANNOTATION_COLUMNS, "annotations"):
        query_id = _integer(record["query_id"], "query_id", where)
        image_id = _integer(record["image_id"], "image_id", where)
        image_path = record["image_path"]
        found = lineages.get(_folder_of(image_path))
        if found is None:
            raise where.error("image_path", f"{image_path!r} is not <split>/<species folder>/<file>, the folder being "
                                            "<id>_<Kingdom>_<Phylum>_<Class>_<Order>_<Family>_<Genus>_<epithet>")
        category_id, lineage = found
        key = inat24_file_key(image_path)
        pairs[(query_id, key)] += 1
        values = {"query_id": query_id, "image_id": image_id, "image_path": image_path, "inat24_file_name": key,
                  "inat24_category_id": category_id, **_lineage_values(lineage)}
        for name, column in columns.items():
            column.append(values[name])
    table = pa.table(columns, schema=ANNOTATIONS_SCHEMA)
    stats = {"file": path.name, "rows": table.num_rows, "queries": len({q for q, _ in pairs}),
             "repeated_pairs": sum(n - 1 for n in pairs.values())}
    return with_stats(table, READ_STATS_KEY, stats)


def read_stats(table: pa.Table) -> dict[str, Any]:
    """The counts a reader of this module recorded in the table's schema metadata."""
    return stats_of(table, READ_STATS_KEY)


# --- INQUIRE-Rerank --------------------------------------------------------------------------------


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

    def as_dict(self) -> dict[str, Any]:
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
        hint = " (pass queries=... to take query ids from the query CSVs)" if missing == ["query_id"] else ""
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
        raise SchemaError(f"{path}: cannot tell the split from the file name (expected validation-* or test-*); "
                          "pass split='val' or split='test'")
    optional = {extra: next((s for s in sources if s in names), None)
                for extra, sources in RERANK_OPTIONAL_COLUMNS.items()}
    columns = [*RERANK_COLUMNS, *(["query_id"] if "query_id" in names else []),
               *(s for s in optional.values() if s is not None)]
    return _Shard(path, split, tuple(columns), optional, in_struct)


def _coordinates(latitude: Any, longitude: Any, where: _Where) -> tuple[float | None, float | None]:
    values = {"latitude": latitude, "longitude": longitude}
    for name, value in values.items():
        if value is not None and not isinstance(value, (int, float)):
            raise where.error(name, f"{value!r} is not a number")
        if value is not None and math.isnan(value):
            values[name] = None  # iNat24 writes an unknown location as NaN
    latitude, longitude = values["latitude"], values["longitude"]
    if (latitude is None) != (longitude is None):
        missing = "latitude" if latitude is None else "longitude"
        raise where.error(missing, "missing while the other coordinate is given")
    for name, value, bound in (("latitude", latitude, 90.0), ("longitude", longitude, 180.0)):
        if value is not None and not -bound <= value <= bound:
            raise where.error(name, f"{value!r} is outside [-{bound:g}, {bound:g}]")
    return (None, None) if latitude is None else (float(latitude), float(longitude))


def _image_column(batch: pa.RecordBatch, shard: _Shard, first_row: int) -> tuple[pa.Array, list[str | None]]:
    column = batch.column("image")
    images = pc.struct_field(column, "bytes") if shard.image_in_struct else column
    empty = pc.or_kleene(pc.is_null(images), pc.equal(pc.binary_length(images), 0))
    bad = pc.indices_nonzero(empty)
    if len(bad):
        row = first_row + bad[0].as_py()
        raise _Where(shard.path, row, "0-based row").error(
            "image", "no image bytes; every INQUIRE-Rerank candidate must have its photo")
    heads = pc.binary_slice(images, 0, 16).to_pylist()  # the signature is all sniffing needs
    return images.cast(pa.large_binary()), [sniff_format(h) for h in heads]


def _provenance(row: Mapping[str, Any]) -> dict[str, Any]:
    """License, link and attribution from ``license`` and ``rights_holder`` (never guessed: null when unknown)."""
    license_raw = _text_or_none(row["license"])
    photo_license = parse_license(license_raw)
    holder = row["rights_holder"].strip() if isinstance(row["rights_holder"], str) else ""
    return {
        "license_name": None if photo_license is None else photo_license.code,
        "license_link": None if photo_license is None else photo_license.link,
        "attribution": photo_license.attribution(holder) if photo_license is not None and holder else None,
        "license_raw": license_raw, "rights_holder": _text_or_none(row["rights_holder"]),
    }


def _number_or_none(value: Any, field_name: str, where: _Where) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise where.error(field_name, f"{value!r} is not a number")
    return None if math.isnan(value) else float(value)


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
        self.lineages = _Lineages()

    def _query(self, row: Mapping[str, Any], split: str, where: _Where) -> tuple[str, int]:
        query = row["query"]
        if not isinstance(query, str) or not query.strip():
            raise where.error("query", f"{query!r} is not a query text")
        if "query_id" in row:
            query_id = _integer(row["query_id"], "query_id", where)
        elif query in self.query_ids:
            query_id = self.query_ids[query]
        else:
            raise where.error("query", f"{query!r} is not a query text of the queries given, so it has no query id")
        here = f"{where.path.name} row {where.row}"
        first_text, first_where = self.query_at.setdefault((split, query_id), (query, here))
        if first_text != query:
            raise where.error("query", f"{query!r} differs from {first_text!r}, the text of query {query_id} at "
                                       f"{first_where}")
        return query, query_id

    def _candidate(self, row: Mapping[str, Any], split: str, query_id: int, where: _Where) -> tuple[int, str]:
        image_id = _integer(row["inat24_image_id"], "inat24_image_id", where)
        here = f"{where.path.name} row {where.row}"
        first = self.candidate_at.setdefault((split, query_id, image_id), here)
        if first != here:
            raise where.error("inat24_image_id", f"image {image_id} is already a candidate of {split} query "
                                                 f"{query_id} ({first})")
        file_name = row["inat24_file_name"]
        if not isinstance(file_name, str) or not file_name:
            raise where.error("inat24_file_name", f"{file_name!r} is not an iNat24 file name")
        return image_id, file_name

    def record(self, row: Mapping[str, Any], shard: _Shard, where: _Where) -> dict[str, Any]:
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
        provenance = _provenance(row)
        found = self.lineages.get(_folder_of(file_name))
        extras = {name: row.get(source) if source else None for name, source in shard.optional.items()}
        species_id = extras["inat24_species_id"]
        if species_id is not None:
            species_id = _integer(species_id, shard.optional["inat24_species_id"] or "inat24_species_id", where)
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
            **_lineage_values(None if found is None else found[1]),
            "latitude": latitude, "longitude": longitude, "observed_on": observed_on,
            "source_dataset": SOURCE_DATASET, "source_id": str(image_id), **provenance,
            "split": shard.split, "query_id": query_id, "query": query, "relevant": bool(relevant),
            "clip_score": _number_or_none(row["clip_score"], "clip_score", where),
            "supercategory": _text_or_none(row["supercategory"]), "category": _text_or_none(row["category"]),
            "iconic_group": _text_or_none(row["iconic_group"]),
            "inat24_image_id": image_id, "inat24_file_name": file_name,
            "location_uncertainty": _number_or_none(extras["location_uncertainty"], "location_uncertainty", where),
            "inat24_species_id": species_id, "inat24_species_name": _text_or_none(extras["inat24_species_name"]),
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
        columns: dict[str, list[Any]] = {f.name: [] for f in RERANK_SCHEMA}
        for i in range(batch.num_rows):
            row = {name: column[i] for name, column in values.items()}
            record = self.record(row, shard, _Where(shard.path, first_row + i, "0-based row"))
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
    import pyarrow.parquet as pq

    if batch_rows < 1:
        raise CladebenchError(f"batch_rows must be positive, got {batch_rows}")
    if split is not None and split not in SPLIT_NAMES.values():
        raise CladebenchError(f"unknown split {split!r}; INQUIRE's splits are 'val' and 'test'")
    query_ids = None if queries is None else _query_ids_by_text(queries)
    paths, skipped = shard_paths(parquet_paths, split=split)
    shards = [_open_shard(p, split, query_ids is not None) for p in paths]
    stats = stats if stats is not None else RerankStats()
    stats.skipped_files.extend(str(p) for p in skipped)
    rerank_pass = _RerankPass(stats, query_ids)
    for shard in shards:
        stats.files.append(shard.path.name)
        columns = [c for c in shard.columns if images or c != "image"]
        first_row = 0
        # pre_buffer (pyarrow's default) caches every column chunk read for the life of the reader: a
        # whole shard (~400 MB) would stay in memory. Without it memory stays at one row group.
        parquet = pq.ParquetFile(shard.path, pre_buffer=False)
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=columns):
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


def rerank_schema(*, images: bool) -> pa.Schema:
    """Columns of a rerank batch: :data:`RERANK_SCHEMA`, with the image columns after ``uuid`` when ``images``."""
    if not images:
        return RERANK_SCHEMA
    return pa.schema([RERANK_SCHEMA.field("uuid"), *IMAGE_FIELDS, *list(RERANK_SCHEMA)[1:]])


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
        """What a person should know about the build beyond its row count: the files it did not read."""
        skipped = self.stats.get("skipped_files") or []
        if not skipped:
            return []
        return [f"skipped {len(skipped)} file(s) whose names name a split INQUIRE-Rerank does not have (its splits "
                f"are validation and test): {', '.join(Path(f).name for f in skipped)}"]


def build_inquire_rerank(
    parquet_paths: str | Path | Iterable[str | Path],
    out: str | Path,
    *,
    split: str | None = None,
    queries: pa.Table | str | Path | Sequence[str | Path] | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> InquireRerankBuild:
    """Write INQUIRE-Rerank shards (files, or a directory of them) to a Lance dataset at ``out``.

    The shards stream through :func:`cladebench.store.write_dataset` a batch at a time, so memory
    stays bounded. Every shard's columns are checked before a byte is written; a bad value found
    later aborts the write and, the dataset being committed only at the end, leaves nothing at
    ``out``. ``out`` must not exist yet.
    """
    out = Path(out)
    check_out_apart(out, [*input_paths(parquet_paths),
                          *(input_paths(queries) if not isinstance(queries, pa.Table) else [])])
    stats = RerankStats()
    batches = iter_inquire_rerank_batches(parquet_paths, split=split, queries=queries, images=True,
                                          batch_rows=batch_rows, stats=stats)
    dataset = store.write_dataset(batches, out)
    return InquireRerankBuild(dataset_path=out, rows=dataset.count_rows(), fingerprint=store.fingerprint(dataset),
                              stats=stats.as_dict())


__all__ = [
    "ANNOTATIONS_SCHEMA",
    "QUERIES_SCHEMA",
    "RERANK_COLUMNS",
    "RERANK_SCHEMA",
    "SOURCE_DATASET",
    "UUID_NAMESPACE",
    "InatLicense",
    "InquireRerankBuild",
    "RerankStats",
    "build_inquire_rerank",
    "inat24_file_key",
    "iter_inquire_rerank_batches",
    "parquet_paths_of",
    "parse_license",
    "parse_observed_on",
    "read_inquire_annotations",
    "read_inquire_queries",
    "read_inquire_rerank",
    "read_stats",
    "rerank_schema",
    "shard_paths",
    "species_folder_lineage",
    "split_from_name",
]
