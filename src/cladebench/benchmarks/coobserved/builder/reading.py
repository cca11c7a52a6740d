"""Reading an iNat open-data export into DuckDB: each file as text, each typed column cast once, and the id lists.

Every file is read as text (tab-separated, no quote character, no escape, the header checked against
:data:`cladebench.curate.inat_export.HEADERS`, the 8- and 9-column observations both accepted). A line with too many
fields or bytes that are not UTF-8 cannot be split into the header's columns: DuckDB's ``store_rejects`` records it
(the build counts it as ``malformed_line``, with DuckDB's error type); a short line is padded with nulls and then
fails the row checks. DuckDB reads only the columns a query uses and splits a file between its threads.

Why a module: how a file is read (options, rejects, the one cast per typed column) is shared by every stage of
:mod:`.stages` and by ``bench/coobserved_builder.py``'s scan baseline, and is independent of what the stages decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.benchmarks.coobserved.builder.checks import ROW_CHECKS, case_sql, typed_column
from cladebench.curate import inat_export
from cladebench.errors import CladebenchError, UsageError
from cladebench.store import sql_literal

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class ExportFile:
    table: str
    path: Path
    header: tuple[str, ...]

    def scan(self, *, record_rejects: bool) -> str:
        """A ``read_csv`` of the file, every column text. With ``record_rejects`` the lines it cannot split are
        recorded (in ``rejects_<table>``); without, they are skipped. DuckDB reads only the columns a query uses,
        and splits the file between its threads."""
        columns = "{" + ", ".join(f"'{c}': 'VARCHAR'" for c in self.header) + "}"
        rejects = (f"store_rejects=true, rejects_table='rejects_{self.table}', rejects_scan='scans_{self.table}'"
                   if record_rejects else "ignore_errors=true")
        return (f"read_csv({sql_literal(str(self.path))}, delim='\\t', quote='', escape='', header=true, "
                f"auto_detect=false, columns={columns}, null_padding=true, {rejects})")

    def rows(self, *, record_rejects: bool = True, where: str | None = None) -> str:
        """The file's rows (:meth:`scan`): every column as text and each typed column also cast to its type once
        (:func:`~.checks.typed_column`; null where it does not parse), so the row checks and the values a stage
        keeps share one cast. Casts no query uses are dropped by DuckDB. ``where`` (SQL over the text columns)
        keeps only some rows, before anything is cast: DuckDB would otherwise cast every row, then filter."""
        casts = "".join(f", TRY_CAST(\"{c}\" AS {inat_export.SQL_TYPES[c]}) AS {typed_column(c)}"
                        for c in self.header if c in inat_export.SQL_TYPES)
        source = self.scan(record_rejects=record_rejects)
        if where is not None:
            source = f"(SELECT * FROM {source} WHERE {where})"
        return f"(SELECT *{casts} FROM {source})"

    def typed(self, column: str) -> str:
        """A column of :meth:`rows` as its type (null where it does not parse), or null when the header lacks it."""
        if column not in self.header:
            return "NULL"
        return typed_column(column) if column in inat_export.SQL_TYPES else f'"{column}"'

    def issue(self) -> str:
        return case_sql(ROW_CHECKS[self.table])


def export_files(export_dir: Path) -> dict[str, ExportFile]:
    if not export_dir.is_dir():
        raise CladebenchError(f"{export_dir} is not a folder (expected an iNat open-data export)")
    files = {}
    for table in inat_export.TABLES:
        path = inat_export.export_file(export_dir, table)
        files[table] = ExportFile(table, path, inat_export.read_header(path, table))
    return files


def read_id_list(con: duckdb.DuckDBPyConnection, path: Path, column: str, sql_type: str, name: str) -> None:
    """``--exclude-photo-ids`` / ``--tol-species`` into table ``name``: Parquet with ``column``, or text with one
    value per line (blank lines skipped; a first line equal to the column name is a header)."""
    import duckdb

    if not path.is_file():
        option = {"excluded": "--exclude-photo-ids", "tol": "--tol-species"}.get(name, name)
        raise UsageError(f"{option}: {path}: {'a folder, not a file' if path.is_dir() else 'no such file'}")
    quoted = sql_literal(str(path))
    if path.suffix == ".parquet":
        names = [r[0] for r in con.sql(f"DESCRIBE SELECT * FROM read_parquet({quoted})").fetchall()]
        if column not in names:
            raise UsageError(f"{path}: no column {column!r} (it has {names})")
        source = f"SELECT CAST(\"{column}\" AS VARCHAR) AS value FROM read_parquet({quoted})"
    else:
        source = (f"SELECT trim(value) AS value FROM read_csv({quoted}, columns={{'value': 'VARCHAR'}}, "
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


__all__ = ["ExportFile", "export_files", "read_id_list"]
