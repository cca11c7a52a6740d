"""The iNaturalist open-data export format: its four files, their headers and types, and its URLs.

**The format** (``inaturalist/inaturalist-open-data``, ``Metadata/structure.sql`` and its README): four
files, ``photos.csv``, ``observations.csv``, ``taxa.csv`` and ``observers.csv`` (gzipped as
``*.csv.gz`` in the bucket), TAB-separated, one header line, **no quoting**: a field may hold ``'`` or
``"`` and means it literally. ``taxa.ancestry`` is the taxon's ancestors' ids, root first, joined by
``/`` (the README says ``\\``; the files use ``/``), empty for the root. ``observations`` has gained
``anomaly_score``: a 2022 export has 8 columns, a current one 9; both headers are :data:`HEADERS`.
A photo attached to several observations appears once per observation in ``photos.csv``, with the
same ``photo_id``. Photos are served at ``https://inaturalist-open-data.s3.amazonaws.com/photos/
<photo_id>/<size>.<extension>``, the extension kept as written (``jpg``, ``jpeg``, ``JPG``, ...).
``observers.name`` is optional, and old exports write the literal ``None`` for a missing one; the
attribution then names the login (:func:`attribution_name`).

Only the format lives here: what the builders (:mod:`cladebench.benchmarks.coobserved.builder`) read and
check against. A generator of exports in this format, with planted photos of known outcome, is
:mod:`cladebench.synthetic.inat_export` (a higher layer, for tests, benchmarks and the demo).

Example:
    >>> photo_url(35927, "JPG")
    'https://inaturalist-open-data.s3.amazonaws.com/photos/35927/medium.JPG'
    >>> attribution_name("tueda", "None"), attribution_name("kueda", "Ken-ichi Ueda")
    ('tueda', 'Ken-ichi Ueda')
"""

from __future__ import annotations

import gzip
from pathlib import Path

from cladebench.errors import CladebenchError, SchemaError, undecodable_at
from cladebench.taxonomy import RANK_COLUMNS

# --- the format ----------------------------------------------------------------------------------

TABLES: tuple[str, ...] = ("photos", "observations", "taxa", "observers")
"""The four files of an export, by table name (the file is ``<table>.csv`` or ``<table>.csv.gz``)."""

OBSERVATIONS_2022: tuple[str, ...] = (
    "observation_uuid", "observer_id", "latitude", "longitude", "positional_accuracy", "taxon_id",
    "quality_grade", "observed_on",
)
HEADERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "photos": (("photo_uuid", "photo_id", "observation_uuid", "observer_id", "extension", "license", "width",
                "height", "position"),),
    "observations": ((*OBSERVATIONS_2022, "anomaly_score"), OBSERVATIONS_2022),
    "taxa": (("taxon_id", "ancestry", "rank_level", "rank", "name", "active"),),
    "observers": (("observer_id", "login", "name"),),
}
"""Accepted header lines per table, the current one first (column order as in ``structure.sql``)."""

SQL_TYPES: dict[str, str] = {
    "observation_uuid": "UUID", "photo_uuid": "UUID", "observer_id": "BIGINT", "photo_id": "BIGINT",
    "taxon_id": "BIGINT", "latitude": "DOUBLE", "longitude": "DOUBLE", "positional_accuracy": "BIGINT",
    "observed_on": "DATE", "anomaly_score": "DOUBLE", "width": "INTEGER", "height": "INTEGER",
    "position": "INTEGER", "rank_level": "DOUBLE", "active": "BOOLEAN",
}
"""DuckDB type each typed column must parse as (``structure.sql``'s types; ids widened to 64 bits, since
iNat's photo ids are past 400 million and growing). Columns not listed are text."""

REQUIRED: dict[str, tuple[str, ...]] = {
    "photos": ("photo_uuid", "photo_id", "observation_uuid", "observer_id", "extension", "license"),
    "observations": ("observation_uuid", "observer_id", "quality_grade"),
    "taxa": ("taxon_id", "rank", "name", "active"),
    "observers": ("observer_id", "login"),
}
"""Columns a row is unusable without: ``structure.sql``'s NOT NULL ones and what a photo's URL, license
and attribution need. An observation without ``taxon_id`` is a valid row of an unidentified organism."""

RANK_LEVELS: dict[str, float] = {
    "stateofmatter": 100, "kingdom": 70, "subkingdom": 67, "phylum": 60, "subphylum": 57, "superclass": 53,
    "class": 50, "subclass": 47, "infraclass": 45, "subterclass": 44, "superorder": 43, "order": 40,
    "suborder": 37, "infraorder": 35, "parvorder": 34.5, "zoosection": 34, "zoosubsection": 33.5,
    "superfamily": 33, "epifamily": 32, "family": 30, "subfamily": 27, "supertribe": 26, "tribe": 25,
    "subtribe": 24, "genus": 20, "genushybrid": 20, "subgenus": 15, "section": 13, "subsection": 12,
    "complex": 11, "species": 10, "hybrid": 10, "subspecies": 5, "variety": 5, "form": 5, "infrahybrid": 5,
}
"""iNaturalist's ``rank_level`` of each rank name."""

PHOTO_BASE_URL = "https://inaturalist-open-data.s3.amazonaws.com/photos"
PHOTO_SIZES: tuple[str, ...] = ("original", "large", "medium", "small", "thumb", "square")
"""Sizes the bucket serves: longest side 2048, 1024, 500, 240, 100 and a 75 px square."""
LIFE_TAXON_ID = 48460
KINGDOM_IDS: dict[str, int] = {"Animalia": 1, "Plantae": 47126, "Fungi": 47170, "Chromista": 48222,
                               "Protozoa": 47686}
"""iNaturalist's taxon ids of the kingdoms (and :data:`LIFE_TAXON_ID` of the root, "Life")."""


def photo_url(photo_id: int, extension: str, size: str = "medium") -> str:
    """The open-data URL of a photo at one size; the extension is kept exactly as the export writes it."""
    if size not in PHOTO_SIZES:
        raise CladebenchError(f"unknown photo size {size!r}; known: {', '.join(PHOTO_SIZES)}")
    return f"{PHOTO_BASE_URL}/{int(photo_id)}/{size}.{extension}"


def photo_page_url(photo_id: int) -> str:
    return f"https://www.inaturalist.org/photos/{int(photo_id)}"


def observation_url(observation_uuid: str) -> str:
    return f"https://www.inaturalist.org/observations/{observation_uuid}"


def taxon_url(taxon_id: int) -> str:
    return f"https://www.inaturalist.org/taxa/{int(taxon_id)}"


def attribution_name(login: str | None, name: str | None) -> str | None:
    """Whom an attribution names: the observer's name, or the login when the name is empty or ``None``
    (the literal string older exports write for a missing name)."""
    cleaned = (name or "").strip()
    if cleaned and cleaned != "None":
        return cleaned
    login = (login or "").strip()
    return login or None


def _candidates(export_dir: str | Path, table: str) -> list[Path]:
    if table not in HEADERS:
        raise CladebenchError(f"unknown export table {table!r}; known: {', '.join(TABLES)}")
    return [p for p in (Path(export_dir) / f"{table}.csv", Path(export_dir) / f"{table}.csv.gz")
            if p.exists() or p.is_symlink()]


def export_file(export_dir: str | Path, table: str) -> Path:
    """The file of ``table`` in an export folder: ``<table>.csv`` or ``<table>.csv.gz``. Both at once are
    refused: which is the export (a stale one beside a full one?) is not the tool's to guess. A folder, a FIFO
    or a dangling link under either name is refused as what it is, not reported missing.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name in ("photos.csv", "photos.csv.gz"):
        ...     _ = (folder / name).write_bytes(b"")
        >>> try:
        ...     export_file(folder, "photos")
        ... except CladebenchError as error:
        ...     print(str(error).split(": ", 1)[1])
        both photos.csv and photos.csv.gz; keep the one that is the export
    """
    found = _candidates(export_dir, table)
    if not found:
        raise CladebenchError(f"{export_dir}: no {table}.csv or {table}.csv.gz (an iNat open-data export has "
                              f"{', '.join(t + '.csv' for t in TABLES)})")
    if len(found) > 1:
        raise CladebenchError(f"{export_dir}: both {found[0].name} and {found[1].name}; keep the one that is the "
                              "export")
    path = found[0]
    if not path.is_file():
        what = ("a folder" if path.is_dir() else "a link to nothing" if not path.exists()
                else "not a regular file (a pipe or a device)")
        raise CladebenchError(f"{path}: {what}; the export's {table} table must be a file")
    return path


def read_header(path: str | Path, table: str) -> tuple[str, ...]:
    """The header of an export file, checked against :data:`HEADERS`; anything else is a SchemaError."""
    path = Path(path)
    try:
        # Only the first line is decoded: bytes that are not UTF-8 further on are the reader's to count, row by row.
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as handle:
            line = handle.readline(1 << 16).decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as error:
        raise SchemaError(f"{path}: not an iNat open-data {table} file: its header is not UTF-8 text "
                          f"({undecodable_at(error)})") from None
    except (OSError, EOFError) as error:  # unreadable, a gzip that is not one or ends early
        raise CladebenchError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None
    header = tuple(line.split("\t"))
    if header not in HEADERS[table]:
        expected = " or ".join("\\t".join(h) for h in HEADERS[table])
        shown = line if len(line) <= 300 else line[:300] + "..."
        raise SchemaError(f"{path}: not an iNat open-data {table} file: header is {shown!r}, expected {expected}")
    return header


DIVERGENCE_RANKS: tuple[str, ...] = RANK_COLUMNS[:-1]
"""Ranks at which a usable pair can part: kingdom .. genus (a pair parting at species shares its genus,
and its lineage down to the divergence rank would give the answer away)."""


__all__ = [
    "DIVERGENCE_RANKS",
    "HEADERS",
    "KINGDOM_IDS",
    "LIFE_TAXON_ID",
    "OBSERVATIONS_2022",
    "PHOTO_SIZES",
    "RANK_LEVELS",
    "REQUIRED",
    "SQL_TYPES",
    "TABLES",
    "attribution_name",
    "export_file",
    "observation_url",
    "photo_page_url",
    "photo_url",
    "read_header",
    "taxon_url",
]
