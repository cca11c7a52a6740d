"""A table's columns mapped onto the fields of a record, by the usual spellings or as the user names them.

Spellings are compared without case and without anything but letters and digits (``decimalLatitude``,
``decimal_latitude`` and ``dwc:decimalLatitude`` are one spelling). The Darwin Core terms are among them
(``scientificName``, ``vernacularName``, ``decimalLatitude``, ``decimalLongitude``, ``eventDate``, ``license``,
``rightsHolder``, ``creator``, ``occurrenceID``, ``identifier``, ``accessURI``), so a GBIF table maps by itself.
``--column FIELD=COLUMN`` names a column for a field; a named column missing from the table is an error, not a
fallback to another spelling.

Cells are read leniently where a researcher's table is often rough, and every value left out is counted: a
coordinate outside its range or a date that is not one becomes null and the record notes it
(:attr:`MappedValues.dropped`), which the card lists.

Example:
    >>> mapping = map_columns(["Image URL", "scientificName", "decimalLatitude", "decimalLongitude", "rightsHolder"])
    >>> mapping["image"], mapping["label"], mapping["attribution"]
    ('Image URL', 'scientificName', 'rightsHolder')
    >>> parse_date("2019-05-03T10:12:00Z"), parse_date("2019-05-03/2019-05-04"), parse_date("May 2019")
    (datetime.date(2019, 5, 3), datetime.date(2019, 5, 3), None)
    >>> license_columns("http://creativecommons.org/licenses/by-nc/4.0/")
    ('cc-by-nc', 'https://creativecommons.org/licenses/by-nc/4.0/')
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cladebench.errors import SchemaError, UsageError
from cladebench.taxonomy import RANK_COLUMNS

SPELLINGS: dict[str, tuple[str, ...]] = {
    "image": ("image", "imagepath", "path", "file", "filename", "filepath", "img", "imageurl", "url", "identifier",
              "accessuri", "associatedmedia", "photourl", "photo", "mediaurl", "imagefile", "photopath"),
    "label": ("scientificname", "taxonname", "taxon", "label", "name", "speciesname", "verbatimscientificname"),
    "kingdom": ("kingdom",), "phylum": ("phylum",), "class": ("class", "cls", "classis"), "order": ("order",),
    "family": ("family",), "genus": ("genus",), "species": ("species", "specificepithet", "binomial"),
    "common_name": ("vernacularname", "commonname", "common", "vernacular"),
    "latitude": ("decimallatitude", "latitude", "lat"),
    "longitude": ("decimallongitude", "longitude", "lon", "lng", "long"),
    "observed_on": ("eventdate", "observedon", "date", "observationdate", "dateobserved", "datetime"),
    "license": ("license", "licence", "licensename", "dctermslicense", "rights"),
    "attribution": ("attribution", "rightsholder", "dctermsrightsholder", "creator", "dctermscreator", "author",
                    "photographer"),
    "group": ("observationid", "occurrenceid", "gbifid", "sequenceid", "seqid", "sequence", "eventid", "siteid",
              "site", "locationid"),
    "source_url": ("references", "sourceurl", "observationurl", "occurrenceurl"),
}
"""Field -> spellings of its column, best first; the first spelling a header has wins."""
FIELDS = tuple(SPELLINGS)
"""The fields a table's columns map onto (``--column FIELD=COLUMN``)."""
RANK_FIELDS = tuple(RANK_COLUMNS)
"""The rank fields, kingdom first."""


def spelling(name: str) -> str:
    """A column name as spellings are compared: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """``FIELD=COLUMN`` options as a dict; an unknown field or a pair without ``=`` is a usage error."""
    out = {}
    for pair in pairs:
        name, sep, column = pair.partition("=")
        if not sep or not column.strip():
            raise UsageError(f"--column takes FIELD=COLUMN, got {pair!r}")
        if name.strip() not in SPELLINGS:
            raise UsageError(f"--column: unknown field {name.strip()!r}; fields: {', '.join(FIELDS)}")
        out[name.strip()] = column.strip()
    return out


def map_columns(header: Sequence[str], overrides: Mapping[str, str] | None = None, *, where: str = "the table"
                ) -> dict[str, str]:
    """Field -> column of ``header``: the columns the user named, then the usual spellings. Two columns of one
    name, or of one spelling a field would be read from (``Species`` and ``species``), are a
    :class:`~cladebench.errors.SchemaError` naming them: either could be the one meant."""
    repeated = sorted({column for column in header if list(header).count(column) > 1})
    if repeated:
        raise SchemaError(f"{where}: two columns are named {repeated[0]!r}; rename one (which one holds the "
                          f"values cannot be told)")
    by_spelling: dict[str, str] = {}
    named = set((overrides or {}).values())
    for column in header:
        first = by_spelling.setdefault(spelling(column), column)
        if first != column and first not in named and column not in named and \
                any(spelling(column) in spellings for spellings in SPELLINGS.values()):
            field_name = next(f for f, spellings in SPELLINGS.items() if spelling(column) in spellings)
            raise SchemaError(f"{where}: columns {first!r} and {column!r} are one spelling; name the one to read "
                              f"with --column {field_name}=COLUMN")
    mapping = {}
    taken = set()
    for name, column in (overrides or {}).items():
        if column not in header:
            raise SchemaError(f"{where}: --column {name}={column}: no such column; the columns are {list(header)}")
        mapping[name] = column
        taken.add(column)
    for name, spellings in SPELLINGS.items():
        if name in mapping:
            continue
        found = next((by_spelling[s] for s in spellings if s in by_spelling and by_spelling[s] not in taken), None)
        if found is not None:
            mapping[name] = found
            taken.add(found)
    return mapping


# --- cells ---------------------------------------------------------------------------------------


def text(value: object) -> str | None:
    """A cell as stripped text; null, empty and NaN are None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    out = str(value).strip()
    return out or None


def parse_date(value: object) -> datetime.date | None:
    """A date from a date, a datetime or ISO 8601 text (time and zone ignored; an interval's start); else None."""
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    raw = text(value)
    if raw is None:
        return None
    try:
        return datetime.date.fromisoformat(raw.split("/")[0][:10])
    except ValueError:
        return None


def parse_number(value: object) -> float | None:
    """A finite float from a number or its text; anything else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if isinstance(value, (int, float)) else float(text(value) or "nan")
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def license_columns(value: object) -> tuple[str | None, str | None]:
    """(``license_name``, ``license_link``): a Creative Commons license by its code and the link to its text, when
    recognised (names, codes and creativecommons.org URLs); otherwise the text as written, and itself as the link
    when it is a URL."""
    from cladebench.curate.sources.values import parse_license

    raw = text(value)
    if raw is None:
        return None, None
    known = parse_license(raw)
    if known is not None:
        return known.code, known.link
    return raw, raw if raw.startswith(("http://", "https://")) else None


@dataclass
class MappedValues:
    """A record's canonical values from its cells, and what was left out of them."""

    values: dict[str, object] = field(default_factory=dict)
    """Canonical column -> value."""
    ranks: dict[str, str] = field(default_factory=dict)
    """Rank column -> name, as the source gives them."""
    label: str | None = None
    """The name to resolve: the label field, else the deepest rank given (the binomial from genus and species)."""
    dropped: list[str] = field(default_factory=list)
    """Fields whose value was there but unreadable (``latitude``, ``observed_on``), set to null."""


def mapped_values(cells: Mapping[str, object], mapping: Mapping[str, str]) -> MappedValues:
    """The canonical values of one row of cells, by ``mapping`` (from :func:`map_columns`)."""
    from cladebench.taxonomy import Lineage

    out = MappedValues()
    get = {name: cells.get(column) for name, column in mapping.items()}
    for rank in RANK_FIELDS:
        if (name := text(get.get(rank))) is not None:
            out.ranks[rank] = name
    label = text(get.get("label"))
    if label is None and out.ranks:
        label = Lineage.from_names(*(out.ranks.get(r) for r in RANK_FIELDS)).scientific_name
    out.label = label
    out.values["common_name"] = text(get.get("common_name"))
    latitude, longitude = parse_number(get.get("latitude")), parse_number(get.get("longitude"))
    for name, number, bound in (("latitude", latitude, 90.0), ("longitude", longitude, 180.0)):
        if text(get.get(name)) is not None and (number is None or not -bound <= number <= bound):
            out.dropped.append(name)
    if out.dropped or latitude is None or longitude is None:
        if (latitude is None) != (longitude is None) and not out.dropped:
            out.dropped.append("latitude" if latitude is None else "longitude")
        latitude = longitude = None
    out.values["latitude"], out.values["longitude"] = latitude, longitude
    observed = parse_date(get.get("observed_on"))
    if observed is None and text(get.get("observed_on")) is not None:
        out.dropped.append("observed_on")
    out.values["observed_on"] = observed
    out.values["license_name"], out.values["license_link"] = license_columns(get.get("license"))
    out.values["attribution"] = text(get.get("attribution"))
    out.values["source_id"] = text(get.get("group"))
    out.values["source_url"] = text(get.get("source_url"))
    return out


__all__ = ["FIELDS", "SPELLINGS", "MappedValues", "license_columns", "map_columns", "mapped_values", "parse_date",
           "parse_number", "parse_overrides", "spelling", "text"]
