"""The filter language of a CrypticBio curation config (``filters:``): one rule for every key, compiled to SQL.

**The filter rule, once for every key.** A key names a column (:data:`FILTER_KEYS`); its value's YAML
type says what it means: a boolean means not null (``true``) or null (``false``); a list means
membership (for list-valued columns: any member shared), except that for ordered keys (numbers,
dates) it is an inclusive ``[from, to]`` range with ``null`` for an open end; any other scalar means
equality (for list-valued columns: contains). Text matches exactly. A row whose value is missing
fails every condition on that key except ``false``. YAML 1.1 reads unquoted ``yes``/``no``/``on``/``off``
as booleans: quote such names.


Why a module: the rule is the part of the config a user reasons about most, and the one most easily made
inconsistent (a key whose list means a range, another whose list means membership); keeping every key's
kind in one registry (:data:`FILTER_KEYS`) keeps the rule one rule.

Example:
    >>> parse_condition("class", ["Aves", "Insecta"]).describe()
    'class in [Aves, Insecta]'
    >>> parse_condition("year", [2015, None]).describe()
    'year from 2015'
    >>> parse_condition("vernacular_name", True).describe()
    'vernacular_name present'
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cladebench.errors import UsageError, unknown_name
from cladebench.registry import Registry

NOT_CONVERTED = object()
"""What a converter returns for a value of the wrong type (``None`` is a value: YAML's null)."""


def to_date(value: object) -> object:
    """A YAML date (or ``YYYY-MM-DD`` text) as a date, else :data:`NOT_CONVERTED`."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value.strip())
        except ValueError:
            return NOT_CONVERTED
    return NOT_CONVERTED


@dataclass(frozen=True)
class Condition:
    """One filter: a key of :data:`FILTER_KEYS`, what it asks, and the values it asks with."""

    key: str
    op: Literal["in", "equals", "present", "absent", "between"]
    """Membership, equality, not null, null, or an inclusive range (``values`` = (from, to), None = open)."""
    values: tuple[Any, ...] = ()

    def describe(self) -> str:
        shown = {
            "in": lambda: f"in [{', '.join(map(str, self.values))}]",
            "equals": lambda: f"= {self.values[0]}",
            "present": lambda: "present",
            "absent": lambda: "absent",
            "between": lambda: " ".join(f"{word} {value}" for word, value in zip(("from", "to"), self.values,
                                                                                   strict=True) if value is not None),
        }
        return f"{self.key} {shown[self.op]()}"


def _text(value: object) -> object:
    return value.strip() if isinstance(value, str) and value.strip() else NOT_CONVERTED


def _number(value: object) -> object:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else NOT_CONVERTED


@dataclass(frozen=True)
class ValueKind:
    """How one kind of column is compared: what a YAML value must be, and the SQL of each operation."""

    name: str
    expected: str
    """What a value of this kind is, for error messages."""
    scalar: Callable[[Any], Any]
    """One YAML value -> the value compared (``NOT_CONVERTED`` when it is not of this kind)."""
    ordered: bool
    """A list means an inclusive [from, to] range (rather than membership)."""
    sql: Mapping[str, str]
    """Operation -> SQL with ``{c}`` for the column and ``?`` for the values (ranges are built in code)."""


_PRESENCE = {"present": "{c} IS NOT NULL", "absent": "{c} IS NULL"}
TEXT = ValueKind("text", "text", _text, False, {"in": "list_contains(?, {c})", "equals": "{c} = ?", **_PRESENCE})
NUMBER = ValueKind("number", "a number", _number, True, {"equals": "{c} = ?", **_PRESENCE})
DATE = ValueKind("date", "a date (YYYY-MM-DD)", to_date, True, {"equals": "{c} = ?", **_PRESENCE})
NAMES = ValueKind("names", "text", _text, False, {
    "in": "list_has_any({c}, ?)", "equals": "list_contains({c}, ?)",
    "present": "coalesce(len({c}), 0) > 0", "absent": "coalesce(len({c}), 0) = 0",
})


@dataclass(frozen=True)
class FilterKey:
    """A filter key of the config: the column it tests, its kind, and what it is for."""

    name: str
    column: str
    kind: ValueKind
    doc: str
    cyclic: bool = False
    """A range whose from is after its to wraps around (months, longitudes across the antimeridian)."""


FILTER_KEYS: Registry[FilterKey] = Registry("filter key")
"""Registry of filter keys, in the order their drops are attributed."""


def filter_key(name: str, column: str, kind: ValueKind, doc: str, *, cyclic: bool = False) -> FilterKey:
    """Register the filter key ``name`` (its drops are attributed after those of every key registered before)."""
    return FILTER_KEYS.add(name, FilterKey(name, column, kind, doc, cyclic))


filter_key("scientific_name", "scientific_name", TEXT, "scientificName, exactly as written")
for _rank in ("kingdom", "phylum", "class", "order", "family", "genus"):
    filter_key(_rank, _rank, TEXT, f"the {_rank} column")
filter_key("year", "year", NUMBER, "year of observation")
filter_key("month", "month", NUMBER, "month of observation (1-12)", cyclic=True)
filter_key("day", "day", NUMBER, "day of the month")
filter_key("observed_on", "observed_on", DATE, "the full date (null when a part is missing)")
filter_key("latitude", "latitude", NUMBER, "decimalLatitude")
filter_key("longitude", "longitude", NUMBER, "decimalLongitude (a from east of the to crosses the antimeridian)",
           cyclic=True)
filter_key("vernacular_name", "vernacular_names", NAMES, "vernacularName, any of its names")
filter_key("cryptic_group", "cryptic_group", NAMES, "the species the row's species is confused with")
filter_key("license", "license", TEXT, "the licence code (cc0, cc-by, cc-by-nc, ...; needs a licence column)")


def parse_condition(key: str, value: object) -> Condition:
    """The one rule: a boolean means not null / null, a list membership (a [from, to] range for ordered
    keys), any other scalar equality. Everything else is an error naming the key."""
    if key not in FILTER_KEYS:
        raise UsageError(f"filters: {unknown_name('key', key, FILTER_KEYS)}")
    spec = FILTER_KEYS[key]
    where = f"filters.{key}"
    if isinstance(value, bool):
        return Condition(key, "present" if value else "absent")
    if isinstance(value, (list, tuple)):
        return _range(spec, list(value)) if spec.kind.ordered else _membership(spec, list(value))
    if value is None or isinstance(value, Mapping):
        raise UsageError(f"{where}: expected true/false, {spec.kind.expected} or a list, got {value!r}")
    return Condition(key, "equals", (_scalar(spec, value, where),))


def _scalar(spec: FilterKey, value: object, where: str) -> Any:
    converted = spec.kind.scalar(value)
    if converted is NOT_CONVERTED:
        raise UsageError(f"{where}: expected {spec.kind.expected}, got {value!r} ({type(value).__name__})")
    return converted


def _membership(spec: FilterKey, values: list[object]) -> Condition:
    if not values:
        raise UsageError(f"filters.{spec.name}: an empty list matches nothing; remove the key or name values")
    converted = [_scalar(spec, v, f"filters.{spec.name}[{i}]") for i, v in enumerate(values)]
    return Condition(spec.name, "in", tuple(dict.fromkeys(converted)))


def _range(spec: FilterKey, values: list[object]) -> Condition:
    where = f"filters.{spec.name}"
    if len(values) != 2 or all(v is None for v in values):
        raise UsageError(f"{where}: a list is an inclusive [from, to] range (null for an open end), got {values!r}")
    low, high = (None if v is None else _scalar(spec, v, f"{where}[{i}]") for i, v in enumerate(values))
    if low is not None and high is not None and low > high and not spec.cyclic:
        raise UsageError(f"{where}: from {low} is after to {high}")
    return Condition(spec.name, "between", (low, high))


def condition_sql(condition: Condition) -> tuple[str, list[object]]:
    """SQL (true when a row passes) and its parameters."""
    spec = FILTER_KEYS[condition.key]
    column = f'"{spec.column}"'
    if condition.op != "between":
        params = {"in": [list(condition.values)], "equals": list(condition.values)}.get(condition.op, [])
        return spec.kind.sql[condition.op].format(c=column), params
    low, high = condition.values
    if low is None:
        return f"{column} <= ?", [high]
    if high is None:
        return f"{column} >= ?", [low]
    if low > high:  # a cyclic range that wraps
        return f"({column} >= ? OR {column} <= ?)", [low, high]
    return f"{column} BETWEEN ? AND ?", [low, high]



__all__ = [
    "DATE",
    "FILTER_KEYS",
    "NAMES",
    "NOT_CONVERTED",
    "NUMBER",
    "TEXT",
    "Condition",
    "FilterKey",
    "ValueKind",
    "condition_sql",
    "filter_key",
    "parse_condition",
    "to_date",
]
