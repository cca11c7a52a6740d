"""Reading a TreeOfLife-200M-style catalog and its provenance for a Fine-Grained Challenges build.

**Input.** A catalog (Parquet, CSV or TSV file, or a folder of Parquet files) with ``uuid``, the
seven rank columns ``kingdom`` .. ``species`` (``species`` the epithet or the binomial, null for a
row identified to genus only) and, when present, ``source_dataset``, ``source_id``,
``scientific_name``, ``common_name``, ``publisher``, ``basisOfRecord``, ``img_type``,
``resolution_status``, ``source_url`` (the image URL) and a column of local image paths
(``--image-path-column``). A provenance table (same formats) with ``uuid``, ``license_name``,
``license_link`` and optionally ``copyright_owner``, joined on ``uuid``. DuckDB scans both out of
core: only the rows of the challenge groups reach Python.

Why a module: the catalog is the one input that may be huge; everything that touches it runs in DuckDB
here, and only the challenge groups' rows come back to Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.benchmarks.finegrained.builder.config import (
    CATALOG_TEXT_COLUMNS,
    ChallengeGroup,
    FineGrainedBuildConfig,
)
from cladebench.curate.builders.duckdb_errors import duckdb_errors
from cladebench.errors import CladebenchError, SchemaError, UsageError, undecodable_at
from cladebench.store import sql_literal
from cladebench.taxonomy import RANK_COLUMNS

if TYPE_CHECKING:
    import duckdb


def _scan_sql(path: Path) -> str:
    """A DuckDB table function reading ``path``: every CSV value as text (ids must not become numbers)."""
    if path.is_dir():
        files = sorted(path.rglob("*.parquet"))
        if not files:
            raise UsageError(f"{path}: a folder without Parquet files")
        return f"read_parquet({sql_literal(str(path) + '/**/*.parquet')}, union_by_name=true)"
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    name = path.name.lower()
    quoted = sql_literal(str(path))
    if name.endswith(".parquet"):
        return f"read_parquet({quoted})"
    if name.endswith((".csv", ".csv.gz")):
        return f"read_csv({quoted}, header=true, all_varchar=true)"
    if name.endswith((".tsv", ".tsv.gz")):
        return f"read_csv({quoted}, header=true, all_varchar=true, delim='\\t')"
    raise UsageError(f"{path}: not a Parquet, CSV or TSV file")


def _columns(con: duckdb.DuckDBPyConnection, scan: str) -> list[str]:
    return [r[0] for r in con.sql(f"DESCRIBE SELECT * FROM {scan}").fetchall()]


NAME_TYPES = frozenset({"VARCHAR", '"NULL"'})
"""DuckDB's types of a rank column that holds names: text, or nothing at all (a Parquet column of nulls only)."""


def _check_rank_types(con: duckdb.DuckDBPyConnection, scan: str, catalog: object) -> None:
    """A rank column of numbers or lists is another table (or one written with the wrong types): a schema error
    naming it, before the groups' SQL, which compares names, fails on it."""
    columns = ", ".join(f'"{c}"' for c in RANK_COLUMNS)
    described = con.sql(f"DESCRIBE SELECT {columns} FROM {scan}").fetchall()
    wrong = [(column, kind) for column, kind, *_ in described if kind not in NAME_TYPES]
    if wrong:
        column, kind = wrong[0]
        raise SchemaError(f"{catalog}: column {column!r} is {kind}; the rank columns ({', '.join(RANK_COLUMNS)}) "
                          "hold names (text)")


def _text(column: str, present: Sequence[str], alias: str | None = None) -> str:
    """A column as trimmed text with empty values null (null when the table lacks it), named ``alias``."""
    value = f"NULLIF(trim(CAST(\"{column}\" AS VARCHAR)), '')" if column in present else "NULL::VARCHAR"
    return f'{value} AS "{alias or column}"'


@dataclass(frozen=True)
class Catalog:
    """What the scan of the catalog found: every row count, and the groups' rows with their provenance."""

    rows: int
    outside: int
    in_several_groups: int
    group_rows: list[dict[str, object]]


def read_catalog(config: FineGrainedBuildConfig, groups: Sequence[ChallengeGroup]) -> Catalog:
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
        _check_rank_types(con, catalog_scan, config.catalog)
        if "source_url" not in catalog_columns and config.image_path_column not in catalog_columns:
            raise UsageError(f"{config.catalog}: neither source_url nor {config.image_path_column!r}: no images")
        missing = [c for c in ("uuid", "license_name", "license_link") if c not in provenance_columns]
        if missing:
            raise UsageError(f"{config.provenance}: missing column(s) {missing} (it has {provenance_columns})")

        case = "CASE " + " ".join(f"WHEN {g.condition()} THEN {sql_literal(g.name)}" for g in groups) + " END"
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
    return Catalog(int(total), int(outside), int(overlapping), rows)


def read_uuid_list(path: Path) -> set[str]:
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



__all__ = ["Catalog", "read_catalog", "read_uuid_list"]
