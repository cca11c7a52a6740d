"""Reading CrypticBio-style metadata for a curation: streamed batches, the data checks, every row into one bin.

**Every row is accounted for.** A row is dropped by the first of these that it fails, and counted
under that reason: the data checks (:data:`ROW_CHECKS`: no name or URL, numbers that do not parse,
impossible dates, coordinates out of range, malformed list strings, a name that resolves to no
species of the row's genus, a missing or unknown licence), then the filters in :data:`FILTER_KEYS`
order, then ``duplicate_url`` (a photo already kept). An empty cell, a Parquet NaN or the text
``nan`` is a missing value, not a bad one; a row missing a date part keeps a null date, as the
published reader does. A CSV line the reader cannot split into the header's fields is
``malformed_line``. Each filter's own count (rows that fail it, among rows passing the data checks,
whatever the other filters say) is reported as well, since the first-reason count of a later filter
hides rows an earlier one already took. Rows dropped by a data check, and a photo's later rows
(``duplicate_url``), are listed in ``left_out.parquet``; filter names and species-list names that match no
row are reported.

**Memory.** Files are read as a stream of Arrow batches, each normalised, checked and filtered in
DuckDB; only kept rows are held, so memory follows the curated size, not the metadata's.

Why a module: this is the part that touches every row of files that may be far larger than the
curated benchmark, so it is where memory and row accounting are decided, apart from the config and the output.
"""

from __future__ import annotations

import ast
import contextlib
import csv
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.benchmarks.crypticbio import cryptic_groups
from cladebench.benchmarks.crypticbio.builder.filters import Condition, condition_sql
from cladebench.benchmarks.crypticbio.builder.sections import CrypticBioCurateConfig
from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS
from cladebench.curate.builders.duckdb_errors import duckdb_interrupts
from cladebench.errors import SchemaError, UsageError
from cladebench.taxonomy import Lineage, Rank

if TYPE_CHECKING:
    import duckdb

# --- the data checks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowCheck:
    """A reason a row cannot be used: its name, the SQL that detects it, and why."""

    reason: str
    condition: str
    doc: str


ROW_CHECKS: tuple[RowCheck, ...] = (
    RowCheck("missing_scientific_name", "scientific_name IS NULL", "no scientificName"),
    RowCheck("missing_url", "url IS NULL", "no photo URL"),
    RowCheck("invalid_number", "_bad_number", "year/month/day/coordinates that are not finite numbers, or date "
             "parts that are not whole"),
    RowCheck("invalid_date", "_bad_date", "a month outside 1-12 or a day the month does not have"),
    RowCheck("invalid_coordinates", "_bad_coordinates", "one coordinate without the other, or out of range"),
    RowCheck("malformed_vernacular_name", "_vernacular_bad", "vernacularName looks like a list but does not parse"),
    RowCheck("malformed_cryptic_group", "_group_bad", "the cryptic group looks like a list but does not parse"),
    RowCheck("unresolved_name", "NOT _species_ok", "scientificName does not resolve to a species of the row's "
             "genus (a genus alone, an author string, a genus that disagrees)"),
    RowCheck("missing_license", "_license_state = 'missing'", "the licence column is empty"),
    RowCheck("unknown_license", "_license_state = 'unknown'", "a licence that is not recognised "
             "(cladebench.benchmarks.inquire.source.parse_license)"),
)
"""Data checks in the order drops are attributed; each condition is SQL over the normalised row."""
DUPLICATE_URL = "duplicate_url"
MALFORMED_LINE = "malformed_line"

_TEXT_COLUMNS: dict[str, str] = {
    "scientific_name": "scientificName", "kingdom": "kingdom", "phylum": "phylum", "class": "class",
    "order": "order", "family": "family", "genus": "genus", "url": "url",
}
_NUMBER_COLUMNS: dict[str, str] = {
    "year": "year", "month": "month", "day": "day", "latitude": "decimalLatitude", "longitude": "decimalLongitude",
}
_WHOLE = ("year", "month", "day")
KEPT_SCHEMA = pa.schema([
    *(pa.field(name, pa.string()) for name in _TEXT_COLUMNS),
    *(pa.field(name, pa.float64()) for name in _NUMBER_COLUMNS),
    pa.field("observed_on", pa.date32()),
    pa.field("vernacular_names", pa.list_(pa.string())),
    pa.field("cryptic_group", pa.list_(pa.string())),
    pa.field("license", pa.string()),
    pa.field("_file", pa.int64()),
    pa.field("_row", pa.int64()),
])
"""Columns of a kept row: normalised values, the file (index into dataset.metadata) and 1-based data row."""


def _normalise_sql(filters: Sequence[Condition]) -> tuple[str, list[object]]:
    """One query over a prepared batch: normalised columns, the first failing data check, each filter's verdict."""
    text = [f'NULLIF(trim(CAST("{raw}" AS VARCHAR)), \'\') AS "{name}"' for name, raw in _TEXT_COLUMNS.items()]
    raw_numbers = [f'NULLIF(trim(CAST("{raw}" AS VARCHAR)), \'\') AS "_{name}_text"'
                   for name, raw in _NUMBER_COLUMNS.items()]
    values = [f'CASE WHEN isfinite(TRY_CAST("_{n}_text" AS DOUBLE)) THEN TRY_CAST("_{n}_text" AS DOUBLE) END AS "{n}"'
              for n in _NUMBER_COLUMNS]
    bad_parts = [f"(\"_{n}_text\" IS NOT NULL AND lower(\"_{n}_text\") <> 'nan' AND \"{n}\" IS NULL)"
                 for n in _NUMBER_COLUMNS]
    bad_parts += [f'("{n}" IS NOT NULL AND "{n}" <> floor("{n}"))' for n in _WHOLE]
    complete = "year IS NOT NULL AND month IS NOT NULL AND day IS NOT NULL AND NOT _bad_number"
    month_ok = "month BETWEEN 1 AND 12 AND year BETWEEN 1 AND 9999"
    last_day = "day(last_day(make_date(CAST(year AS INTEGER), CAST(month AS INTEGER), 1)))"
    date_ok = f"{month_ok} AND day >= 1 AND day <= (CASE WHEN {month_ok} THEN {last_day} END)"
    reasons = " ".join(f"WHEN {check.condition} THEN '{check.reason}'" for check in ROW_CHECKS)
    verdicts, params = [], []
    for index, condition in enumerate(filters):
        sql, values_ = condition_sql(condition)
        verdicts.append(f"COALESCE(({sql}), FALSE) AS \"_pass_{index}\"")
        params.extend(values_)
    query = f"""
        WITH t AS (
            SELECT {", ".join(text)}, {", ".join(raw_numbers)},
                   _vernacular AS vernacular_names, _vernacular_bad, _group, _group_bad, _species_ok,
                   _license AS license, _license_state, _file, _row
            FROM batch
        ), v AS (
            SELECT *, {", ".join(values)} FROM t
        ), w AS (
            SELECT *, ({" OR ".join(bad_parts)}) AS _bad_number FROM v
        ), d AS (
            SELECT *,
                   ({complete}) AND NOT coalesce({date_ok}, FALSE) AS _bad_date,
                   CASE WHEN {complete} AND coalesce({date_ok}, FALSE)
                        THEN make_date(CAST(year AS INTEGER), CAST(month AS INTEGER), CAST(day AS INTEGER))
                   END AS observed_on,
                   ((latitude IS NULL) <> (longitude IS NULL) OR NOT coalesce(latitude BETWEEN -90 AND 90, TRUE)
                    OR NOT coalesce(longitude BETWEEN -180 AND 180, TRUE)) AS _bad_coordinates,
                   list_filter(_group, lambda m: m IS NOT NULL AND m <> scientific_name) AS cryptic_group
            FROM w
        )
        SELECT {", ".join(f'"{f.name}"' for f in KEPT_SCHEMA)},
               CASE {reasons} END AS _reason{"".join(", " + v for v in verdicts)}
        FROM d
    """
    return query, params


# --- reading and preparing batches -----------------------------------------------------------------


def _csv_batches(path: Path, batch_rows: int, invalid: list[str]) -> Iterator[pa.Table]:
    import pyarrow.csv as pacsv

    header = _column_names(path)
    _check_columns(path, header)

    def skip(row: Any) -> str:
        invalid.append(row.text)
        return "skip"

    with _arrow_errors(path):
        reader = pacsv.open_csv(
            pa.input_stream(str(path)),
            read_options=pacsv.ReadOptions(block_size=8 << 20),
            parse_options=pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=skip),
            convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(header, pa.string()),
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
        for batch in reader:
            yield pa.Table.from_batches([batch])


def _parquet_batches(path: Path, batch_rows: int, invalid: list[str]) -> Iterator[pa.Table]:
    import pyarrow.parquet as pq

    with _arrow_errors(path):
        parquet = pq.ParquetFile(path)
        _check_columns(path, parquet.schema_arrow.names)
        for batch in parquet.iter_batches(batch_size=batch_rows):
            yield pa.Table.from_batches([batch])


def _arrow_errors(path: Path) -> contextlib.AbstractContextManager[None]:
    """:func:`cryptic_groups.arrow_errors` with the hint a metadata file needs."""
    return cryptic_groups.arrow_errors(path, utf8_hint=" (metadata must be UTF-8)")


READERS: dict[str, Callable[[Path, int, list[str]], Iterator[pa.Table]]] = {
    ".csv": _csv_batches, ".csv.gz": _csv_batches, ".csv.bz2": _csv_batches, ".csv.zst": _csv_batches,
    ".parquet": _parquet_batches,
}
"""Metadata file suffix -> batch reader."""


def _reader(path: Path) -> Callable[[Path, int, list[str]], Iterator[pa.Table]]:
    name = path.name.lower()
    for suffix in sorted(READERS, key=len, reverse=True):
        if name.endswith(suffix):
            return READERS[suffix]
    raise UsageError(f"{path}: metadata must be {', '.join(READERS)}")


def _check_columns(path: Path, names: Sequence[str]) -> None:
    missing = [c for c in CSV_COLUMNS if c not in names]
    if missing:
        raise SchemaError(f"{path}: not CrypticBio-style metadata: missing column(s) {missing}; has {list(names)}")


def _parse_names(text: str) -> tuple[list[str] | None, bool]:
    """A list-literal cell -> (names, malformed); a plain name is a list of one, as the published reader does."""
    text = text.strip()
    if not text:
        return None, False
    if not text.startswith("["):
        return [text], False
    try:
        names = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None, True
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return None, True
    return [n.strip() for n in names if n.strip()], False


class _Distinct:
    """Per-distinct-value Python work (list literals, names, licences), cached across batches: a metadata file
    repeats a few thousand species' values over millions of rows."""

    def __init__(self, fn: Callable[[str], object]) -> None:
        self.fn = fn
        self.cache: dict[str, Any] = {}

    def map(self, array: pa.ChunkedArray, *out_types: pa.DataType) -> list[pa.Array]:
        encoded = pc.dictionary_encode(pc.cast(array, pa.string()).combine_chunks())
        results = []
        for value in encoded.dictionary.to_pylist():
            if value not in self.cache:
                self.cache[value] = self.fn(value)
            results.append(self.cache[value])
        return [pa.array([r[i] for r in results], t).take(encoded.indices) for i, t in enumerate(out_types)]


def _species_ok(key: str) -> tuple[bool]:
    genus, _, name = key.partition("\x1f")
    return (Lineage.from_row({"genus": genus or None, "scientificName": name})[Rank.SPECIES] is not None,)


def _license_state(raw: str) -> tuple[str | None, str]:
    from cladebench.curate.sources.values import parse_license

    if not raw.strip():
        return None, "missing"
    parsed = parse_license(raw)
    return (None, "unknown") if parsed is None else (parsed.code, "ok")


class _Preparer:
    """Adds the columns Python computes (parsed lists, species and licence verdicts, groups) to a raw batch."""

    def __init__(self, group_column: str | None, license_column: str | None,
                 groups: Mapping[str, tuple[str, ...]] | None) -> None:
        self.group_column, self.license_column, self.groups = group_column, license_column, groups
        self.lists = _Distinct(_parse_names)
        self.species = _Distinct(_species_ok)
        self.licenses = _Distinct(_license_state)
        self.group_species = _Distinct(lambda name: (None if self.groups is None or name.strip() not in self.groups
                                                     else list(self.groups[name.strip()][1:]),))

    def _names(self, table: pa.Table, column: str | None) -> tuple[pa.Array, pa.Array]:
        n = table.num_rows
        if column is None or column not in table.column_names:
            return pa.nulls(n, pa.list_(pa.string())), pa.array(np.zeros(n, dtype=bool))
        array = table.column(column)
        if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
            return pc.cast(array, pa.list_(pa.string())).combine_chunks(), pa.array(np.zeros(n, dtype=bool))
        names, bad = self.lists.map(array, pa.list_(pa.string()), pa.bool_())
        return names, pc.fill_null(bad, False)

    def prepare(self, table: pa.Table, file_index: int, first_row: int) -> pa.Table:
        n = table.num_rows
        vernacular, vernacular_bad = self._names(table, "vernacularName")
        if self.groups is not None:
            (group,) = self.group_species.map(table.column("scientificName"), pa.list_(pa.string()))
            group_bad = pa.array(np.zeros(n, dtype=bool))
        else:
            group, group_bad = self._names(table, self.group_column)
        key = pc.binary_join_element_wise(pc.fill_null(pc.cast(table.column("genus"), pa.string()), ""),
                                          pc.fill_null(pc.cast(table.column("scientificName"), pa.string()), ""),
                                          "\x1f")
        (species_ok,) = self.species.map(key, pa.bool_())
        if self.license_column is None:
            license_code, state = pa.nulls(n, pa.string()), pa.nulls(n, pa.string())
        else:
            raw = pc.fill_null(pc.cast(table.column(self.license_column), pa.string()), "")
            license_code, state = self.licenses.map(raw, pa.string(), pa.string())
        raw_columns = {c: table.column(c) for c in (*_TEXT_COLUMNS.values(), *_NUMBER_COLUMNS.values())}
        return pa.table(raw_columns | {
            "_vernacular": vernacular, "_vernacular_bad": vernacular_bad, "_group": group, "_group_bad": group_bad,
            "_species_ok": species_ok, "_license": license_code, "_license_state": state,
            "_file": pa.array(np.full(n, file_index, dtype=np.int64)),
            "_row": pa.array(np.arange(first_row, first_row + n, dtype=np.int64)),
        })


# --- filtering: every row into exactly one bin -----------------------------------------------------


@dataclass
class Tally:
    rows: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    failing: Counter[str] = field(default_factory=Counter)
    kept: list[pa.Table] = field(default_factory=list)
    rejected: list[pa.Table] = field(default_factory=list)
    names_seen: set[str] = field(default_factory=set)


def _evaluate(con: duckdb.DuckDBPyConnection, prepared: pa.Table, query: str, params: list[object],
              filters: Sequence[Condition], tally: Tally, wanted_names: set[str]) -> None:
    con.register("batch", prepared)
    try:
        result = con.sql(query, params=params or None).to_arrow_table()
    finally:
        con.unregister("batch")
    tally.rows += result.num_rows
    reason = result.column("_reason")
    valid = np.asarray(pc.is_null(reason), dtype=bool)
    for value, count in zip(*np.unique(np.asarray(reason.filter(pc.is_valid(reason))), return_counts=True),
                            strict=True):
        tally.dropped[str(value)] += int(count)
    rejected = result.filter(pc.is_valid(reason))
    if rejected.num_rows:
        tally.rejected.append(rejected.select(["_file", "_row", "_reason", "scientific_name", "url"]))
    if wanted_names:
        names = result.column("scientific_name").filter(pa.array(valid)).unique().to_pylist()
        tally.names_seen.update(n for n in names if n in wanted_names)
    remaining = valid.copy()
    for index, condition in enumerate(filters):
        passes = np.asarray(result.column(f"_pass_{index}"), dtype=bool)
        tally.failing[f"filter:{condition.key}"] += int((valid & ~passes).sum())
        tally.dropped[f"filter:{condition.key}"] += int((remaining & ~passes).sum())
        remaining &= passes
    tally.kept.append(result.filter(pa.array(remaining)).select(KEPT_SCHEMA.names).cast(KEPT_SCHEMA))


def _auto_column(path: Path, given: str | None, default: str) -> str | None:
    """The configured column, or ``default`` when the file has it; a configured column the file lacks is an error."""
    names = _column_names(path)
    if given is not None:
        if given not in names:
            raise SchemaError(f"{path}: the configured column {given!r} is not there; it has {names}")
        return given
    return default if default in names else None


def _column_names(path: Path) -> list[str]:
    with _arrow_errors(path):
        if _reader(path) is _parquet_batches:
            import pyarrow.parquet as pq

            return pq.ParquetFile(path).schema_arrow.names
        with pa.input_stream(str(path)) as stream:
            first = stream.read(1 << 16).decode("utf-8-sig", errors="replace")
    return next(csv.reader([first.splitlines()[0]])) if first.strip() else []


def read_and_filter(config: CrypticBioCurateConfig, groups: Mapping[str, tuple[str, ...]] | None
                     ) -> tuple[Tally, pa.Table, list[tuple[int, str]]]:
    """Every metadata row checked and filtered; the kept rows (duplicates of a URL removed) and the tallies."""
    import duckdb

    filters = config.filters.conditions
    query, params = _normalise_sql(filters)
    wanted = {v for c in filters if c.key == "scientific_name" for v in c.values}
    tally = Tally()
    malformed: list[tuple[int, str]] = []
    con = duckdb.connect()
    try:
        for file_index, path in enumerate(config.dataset.metadata):
            if not path.is_file():
                raise UsageError(f"dataset.metadata: {path} {'is a folder' if path.is_dir() else 'does not exist'}")
            preparer = _Preparer(_auto_column(path, config.dataset.cryptic_group_column, "crypticGroup"),
                                 _auto_column(path, config.dataset.license_column, "license"), groups)
            invalid: list[str] = []
            first_row = 1
            for batch in _reader(path)(path, config.dataset.batch_rows, invalid):
                prepared = preparer.prepare(batch, file_index, first_row)
                first_row += batch.num_rows
                with duckdb_interrupts():
                    _evaluate(con, prepared, query, params, filters, tally, wanted)
            malformed.extend((file_index, text) for text in invalid)
    finally:
        con.close()
    kept = pa.concat_tables(tally.kept) if tally.kept else KEPT_SCHEMA.empty_table()
    kept, duplicates = _drop_duplicate_urls(kept)
    tally.dropped[DUPLICATE_URL] += duplicates.num_rows
    if duplicates.num_rows:  # left out like any other row, so the record and the card's counts agree
        tally.rejected.append(duplicates.select(["_file", "_row", "scientific_name", "url"]).append_column(
            "_reason", pa.array([DUPLICATE_URL] * duplicates.num_rows, pa.string())))
    return tally, kept, malformed


def _drop_duplicate_urls(kept: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The first row (file, then row order) of each URL, and the later rows of a URL already kept: one photo is
    one benchmark example."""
    order = pc.add(pc.multiply(kept.column("_file"), 1 << 40), kept.column("_row"))
    keyed = pa.table({"url": kept.column("url"), "_order": order})
    first = keyed.group_by("url", use_threads=False).aggregate([("_order", "min")]).column("_order_min")
    keep = pc.is_in(order, value_set=first)
    return kept.filter(keep), kept.filter(pc.invert(keep))



__all__ = ["DUPLICATE_URL", "KEPT_SCHEMA", "MALFORMED_LINE", "ROW_CHECKS", "RowCheck", "Tally", "read_and_filter"]
