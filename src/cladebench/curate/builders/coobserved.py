"""Build iNat Co-Observed from an iNaturalist open-data export: photos on two observations of different species.

iNat Co-Observed (``dcher95/inat-coobserved``) is made of photos that an observer attached to two
observations, one per organism in the frame. The open-data export shows such a photo as one row of
``photos.csv`` per observation, with the same ``photo_id`` (:mod:`cladebench.curate.inat_export` describes
the files). This builder finds those photos in a full export (hundreds of millions of rows) with
DuckDB, out of core, keeps the usable ones, samples them per divergence rank and writes them in the
published dataset's layout.

**What is kept.** A photo on exactly two observations (deduplicated by ``(photo_id, observation)``),
whose rows agree on observer, license and extension, both observations found once, valid, by the
photo's observer and research grade, both taxa found, active, with a well-formed ancestry that agrees
with their ancestors' own (a taxon moved without its descendants being updated does not), with all
seven ranks kingdom .. species (joined from the ancestry by rank name; intermediate ranks ignored; a
subspecies observation counts as its species), kingdoms Animalia, Plantae or Fungi, of different
species and different genera (a pair parting only at species has no lineage left to complete below
its divergence rank), a license CC0, CC-BY or CC-BY-NC (codes in any case, parsed by
:func:`cladebench.curate.sources.inquire.parse_license`), not in ``--exclude-photo-ids``, and an observer
with a login. Every photo id the export holds ends in exactly one of :data:`PHOTO_CHECKS`'s reasons,
a sampling reason (:data:`SAMPLING_REASONS`) or the dataset; the summary asserts that they add up.

**Bad rows are counted, never fatal, never silent.** Every file is read as text (tab-separated, no
quote character, no escape, the header checked against :data:`cladebench.curate.inat_export.HEADERS`, the
8- and 9-column observations both accepted). A line with too many fields or bytes that are not UTF-8
cannot be split into the header's columns: DuckDB's ``store_rejects`` records it and it is counted
as ``malformed_line`` (with DuckDB's error type). A short line is padded with nulls and then fails the
checks below. Each row is checked in SQL (:data:`ROW_CHECKS`): a required field missing
(``missing_fields``); a value the build relies on (:data:`CHECKED_TYPES`) that does not parse as its
``structure.sql`` type, or a coordinate out of range (``invalid_value``); an ancestry that is not ids
joined by ``/`` (``malformed_ancestry``); a duplicated ``(photo_id, observation)`` row
(``duplicate_row``, kept once) or taxon id (``duplicate_taxon_id``; the id is then unusable), an
observer id on several rows (``duplicate_observer_id``, the rows beyond the first; the observer is
the least row by login and name, whatever the file order, and ids whose rows disagree are counted in
the notes as ``observer_ids_on_disagreeing_rows``). A photo one of whose rows is bad is left out as a
whole (``invalid_photo_row``), since its observation count cannot be trusted.

**Sampling.** Eligible photos are grouped by divergence rank (the broadest rank at which the two
lineages' taxon ids differ). Ranks are filled broadest first (cross-kingdom pairs are the rarest), each
up to ``per_rank`` photos, round-robin over kingdom pairs (in name order) and, within a kingdom pair,
over class pairs (in seeded order); within a class pair photos come in seeded order
(MD5 of ``"<seed>:<photo_id>"``). A photo whose species (either one) already has ``max_per_species``
photos, or whose observer has ``max_per_observer``, is skipped (``species_cap``, ``observer_cap``);
eligible photos left when a rank is full are ``rank_quota``. Every ordering is explicit, so the same
export and config give the same rows in the same order (the same fingerprint), whatever the threads.

**Output** (a folder, ``--out``), written to a hidden staging folder beside it and renamed into place
at the end, so a failure leaves nothing half-written (:mod:`cladebench.curate.staging`: ``--out`` may
not be, be inside or contain the export or a list it reads; ``--overwrite`` replaces only a previous
output of this builder, which its marker file ``.cladebench-output.json`` identifies; DuckDB's
database and spill files live in the staging folder, so a killed build's are removed by the next):

- ``data/coobserved.parquet``: one row per photo in the published dataset's layout (``photo_id``,
  ``photo_uuid``, ``image_url``, ``image_url_medium``, ``photo_page_url``, ``width``, ``height``,
  ``license``, ``license_url``, ``attribution``, ``observer_id``, ``observer_login``, ``observer_name``,
  ``observed_on``, ``latitude``, ``longitude``, ``positional_accuracy_m``, ``divergence_rank``,
  ``kingdom_pair``, ``class_pair``, ``n_photos_sharing_observation_pair``, ``organisms``,
  ``in_tol200m``, ``source``), without image bytes. ``organisms`` holds the two organisms in lineage
  order (kingdom .. species names, then observation uuid); the pairs read ``"Animalia + Plantae"`` in
  that order. ``species`` is the lower-case epithet, ``scientific_name`` the binomial of the species.
  The image URL is the ``medium`` (500 px) one with the extension as the export writes it; the
  attribution is iNaturalist's (``© name, some rights reserved (CC-BY-NC)``, ``name, no rights
  reserved (CC0)``) naming the observer, or the login when the name is empty or ``None``. Latitude,
  longitude, date and positional accuracy are the first organism's observation's (the second's when the
  first has no coordinates). ``species_in_tol200m`` is whether the species' binomial is in
  ``--tol-species`` (null without it); ``in_tol200m`` (whether the photo itself is in TreeOfLife-200M)
  stays null: it needs TOL's photo ids, which is what ``--exclude-photo-ids`` takes.
- ``README.md``: the dataset card (per divergence rank, kingdom pairs, class pairs, species, licenses,
  every count by reason), ``build.json`` (the summary), ``dropped.parquet`` (each photo on two or more
  observations that was left out, with its reason).
- With ``--download``: ``coobserved.lance``, the store's co-observed rows with their images.

**Why the images are separate.** The store's ``image`` column is required (non-null bytes), so a
Lance dataset cannot be written before the photos are fetched. Without ``--download`` the builder
writes the Parquet above: exactly the file ``cladebench load inat-coobserved`` reads, which fetches the
photos (:mod:`cladebench.curate.fetch`: resumable, retried, every failure recorded) and writes the Lance
dataset, through the same mapping as the published dataset
(:func:`cladebench.curate.sources.coobserved.build_inat_coobserved`). ``--download`` runs that step at once.

**Memory.** DuckDB runs with a ``memory_limit`` (default :data:`DEFAULT_MEMORY_LIMIT`) and spills to
disk; tables live in an on-disk database, both in the staging folder (on the output's disk, not in
``/tmp``, which is often memory). Python holds only the eligible photos
(a small fraction of an export). ``bench/coobserved_builder.py`` measures peak memory as the export
grows.

Example:
    >>> from dataclasses import fields
    >>> [f.name for f in fields(CoObservedBuildConfig)][:4]
    ['export_dir', 'out', 'exclude_photo_ids', 'tol_species']
    >>> sample_key(0, 35927) == sample_key(0, 35927) != sample_key(1, 35927)
    True
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cladebench.config import OPTION, bare_value, config_to_dict
from cladebench.curate import inat_export
from cladebench.curate.builders.duckdb_errors import duckdb_errors
from cladebench.curate.staging import OutputTarget, check_output, staged_output, work_dir
from cladebench.errors import CladebenchError, UsageError
from cladebench.raycluster import DEFAULT_ADDRESS
from cladebench.store import fingerprint_uuids
from cladebench.taxonomy import RANK_COLUMNS

if TYPE_CHECKING:
    import duckdb

ALLOWED_LICENSES: tuple[str, ...] = ("cc0", "cc-by", "cc-by-nc")
"""License codes kept (:func:`cladebench.curate.sources.inquire.parse_license`'s codes)."""
INCLUDED_KINGDOMS: tuple[str, ...] = ("Animalia", "Plantae", "Fungi")
DIVERGENCE_RANKS: tuple[str, ...] = inat_export.DIVERGENCE_RANKS
"""Ranks a kept pair can part at, broadest first (also the order ranks are filled in)."""
DEFAULT_MEMORY_LIMIT = "1GB"
"""DuckDB's memory limit; it spills beyond it (sorts, joins, aggregates) to its temporary directory."""
SOURCE = "inaturalist-open-data"
"""Value of the ``source`` column."""
DATA_FILE = "data/coobserved.parquet"
"""Where the rows go inside ``--out``: under ``data/``, so the folder can be given to the reader as is."""


@dataclass(frozen=True)
class CoObservedBuildConfig:
    """Build iNat Co-Observed from an iNaturalist open-data export (``cladebench build coobserved``)."""

    export_dir: Path = field(metadata=OPTION)
    """Folder with photos.csv, observations.csv, taxa.csv and observers.csv (or their .csv.gz)."""
    out: Path = field(metadata=OPTION)
    """Output folder: data/coobserved.parquet, README.md (the card), build.json, dropped.parquet."""
    exclude_photo_ids: Path | None = None
    """Photo ids to leave out (e.g. TreeOfLife-200M's): a text file, one id per line, or a Parquet file with a
    photo_id column."""
    tol_species: Path | None = None
    """Scientific names of the species in TreeOfLife-200M (one per line, or Parquet with scientific_name), to fill
    species_in_tol200m."""
    per_rank: int = 1000
    """At most this many photos per divergence rank (kingdom .. genus)."""
    seed: int = 0
    """Seed of the sampling order; the same export, config and seed give the same rows in the same order."""
    max_per_species: int = 5
    """At most this many photos per species (counting either organism)."""
    max_per_observer: int = 10
    """At most this many photos per observer."""
    download: bool = False
    """Also fetch the photos and write OUT/coobserved.lance (otherwise: cladebench load inat-coobserved OUT/data)."""
    ray: str | None = field(default=None, metadata=bare_value(DEFAULT_ADDRESS))
    """With --download, fetch on a Ray cluster: --ray alone as ray.init finds it, or auto, local,
    ray://HOST:10001 (the download cache must be on a filesystem every node sees)."""
    overwrite: bool = False
    """Replace OUT if it is a previous output of this builder (its marker file says so); anything else is refused."""

    def __post_init__(self) -> None:
        for name in ("per_rank", "max_per_species", "max_per_observer"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.seed < 0:
            raise UsageError(f"seed must be >= 0, got {self.seed}")


# --- the checks, in the order they are applied ---------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One reason a row or photo is left out: its name, the SQL condition that detects it, and why."""

    reason: str
    condition: str
    """SQL over the stage's columns; true means the row or photo fails this check."""
    doc: str


CHECKED_TYPES: dict[str, tuple[str, ...]] = {
    "photos": ("photo_id", "observation_uuid", "observer_id"),
    "observations": ("observation_uuid", "observer_id", "taxon_id", "latitude", "longitude", "positional_accuracy",
                     "observed_on"),
    "taxa": ("taxon_id", "active"),
    "observers": ("observer_id",),
}
"""Per file, the typed columns whose values the build relies on; a row where one does not parse is
``invalid_value``. The other typed columns (``photo_uuid``, ``width``, ``height``, ``position``,
``anomaly_score``, ``rank_level``) are cast where they are written, a value that does not parse becoming
null there: checking them on every row of a full export would cost a third of the build for columns
nothing is decided on."""


def _any_null(columns: Iterable[str]) -> str:
    # The reader gives null for an empty field, so "is null" is "is empty" (and a short line's missing fields).
    return " OR ".join(f'"{c}" IS NULL' for c in columns)


def _bad_types(columns: Iterable[str]) -> str:
    return " OR ".join(f"(\"{c}\" IS NOT NULL AND TRY_CAST(\"{c}\" AS {inat_export.SQL_TYPES[c]}) IS NULL)"
                       for c in columns)


def _row_checks(table: str) -> tuple[Check, ...]:
    invalid = _bad_types(CHECKED_TYPES[table])
    if table == "observations":
        invalid += " OR abs(TRY_CAST(latitude AS DOUBLE)) > 90 OR abs(TRY_CAST(longitude AS DOUBLE)) > 180"
    checks = [
        Check("missing_fields", _any_null(inat_export.REQUIRED[table]),
              "a required field is empty (or the line short)"),
        Check("invalid_value", invalid, "a value does not parse as its structure.sql type, or a coordinate is out of "
                                        "range"),
    ]
    if table == "taxa":
        checks.append(Check("malformed_ancestry",
                            "ancestry IS NOT NULL AND NOT regexp_full_match(ancestry, '[0-9]+(/[0-9]+)*')",
                            "the ancestry is not taxon ids joined by /"))
    return tuple(checks)


ROW_CHECKS: dict[str, tuple[Check, ...]] = {table: _row_checks(table) for table in inat_export.TABLES}
"""Per file, the checks of each row, first failing one wins; plus ``malformed_line`` (a line the reader
cannot split), ``duplicate_row`` (photos), ``duplicate_taxon_id`` (taxa) and ``duplicate_observer_id``
(observers), counted apart."""

GROUP_CHECKS: tuple[Check, ...] = (
    Check("invalid_photo_row", "n_missing + n_invalid > 0", "a row of the photo is bad (missing or invalid field)"),
    Check("single_observation", "n_observations = 1", "on one observation: not a co-observed photo"),
    Check("more_than_two_observations", "n_observations > 2", "on three or more observations"),
    Check("inconsistent_photo_rows", "attrs_min <> attrs_max",
          "its rows disagree on observer, license or extension"),
)
"""Checks of a photo id from its rows alone."""

TAXON_CHECKS: tuple[Check, ...] = (
    Check("malformed_ancestry", "any_malformed", "its ancestry (or an ancestor's) is not ids joined by /"),
    Check("inactive_taxon", "NOT self_active", "the taxon is inactive (replaced in iNat's taxonomy)"),
    Check("ancestry_mismatch",
          "any_missing OR inactive_ancestor OR any_stale OR greatest(" + ", ".join(
              f"n_{c}" for c in RANK_COLUMNS) + ") > 1",
          "an ancestor is missing or inactive, an ancestor's own ancestry disagrees (the taxon moved), "
          "or a rank repeats"),
    Check("incomplete_lineage", "least(" + ", ".join(f"n_{c}" for c in RANK_COLUMNS) + ") = 0",
          "one of kingdom .. species is not in the lineage"),
)
"""Checks of a taxon's lineage; a photo fails one when either organism's taxon does."""


def _either(template: str) -> str:
    return "(" + " OR ".join(template.format(side=s) for s in ("a", "b")) + ")"


PHOTO_CHECKS: tuple[Check, ...] = (
    *GROUP_CHECKS,
    Check("unknown_observation", _either("o{side}.n IS NULL"), "an observation is not in observations.csv"),
    Check("invalid_observation_row", _either("o{side}.bad"), "an observation's row is bad"),
    Check("ambiguous_observation", _either("o{side}.n > 1"), "an observation appears on more than one row"),
    Check("observer_mismatch", _either("o{side}.observer_id IS DISTINCT FROM c.observer_id"),
          "an observation is not by the photo's observer"),
    Check("not_research_grade", _either("coalesce(lower(trim(o{side}.quality_grade)), '') <> 'research'"),
          "an observation is not research grade"),
    Check("unknown_taxon", _either("l{side}.taxon_id IS NULL"),
          "an observation's taxon is not in taxa.csv (or has no taxon, or a duplicated id)"),
    *(Check(t.reason, _either(f"l{{side}}.status = '{t.reason}'"), t.doc) for t in TAXON_CHECKS),
    Check("kingdom_not_included", _either("l{side}.name_kingdom NOT IN ("
                                          + ", ".join(f"'{k}'" for k in INCLUDED_KINGDOMS) + ")"),
          "an organism is not in Animalia, Plantae or Fungi"),
    Check("same_species", "la.id_species = lb.id_species", "both organisms are the same species"),
    Check("same_genus", "la.id_genus = lb.id_genus",
          "both species are in one genus: they part at species, leaving nothing to complete"),
    Check("license_not_allowed", "lic.code IS NULL OR lic.code NOT IN ("
          + ", ".join(f"'{c}'" for c in ALLOWED_LICENSES) + ")", "the license is not CC0, CC-BY or CC-BY-NC"),
    Check("excluded_photo_id", "x.photo_id IS NOT NULL", "the photo id is in --exclude-photo-ids"),
    Check("unknown_observer", "u.observer_id IS NULL OR u.display_name IS NULL",
          "the observer is not in observers.csv, or has neither login nor name"),
)
"""Every reason a photo id in the export is not eligible, first failing one wins."""

SAMPLING_REASONS: tuple[str, ...] = ("species_cap", "observer_cap", "rank_quota")
"""Why an eligible photo was not sampled."""
FETCH_REASON = "image_fetch_failed"


def _case(checks: Sequence[Check]) -> str:
    return "CASE " + " ".join(f"WHEN {c.condition} THEN '{c.reason}'" for c in checks) + " END"


def sample_key(seed: int, value: int | str) -> str:
    """The seeded order of photos (by id) and of class pairs (by name): MD5 of ``"<seed>:<value>"`` in hex,
    the same in DuckDB and here, on any machine (Python's ``hash`` is salted per process)."""
    return hashlib.md5(f"{seed}:{value}".encode()).hexdigest()


# --- reading the export --------------------------------------------------------------------------


@dataclass(frozen=True)
class _File:
    table: str
    path: Path
    header: tuple[str, ...]
    not_read: Path | None = None
    """The ``.csv.gz`` beside a ``.csv`` of the same table, which is not read (the ``.csv`` always is)."""

    def scan(self, *, record_rejects: bool) -> str:
        """A ``read_csv`` of the file, every column text. The first scan records the lines it cannot split;
        later scans skip those same lines (they are counted once)."""
        columns = "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in self.header) + "}"
        rejects = (f"store_rejects=true, rejects_table='rejects_{self.table}', rejects_scan='scans_{self.table}'"
                   if record_rejects else "ignore_errors=true")
        path = str(self.path).replace("'", "''")
        return (f"read_csv('{path}', delim='\\t', quote='', escape='', header=true, auto_detect=false, "
                f"columns={columns}, null_padding=true, {rejects})")

    def typed(self, column: str) -> str:
        """A column cast to its type (null where it does not parse), or null when the header lacks it."""
        if column not in self.header:
            return "NULL"
        sql_type = inat_export.SQL_TYPES.get(column)
        return f'TRY_CAST("{column}" AS {sql_type})' if sql_type else f'"{column}"'

    def issue(self) -> str:
        return _case(ROW_CHECKS[self.table])


def _export_files(export_dir: Path) -> dict[str, _File]:
    if not export_dir.is_dir():
        raise CladebenchError(f"{export_dir} is not a folder (expected an iNat open-data export)")
    files = {}
    for table in inat_export.TABLES:
        path = inat_export.export_file(export_dir, table)
        files[table] = _File(table, path, inat_export.read_header(path, table),
                             inat_export.unread_export_file(export_dir, table))
    return files


def _read_id_list(con: duckdb.DuckDBPyConnection, path: Path, column: str, sql_type: str, name: str) -> None:
    """``--exclude-photo-ids`` / ``--tol-species`` into table ``name``: Parquet with ``column``, or text with one
    value per line (blank lines skipped; a first line equal to the column name is a header)."""
    import duckdb

    if not path.is_file():
        option = {"excluded": "--exclude-photo-ids", "tol": "--tol-species"}.get(name, name)
        raise UsageError(f"{option}: {path}: {'a folder, not a file' if path.is_dir() else 'no such file'}")
    quoted = str(path).replace("'", "''")
    if path.suffix == ".parquet":
        names = [r[0] for r in con.sql(f"DESCRIBE SELECT * FROM read_parquet('{quoted}')").fetchall()]
        if column not in names:
            raise UsageError(f"{path}: no column {column!r} (it has {names})")
        source = f"SELECT CAST(\"{column}\" AS VARCHAR) AS value FROM read_parquet('{quoted}')"
    else:
        source = (f"SELECT trim(value) AS value FROM read_csv('{quoted}', columns={{'value': 'VARCHAR'}}, "
                  "header=false, delim='\\t', quote='', escape='', auto_detect=false)")
    try:
        con.sql(f"CREATE TEMP TABLE raw_{name} AS SELECT value FROM ({source}) "
                f"WHERE value IS NOT NULL AND value <> '' AND lower(value) <> '{column}'")
    except duckdb.Error as exc:
        raise UsageError(f"{path}: cannot be read as one value per line: {str(exc).splitlines()[0]}") from None
    if sql_type == "BIGINT":
        bad = con.sql(f"SELECT value FROM raw_{name} WHERE TRY_CAST(value AS BIGINT) IS NULL LIMIT 3").fetchall()
        if bad:
            raise UsageError(f"{path}: not a list of photo ids: {[b[0] for b in bad]}")
        con.sql(f"CREATE TABLE {name} AS SELECT DISTINCT CAST(value AS BIGINT) AS value FROM raw_{name}")
    else:
        con.sql(f"CREATE TABLE {name} AS SELECT DISTINCT lower(value) AS value FROM raw_{name}")


# --- the stages ----------------------------------------------------------------------------------


def _evaluate_parts(tol: bool) -> tuple[list[str], list[str], str, str, str]:
    """SQL pieces of the evaluation: the joins per side, the organism columns, the divergence rank and the
    two organisms' sort keys (their names kingdom .. species, then the observation uuid)."""
    sides, columns = [], []
    species_epithet = "lower(regexp_replace(l{s}.name_species, '^\\S+\\s+', ''))"
    for s in ("a", "b"):
        sides.append(f"""
            LEFT JOIN observations_found o{s} ON o{s}.observation_uuid = c.obs_{s}
            LEFT JOIN lineages l{s} ON l{s}.taxon_id = o{s}.taxon_id""")
        columns.append(", ".join([
            f"CAST(c.obs_{s} AS VARCHAR) AS obs_{s}_uuid", f"o{s}.taxon_id AS taxon_{s}",
            f"o{s}.quality_grade AS grade_{s}", f"l{s}.id_species AS species_{s}",
            *(f"l{s}.name_{c} AS {c}_{s}" for c in RANK_COLUMNS[:-1]),
            f"{species_epithet.format(s=s)} AS species_epithet_{s}", f"l{s}.name_species AS binomial_{s}",
            (f"lower(l{s}.name_species) IN (SELECT value FROM tol)" if tol else "NULL::BOOLEAN") + f" AS in_tol_{s}",
            f"o{s}.latitude AS latitude_{s}", f"o{s}.longitude AS longitude_{s}",
            f"o{s}.observed_on AS observed_on_{s}", f"o{s}.positional_accuracy AS accuracy_{s}",
        ]))
    divergence = "CASE " + " ".join(
        f"WHEN la.id_{c} IS DISTINCT FROM lb.id_{c} THEN {i}" for i, c in enumerate(RANK_COLUMNS)) + " END"
    keys = ["[" + ", ".join(f"l{s}.name_{c}" for c in RANK_COLUMNS) + f", CAST(c.obs_{s} AS VARCHAR)]"
            for s in ("a", "b")]
    return sides, columns, divergence, keys[0], keys[1]


class _Stages:
    """The SQL of a build, one method per stage; tables stay in DuckDB between stages."""

    def __init__(self, con: duckdb.DuckDBPyConnection, files: Mapping[str, _File], config: CoObservedBuildConfig):
        self.con, self.files, self.config = con, files, config
        self.row_issues: dict[str, Counter[str]] = {t: Counter() for t in inat_export.TABLES}
        self.rows_read: dict[str, int] = {}
        self.malformed_kinds: dict[str, dict[str, int]] = {}
        self.notes: dict[str, int] = {}

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        return self.con.sql(query)

    def one(self, query: str) -> tuple[Any, ...]:
        """The first row of a query (DuckDB 2's relations have no ``fetchone``)."""
        return self.con.sql(query).fetchall()[0]

    def _count_rejects(self, table: str) -> int:
        rows = self.sql(f"SELECT error_type, count(*) FROM rejects_{table} GROUP BY ALL ORDER BY 1").fetchall()
        kinds = {str(kind): int(n) for kind, n in rows}
        if kinds:
            self.malformed_kinds[table] = kinds
            self.row_issues[table]["malformed_line"] += sum(kinds.values())
        return sum(kinds.values())

    def _tally(self, table: str, query: str) -> None:
        """Lines read and bad rows by issue, from a query of ``(issue, rows)``."""
        total = self._count_rejects(table)
        for issue, n in self.sql(query).fetchall():
            total += int(n)
            if issue is not None:
                self.row_issues[table][issue] += int(n)
        self.rows_read[table] = total

    def photos(self) -> None:
        """Every photo id's rows: how many observations, how many bad or duplicate rows, whether they agree.
        One row per photo id in ``photo_groups``, except the photos on one observation, which share one row
        (``photo_id`` null, ``n_ids`` of them); the rows without a photo id have a row of their own (both
        ``photo_id`` and ``outcome`` null)."""
        f = self.files["photos"]
        self.sql(f"""
            CREATE TABLE photo_groups AS
            WITH rows AS (
                SELECT {f.typed('photo_id')} AS photo_id, {f.typed('observation_uuid')} AS observation_uuid,
                       {f.issue()} AS issue, hash(observer_id, license, extension) AS attrs
                FROM {f.scan(record_rejects=True)}
            ), pairs AS (
                SELECT photo_id, observation_uuid, count(*) AS n_rows,
                       count(*) FILTER (issue IS NULL) AS n_valid,
                       count(*) FILTER (issue = 'missing_fields') AS n_missing,
                       count(*) FILTER (issue = 'invalid_value') AS n_invalid,
                       min(attrs) FILTER (issue IS NULL) AS attrs_min, max(attrs) FILTER (issue IS NULL) AS attrs_max
                FROM rows GROUP BY ALL
            )
            , groups AS (
                SELECT photo_id, sum(n_rows)::BIGINT AS n_rows, sum(n_missing)::BIGINT AS n_missing,
                       sum(n_invalid)::BIGINT AS n_invalid, sum(greatest(n_valid - 1, 0))::BIGINT AS n_duplicate,
                       count(*) FILTER (n_valid > 0) AS n_observations,
                       min(observation_uuid) FILTER (n_valid > 0) AS obs_a,
                       max(observation_uuid) FILTER (n_valid > 0) AS obs_b,
                       min(attrs_min) AS attrs_min, max(attrs_max) AS attrs_max
                FROM pairs GROUP BY photo_id
            )
            , judged AS (
                SELECT *, CASE WHEN photo_id IS NOT NULL THEN {_case(GROUP_CHECKS)} END AS outcome FROM groups
            )
            -- Photos on one observation (nearly all of an export) are only counted: one row for all of them.
            SELECT CASE WHEN outcome = 'single_observation' THEN NULL ELSE photo_id END AS photo_id, outcome,
                   count(*) AS n_ids, sum(n_rows)::BIGINT AS n_rows, sum(n_missing)::BIGINT AS n_missing,
                   sum(n_invalid)::BIGINT AS n_invalid, sum(n_duplicate)::BIGINT AS n_duplicate,
                   min(obs_a) AS obs_a, min(obs_b) AS obs_b
            FROM judged GROUP BY ALL
        """)
        rejected = self._count_rejects("photos")
        n_rows, missing, invalid, duplicate = self.one(
            "SELECT sum(n_rows), sum(n_missing), sum(n_invalid), sum(n_duplicate) FROM photo_groups")
        self.rows_read["photos"] = int(n_rows or 0) + rejected
        for reason, n in (("missing_fields", missing), ("invalid_value", invalid), ("duplicate_row", duplicate)):
            self.row_issues["photos"][reason] += int(n or 0)

    def candidates(self) -> None:
        """The photos on exactly two observations: their details from a second scan, joined on photo id."""
        f = self.files["photos"]
        self.sql(f"""
            CREATE TABLE candidates AS
            WITH c AS (SELECT photo_id, obs_a, obs_b FROM photo_groups WHERE photo_id IS NOT NULL AND outcome IS NULL),
            details AS (
                SELECT {f.typed('photo_id')} AS photo_id, min({f.typed('photo_uuid')}) AS photo_uuid,
                       min({f.typed('observer_id')}) AS observer_id, min(extension) AS extension,
                       min(license) AS license, max({f.typed('width')}) AS width, max({f.typed('height')}) AS height
                FROM {f.scan(record_rejects=False)}
                -- A candidate's rows all passed the row checks in the first scan: no need to check them again.
                WHERE {f.typed('photo_id')} IN (SELECT photo_id FROM c)
                GROUP BY 1
            )
            SELECT c.*, d.* EXCLUDE (photo_id),
                   count(*) OVER (PARTITION BY c.obs_a, c.obs_b) AS n_sharing
            FROM c JOIN details d USING (photo_id)
        """)

    def observations(self) -> None:
        """One scan: row counts by issue for the whole file, and the rows of the candidates' observations."""
        f = self.files["observations"]
        values = {
            "observer_id": f.typed("observer_id"), "taxon_id": f.typed("taxon_id"),
            "quality_grade": '"quality_grade"', "latitude": f.typed("latitude"), "longitude": f.typed("longitude"),
            "positional_accuracy": f.typed("positional_accuracy"), "observed_on": f.typed("observed_on"),
        }
        self.sql(f"""
            CREATE TABLE observation_groups AS
            WITH wanted AS (SELECT obs_a AS uuid FROM candidates UNION SELECT obs_b FROM candidates),
            rows AS (
                SELECT {f.typed('observation_uuid')} AS uuid, {f.issue()} AS issue,
                       {", ".join(f"{sql} AS {name}" for name, sql in values.items())}
                FROM {f.scan(record_rejects=True)}
            )
            SELECT w.uuid AS observation_uuid, r.issue, count(*) AS n,
                   {", ".join(f"min(r.{name}) FILTER (w.uuid IS NOT NULL) AS {name}" for name in values)}
            FROM rows r LEFT JOIN wanted w ON w.uuid = r.uuid
            GROUP BY ALL
        """)
        self._tally("observations", "SELECT issue, sum(n) FROM observation_groups GROUP BY ALL")
        self.sql(f"""
            CREATE TABLE observations_found AS
            SELECT observation_uuid, sum(n)::BIGINT AS n, bool_or(issue IS NOT NULL) AS bad,
                   {", ".join(f"min({name}) FILTER (issue IS NULL) AS {name}" for name in values)}
            FROM observation_groups WHERE observation_uuid IS NOT NULL GROUP BY observation_uuid
        """)

    def taxa(self) -> None:
        """The whole taxa file (the ancestors of any taxon may be anywhere in it), checked row by row."""
        f = self.files["taxa"]
        self.sql(f"""
            CREATE TABLE taxa_rows AS
            SELECT {f.typed('taxon_id')} AS taxon_id, ancestry, lower(trim(rank)) AS rank, name,
                   {f.typed('active')} AS active, {f.issue()} AS issue
            FROM {f.scan(record_rejects=True)}
        """)
        self._tally("taxa", "SELECT issue, count(*) FROM taxa_rows GROUP BY ALL")
        self.sql("""
            CREATE TABLE taxa AS
            WITH usable AS (SELECT * FROM taxa_rows WHERE issue IS NULL OR issue = 'malformed_ancestry'),
            repeated AS (SELECT taxon_id, count(*) AS n FROM usable GROUP BY taxon_id HAVING count(*) > 1)
            SELECT taxon_id, ancestry, rank, name, active, issue IS NOT NULL AS malformed
            FROM usable WHERE taxon_id NOT IN (SELECT taxon_id FROM repeated)
        """)
        duplicates = self.one("SELECT sum(n - 1) FROM (SELECT count(*) AS n FROM taxa_rows "
                              "WHERE issue IS NULL OR issue = 'malformed_ancestry' GROUP BY taxon_id "
                              "HAVING count(*) > 1)")[0]
        if duplicates:
            self.row_issues["taxa"]["duplicate_taxon_id"] += int(duplicates)

    def lineages(self) -> None:
        """The seven ranks of every taxon the candidates' observations are on, from its ancestry, with the
        checks of :data:`TAXON_CHECKS`."""
        per_rank = ",\n".join(
            f"count(*) FILTER (rank = '{c}') AS n_{c}, max(name) FILTER (rank = '{c}') AS name_{c}, "
            f"max(ancestor_id) FILTER (rank = '{c}') AS id_{c}" for c in RANK_COLUMNS
        )
        self.sql(f"""
            CREATE TABLE lineages AS
            WITH need AS (SELECT DISTINCT taxon_id FROM observations_found WHERE taxon_id IS NOT NULL),
            self AS (
                SELECT t.*, CASE WHEN t.ancestry IS NULL THEN []::VARCHAR[] ELSE string_split(t.ancestry, '/') END
                       AS parts
                FROM taxa t JOIN need USING (taxon_id)
            ),
            steps AS (
                SELECT taxon_id, parts, unnest(parts) AS part, generate_subscripts(parts, 1) AS pos
                FROM self WHERE NOT malformed
            ),
            chain AS (
                SELECT s.taxon_id, a.taxon_id AS ancestor_id, a.rank, a.name, a.active, a.malformed,
                       a.taxon_id IS NULL AS missing,
                       a.taxon_id IS NOT NULL AND a.ancestry IS DISTINCT FROM
                           nullif(array_to_string(s.parts[1:s.pos - 1], '/'), '') AS stale,
                       false AS is_self
                FROM steps s LEFT JOIN taxa a ON a.taxon_id = TRY_CAST(s.part AS BIGINT)
                UNION ALL
                SELECT taxon_id, taxon_id, rank, name, active, malformed, false, false, true FROM self
            ),
            per_taxon AS (
                SELECT taxon_id, bool_or(malformed) AS any_malformed, bool_or(missing) AS any_missing,
                       bool_or(NOT active AND NOT is_self) AS inactive_ancestor, bool_or(stale) AS any_stale,
                       bool_and(active) FILTER (is_self) AS self_active,
                       {per_rank}
                FROM chain GROUP BY taxon_id
            )
            SELECT *, {_case(TAXON_CHECKS)} AS status FROM per_taxon
        """)

    def observers(self) -> None:
        """One scan: row counts by issue, observers without a name, repeated observer ids, and the candidates'
        observers. An id on several valid rows is counted (``duplicate_observer_id``, the rows beyond the
        first) and resolved to one whole row, the least by (login, name), whatever the file order."""
        f = self.files["observers"]
        self.sql(f"""
            CREATE TABLE observer_rows AS
            SELECT {f.typed('observer_id')} AS observer_id, login, name, {f.issue()} AS issue
            FROM {f.scan(record_rejects=True)}
        """)
        self.sql("""
            CREATE TABLE observer_groups AS
            WITH wanted AS (SELECT DISTINCT observer_id FROM candidates)
            SELECT w.observer_id, r.issue, count(*) AS n,
                   count(*) FILTER (nullif(trim(r.name), '') IS NULL OR trim(r.name) = 'None') AS n_without_name,
                   min({'login': r.login, 'name': r.name}) FILTER (w.observer_id IS NOT NULL) AS entry
            FROM observer_rows r LEFT JOIN wanted w ON w.observer_id = r.observer_id
            GROUP BY ALL
        """)
        rejected = self._count_rejects("observers")
        total, without_name = rejected, 0
        for issue, n, n_without_name in self.sql(
                "SELECT issue, sum(n), sum(n_without_name) FROM observer_groups GROUP BY ALL").fetchall():
            total += int(n)
            if issue is not None:
                self.row_issues["observers"][issue] += int(n)
            else:
                without_name += int(n_without_name)
        self.rows_read["observers"] = total
        self.notes["observers_without_name"] = without_name
        repeated, conflicting = self.one("""
            SELECT coalesce(sum(n - 1), 0), count(*) FILTER (n_distinct > 1) FROM (
                SELECT observer_id, count(*) AS n, count(DISTINCT {'login': login, 'name': name}) AS n_distinct
                FROM observer_rows WHERE issue IS NULL GROUP BY observer_id HAVING count(*) > 1)
        """)
        if repeated:
            self.row_issues["observers"]["duplicate_observer_id"] += int(repeated)
        self.notes["observer_ids_on_disagreeing_rows"] = int(conflicting)
        rows = self.sql("SELECT observer_id, min(entry).login, min(entry).name FROM observer_groups "
                        "WHERE observer_id IS NOT NULL AND issue IS NULL GROUP BY ALL ORDER BY 1").fetchall()
        names = [(i, login, name, inat_export.attribution_name(login, name)) for i, login, name in rows]
        self.con.register("observer_names_arrow", pa.table({
            "observer_id": pa.array([n[0] for n in names], pa.int64()),
            "login": pa.array([n[1] for n in names], pa.string()),
            "name": pa.array([n[2] for n in names], pa.string()),
            "display_name": pa.array([n[3] for n in names], pa.string()),
            "from_login": pa.array([n[3] is not None and n[3] != (n[2] or "").strip() for n in names], pa.bool_()),
        }))
        self.sql("CREATE TABLE observer_names AS SELECT * FROM observer_names_arrow")

    def licenses(self) -> None:
        """Each distinct license text of the candidates, parsed once in Python."""
        from cladebench.curate.sources.inquire import parse_license

        raws = [r[0] for r in self.sql("SELECT DISTINCT license FROM candidates ORDER BY 1").fetchall()]
        parsed = [parse_license(r) for r in raws]
        self.con.register("licenses_arrow", pa.table({
            "raw": pa.array(raws, pa.string()),
            "code": pa.array([p.code if p else None for p in parsed], pa.string()),
            "link": pa.array([p.link if p else None for p in parsed], pa.string()),
        }))
        self.sql("CREATE TABLE licenses AS SELECT * FROM licenses_arrow")

    def evaluate(self, excluded: bool, tol: bool) -> None:
        """Every candidate's outcome (null when eligible), and what a row of the dataset needs."""
        sides, organism_columns, divergence, key_a, key_b = _evaluate_parts(tol)
        exclusion = "excluded" if excluded else "(SELECT NULL::BIGINT AS value WHERE false)"
        self.sql(f"""
            CREATE TABLE evaluated AS
            SELECT c.photo_id, c.photo_uuid, c.observer_id, c.extension, c.license, c.width, c.height,
                   c.n_sharing, lic.code AS license_code, lic.link AS license_link,
                   u.login AS observer_login, u.display_name AS observer_name, u.from_login,
                   {_case(PHOTO_CHECKS[len(GROUP_CHECKS):])} AS outcome,
                   {divergence} AS rank_index,
                   {key_a} <= {key_b} AS a_first,
                   {", ".join(organism_columns)}
            FROM candidates c {"".join(sides)}
            LEFT JOIN licenses lic ON lic.raw = c.license
            LEFT JOIN (SELECT value AS photo_id FROM {exclusion}) x ON x.photo_id = c.photo_id
            LEFT JOIN observer_names u ON u.observer_id = c.observer_id
        """)

    def outcomes(self) -> dict[str, int]:
        """Photo ids per outcome, before sampling; ``None`` is the eligible ones."""
        counts: Counter[str] = Counter()
        for outcome, n in self.sql("SELECT outcome, sum(n_ids) FROM photo_groups WHERE outcome IS NOT NULL "
                                   "GROUP BY ALL").fetchall():
            counts[outcome] += int(n)
        for outcome, n in self.sql("SELECT coalesce(outcome, ''), count(*) FROM evaluated GROUP BY ALL").fetchall():
            counts[outcome] += int(n)
        candidates = self.one("SELECT count(*) FROM candidates")[0]
        expected = self.one("SELECT count(*) FROM photo_groups WHERE photo_id IS NOT NULL AND outcome IS NULL")
        if candidates != expected[0]:  # both scans apply the same checks to the same lines
            raise AssertionError("the second scan of photos.csv lost candidates")
        return dict(counts)

    def eligible(self) -> list[tuple[Any, ...]]:
        """The eligible photos with what sampling needs, in a fixed order."""
        pairs = self._pair_expressions()
        return self.sql(f"""
            SELECT photo_id, rank_index, {pairs['kingdom']} AS kingdom_pair, {pairs['class']} AS class_pair,
                   species_a, species_b, observer_id, md5(concat({int(self.config.seed)}, ':', photo_id)) AS key
            FROM evaluated WHERE outcome IS NULL
            ORDER BY rank_index, kingdom_pair, class_pair, key, photo_id
        """).fetchall()

    @staticmethod
    def _pair_expressions() -> dict[str, str]:
        return {rank: (f"CASE WHEN a_first THEN concat({rank}_a, ' + ', {rank}_b) "
                       f"ELSE concat({rank}_b, ' + ', {rank}_a) END") for rank in ("kingdom", "class")}

    def dropped(self, sampling: Mapping[int, str]) -> pa.Table:
        """Photo id and reason of every photo on two or more observations that is not in the dataset."""
        self.con.register("sampling_arrow", pa.table({
            "photo_id": pa.array(list(sampling), pa.int64()), "reason": pa.array(list(sampling.values()), pa.string()),
        }))
        return self.sql("""
            SELECT photo_id, outcome AS reason FROM photo_groups
            WHERE photo_id IS NOT NULL AND outcome IS NOT NULL AND outcome <> 'single_observation'
            UNION ALL SELECT photo_id, outcome FROM evaluated WHERE outcome IS NOT NULL
            UNION ALL SELECT photo_id, reason FROM sampling_arrow
            ORDER BY reason, photo_id
        """).to_arrow_table()

    def rows(self, selected: Sequence[int]) -> list[dict[str, Any]]:
        """The selected photos' evaluated rows, in the order given."""
        self.con.register("selected_arrow", pa.table({
            "photo_id": pa.array(list(selected), pa.int64()), "ord": pa.array(range(len(selected)), pa.int64()),
        }))
        pairs = self._pair_expressions()
        return self.sql(f"""
            SELECT e.*, {pairs['kingdom']} AS kingdom_pair, {pairs['class']} AS class_pair
            FROM evaluated e JOIN selected_arrow s USING (photo_id) ORDER BY s.ord
        """).to_arrow_table().to_pylist()


# --- sampling ------------------------------------------------------------------------------------


@dataclass
class _Caps:
    max_per_species: int
    max_per_observer: int
    species: Counter[int] = field(default_factory=Counter)
    observers: Counter[int] = field(default_factory=Counter)

    def refusal(self, species: tuple[int, int], observer: int) -> str | None:
        if any(self.species[s] >= self.max_per_species for s in species):
            return "species_cap"
        if self.observers[observer] >= self.max_per_observer:
            return "observer_cap"
        return None

    def take(self, species: tuple[int, int], observer: int) -> None:
        for s in set(species):
            self.species[s] += 1
        self.observers[observer] += 1


def sample(eligible: Sequence[tuple[Any, ...]], config: CoObservedBuildConfig) -> tuple[list[int], dict[int, str]]:
    """The photos kept, in dataset order, and the reason each other eligible photo was not.

    ``eligible`` rows are ``(photo_id, rank_index, kingdom_pair, class_pair, species_a, species_b,
    observer_id, key)`` sorted by rank, kingdom pair, class pair and key. Ranks are filled broadest
    first; within a rank, kingdom pairs take turns (name order) and within each the class pairs take
    turns (seeded order); a turn takes the next photo of its class pair that the caps allow.
    """
    caps = _Caps(config.max_per_species, config.max_per_observer)
    kept: list[int] = []
    refused: dict[int, str] = {}
    by_rank: dict[int, dict[str, dict[str, list[tuple[Any, ...]]]]] = {}
    for row in eligible:
        by_rank.setdefault(row[1], {}).setdefault(row[2], {}).setdefault(row[3], []).append(row)
    for rank in sorted(by_rank):
        kingdoms = by_rank[rank]
        queues = {kp: [list(reversed(kingdoms[kp][cp]))
                       for cp in sorted(kingdoms[kp], key=lambda cp: (sample_key(config.seed, cp), cp))]
                  for kp in sorted(kingdoms)}
        taken = 0
        turn = {kp: 0 for kp in queues}
        while taken < config.per_rank and queues:
            for kp in list(queues):
                if taken >= config.per_rank:
                    break
                photo = _next_photo(queues[kp], turn, kp, caps, refused)
                if photo is None:
                    del queues[kp]
                    continue
                kept.append(photo[0])
                caps.take((photo[4], photo[5]), photo[6])
                taken += 1
        for class_queues in queues.values():
            for queue in class_queues:
                for row in queue:
                    refused[row[0]] = "rank_quota"
    return kept, refused


def _next_photo(class_queues: list[list[tuple[Any, ...]]], turn: dict[str, int], kingdom_pair: str, caps: _Caps,
                refused: dict[int, str]) -> tuple[Any, ...] | None:
    """The next photo the caps allow from the kingdom pair's class pairs, taking turns; None when none is left."""
    while class_queues:
        index = turn[kingdom_pair] % len(class_queues)
        queue = class_queues[index]
        while queue:
            row = queue.pop()
            reason = caps.refusal((row[4], row[5]), row[6])
            if reason is None:
                if queue:
                    turn[kingdom_pair] = index + 1
                else:
                    class_queues.pop(index)
                    turn[kingdom_pair] = index
                return row
            refused[row[0]] = reason
        class_queues.pop(index)
        turn[kingdom_pair] = index
    return None


# --- the output ----------------------------------------------------------------------------------

ORGANISM_TYPE = pa.struct([
    pa.field("observation_uuid", pa.string()),
    pa.field("observation_url", pa.string()),
    pa.field("taxon_id", pa.int64()),
    pa.field("taxon_url", pa.string()),
    *(pa.field(c, pa.string()) for c in RANK_COLUMNS),
    pa.field("scientific_name", pa.string()),
    pa.field("quality_grade", pa.string()),
    pa.field("species_in_tol200m", pa.bool_()),
])
"""One entry of ``organisms`` in the published layout."""

PUBLISHED_SCHEMA = pa.schema([
    pa.field("photo_id", pa.int64(), nullable=False),
    pa.field("photo_uuid", pa.string()),
    pa.field("image_url", pa.string()),
    pa.field("image_url_medium", pa.string()),
    pa.field("photo_page_url", pa.string()),
    pa.field("width", pa.int64()),
    pa.field("height", pa.int64()),
    pa.field("license", pa.string()),
    pa.field("license_url", pa.string()),
    pa.field("attribution", pa.string()),
    pa.field("observer_id", pa.int64()),
    pa.field("observer_login", pa.string()),
    pa.field("observer_name", pa.string()),
    pa.field("observed_on", pa.date32()),
    pa.field("latitude", pa.float64()),
    pa.field("longitude", pa.float64()),
    pa.field("positional_accuracy_m", pa.float64()),
    pa.field("divergence_rank", pa.string()),
    pa.field("kingdom_pair", pa.string()),
    pa.field("class_pair", pa.string()),
    pa.field("n_photos_sharing_observation_pair", pa.int64()),
    pa.field("organisms", pa.list_(ORGANISM_TYPE)),
    pa.field("in_tol200m", pa.bool_()),
    pa.field("source", pa.string()),
])
"""Columns of ``data/coobserved.parquet``: the published dataset's, without the image bytes."""


def _organism(row: Mapping[str, Any], side: str) -> dict[str, Any]:
    uuid = row[f"obs_{side}_uuid"]
    taxon_id = row[f"taxon_{side}"]
    return {
        "observation_uuid": uuid, "observation_url": inat_export.observation_url(uuid),
        "taxon_id": taxon_id, "taxon_url": inat_export.taxon_url(taxon_id),
        **{c: row[f"{c}_{side}"] for c in RANK_COLUMNS[:-1]}, "species": row[f"species_epithet_{side}"],
        "scientific_name": row[f"binomial_{side}"], "quality_grade": row[f"grade_{side}"],
        "species_in_tol200m": row[f"in_tol_{side}"],
    }


def _published_row(row: Mapping[str, Any]) -> dict[str, Any]:
    from cladebench.curate.sources.inquire import parse_license

    first, second = ("a", "b") if row["a_first"] else ("b", "a")
    place = first if row[f"latitude_{first}"] is not None and row[f"longitude_{first}"] is not None else second
    parsed = parse_license(row["license"])
    assert parsed is not None and row["observer_name"] is not None  # eligible photos have both
    url = inat_export.photo_url(row["photo_id"], row["extension"])
    accuracy = row[f"accuracy_{place}"]
    return {
        "photo_id": row["photo_id"], "photo_uuid": None if row["photo_uuid"] is None else str(row["photo_uuid"]),
        "image_url": url, "image_url_medium": url, "photo_page_url": inat_export.photo_page_url(row["photo_id"]),
        "width": row["width"], "height": row["height"], "license": row["license"], "license_url": parsed.link,
        "attribution": parsed.attribution(row["observer_name"]), "observer_id": row["observer_id"],
        "observer_login": row["observer_login"], "observer_name": row["observer_name"],
        "observed_on": row[f"observed_on_{place}"], "latitude": row[f"latitude_{place}"],
        "longitude": row[f"longitude_{place}"], "positional_accuracy_m": None if accuracy is None else float(accuracy),
        "divergence_rank": RANK_COLUMNS[row["rank_index"]], "kingdom_pair": row["kingdom_pair"],
        "class_pair": row["class_pair"], "n_photos_sharing_observation_pair": row["n_sharing"],
        "organisms": [_organism(row, first), _organism(row, second)], "in_tol200m": None, "source": SOURCE,
    }


# --- the summary and the card --------------------------------------------------------------------


@dataclass(frozen=True)
class CoObservedBuildSummary:
    """What a build read, dropped (by reason), kept and wrote."""

    out: Path
    """The output folder."""
    data_path: Path
    """``data/coobserved.parquet``: the rows, without images."""
    card_path: Path
    """``README.md``: the dataset card."""
    dataset_path: Path | None
    """``coobserved.lance`` with the images (``--download``), else ``None``."""
    rows: int
    """Photos in the dataset (in ``data_path``)."""
    fingerprint: str
    """SHA-256 of the rows' uuids in order (:func:`cladebench.store.fingerprint_uuids`), which is what the
    Lance dataset's fingerprint is when every photo is fetched."""
    files: dict[str, dict[str, Any]]
    """Per table: file, header variant (columns) and data lines read; ``not_read``: the ``.csv.gz`` passed over
    because the ``.csv`` of the same table is there too (the ``.csv`` is always the one read)."""
    row_issues: dict[str, dict[str, int]]
    """Bad rows per table and reason."""
    photo_outcomes: dict[str, int]
    """Photo ids per reason they are not in the dataset (every :data:`PHOTO_CHECKS` reason and
    :data:`SAMPLING_REASONS`, zeros included), plus ``image_fetch_failed`` with ``--download``."""
    photo_ids: int
    """Distinct photo ids in the export (lines rejected by the reader have none)."""
    eligible: int
    """Photos that passed every check, before sampling."""
    eligible_per_rank: dict[str, int]
    kept_per_rank: dict[str, int]
    kingdom_pairs: dict[str, int]
    """Kept photos per kingdom pair."""
    class_pairs: dict[str, int]
    """Kept photos per class pair."""
    species: int
    """Distinct species among the kept photos' organisms."""
    licenses: dict[str, int]
    """Kept photos per license code."""
    notes: dict[str, Any]
    """Counts that are not drops: observers without a name, attributions from the login, malformed line kinds."""
    dataset_fingerprint: str | None = None
    """Fingerprint of the Lance dataset (``--download``); equals ``fingerprint`` when no fetch failed."""
    config: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def describe(self) -> str:
        """A few lines for a terminal: what was written, and the largest reasons photos were left out."""
        drops = sorted(((n, r) for r, n in self.photo_outcomes.items() if n and r != "single_observation"),
                       reverse=True)
        bad_rows = sum(n for issues in self.row_issues.values() for n in issues.values())
        lines = [
            f"{self.out}: {self.rows:,} photos ({self.fingerprint[:12]}) of {self.eligible:,} eligible, from "
            f"{self.photo_ids:,} photo ids ({self.photo_outcomes.get('single_observation', 0):,} on one observation)",
            "left out: " + (", ".join(f"{r} {n:,}" for n, r in drops[:8]) or "none")
            + (f"; {bad_rows:,} bad rows" if bad_rows else "") + f"; all counts in {self.card_path}",
        ]
        lines += [f"read {Path(v['file']).name}, not {Path(v['not_read']).name} beside it (the uncompressed file "
                  "is always the one read)" for v in self.files.values() if v.get("not_read")]
        if self.dataset_path is None:
            lines.append(f"images: cladebench load inat-coobserved {self.out / 'data'} --out <dataset>.lance")
        else:
            lines.append(f"dataset with images: {self.dataset_path}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("out", "data_path", "card_path", "dataset_path"):
            out[key] = None if out[key] is None else str(out[key])
        return out


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _docs() -> dict[str, str]:
    docs = {c.reason: c.doc for c in PHOTO_CHECKS}
    docs.update(species_cap="a species already had its cap of photos", observer_cap="the observer had its cap",
                rank_quota="eligible, but the divergence rank was full", image_fetch_failed="the photo could not be "
                "fetched (--download; reasons in coobserved.lance.failures.parquet)")
    return docs


def render_card(summary: CoObservedBuildSummary) -> str:
    """The dataset card: what the dataset is, how it was built, and every count."""
    config = summary.config
    docs = _docs()
    kept_total = max(summary.rows, 1)
    sections = [
        "# iNat Co-Observed (rebuilt from an iNaturalist open-data export)",
        "",
        f"{summary.rows:,} iNaturalist photos, each attached by its observer to two research-grade observations of "
        "different species (different genera), with both organisms' seven-rank lineages and the rank at which they "
        "part (`divergence_rank`). The task it serves is steered lineage completion: given the image and one "
        "organism's lineage down to the divergence rank, complete the rest of its lineage; either organism can be "
        "the target.",
        "",
        f"- Fingerprint (SHA-256 of the row uuids in order): `{summary.fingerprint}`",
        f"- Rows: `{DATA_FILE}` (the published dataset's columns, no image bytes)"
        + (f"; with images: `{summary.dataset_path.name}`" if summary.dataset_path else
           "; images: `cladebench load inat-coobserved <out>/data --out <dataset>.lance` fetches them"),
        f"- Built with: per_rank={config.get('per_rank')}, seed={config.get('seed')}, "
        f"max_per_species={config.get('max_per_species')}, max_per_observer={config.get('max_per_observer')}, "
        f"exclude_photo_ids={config.get('exclude_photo_ids')}, tol_species={config.get('tol_species')}",
        "- Licenses: CC0, CC-BY and CC-BY-NC only; each row's `attribution` is the one iNaturalist requires "
        "(the observer's name, or the login when no name is given).",
        "",
        "## Photos per divergence rank",
        "",
        _table(["divergence rank", "eligible", "in dataset"],
               [(r, summary.eligible_per_rank.get(r, 0), summary.kept_per_rank.get(r, 0)) for r in DIVERGENCE_RANKS]
               + [("total", summary.eligible, summary.rows)]),
        "",
        "## Kingdom pairs",
        "",
        _table(["kingdom pair", "photos", "share"],
               [(k, n, f"{n / kept_total:.1%}") for k, n in summary.kingdom_pairs.items()]),
        "",
        "## Species and class pairs",
        "",
        f"{summary.species:,} species in {len(summary.class_pairs):,} class pairs. The most frequent class pairs:",
        "",
        _table(["class pair", "photos"], list(summary.class_pairs.items())[:20]),
        "",
        "## Licenses",
        "",
        _table(["license", "photos"], list(summary.licenses.items())),
        "",
        "## What was left out, and why",
        "",
        f"The export held {summary.photo_ids:,} distinct photo ids. Each is in the dataset or counted under "
        "exactly one reason (first failing check, in this order):",
        "",
        _table(["reason", "photo ids", "meaning"],
               [(r, n, docs.get(r, "")) for r, n in summary.photo_outcomes.items()]),
        "",
        "Rows that are bad on their own, per file (a bad photo row also leaves its photo out, above):",
        "",
        _table(["file", "data lines", "reason", "rows"],
               [(t, summary.files[t]["rows"], r, n) for t in summary.files for r, n in
                summary.row_issues.get(t, {}).items()] or [("all", "", "none", 0)]),
        "",
        _table(["note", "count"], [(k, v if isinstance(v, int) else json.dumps(v)) for k, v in summary.notes.items()]),
        "",
        "## Source",
        "",
        "iNaturalist open data (`inaturalist-open-data` bucket): photos.csv, observations.csv, taxa.csv, "
        "observers.csv, read as tab-separated text without quoting:",
        "",
        _table(["file", "columns", "data lines"],
               [(Path(v["file"]).name, len(v["columns"]), v["rows"]) for v in summary.files.values()]),
        "",
        *[f"Both `{Path(v['file']).name}` and `{Path(v['not_read']).name}` were in the export folder: "
          f"`{Path(v['file']).name}` was read, `{Path(v['not_read']).name}` was not (the uncompressed file is "
          "always the one read).\n" for v in summary.files.values() if v.get("not_read")],
    ]
    return "\n".join(sections)


def _counts(values: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def _summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    species = {(o["kingdom"], o["phylum"], o["class"], o["order"], o["family"], o["genus"], o["species"])
               for r in rows for o in r["organisms"]}
    from cladebench.curate.sources.inquire import parse_license

    return {
        "kept_per_rank": {r: sum(row["divergence_rank"] == r for row in rows) for r in DIVERGENCE_RANKS},
        "kingdom_pairs": _counts(r["kingdom_pair"] for r in rows),
        "class_pairs": _counts(r["class_pair"] for r in rows),
        "species": len(species),
        "licenses": _counts(parse_license(r["license"]).code for r in rows),  # type: ignore[union-attr]
    }


# --- the build -----------------------------------------------------------------------------------


def _connect(work_dir: Path, memory_limit: str, threads: int | None) -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(str(work_dir / "build.duckdb"))
    con.sql(f"SET memory_limit = '{memory_limit}'")
    con.sql(f"SET temp_directory = '{work_dir / 'spill'}'")
    # Output order is fixed by explicit ORDER BYs; insertion order would only cost memory.
    con.sql("SET preserve_insertion_order = false")
    if threads is not None:
        con.sql(f"SET threads = {int(threads)}")
    return con


WRITER = "build coobserved"
"""The output's marker names this writer; ``--overwrite`` replaces only such a folder
(:mod:`cladebench.curate.staging`)."""


def _inputs(config: CoObservedBuildConfig) -> tuple[Path, ...]:
    """What the build reads: the output may be none of these, inside none, and contain none."""
    return tuple(Path(p) for p in (config.export_dir, config.exclude_photo_ids, config.tol_species) if p is not None)


def _write_parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)


def _download(staging: Path, ray: str | None = None) -> tuple[Path, int, dict[str, int], str]:
    from cladebench.curate.fetch import DownloadConfig
    from cladebench.curate.sources.coobserved import build_inat_coobserved

    dataset_path = staging / "coobserved.lance"
    build = build_inat_coobserved(staging / "data", dataset_path,
                                  download_config=DownloadConfig(progress=sys.stderr.isatty(), ray=ray))
    return dataset_path, build.failed, build.failed_by_reason, build.fingerprint


def build_coobserved(config: CoObservedBuildConfig, *, memory_limit: str = DEFAULT_MEMORY_LIMIT,
                     threads: int | None = None) -> CoObservedBuildSummary:
    """Build iNat Co-Observed from the export in ``config.export_dir`` into ``config.out``; see the module
    docstring. ``memory_limit`` and ``threads`` are DuckDB's (``threads`` None: one per core)."""
    from cladebench.curate.sources.coobserved import row_uuid

    started = time.monotonic()
    out = Path(config.out)
    target = OutputTarget(out, writer=WRITER, overwrite=config.overwrite,
                          inputs=_inputs(config))
    check_output(target)  # before anything is read
    files = _export_files(Path(config.export_dir))
    with staged_output(target) as staging:
        (staging / "data").mkdir()
        con = _connect(work_dir(staging), memory_limit, threads)
        try:
            with duckdb_errors(f"the export in {config.export_dir}",
                               memory_hint=f"DuckDB's memory_limit is {memory_limit}"):
                stages = _Stages(con, files, config)
                if config.exclude_photo_ids is not None:
                    _read_id_list(con, Path(config.exclude_photo_ids), "photo_id", "BIGINT", "excluded")
                if config.tol_species is not None:
                    _read_id_list(con, Path(config.tol_species), "scientific_name", "VARCHAR", "tol")
                stages.photos()
                stages.candidates()
                stages.observations()
                stages.taxa()
                stages.lineages()
                stages.observers()
                stages.licenses()
                stages.evaluate(config.exclude_photo_ids is not None, config.tol_species is not None)
                outcomes = stages.outcomes()
                eligible = stages.eligible()
                kept, refused = sample(eligible, config)
                selected = stages.rows(kept)
                rows = [_published_row(r) for r in selected]
                from_login = sum(bool(r["from_login"]) for r in selected)
                dropped = stages.dropped(refused)
                n_photo_ids = stages.one("SELECT coalesce(sum(n_ids), 0) FROM photo_groups "
                                         "WHERE photo_id IS NOT NULL OR outcome IS NOT NULL")[0]
        finally:
            con.close()
        table = pa.Table.from_pylist(rows, schema=PUBLISHED_SCHEMA)
        _write_parquet(table, staging / DATA_FILE)
        _write_parquet(dropped, staging / "dropped.parquet")
        eligible_count = outcomes.pop("", 0)
        photo_outcomes = {c.reason: outcomes.pop(c.reason, 0) for c in PHOTO_CHECKS}
        photo_outcomes.update({r: sum(v == r for v in refused.values()) for r in SAMPLING_REASONS})
        if outcomes:
            raise AssertionError(f"outcomes without a check: {outcomes}")
        if sum(photo_outcomes.values()) + len(kept) != n_photo_ids or eligible_count != len(kept) + len(refused):
            raise AssertionError(f"photo accounting: {photo_outcomes} + {len(kept)} kept != {n_photo_ids} photo ids")
        dataset_path = dataset_fingerprint = None
        if config.download and rows:
            dataset_path, failed, _, dataset_fingerprint = _download(staging, config.ray)
            photo_outcomes[FETCH_REASON] = failed
        summary = CoObservedBuildSummary(
            out=out, data_path=out / DATA_FILE, card_path=out / "README.md",
            dataset_path=None if dataset_path is None else out / dataset_path.name, rows=len(rows),
            fingerprint=fingerprint_uuids(row_uuid(p) for p in kept),
            files={t: {"file": str(f.path), "columns": list(f.header), "rows": stages.rows_read.get(t, 0),
                       **({"not_read": str(f.not_read)} if f.not_read is not None else {})}
                   for t, f in files.items()},
            row_issues={t: {r: n for r, n in sorted(c.items()) if n} for t, c in stages.row_issues.items()
                        if any(c.values())},
            photo_outcomes=photo_outcomes, photo_ids=int(n_photo_ids), eligible=eligible_count,
            eligible_per_rank={r: sum(e[1] == i for e in eligible) for i, r in enumerate(DIVERGENCE_RANKS)},
            notes={**stages.notes, "kept_attributions_from_login": from_login,
                   "malformed_line_kinds": stages.malformed_kinds},
            dataset_fingerprint=dataset_fingerprint, config=config_to_dict(config),
            elapsed_s=round(time.monotonic() - started, 3), **_summarise(rows),
        )
        (staging / "README.md").write_text(render_card(summary), encoding="utf-8")
        (staging / "build.json").write_text(json.dumps(summary.as_dict(), indent=1, default=str), encoding="utf-8")
    return summary


__all__ = [
    "ALLOWED_LICENSES",
    "DATA_FILE",
    "DEFAULT_MEMORY_LIMIT",
    "GROUP_CHECKS",
    "INCLUDED_KINGDOMS",
    "ORGANISM_TYPE",
    "PHOTO_CHECKS",
    "PUBLISHED_SCHEMA",
    "ROW_CHECKS",
    "SAMPLING_REASONS",
    "TAXON_CHECKS",
    "Check",
    "CoObservedBuildConfig",
    "CoObservedBuildSummary",
    "build_coobserved",
    "render_card",
    "sample",
    "sample_key",
]
