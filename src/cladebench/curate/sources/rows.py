"""Reading a source's rows cell by cell: one way to coerce a cell and one way to name a bad one.

Why: every source reader (CrypticBio's CSVs, INQUIRE's CSVs and Parquet shards, iNat Co-Observed's Parquet
files) turns cells into typed values and, on a bad value, stops with one line that a person can act on: the
file, the row and the field. With one set of helpers a message reads the same whatever the source, and a row
number means the same thing in every message.

**Row numbers.** A row is numbered as a person counts the rows of data when they open the file in a
spreadsheet or a table viewer: **row 1 is the first row of data**, the first row after a CSV's header and the
first row of a Parquet file; every message says so, ``row 3 (1-based data row)``. (In a CSV without line
breaks inside a field, data row N is line N + 1 of the file.) Messages about the bytes of a file rather than a
row (text that is not UTF-8, a line the CSV parser refuses) name the **line** of the file instead, and say
``line``.

Example:
    >>> from pathlib import Path
    >>> row = Row.at_index(Path("shard.parquet"), 0)
    >>> str(row.error("latitude", "95.0 is outside [-90, 90]"))
    "shard.parquet: row 1 (1-based data row), field 'latitude': 95.0 is outside [-90, 90]"
    >>> integer_or_none("42", "photo_id", row), number_or_none(float("nan"), "latitude", row)
    (42, None)
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cladebench.curate.sources import open_text
from cladebench.errors import SchemaError

ROW_COUNTING = "1-based data row"
"""How every message counts rows (see the module docstring)."""

_INTEGER = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Row:
    """Where a row is: its file and its number (1 = the first row of data), for messages a person can act on."""

    path: Path
    """The file the row is in."""
    number: int
    """1-based data row: 1 is the first row after a CSV's header, or the first row of a Parquet file."""

    @classmethod
    def at_index(cls, path: Path, index: int) -> Row:
        """The row at 0-based position ``index`` among the file's rows of data (as Arrow counts them)."""
        return cls(path, index + 1)

    def here(self) -> str:
        """Short form for pointing at this row from another row's message: ``file.parquet row 3``."""
        return f"{self.path.name} row {self.number}"

    def problem(self, problem: str) -> SchemaError:
        """A problem with the row as a whole (too many fields, ...)."""
        return SchemaError(f"{self.path}: row {self.number} ({ROW_COUNTING}): {problem}")

    def error(self, field_name: str, problem: str) -> SchemaError:
        """A problem with one field of the row."""
        return SchemaError(f"{self.path}: row {self.number} ({ROW_COUNTING}), field {field_name!r}: {problem}")


# --- typed cells (Parquet, or values already parsed) ---------------------------------------------


def text_or_none(value: object, field_name: str, row: Row) -> str | None:
    """Text exactly as written; null and empty text are null; a value that is not text is an error."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise row.error(field_name, f"{value!r} is not text")
    return value


def integer_or_none(value: object, field_name: str, row: Row) -> int | None:
    """An integer from an int, a whole float or decimal digits; null is null; anything else is an error."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise row.error(field_name, f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value.strip())
    raise row.error(field_name, f"{value!r} is not an integer")


def integer(value: object, field_name: str, row: Row) -> int:
    """As :func:`integer_or_none`, for a field every row must have: null is an error too."""
    number = integer_or_none(value, field_name, row)
    if number is None:
        raise row.error(field_name, f"{value!r} is not an integer")
    return number


def number_or_none(value: object, field_name: str, row: Row) -> float | None:
    """A float from a typed number; null and NaN are null (iNat data writes an unknown value as NaN); an
    infinity is an error, as it is in text (:func:`number_from_text`): no stored number is infinite."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise row.error(field_name, f"{value!r} is not a number")
    if math.isinf(value):
        raise row.error(field_name, f"{value!r} is not a finite number")
    return None if math.isnan(value) else float(value)


def boolean_or_none(value: object, field_name: str, row: Row) -> bool | None:
    """A boolean; null is null; anything else (``1``, ``"yes"``) is an error rather than a guess."""
    if value is None or isinstance(value, bool):
        return value
    raise row.error(field_name, f"{value!r} is not true or false")


# --- text cells (CSV) ----------------------------------------------------------------------------


def required_text(record: Mapping[str, str | None], field_name: str, row: Row, *, what: str) -> str:
    """The field's text, stripped; empty is an error (``what`` names the kind of row that must have it)."""
    text = (record[field_name] or "").strip()
    if not text:
        raise row.error(field_name, f"empty; every {what} has one")
    return text


def number_from_text(record: Mapping[str, str | None], field_name: str, row: Row) -> float | None:
    """A finite float from the field's text; blank is null; ``nan``, ``inf`` and non-numbers are errors."""
    text = (record[field_name] or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise row.error(field_name, f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise row.error(field_name, f"{text!r} is not a finite number")
    return value


def whole_number_from_text(record: Mapping[str, str | None], field_name: str, row: Row) -> int | None:
    """A whole number from the field's text (``2018.0`` is 2018); blank is null; ``2.5`` is an error."""
    value = number_from_text(record, field_name, row)
    if value is not None and not value.is_integer():
        raise row.error(field_name, f"{record[field_name]!r} is not a whole number")
    return None if value is None else int(value)


# --- across cells --------------------------------------------------------------------------------


def coordinates(latitude: float | None, longitude: float | None, row: Row,
                names: tuple[str, str] = ("latitude", "longitude"),
                shown: tuple[object, object] | None = None) -> tuple[float | None, float | None]:
    """Latitude and longitude, both or neither, each within its range; ``names`` are the fields' names in the
    file and ``shown`` the values as the file wrote them (default: the numbers), for the messages."""
    if (latitude is None) != (longitude is None):
        raise row.error(names[0] if latitude is None else names[1], "missing while the other coordinate is given")
    shown = shown or (latitude, longitude)
    for name, value, written, bound in zip(names, (latitude, longitude), shown, (90.0, 180.0), strict=True):
        if value is not None and not -bound <= value <= bound:
            raise row.error(name, f"{written!r} is outside [-{bound:g}, {bound:g}]")
    if latitude is None or longitude is None:
        return None, None
    return float(latitude), float(longitude)


# --- CSV files -----------------------------------------------------------------------------------


def csv_records(path: Path, required: Sequence[str], *, what: str, other_columns: bool = True,
                ignored: Sequence[str] = ()) -> Iterator[tuple[Row, dict[str, str]]]:
    """The CSV's rows of data with where each is, after checking the header.

    ``what`` names the format in messages (``a CrypticBio benchmark CSV``). A header without a ``required``
    column is an error; so is one with other columns unless ``other_columns`` (``ignored`` columns are always
    allowed: pandas writes its index as a column named ``""``). A row with more or fewer fields than the
    header is an error naming the row. A gzip file is read decompressed, whatever its name. Bytes that are
    not UTF-8, and what the csv module refuses (a field over
    ``csv.field_size_limit()``, 131,072 characters by default; a NUL byte), are a :class:`SchemaError` naming
    the line of the file; so is a header naming a column twice.
    """
    with open_text(path) as handle:
        reader = csv.DictReader(handle)
        try:
            yield from _checked_records(reader, path, required, what, other_columns, ignored)
        except csv.Error as exc:
            raise SchemaError(f"{path}: line {reader.line_num + 1}: cannot be read as CSV: {exc}") from None


def _checked_records(reader: csv.DictReader, path: Path, required: Sequence[str], what: str, other_columns: bool,
                     ignored: Sequence[str]) -> Iterator[tuple[Row, dict[str, str]]]:
    header = reader.fieldnames or []
    repeated = sorted(c for c, n in Counter(header).items() if n > 1)
    if repeated:  # a dict per row would keep the last of them for every row, without a word
        raise SchemaError(f"{path}: the header names {', '.join(map(repr, repeated))} more than once; which of "
                          "the columns holds the value is ambiguous: keep one of each")
    missing = [c for c in required if c not in header]
    if missing:
        raise SchemaError(f"{path}: not {what}: missing column(s) {missing}; header is {header}")
    unknown = [c for c in header if c not in required and c not in ignored]
    if unknown and not other_columns:
        raise SchemaError(f"{path}: unexpected column(s) {unknown} in {what}; header is {header}")
    for number, record in enumerate(reader, 1):
        row = Row(path, number)
        if None in record or any(record.get(c) is None for c in required):
            more = "more" if None in record else "fewer"
            raise row.problem(f"{more} fields than the header's {len(header)}")
        yield row, record


__all__ = [
    "ROW_COUNTING",
    "Row",
    "boolean_or_none",
    "coordinates",
    "csv_records",
    "integer",
    "integer_or_none",
    "number_from_text",
    "number_or_none",
    "required_text",
    "text_or_none",
    "whole_number_from_text",
]
