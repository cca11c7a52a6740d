"""Build Fine-Grained Challenges from a TreeOfLife-200M-style catalog: hard taxa, clean licenses, one Lance table.

Fine-Grained Challenges (``imageomics/fine-grained-challenges``) is one Lance table of 6,633 images in
three groups of look-alike taxa (1,737 *Peromyscus* deer mice, 4,499 Ixodidae ticks, 397 zebras),
each row with its seven ranks, provenance, license, the models whose training data held it
(``seen_in_training``), raw embeddings and vector and scalar indices. This builder makes such a table
from the catalog TreeOfLife-200M publishes, for the published groups or any others.

**Input.** A catalog (Parquet, CSV or TSV file, or a folder of Parquet files) with ``uuid``, the
seven rank columns ``kingdom`` .. ``species`` (``species`` the epithet or the binomial, null for a
row identified to genus only) and, when present, ``source_dataset``, ``source_id``,
``scientific_name``, ``common_name``, ``publisher``, ``basisOfRecord``, ``img_type``,
``resolution_status``, ``source_url`` (the image URL) and a column of local image paths
(``--image-path-column``). A provenance table (same formats) with ``uuid``, ``license_name``,
``license_link`` and optionally ``copyright_owner``, joined on ``uuid``. DuckDB scans both out of
core: only the rows of the challenge groups reach Python.

**Challenge groups** are chosen by taxon: ``NAME=RANK:VALUE[,VALUE]`` (:class:`ChallengeGroup`),
defaults :data:`DEFAULT_GROUPS`. Names compare case-insensitively; a species value is a binomial,
matched against the catalog's binomial (its ``species`` when that is one, else ``genus species``).
A row goes to the first group it matches (rows in several are counted in the notes).

**What is kept.** Each row of a group passes :data:`ROW_CHECKS` (first failing one is its reason):
a uuid, unique among the groups' rows (every copy of a repeated uuid is dropped: which copy is right
cannot be known), a genus, a binomial whose genus agrees, one provenance record, and a license that
is CC0, CC-BY, CC-BY-NC or CC-BY-SA in any spelling :func:`cladebench.curate.sources.inquire.parse_license`
reads (never ND in any variant, never all rights reserved, never ``other`` or a value it does not
read) with a license link, and an image source (a local path or a URL). Then the sampling: at most
``per_species`` rows per species, and at most ``genus_only_cap`` rows per genus among the rows
identified to genus only (a bucket of their own, so camera-trap rows without a species cannot crowd
out the species); within a bucket rows go in seeded order (:func:`sample_key`), so the same catalog,
config and seed give the same rows in the same order (the same fingerprint). Last the images: a
sampled row whose image cannot be fetched or decoded is dropped under its reason (not replaced, so
the selection never depends on which hosts answered). Every row of the catalog ends in the dataset,
``outside_groups`` or exactly one reason; the build asserts that they add up.

**Images** are fetched with :mod:`cladebench.curate.fetch` (resumable; the originals are kept in
``--download-dir``, by default the cladebench cache, so a rerun fetches only what is missing) or read
from the local paths, decoded upright to RGB (:func:`cladebench.images.decode_image`), shrunk with
Lanczos so the longest side is at most ``max_side`` (720 px, as published; smaller images are kept as
they are), and stored as **lossless** WebP (method 6, the slowest and smallest): the stored pixels are
exactly the resized ones, so a model sees what the resize made and nothing a codec invented.
Resizing runs in ``--workers`` processes.

**seen_in_training** lists, per row, the models (in the order given) whose ``--seen MODEL=FILE`` list
holds its uuid; ``[]`` when none does, null for every row when no list was given (unknown, not
"unseen").

**Embeddings and indices.** Each ``--embed`` model encodes every image into ``emb_<key>``
(:func:`cladebench.embed.embed_dataset`; raw vectors, field metadata naming model, revision,
preprocessing and dim). Then BTREE on ``uuid``, BITMAP on ``challenge_group``, and an IVF_FLAT cosine
index on each ``emb_*`` column when the dataset has at least ``min_index_rows`` rows
(:data:`DEFAULT_MIN_INDEX_ROWS`): below that an exact search over every row is as fast as the index
and never misses, and k-means over a handful of vectors gives partitions that mean nothing.

**Output** (``--out``), written to a temporary sibling and renamed into place only when everything is
done, so a failure at any step leaves nothing half-written (and an existing ``--out`` untouched;
:mod:`cladebench.curate.staging`: ``--out`` may not be, be inside or contain an input, and
``--overwrite`` replaces only a previous output of this builder, which its marker
``.cladebench-output.json`` identifies):

- ``data/challenges.lance``: the table (the store's canonical columns; ``species`` is the lower-case
  epithet and ``scientific_name`` the catalog's, authority included; plus ``challenge_group``,
  ``copyright_owner``, ``publisher``, ``basisOfRecord``, ``img_type``, ``resolution_status``,
  ``width``/``height`` of the stored image and ``original_width``/``original_height``);
- ``embedding_models.json``: one entry per ``emb_*`` column (model id, revision, preprocessing, dim,
  ...), beside the card and inside the dataset;
- ``README.md``: the card, with images per group, per species and per license, seen_in_training,
  embeddings, indices and every drop count by reason; ``build.json`` (the summary);
  ``dropped.parquet`` (every row of a group left out, with its reason and detail).

Example:
    >>> ChallengeGroup.parse("zebras=species:Equus quagga,Equus grevyi")
    ChallengeGroup(name='zebras', rank=<Rank.SPECIES: 6>, values=('Equus quagga', 'Equus grevyi'))
    >>> [classify_license(raw)[0] for raw in ("cc-by-nc-4.0", "CC BY-NC-ND 4.0", "All rights reserved", "other")]
    [None, 'license_no_derivatives', 'license_all_rights_reserved', 'license_other']
    >>> sample_key(0, "a") == sample_key(0, "a") != sample_key(1, "a")
    True
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from cladebench import store
from cladebench.config import OPTION, bare_value, config_to_dict
from cladebench.curate.builders.duckdb_errors import duckdb_errors
from cladebench.curate.staging import OutputTarget, check_output, staged_output
from cladebench.errors import CladebenchError, UsageError, undecodable_at
from cladebench.raycluster import DEFAULT_ADDRESS
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank

if TYPE_CHECKING:
    import duckdb
    from PIL import Image

    from cladebench.curate.sources.inquire import InatLicense

DEFAULT_GROUPS: tuple[str, ...] = (
    "Peromyscus=genus:Peromyscus",
    "Ixodidae=family:Ixodidae",
    "zebras=species:Equus quagga,Equus grevyi,Equus zebra",
)
"""The published dataset's groups: deer mice (genus), hard ticks (family), the three zebra species of *Equus*."""
DATASET_DIR = "data/challenges.lance"
"""Where the table goes inside ``--out`` (the published repository's layout)."""
DEFAULT_MIN_INDEX_ROWS = 256
"""Fewest rows for an IVF_FLAT index; below it exact search is as fast and k-means has too little to learn."""
WEBP_METHOD = 6
"""libwebp's effort level (0-6): 6 gives the smallest lossless files; pixels are identical at every level."""
PASSTHROUGH_COLUMNS: tuple[str, ...] = ("publisher", "basisOfRecord", "img_type", "resolution_status")
"""Catalog columns copied as they are (null when the catalog lacks them)."""
CATALOG_TEXT_COLUMNS: tuple[str, ...] = ("source_dataset", "source_id", "scientific_name", "common_name",
                                         "source_url", *PASSTHROUGH_COLUMNS)
"""Optional catalog columns read as text."""
CHUNK_ROWS = 64
"""Rows per batch handed to Lance: bounds the encoded images held in memory."""


# --- challenge groups ----------------------------------------------------------------------------


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _normalise_name(value: str) -> str:
    return " ".join(value.split()).lower()


BINOMIAL_SQL = ("lower(regexp_replace(CASE WHEN regexp_matches(trim(species), '^[A-Z]\\S*\\s') THEN trim(species) "
                "ELSE trim(genus) || ' ' || trim(species) END, '\\s+', ' ', 'g'))")
"""The catalog row's binomial, lower case: ``species`` when it is one, else ``genus species``."""


@dataclass(frozen=True)
class ChallengeGroup:
    """A challenge group: every row whose name at ``rank`` is one of ``values``."""

    name: str
    """The ``challenge_group`` value."""
    rank: Rank
    """Rank the values name taxa at."""
    values: tuple[str, ...]
    """Taxon names at that rank (binomials for ``species``), compared case-insensitively."""

    @classmethod
    def parse(cls, spec: str) -> ChallengeGroup:
        """``NAME=RANK:VALUE[,VALUE]``, e.g. ``Ixodidae=family:Ixodidae``."""
        example = "e.g. zebras=species:Equus quagga,Equus grevyi"
        name, equals, rest = spec.partition("=")
        rank_name, colon, values_text = rest.partition(":")
        values = tuple(v.strip() for v in values_text.split(",") if v.strip())
        if not (equals and colon and name.strip() and values):
            raise UsageError(f"challenge group {spec!r}: expected NAME=RANK:VALUE[,VALUE] ({example})")
        try:
            rank = Rank.parse(rank_name)
        except KeyError as exc:
            raise UsageError(f"challenge group {spec!r}: {exc}") from None
        if rank is Rank.SPECIES:
            not_binomial = [v for v in values if len(v.split()) < 2]
            if not_binomial:
                raise UsageError(f"challenge group {spec!r}: species are named by their binomial "
                                 f"('Equus quagga'), not {not_binomial}")
        return cls(name.strip(), rank, values)

    @property
    def taxon(self) -> str:
        """``genus:Peromyscus``, as the card shows it."""
        return f"{self.rank.column}:{', '.join(self.values)}"

    def condition(self) -> str:
        """SQL over the catalog's columns: true for a row of this group."""
        column = BINOMIAL_SQL if self.rank is Rank.SPECIES else f'lower(trim("{self.rank.column}"))'
        return f"{column} IN ({', '.join(_sql_text(_normalise_name(v)) for v in self.values)})"


def parse_groups(specs: Iterable[str]) -> tuple[ChallengeGroup, ...]:
    """Parse ``--group`` values; group names must be unique."""
    groups = tuple(ChallengeGroup.parse(s) for s in specs)
    names = Counter(g.name for g in groups)
    repeated = [n for n, count in names.items() if count > 1]
    if repeated:
        raise UsageError(f"challenge group name(s) {repeated} given more than once")
    if not groups:
        raise UsageError("at least one challenge group is needed (--group NAME=RANK:VALUE)")
    return groups


def _parse_pair(spec: str, what: str, example: str) -> tuple[str, str]:
    left, equals, right = spec.partition("=")
    if not (equals and left.strip() and right.strip()):
        raise UsageError(f"{what} {spec!r}: expected {example}")
    return left.strip(), right.strip()


def parse_seen(specs: Iterable[str]) -> tuple[tuple[str, Path], ...]:
    """Parse ``--seen MODEL=FILE`` values; each model once."""
    pairs = tuple((model, Path(path)) for model, path in
                  (_parse_pair(s, "--seen", "MODEL=FILE, e.g. bioclip-2=bioclip2_uuids.txt") for s in specs))
    repeated = [m for m, n in Counter(m for m, _ in pairs).items() if n > 1]
    if repeated:
        raise UsageError(f"--seen names model(s) {repeated} more than once")
    return pairs


_COLUMN_KEY = re.compile(r"[A-Za-z0-9_]+")


def parse_embed(specs: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Parse ``--embed`` values into ``(column, model)``: ``MODEL`` (column derived from it) or ``KEY=MODEL``.

    Each model name is resolved here (no weights read), so a misspelt alias fails before any image is fetched.
    """
    from cladebench.embed import column_for_model
    from cladebench.models.registry import resolve_model

    pairs = []
    for spec in specs:
        key, equals, model = spec.partition("=")
        if equals and _COLUMN_KEY.fullmatch(key) and model.strip():
            column = key if key.startswith(store.EMBEDDING_PREFIX) else store.EMBEDDING_PREFIX + key
            pairs.append((column, model.strip()))
        elif spec.strip():
            pairs.append((column_for_model(spec.strip()), spec.strip()))
        else:
            raise UsageError("--embed: an empty model name")
    repeated = [c for c, n in Counter(c for c, _ in pairs).items() if n > 1]
    if repeated:
        raise UsageError(f"--embed: two models would write column(s) {repeated}; name them with KEY=MODEL")
    for _, model in pairs:
        resolve_model(model)
    return tuple(pairs)


# --- the config ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FineGrainedBuildConfig:
    """Build Fine-Grained Challenges from a TreeOfLife-200M-style catalog (``cladebench build finegrained``)."""

    catalog: Path
    """Catalog of images (Parquet, CSV or TSV, or a folder of Parquet files): uuid, kingdom .. species, source_url,
    and optionally source_dataset, source_id, scientific_name, common_name, publisher, basisOfRecord, img_type."""
    provenance: Path = field(metadata=OPTION)
    """Provenance table joined on uuid (Parquet, CSV or TSV): license_name, license_link, copyright_owner."""
    out: Path = field(metadata=OPTION)
    """Output folder: data/challenges.lance, README.md (the card), embedding_models.json, build.json,
    dropped.parquet."""
    group: tuple[str, ...] = DEFAULT_GROUPS
    """Challenge groups, each NAME=RANK:VALUE[,VALUE] (e.g. 'zebras=species:Equus quagga,Equus grevyi'); a row
    goes to the first group it matches."""
    per_species: int = 100
    """At most this many images per species (seeded choice)."""
    genus_only_cap: int = 500
    """At most this many images per genus among rows identified to genus only (species null); 0 leaves them out."""
    seed: int = 0
    """Seed of the sampling; the same catalog, config and seed give the same rows in the same order."""
    seen: tuple[str, ...] = ()
    """MODEL=FILE: the uuids in FILE (one per line, or Parquet/CSV with a uuid column) were in MODEL's training
    data; fills seen_in_training."""
    embed: tuple[str, ...] = ()
    """Models to embed every image with (alias, hf-hub:ORG/NAME, local-dir:PATH), each into emb_<key>; KEY=MODEL
    names the column emb_KEY."""
    image_path_column: str = "image_path"
    """Catalog column of local image files; rows where it is empty (or the catalog lacks it) are fetched from
    source_url."""
    image_dir: Path | None = None
    """Folder that relative image paths are resolved against (default: the catalog's folder)."""
    download_dir: Path | None = None
    """Where fetched originals are kept, so a rerun fetches only what is missing (default: the cladebench cache)."""
    max_side: int = 720
    """Longest side of a stored image in pixels; larger images are shrunk with Lanczos, smaller ones kept as is."""
    min_index_rows: int = DEFAULT_MIN_INDEX_ROWS
    """Fewest rows for an IVF_FLAT index on an emb_ column; smaller datasets are searched exactly."""
    workers: int | None = None
    """Processes that resize and encode images (and decode them for embedding); 0 works in this process.
    Default: one per core."""
    concurrency: int = 16
    """Image downloads in flight at once (per Ray task with --ray)."""
    ray: str | None = field(default=None, metadata=bare_value(DEFAULT_ADDRESS))
    """Fetch the images on a Ray cluster: --ray alone as ray.init finds it, or auto, local, ray://HOST:10001;
    --download-dir must then be on a filesystem every node sees."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the embedding models run."""
    batch_size: int = 64
    """Images per forward pass when embedding."""
    progress: bool = True
    """Show progress bars on stderr."""
    overwrite: bool = False
    """Replace OUT if it is a previous output of this builder (its marker file says so), only once the new build is
    complete; anything else at OUT is refused."""

    def __post_init__(self) -> None:
        for name, low in (("per_species", 1), ("genus_only_cap", 0), ("max_side", 1), ("min_index_rows", 1),
                          ("concurrency", 1), ("batch_size", 1)):
            if getattr(self, name) < low:
                raise UsageError(f"{name} must be at least {low}, got {getattr(self, name)}")
        if self.seed < 0:
            raise UsageError(f"seed must be >= 0, got {self.seed}")
        if self.workers is not None and self.workers < 0:
            raise UsageError(f"workers must be >= 0, got {self.workers}")
        parse_groups(self.group)
        parse_seen(self.seen)
        parse_embed(self.embed)


# --- licenses and row checks ---------------------------------------------------------------------


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t}


def classify_license(raw: str | None) -> tuple[str | None, InatLicense | None]:
    """Why a license is refused (a :data:`ROW_CHECKS` reason) or ``None`` when it is kept, and the parsed license.

    ND is recognised in any spelling (``-nd``, ``NoDerivatives``, ``NoDerivs``), even where the rest of the value
    does not parse; so is "all rights reserved" with stray punctuation. A value that names no license
    (``other``) and one that :func:`~cladebench.curate.sources.inquire.parse_license` does not read are refused apart.
    """
    from cladebench.curate.sources.inquire import parse_license

    text = (raw or "").strip()
    if not text:
        return "missing_license", None
    tokens = _tokens(text)
    parsed = parse_license(text)
    if parsed is None and "other" in tokens:
        return "license_other", None
    if "nd" in tokens or any(t.startswith("noderiv") for t in tokens) or (
            parsed is not None and "nd" in parsed.code.split("-")):
        return "license_no_derivatives", parsed
    if (parsed is not None and parsed.code == "all-rights-reserved") or {"all", "rights", "reserved"} <= tokens:
        return "license_all_rights_reserved", parsed
    if parsed is None:
        return "license_unrecognised", None
    return None, parsed


@dataclass(frozen=True)
class Check:
    """One reason a row of a challenge group is left out, and how to see it."""

    reason: str
    """Short name counted in the card and ``dropped.parquet``."""
    doc: str
    """What it means, for the card."""
    fails: Callable[[Mapping[str, Any]], bool]
    """True when the (prepared) row fails this check."""


def _license_check(reason: str, doc: str) -> Check:
    return Check(reason, doc, lambda row: row["license_reason"] == reason)


def _species_genus_mismatch(row: Mapping[str, Any]) -> bool:
    words = (row["species"] or "").split()
    return len(words) >= 2 and words[0][:1].isupper() and words[0].lower() != (row["genus"] or "").strip().lower()


ROW_CHECKS: tuple[Check, ...] = (
    Check("missing_uuid", "the row has no uuid", lambda row: not row["uuid"]),
    Check("invalid_uuid", "the uuid contains a line break (the fingerprint separates uuids by newlines)",
          lambda row: "\n" in row["uuid"] or "\r" in row["uuid"]),
    Check("duplicate_uuid", "the uuid is on more than one row of the groups (every copy dropped: which is right "
          "cannot be known)", lambda row: row["n_copies"] > 1),
    Check("above_genus", "identified above genus (no genus name)", lambda row: not (row["genus"] or "").strip()),
    Check("species_genus_mismatch", "the species binomial names another genus than the genus column",
          _species_genus_mismatch),
    Check("ambiguous_provenance", "the provenance table gives this uuid more than one license record",
          lambda row: (row["n_provenance"] or 0) > 1),
    _license_check("missing_license", "no provenance row, or an empty license_name"),
    _license_check("license_other", "the license is given as 'other' (no license named)"),
    _license_check("license_no_derivatives", "a NoDerivatives (ND) license: resized images are derivatives"),
    _license_check("license_all_rights_reserved", "all rights reserved"),
    _license_check("license_unrecognised", "a license value that does not parse as CC0 or a CC-BY variant"),
    Check("missing_license_link", "no license_link", lambda row: not (row["license_link"] or "").strip()),
    Check("no_image_source", "neither a local image path nor a source_url",
          lambda row: not (row["image_path"] or "").strip() and not (row["source_url"] or "").strip()),
)
"""Every reason a row of a challenge group is not eligible, in the order checked (first failing one wins)."""

SAMPLING_REASONS: dict[str, str] = {
    "species_cap": "eligible, but its species already had per_species images",
    "genus_only_cap": "eligible, identified to genus only, and its genus already had genus_only_cap such images",
}
IMAGE_REASONS: dict[str, str] = {
    "image_fetch_failed": "sampled, but the image could not be fetched (detail in dropped.parquet)",
    "image_file_missing": "sampled, but its local image file does not exist",
    "image_decode_failed": "sampled, but the image does not decode (corrupt, truncated, not an image)",
}
OUTSIDE_REASON = "outside_groups"


def reason_docs() -> dict[str, str]:
    """Every outcome a catalog row can have other than the dataset, with its meaning, in card order."""
    return {OUTSIDE_REASON: "its taxon is in no challenge group (distractor taxa, the rest of the catalog)",
            **{c.reason: c.doc for c in ROW_CHECKS}, **SAMPLING_REASONS, **IMAGE_REASONS}


def sample_key(seed: int, uuid: str) -> str:
    """The seeded order of rows within a bucket: SHA-256 of ``"<seed>:<uuid>"`` in hex (the same on any machine;
    Python's ``hash`` is salted per process)."""
    return hashlib.sha256(f"{seed}:{uuid}".encode()).hexdigest()


# --- reading -------------------------------------------------------------------------------------


def _scan_sql(path: Path) -> str:
    """A DuckDB table function reading ``path``: every CSV value as text (ids must not become numbers)."""
    if path.is_dir():
        files = sorted(path.rglob("*.parquet"))
        if not files:
            raise UsageError(f"{path}: a folder without Parquet files")
        return f"read_parquet({_sql_text(str(path) + '/**/*.parquet')}, union_by_name=true)"
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    name = path.name.lower()
    quoted = _sql_text(str(path))
    if name.endswith(".parquet"):
        return f"read_parquet({quoted})"
    if name.endswith((".csv", ".csv.gz")):
        return f"read_csv({quoted}, header=true, all_varchar=true)"
    if name.endswith((".tsv", ".tsv.gz")):
        return f"read_csv({quoted}, header=true, all_varchar=true, delim='\\t')"
    raise UsageError(f"{path}: not a Parquet, CSV or TSV file")


def _columns(con: duckdb.DuckDBPyConnection, scan: str) -> list[str]:
    return [r[0] for r in con.sql(f"DESCRIBE SELECT * FROM {scan}").fetchall()]


def _text(column: str, present: Sequence[str], alias: str | None = None) -> str:
    """A column as trimmed text with empty values null (null when the table lacks it), named ``alias``."""
    value = f"NULLIF(trim(CAST(\"{column}\" AS VARCHAR)), '')" if column in present else "NULL::VARCHAR"
    return f'{value} AS "{alias or column}"'


@dataclass(frozen=True)
class _Catalog:
    """What the scan of the catalog found: every row count, and the groups' rows with their provenance."""

    rows: int
    outside: int
    in_several_groups: int
    group_rows: list[dict[str, Any]]


def _read_catalog(config: FineGrainedBuildConfig, groups: Sequence[ChallengeGroup]) -> _Catalog:
    import duckdb

    con = duckdb.connect()
    try:
        catalog_scan = _scan_sql(Path(config.catalog))
        provenance_scan = _scan_sql(Path(config.provenance))
        catalog_columns = _columns(con, catalog_scan)
        provenance_columns = _columns(con, provenance_scan)
        missing = [c for c in ("uuid", *RANK_COLUMNS) if c not in catalog_columns]
        if missing:
            raise UsageError(f"{config.catalog}: missing column(s) {missing} (it has {catalog_columns})")
        if "source_url" not in catalog_columns and config.image_path_column not in catalog_columns:
            raise UsageError(f"{config.catalog}: neither source_url nor {config.image_path_column!r}: no images")
        missing = [c for c in ("uuid", "license_name", "license_link") if c not in provenance_columns]
        if missing:
            raise UsageError(f"{config.provenance}: missing column(s) {missing} (it has {provenance_columns})")

        case = "CASE " + " ".join(f"WHEN {g.condition()} THEN {_sql_text(g.name)}" for g in groups) + " END"
        several = " + ".join(f"coalesce(({g.condition()})::INTEGER, 0)" for g in groups)
        total, outside, overlapping = con.sql(
            f"SELECT count(*), count(*) FILTER (grp IS NULL), count(*) FILTER (n > 1) "
            f"FROM (SELECT {case} AS grp, {several} AS n FROM {catalog_scan})").fetchall()[0]

        texts = [_text(c, catalog_columns) for c in ("uuid", *RANK_COLUMNS, *CATALOG_TEXT_COLUMNS)]
        image_path = _text(config.image_path_column, catalog_columns, "image_path")
        owner = _text("copyright_owner", provenance_columns)
        query = f"""
            WITH matched AS (
                SELECT {", ".join(texts)}, {image_path}, {case} AS challenge_group FROM {catalog_scan}
            ), grouped AS (SELECT * FROM matched WHERE challenge_group IS NOT NULL),
            copies AS (SELECT uuid, count(*) AS n_copies FROM grouped WHERE uuid IS NOT NULL GROUP BY uuid),
            records AS (
                SELECT DISTINCT * FROM (
                    SELECT {_text("uuid", provenance_columns)}, {_text("license_name", provenance_columns)},
                           {_text("license_link", provenance_columns)}, {owner}
                    FROM {provenance_scan})
                WHERE uuid IN (SELECT uuid FROM copies)
            ), provenance AS (
                SELECT uuid, count(*) AS n_provenance, any_value(license_name) AS license_name,
                       any_value(license_link) AS license_link, any_value(copyright_owner) AS copyright_owner
                FROM records GROUP BY uuid
            )
            SELECT g.*, coalesce(c.n_copies, 0) AS n_copies, p.n_provenance, p.license_name, p.license_link,
                   p.copyright_owner
            FROM grouped g LEFT JOIN copies c USING (uuid) LEFT JOIN provenance p USING (uuid)
            ORDER BY g.challenge_group, g.uuid NULLS FIRST, g.genus, g.species
        """
        try:
            rows = con.sql(query).to_arrow_table().to_pylist()
        except duckdb.Error as exc:
            raise CladebenchError(f"cannot read {config.catalog} with {config.provenance}: "
                                  f"{str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    return _Catalog(int(total), int(outside), int(overlapping), rows)


def _read_uuid_list(path: Path) -> set[str]:
    """A ``--seen`` file: Parquet or CSV with a ``uuid`` column, or text with one uuid per line."""
    if not path.is_file():
        raise UsageError(f"--seen: {path}: {'a folder, not a file' if path.is_dir() else 'no such file'}")
    name = path.name.lower()
    if name.endswith((".parquet", ".csv", ".csv.gz")):
        import duckdb

        con = duckdb.connect()
        try:
            with duckdb_errors(f"--seen {path}"):
                scan = _scan_sql(path)
                if "uuid" not in _columns(con, scan):
                    raise UsageError(f"--seen: {path} has no uuid column")
                values = con.sql(f"SELECT DISTINCT trim(CAST(uuid AS VARCHAR)) FROM {scan} WHERE uuid IS NOT NULL")
                return {v for (v,) in values.fetchall() if v}
        finally:
            con.close()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CladebenchError(f"--seen: {path}: not UTF-8 text ({undecodable_at(error)})") from None
    except OSError as error:
        raise CladebenchError(f"--seen: cannot read {path}: {error.strerror or error}") from None
    lines = (line.strip() for line in text.splitlines())
    return {line for line in lines if line and line.lower() != "uuid"}


# --- checking and sampling -----------------------------------------------------------------------


def _prepare(row: dict[str, Any]) -> dict[str, Any]:
    row["uuid"] = row["uuid"] or ""
    row["license_reason"], row["license"] = classify_license(row["license_name"])
    return row


def check_rows(rows: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The eligible rows, and the others, each with the ``reason`` of the first :data:`ROW_CHECKS` check it fails."""
    eligible, refused = [], []
    for row in rows:
        prepared = _prepare(row)
        reason = next((c.reason for c in ROW_CHECKS if c.fails(prepared)), None)
        if reason is None:
            eligible.append(prepared)
        else:
            prepared["reason"] = reason
            refused.append(prepared)
    return eligible, refused


def _bucket(row: Mapping[str, Any]) -> tuple[str, str, str | None]:
    lineage: Lineage = row["lineage"]
    genus = lineage[Rank.GENUS] or ""
    return row["challenge_group"], genus.lower(), lineage[Rank.SPECIES]


def sample(eligible: Sequence[dict[str, Any]], config: FineGrainedBuildConfig,
           groups: Sequence[ChallengeGroup]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows kept by the caps, in dataset order (group, genus, species with genus-only rows first, seeded order),
    and the rows the caps refused (each with its ``reason``)."""
    buckets: dict[tuple[str, str, str | None], list[dict[str, Any]]] = {}
    for row in eligible:
        row["lineage"] = Lineage(tuple(row[c] for c in RANK_COLUMNS), common_name=row["common_name"])
        row["sample_key"] = sample_key(config.seed, row["uuid"])
        buckets.setdefault(_bucket(row), []).append(row)
    order = {g.name: i for i, g in enumerate(groups)}
    kept, refused = [], []
    for key in sorted(buckets, key=lambda k: (order[k[0]], k[1], k[2] or "")):
        rows = sorted(buckets[key], key=lambda r: (r["sample_key"], r["uuid"]))
        cap, reason = (config.per_species, "species_cap") if key[2] is not None else \
            (config.genus_only_cap, "genus_only_cap")
        kept.extend(rows[:cap])
        for row in rows[cap:]:
            row["reason"] = reason
            refused.append(row)
    return kept, refused


# --- images --------------------------------------------------------------------------------------


def fit_within(image: Image.Image, max_side: int) -> Image.Image:
    """The image shrunk with Lanczos so its longest side is ``max_side`` (aspect kept); unchanged when it fits."""
    from PIL import Image

    width, height = image.size
    longest = max(width, height)
    if longest <= max_side:
        return image
    scale = max_side / longest
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    # The longest side is exactly max_side, whatever rounding does to the other.
    size = (max_side, size[1]) if width >= height else (size[0], max_side)
    return image.resize(size, Image.Resampling.LANCZOS)


def encode_webp(data: bytes, max_side: int) -> tuple[bytes, tuple[int, int], tuple[int, int]]:
    """Decode (upright RGB), fit within ``max_side`` and encode as lossless WebP; also the new and original sizes."""
    from cladebench.images import decode_image

    image = decode_image(data)
    original = image.size
    image = fit_within(image, max_side)
    buffer = io.BytesIO()
    image.save(buffer, "WEBP", lossless=True, method=WEBP_METHOD)
    return buffer.getvalue(), image.size, original


def _encode_file(task: tuple[str, str, int]) -> tuple[str, dict[str, Any]]:
    """One image, in a worker process: its file to WebP bytes, or the reason it failed (never raises)."""
    from cladebench.images import ImageDecodeError

    uuid, path, max_side = task
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return uuid, {"reason": "image_file_missing", "detail": f"no file {path}"}
    except OSError as exc:
        return uuid, {"reason": "image_file_missing", "detail": f"cannot read {path}: {exc}"}
    try:
        webp, size, original = encode_webp(data, max_side)
    except ImageDecodeError as exc:
        return uuid, {"reason": "image_decode_failed", "detail": exc.reason}
    except Exception as exc:  # an image that decodes but cannot be resized or encoded is still this row's failure
        return uuid, {"reason": "image_decode_failed", "detail": f"{type(exc).__name__}: {exc}"}
    return uuid, {"image": webp, "width": size[0], "height": size[1], "original_width": original[0],
                  "original_height": original[1]}


def _encoded(tasks: Sequence[tuple[str, str, int]], workers: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """Encoded images in task order, ``workers`` processes at a time (inline when 0)."""
    if workers == 0 or len(tasks) < 2:
        yield from map(_encode_file, tasks)
        return
    import multiprocessing
    import warnings

    # Forked workers only run Pillow on files; they never touch Lance or DuckDB, which are not fork-safe.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="lance is not fork-safe")
        pool = context.Pool(min(workers, len(tasks)))
    with pool:
        yield from pool.imap(_encode_file, tasks, chunksize=4)


def _local_path(value: str, base: Path) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def _image_sources(kept: Sequence[dict[str, Any]], config: FineGrainedBuildConfig,
                   dropped: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every kept row's image file: its local path, or the fetched original. Rows whose fetch failed go to
    ``dropped``; returns the rows with a file and the download counts."""
    from cladebench.curate.fetch import DownloadConfig, DownloadStore, download

    catalog = Path(config.catalog)
    base = Path(config.image_dir) if config.image_dir is not None else (catalog if catalog.is_dir() else
                                                                         catalog.parent)
    remote = [r for r in kept if not r["image_path"]]
    counts: dict[str, Any] = {"local": len(kept) - len(remote), "fetched": 0, "cached": 0, "failed": 0}
    files: dict[str, str] = {r["uuid"]: _local_path(r["image_path"], base) for r in kept if r["image_path"]}
    if remote:
        if config.download_dir is not None:
            root = Path(config.download_dir)
        else:
            from cladebench.cache import cache_dir

            root = cache_dir("downloads", "finegrained")
        download_store = DownloadStore(root)
        report = download([(r["uuid"], r["source_url"]) for r in remote], download_store,
                          DownloadConfig(concurrency=config.concurrency, progress=config.progress, ray=config.ray))
        counts.update(fetched=report.ok, cached=report.cached, failed=report.failed,
                      failed_by_reason=report.failed_by_reason, download_dir=str(root))
        for key, entry in report.downloaded.items():
            files[key] = str(download_store.object_path(entry.sha256))
        failures = {f.key: f for f in report.failures}
        for row in remote:
            failure = failures.get(row["uuid"])
            if failure is not None:
                dropped.append({**row, "reason": "image_fetch_failed", "detail": f"{failure.reason}: {failure.detail}"})
    with_files = [r for r in kept if r["uuid"] in files]
    for row in with_files:
        row["image_file"] = files[row["uuid"]]
    return with_files, counts


# --- the table -----------------------------------------------------------------------------------

EXTRA_FIELDS: tuple[pa.Field, ...] = (
    pa.field("challenge_group", pa.string()),
    pa.field("copyright_owner", pa.string()),
    *(pa.field(c, pa.string()) for c in PASSTHROUGH_COLUMNS),
    pa.field("width", pa.int32()),
    pa.field("height", pa.int32()),
    pa.field("original_width", pa.int32()),
    pa.field("original_height", pa.int32()),
)
"""Columns beside the canonical ones."""
OUTPUT_SCHEMA = pa.schema([
    *(pa.field(c.name, c.type, nullable=not c.required) for c in store.CANONICAL_COLUMNS
      if c.name not in ("taxon_id", "latitude", "longitude", "observed_on")),
    *EXTRA_FIELDS,
])
"""Columns of every batch written (the canonical columns the catalog has nothing for are added as nulls)."""


def _output_row(row: Mapping[str, Any], image: Mapping[str, Any], seen: Sequence[tuple[str, set[str]]] | None
                ) -> dict[str, Any]:
    lineage: Lineage = row["lineage"]
    license_ = row["license"]
    owner = row["copyright_owner"]
    return {
        "uuid": row["uuid"], "image": image["image"], "image_format": "webp",
        **{c: lineage.names[i] for i, c in enumerate(RANK_COLUMNS)},
        "scientific_name": row["scientific_name"] or lineage.scientific_name, "common_name": lineage.common_name,
        "source_dataset": row["source_dataset"], "source_id": row["source_id"], "source_url": row["source_url"],
        "license_name": license_.code, "license_link": row["license_link"],
        "attribution": license_.attribution(owner) if owner else None,
        "seen_in_training": None if seen is None else [m for m, uuids in seen if row["uuid"] in uuids],
        "challenge_group": row["challenge_group"], "copyright_owner": owner,
        **{c: row[c] for c in PASSTHROUGH_COLUMNS},
        **{k: image[k] for k in ("width", "height", "original_width", "original_height")},
    }


def _batches(rows: Sequence[dict[str, Any]], config: FineGrainedBuildConfig,
             seen: Sequence[tuple[str, set[str]]] | None, dropped: list[dict[str, Any]],
             workers: int) -> Iterator[pa.Table]:
    """The dataset's rows as Arrow tables of at most :data:`CHUNK_ROWS`; rows whose image fails go to ``dropped``."""
    from tqdm import tqdm

    by_uuid = {r["uuid"]: r for r in rows}
    tasks = [(r["uuid"], r["image_file"], config.max_side) for r in rows]
    pending: list[dict[str, Any]] = []
    with tqdm(total=len(tasks), desc="images", unit="img", disable=not config.progress, file=sys.stderr) as bar:
        for uuid, result in _encoded(tasks, workers):
            bar.update(1)
            row = by_uuid[uuid]
            if "reason" in result:
                dropped.append({**row, **result})
                continue
            pending.append(_output_row(row, result, seen))
            if len(pending) >= CHUNK_ROWS:
                yield pa.Table.from_pylist(pending, schema=OUTPUT_SCHEMA)
                pending = []
    if pending:
        yield pa.Table.from_pylist(pending, schema=OUTPUT_SCHEMA)


# --- the summary and the card --------------------------------------------------------------------


@dataclass(frozen=True)
class FineGrainedBuildSummary:
    """What a build read, dropped (by reason), kept and wrote."""

    out: Path
    """The output folder."""
    dataset_path: Path
    """``data/challenges.lance`` inside ``out``."""
    card_path: Path
    """``README.md``: the card."""
    rows: int
    """Images in the dataset."""
    fingerprint: str
    """SHA-256 of the dataset's uuids in row order (:func:`cladebench.store.fingerprint`)."""
    catalog_rows: int
    """Rows the catalog holds."""
    outcomes: dict[str, int]
    """Catalog rows per reason they are not in the dataset (``outside_groups`` and every reason of
    :func:`reason_docs`, zeros included); with ``rows`` they add up to ``catalog_rows``."""
    groups: dict[str, dict[str, Any]]
    """Per challenge group: its taxon, images, species, genus-only images, eligible rows."""
    species: dict[str, dict[str, int]]
    """Per group, images per binomial (``Genus`` alone for genus-only rows)."""
    licenses: dict[str, dict[str, int]]
    """Per license code, images per group and ``total``."""
    seen_in_training: dict[str, dict[str, int]]
    """Per ``--seen`` model: uuids listed, and images of the dataset among them."""
    embeddings: dict[str, dict[str, Any]]
    """Per ``emb_*`` column: model, revision, preprocessing, dim, valid and failed rows."""
    indices: list[dict[str, Any]]
    """The dataset's indices: name, type, columns."""
    vector_index_skipped: str | None
    """Why the emb_ columns have no IVF_FLAT index (too few rows), or ``None``."""
    images: dict[str, Any]
    """Where the images came from: local files, fetched, cached, failed."""
    notes: dict[str, Any]
    """Counts that are not drops (rows in several groups, --seen uuids not in the dataset)."""
    config: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def describe(self) -> str:
        """A few lines for a terminal: what was written, and the largest reasons rows were left out."""
        drops = sorted(((n, r) for r, n in self.outcomes.items() if n and r != OUTSIDE_REASON), reverse=True)
        groups = ", ".join(f"{g} {v['images']:,}" for g, v in self.groups.items())
        return "\n".join([
            f"{self.dataset_path}: {self.rows:,} images ({groups}), fingerprint {self.fingerprint[:12]}",
            f"from {self.catalog_rows:,} catalog rows ({self.outcomes.get(OUTSIDE_REASON, 0):,} outside the groups); "
            "left out: " + (", ".join(f"{r} {n:,}" for n, r in drops[:8]) or "none"),
            "embeddings: " + (", ".join(self.embeddings) or "none") + f"; card: {self.card_path}",
        ])

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("out", "dataset_path", "card_path"):
            out[key] = str(out[key])
        return out


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def render_card(summary: FineGrainedBuildSummary) -> str:
    """The dataset card: what the dataset is, how it was built, and every count (all taken from the written data)."""
    config = summary.config
    group_names = list(summary.groups)
    docs = reason_docs()
    embedding_rows = [(c, m.get("model", ""), m.get("revision", "") or "", m.get("dim", ""),
                       json.dumps(m.get("preprocessing", ""), sort_keys=True)) for c, m in summary.embeddings.items()]
    sections = [
        "# Fine-Grained Challenges (built from a TreeOfLife-200M catalog)",
        "",
        f"{summary.rows:,} images in {len(summary.groups)} challenge groups of visually similar taxa, one Lance table "
        f"(`{DATASET_DIR}`) with the image (lossless WebP, longest side at most {config.get('max_side')} px), seven "
        "ranks, provenance, license, `seen_in_training` and raw embeddings. Tasks: zero-shot classification per "
        "group, few-shot on frozen embeddings, comparison of embedding spaces, nearest-neighbour retrieval, and "
        "inspection of the genus-only rows.",
        "",
        f"- Fingerprint (SHA-256 of the row uuids in order): `{summary.fingerprint}`",
        f"- Built with: per_species={config.get('per_species')}, genus_only_cap={config.get('genus_only_cap')}, "
        f"seed={config.get('seed')}, catalog `{config.get('catalog')}`, provenance `{config.get('provenance')}`",
        "- A valid evaluation states its split, sampling unit, label set, model revision, prompts and metric.",
        "",
        "## Challenge groups",
        "",
        _table(["challenge_group", "taxon", "species", "images", "genus-only images"],
               [(g, v["taxon"], v["species"], v["images"], v["genus_only"]) for g, v in summary.groups.items()]
               + [("total", "", sum(v["species"] for v in summary.groups.values()), summary.rows,
                   sum(v["genus_only"] for v in summary.groups.values()))]),
        "",
        "## Licenses",
        "",
        "CC0, CC-BY, CC-BY-NC and CC-BY-SA only: no NoDerivatives variant (a resized image is a derivative), no "
        "all-rights-reserved, no unnamed (`other`) license, none without a license link.",
        "",
        _table(["license", *group_names, "total"],
               [(lic, *(v.get(g, 0) for g in group_names), v["total"]) for lic, v in summary.licenses.items()]
               + [("total", *(summary.groups[g]["images"] for g in group_names), summary.rows)]),
        "",
        "## Images per species",
        "",
        f"At most {config.get('per_species')} per species and {config.get('genus_only_cap')} per genus among rows "
        "identified to genus only (listed by the genus alone).",
        "",
        _table(["challenge_group", "taxon", "images"],
               [(g, name, n) for g, names in summary.species.items() for name, n in names.items()]),
        "",
        "## seen_in_training",
        "",
        _table(["model", "uuids listed", "images in the dataset"],
               [(m, v["listed"], v["in_dataset"]) for m, v in summary.seen_in_training.items()])
        if summary.seen_in_training else "No training lists were given: `seen_in_training` is null (unknown).",
        "",
        "## Embeddings and indices",
        "",
        _table(["column", "model", "revision", "dim", "preprocessing"], embedding_rows) if embedding_rows
        else "No embedding columns.",
        "",
        "Indices: " + ", ".join(f"`{i['name']}` ({i['type']} on {', '.join(i['columns'])})" for i in summary.indices)
        + "." + (f" {summary.vector_index_skipped}" if summary.vector_index_skipped else ""),
        "",
        "## What was left out, and why",
        "",
        f"The catalog held {summary.catalog_rows:,} rows. Each is in the dataset or counted under exactly one "
        "reason (the first that applies, in this order):",
        "",
        _table(["reason", "rows", "meaning"], [(r, n, docs.get(r, "")) for r, n in summary.outcomes.items()]
               + [("in the dataset", summary.rows, "")]),
        "",
    ]
    return "\n".join(sections)


def _summarise(table: pa.Table, groups: Sequence[ChallengeGroup], eligible: Counter[str]) -> dict[str, Any]:
    """Per-group, per-species and per-license counts, from the rows as written."""
    rows = table.select(["challenge_group", "genus", "species", "license_name"]).to_pylist()
    species: dict[str, Counter[str]] = {g.name: Counter() for g in groups}
    licenses: dict[str, Counter[str]] = {}
    for row in rows:
        name = f"{row['genus']} {row['species']}" if row["species"] else row["genus"]
        species[row["challenge_group"]][name] += 1
        licenses.setdefault(row["license_name"], Counter())[row["challenge_group"]] += 1
    return {
        "groups": {g.name: {"taxon": g.taxon, "images": sum(species[g.name].values()),
                            "species": sum(1 for n in species[g.name] if " " in n),
                            "genus_only": sum(n for name, n in species[g.name].items() if " " not in name),
                            "eligible": eligible[g.name]} for g in groups},
        "species": {g: dict(sorted(c.items())) for g, c in species.items()},
        "licenses": {lic: {**dict(c), "total": sum(c.values())}
                     for lic, c in sorted(licenses.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))},
    }


# --- the build -----------------------------------------------------------------------------------


WRITER = "build finegrained"
"""The output's marker names this writer; ``--overwrite`` replaces only such a folder
(:mod:`cladebench.curate.staging`)."""


def _inputs(config: FineGrainedBuildConfig) -> tuple[Path, ...]:
    """What the build reads: the output may be none of these, inside none, and contain none (a local model
    folder given to ``--embed`` included)."""
    paths: list[Path | None] = [config.catalog, config.provenance, config.image_dir, config.download_dir]
    paths += [path for _, path in parse_seen(config.seen)]
    paths += [Path(model.removeprefix("local-dir:")) for _, model in parse_embed(config.embed)
              if model.startswith("local-dir:")]
    return tuple(Path(p) for p in paths if p is not None)


def _embed(dataset_path: Path, config: FineGrainedBuildConfig) -> None:
    from cladebench.embed import EmbedConfig, embed_dataset

    for column, model in parse_embed(config.embed):
        embed_dataset(EmbedConfig(dataset=str(dataset_path), model=model, column=column, device=config.device,
                                  batch_size=config.batch_size, workers=config.workers, progress=config.progress))


def _index(dataset_path: Path, config: FineGrainedBuildConfig) -> str | None:
    """BTREE on uuid, BITMAP on challenge_group, IVF_FLAT cosine on each emb_ column when there are enough rows;
    returns why the vector indices were skipped, if they were."""
    dataset = store.open_dataset(dataset_path)
    store.create_scalar_index(dataset, "uuid", "BTREE")
    store.create_scalar_index(dataset, "challenge_group", "BITMAP")
    columns = store.embedding_columns(store.open_dataset(dataset_path).schema)
    rows = dataset.count_rows()
    if columns and rows < config.min_index_rows:
        return (f"No IVF_FLAT index on {', '.join(columns)}: {rows} rows is under min_index_rows="
                f"{config.min_index_rows}; exact search over every row is as fast at this size.")
    for column in columns:
        store.create_vector_index(store.open_dataset(dataset_path), column, metric="cosine")
    return None


def _embedding_entries(dataset_path: Path) -> dict[str, dict[str, Any]]:
    """``embedding_models.json`` as embed wrote it beside the data (one entry per emb_ column)."""
    sidecar = dataset_path / store.EMBEDDING_SIDECAR
    return json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.exists() else {}


def _dropped_table(dropped: Sequence[Mapping[str, Any]]) -> pa.Table:
    columns = ("uuid", "challenge_group", "reason", "detail", "genus", "species", "source_url", "image_path",
               "license_name")
    rows = [{c: row.get(c) for c in columns} for row in dropped]
    return pa.Table.from_pylist(rows, schema=pa.schema([(c, pa.string()) for c in columns]))


def build_finegrained(config: FineGrainedBuildConfig) -> FineGrainedBuildSummary:
    """Build Fine-Grained Challenges from ``config.catalog`` into ``config.out``; see the module docstring."""
    started = time.monotonic()
    groups = parse_groups(config.group)
    out = Path(config.out)
    target = OutputTarget(out, writer=WRITER, overwrite=config.overwrite, inputs=_inputs(config))
    check_output(target)  # before anything is read
    seen_specs = parse_seen(config.seen)
    seen = [(model, _read_uuid_list(path)) for model, path in seen_specs] if seen_specs else None
    with duckdb_errors(f"the catalog {config.catalog} with {config.provenance}"):
        catalog = _read_catalog(config, groups)

    eligible, dropped = check_rows(catalog.group_rows)
    kept, capped = sample(eligible, config, groups)
    dropped.extend(capped)

    with staged_output(target) as staging:
        with_files, image_counts = _image_sources(kept, config, dropped)
        dataset_path = staging / DATASET_DIR
        dataset_path.parent.mkdir(parents=True)
        workers = (os.cpu_count() or 1) if config.workers is None else config.workers
        batches = _batches(with_files, config, seen, dropped, workers)
        try:
            first = next(batches, None)
            if first is None:
                raise CladebenchError(
                    f"nothing to write: of {catalog.rows:,} catalog rows, {len(kept):,} were sampled and none has "
                    f"an image that could be read ({dict(Counter(r['reason'] for r in dropped).most_common(5))})")
            store.write_dataset(_chain(first, batches), dataset_path)
        finally:
            batches.close()  # stops the encoding processes if the write failed midway
        _embed(dataset_path, config)
        skipped = _index(dataset_path, config)

        dataset = store.open_dataset(dataset_path)
        table = store.read(dataset, columns=["uuid", "challenge_group", "genus", "species", "license_name",
                                             "seen_in_training"])
        counts = Counter(r["reason"] for r in dropped)
        outcomes = {OUTSIDE_REASON: catalog.outside,
                    **{r: counts.pop(r, 0) for r in reason_docs() if r != OUTSIDE_REASON}}
        if counts:
            raise AssertionError(f"reasons without a check: {dict(counts)}")
        if sum(outcomes.values()) + table.num_rows != catalog.rows:
            raise AssertionError(f"row accounting: {outcomes} + {table.num_rows} kept != {catalog.rows} catalog rows")
        uuids = set(table.column("uuid").to_pylist())
        entries = _embedding_entries(dataset_path)
        (staging / store.EMBEDDING_SIDECAR).write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n",
                                                       encoding="utf-8")
        summary = FineGrainedBuildSummary(
            out=out, dataset_path=out / DATASET_DIR, card_path=out / "README.md", rows=table.num_rows,
            fingerprint=store.fingerprint(dataset), catalog_rows=catalog.rows, outcomes=outcomes,
            seen_in_training={m: {"listed": len(u), "in_dataset": len(u & uuids)} for m, u in seen or []},
            embeddings={c: {k: e.get(k) for k in ("model", "revision", "preprocessing", "dim", "valid_rows",
                                                  "failed_rows")} for c, e in entries.items()},
            indices=store.indices(dataset), vector_index_skipped=skipped, images=image_counts,
            notes={"rows_in_several_groups": catalog.in_several_groups,
                   "seen_uuids_not_in_dataset": {m: len(u - uuids) for m, u in seen or []}},
            config=config_to_dict(config), elapsed_s=round(time.monotonic() - started, 3),
            **_summarise(table, groups, Counter(r["challenge_group"] for r in eligible)),
        )
        import pyarrow.parquet as pq

        pq.write_table(_dropped_table(dropped), staging / "dropped.parquet")
        (staging / "README.md").write_text(render_card(summary), encoding="utf-8")
        (staging / "build.json").write_text(json.dumps(summary.as_dict(), indent=1, default=str), encoding="utf-8")
    return summary


def _chain(first: pa.Table, rest: Iterator[pa.Table]) -> Iterator[pa.Table]:
    yield first
    yield from rest


__all__ = [
    "DATASET_DIR",
    "DEFAULT_GROUPS",
    "DEFAULT_MIN_INDEX_ROWS",
    "IMAGE_REASONS",
    "OUTPUT_SCHEMA",
    "ROW_CHECKS",
    "SAMPLING_REASONS",
    "ChallengeGroup",
    "Check",
    "FineGrainedBuildConfig",
    "FineGrainedBuildSummary",
    "build_finegrained",
    "check_rows",
    "classify_license",
    "encode_webp",
    "fit_within",
    "parse_embed",
    "parse_groups",
    "parse_seen",
    "reason_docs",
    "render_card",
    "sample",
    "sample_key",
]
