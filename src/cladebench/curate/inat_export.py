"""The iNaturalist open-data export: its four files, and a generator of exports of any size with known answers.

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

**The generator** (:func:`write_export`) writes such an export with a real-looking taxonomy (the seven
ranks with iNaturalist's intermediate ranks between them, subspecies, inactive taxa, iNat's real ids
for Life and the kingdoms) and streams the background photos and observations to disk
``chunk_rows`` observations at a time, so ten million photo rows take bounded memory. Into it it
plants photos with a known answer for :mod:`cladebench.curate.builders.coobserved`:

- eligible co-observed photos: one photo on two research-grade observations of different species by
  the same observer, cycled over the divergence ranks kingdom .. genus, with licenses in mixed case,
  ``JPG`` extensions, observers named ``None``, subspecies observations, two photos on one
  observation pair, and a duplicated photo row;
- one group of photos per way a candidate can fail (:data:`PHOTO_DEFECTS`), each failing only that
  check, and rows that are bad on their own (:data:`ROW_DEFECTS`): a line with too many fields,
  taxa without a name, a duplicated taxon.

The returned :class:`ExportManifest` says what was planted and the counts the builder must report.

Example:
    >>> photo_url(35927, "JPG")
    'https://inaturalist-open-data.s3.amazonaws.com/photos/35927/medium.JPG'
    >>> attribution_name("tueda", "None"), attribution_name("kueda", "Ken-ichi Ueda")
    ('tueda', 'Ken-ichi Ueda')
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

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
    return [p for p in (Path(export_dir) / f"{table}.csv", Path(export_dir) / f"{table}.csv.gz") if p.is_file()]


def export_file(export_dir: str | Path, table: str) -> Path:
    """The file of ``table`` in an export folder: ``<table>.csv``, else ``<table>.csv.gz``. With both, always
    the uncompressed one (:func:`unread_export_file` names the other, so a reader can say which it read)."""
    found = _candidates(export_dir, table)
    if found:
        return found[0]
    raise CladebenchError(f"{export_dir}: no {table}.csv or {table}.csv.gz (an iNat open-data export has "
                          f"{', '.join(t + '.csv' for t in TABLES)})")


def unread_export_file(export_dir: str | Path, table: str) -> Path | None:
    """The ``<table>.csv.gz`` that :func:`export_file` passes over because ``<table>.csv`` is there too, else None.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name in ("photos.csv", "photos.csv.gz"):
        ...     _ = (folder / name).write_bytes(b"")
        >>> export_file(folder, "photos").name, unread_export_file(folder, "photos").name
        ('photos.csv', 'photos.csv.gz')
    """
    found = _candidates(export_dir, table)
    return found[1] if len(found) == 2 else None


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


# --- the generator's config and manifest ---------------------------------------------------------

DIVERGENCE_RANKS: tuple[str, ...] = RANK_COLUMNS[:-1]
"""Ranks at which a usable pair can part: kingdom .. genus (a pair parting at species shares its genus,
and its lineage down to the divergence rank would give the answer away)."""

PHOTO_DEFECTS: tuple[str, ...] = (
    "invalid_photo_row", "more_than_two_observations", "inconsistent_photo_rows", "unknown_observation",
    "invalid_observation_row", "ambiguous_observation", "observer_mismatch", "not_research_grade",
    "unknown_taxon", "malformed_ancestry", "inactive_taxon", "ancestry_mismatch", "incomplete_lineage",
    "kingdom_not_included", "same_species", "same_genus", "license_not_allowed", "unknown_observer",
)
"""Ways a photo on two or more observations can be unusable, in the order the builder checks them; the
generator plants photos that fail each one (and only it)."""

ROW_DEFECTS: tuple[tuple[str, str], ...] = (
    ("photos", "malformed_line"), ("taxa", "missing_fields"), ("taxa", "duplicate_taxon_id"),
)
"""Rows bad on their own, planted apart from any photo: (table, reason)."""


@dataclass(frozen=True)
class ExportConfig:
    """What :func:`write_export` writes."""

    n_photos: int = 20_000
    """Rows of ``photos.csv`` in all; the background fills what the planted photos leave."""
    seed: int = 0
    """Seed of everything written; the same config writes byte-identical files."""
    anomaly_score: bool = True
    """Write the current 9-column observations (with ``anomaly_score``); False writes the 2022 8-column file."""
    n_coobserved: int = 60
    """Eligible co-observed photos to plant."""
    n_defects: int = 2
    """Photos planted per kind of :data:`PHOTO_DEFECTS`, and rows per kind of :data:`ROW_DEFECTS` (variants
    of a kind alternate, e.g. an empty field and a truncated line)."""
    n_observers: int = 400
    """Observers of the background observations."""
    chunk_rows: int = 100_000
    """Background observations generated and written at a time: the memory bound."""
    compress: bool = False
    """Write ``<table>.csv.gz``, as the bucket serves the files."""

    def __post_init__(self) -> None:
        if self.n_defects < 1 or self.n_coobserved < 1:
            raise CladebenchError("n_coobserved and n_defects must be at least 1")
        if self.chunk_rows < 1 or self.n_observers < 8:
            raise CladebenchError("chunk_rows must be positive and n_observers at least 8")


@dataclass(frozen=True)
class PlantedPhoto:
    """An eligible co-observed photo and what a correct build says about it."""

    photo_id: int
    divergence_rank: str
    """Rank at which the two species' lineages part (kingdom .. genus)."""
    species_ids: tuple[int, int]
    """Species-rank taxon ids of the two organisms (a subspecies observation counts as its species)."""
    observation_uuids: tuple[str, str]
    observer_id: int
    license: str
    """As written in ``photos.csv`` (case varies)."""
    extension: str
    image_url: str
    """Medium-size URL, extension as written."""
    attribution: str
    """As iNaturalist formats it, naming the observer (or the login when the name is ``None``)."""
    scientific_names: tuple[str, str]
    """The two species' binomials."""
    n_photos_sharing_observation_pair: int


@dataclass(frozen=True)
class ExportManifest:
    """What :func:`write_export` wrote and planted: the right answers for a builder's tests."""

    export_dir: Path
    config: ExportConfig
    files: dict[str, Path]
    rows: dict[str, int]
    """Data lines (header excluded) per table."""
    eligible: tuple[PlantedPhoto, ...]
    """The eligible co-observed photos, in photo-id order."""
    planted: dict[str, tuple[int, ...]]
    """Photo ids planted per :data:`PHOTO_DEFECTS` kind."""
    photo_outcomes: dict[str, int]
    """Expected count of distinct photo ids per outcome (every kind of :data:`PHOTO_DEFECTS`, plus
    ``single_observation`` for photos on one observation); the eligible ones are not in it."""
    row_issues: dict[str, dict[str, int]]
    """Expected bad rows per table and reason."""
    observers_without_name: int
    """Rows of ``observers.csv`` whose name is empty or ``None``."""

    @property
    def n_photo_ids(self) -> int:
        """Distinct photo ids a reader can parse (a rejected line's id is not one)."""
        return sum(self.photo_outcomes.values()) + len(self.eligible)

    def as_dict(self) -> dict[str, Any]:
        return {
            "export_dir": str(self.export_dir), "config": dataclasses.asdict(self.config),
            "files": {k: str(v) for k, v in self.files.items()}, "rows": self.rows,
            "eligible": [dataclasses.asdict(p) for p in self.eligible],
            "planted": {k: list(v) for k, v in self.planted.items()}, "photo_outcomes": self.photo_outcomes,
            "row_issues": self.row_issues, "observers_without_name": self.observers_without_name,
        }


# --- the taxonomy --------------------------------------------------------------------------------

_SYLLABLES = ("ba", "co", "di", "fu", "ga", "he", "ki", "lo", "mu", "na", "pe", "ri", "sa", "tu", "vo", "xe",
              "za", "bri", "cla", "dro", "fle", "gri", "plo", "stu", "tha", "vex", "mor", "quin", "zel", "ost")
_ENDINGS: dict[str, tuple[str, ...]] = {
    "phylum": ("phyta", "mycota", "poda", "zoa"), "subphylum": ("ina",), "class": ("opsida", "ia", "ea"),
    "subclass": ("idae",), "order": ("ales", "ptera", "formes"), "suborder": ("ineae",),
    "superfamily": ("oidea",), "family": ("aceae", "idae"), "subfamily": ("oideae", "inae"), "tribe": ("eae", "ini"),
    "genus": ("us", "a", "ium", "is"), "species": ("ensis", "ii", "ata", "icus", "ella"),
    "subspecies": ("inus", "oides"),
}
# Intermediate ranks inserted below a rank, with their probability: iNat lineages are not seven steps.
_INTERMEDIATE: dict[str, tuple[tuple[str, float], ...]] = {
    "phylum": (("subphylum", 0.4),), "class": (("subclass", 0.3),), "order": (("suborder", 0.3),
                                                                              ("superfamily", 0.4)),
    "family": (("subfamily", 0.6), ("tribe", 0.4)),
}
_BRANCHING = {"phylum": 2, "class": 3, "order": 2, "family": 2, "genus": 2, "species": 3}
_INCLUDED_KINGDOMS = ("Animalia", "Plantae", "Fungi")
_EXCLUDED_KINGDOMS = ("Chromista", "Protozoa")


@dataclass
class _Taxon:
    taxon_id: int
    ancestry: tuple[int, ...]
    rank: str
    name: str
    active: bool = True
    ancestry_text: str | None = None
    """Written instead of ``ancestry`` when set (a malformed or stale ancestry)."""

    def line(self) -> str:
        ancestry = self.ancestry_text if self.ancestry_text is not None else "/".join(map(str, self.ancestry))
        level = RANK_LEVELS[self.rank]
        level_text = str(int(level)) if float(level).is_integer() else str(level)
        return "\t".join((str(self.taxon_id), ancestry, level_text, self.rank, self.name,
                          "true" if self.active else "false"))


@dataclass(frozen=True)
class _Species:
    """A species with a clean, complete lineage: what observations of usable pairs are on."""

    taxon_id: int
    ranks: tuple[int, ...]
    """Taxon ids at kingdom .. species."""
    names: tuple[str, ...]
    binomial: str
    subspecies: tuple[int, ...]


class _Names:
    """Made-up, distinct, pronounceable taxon names, seeded."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, rank: str) -> str:
        for _ in range(1000):
            n = int(self.rng.integers(2, 4))
            stem = "".join(self.rng.choice(_SYLLABLES, size=n))
            name = stem + str(self.rng.choice(_ENDINGS.get(rank, ("us",))))
            if rank not in ("species", "subspecies"):
                name = name.capitalize()  # epithets are lower case, every other name capitalised
            if name not in self.used:
                self.used.add(name)
                return name
        raise AssertionError("ran out of names")


class _Tree:
    """The taxonomy written to ``taxa.csv``: clean species, and the odd taxa the defects need."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.names = _Names(rng)
        self.taxa: list[_Taxon] = []
        self.by_id: dict[int, _Taxon] = {}
        self.next_id = 100_000
        self.species: list[_Species] = []
        self.excluded_species: list[_Species] = []
        self.genera: list[_Taxon] = []
        self._add(_Taxon(LIFE_TAXON_ID, (), "stateofmatter", "Life"))
        for kingdom in (*_INCLUDED_KINGDOMS, *_EXCLUDED_KINGDOMS):
            node = self._add(_Taxon(KINGDOM_IDS[kingdom], (LIFE_TAXON_ID,), "kingdom", kingdom))
            small = kingdom in _EXCLUDED_KINGDOMS
            self._grow(node, (LIFE_TAXON_ID, node.taxon_id), [kingdom], RANK_COLUMNS[1:], small)

    def _add(self, taxon: _Taxon) -> _Taxon:
        self.taxa.append(taxon)
        self.by_id[taxon.taxon_id] = taxon
        return taxon

    def new_id(self) -> int:
        self.next_id += int(self.rng.integers(1, 40))
        return self.next_id

    def _child(self, parent_chain: tuple[int, ...], rank: str, name: str) -> _Taxon:
        return self._add(_Taxon(self.new_id(), parent_chain, rank, name))

    def _grow(self, node: _Taxon, chain: tuple[int, ...], names: list[str], ranks: Sequence[str],
              small: bool) -> None:
        """Children of ``node`` down the remaining ranks, intermediate ranks in between."""
        rank, rest = ranks[0], ranks[1:]
        if rank == "species":
            genus = node.name
            for _ in range(1 if small else _BRANCHING["species"]):
                epithet = self.names.word("species")
                taxon = self._child(chain, "species", f"{genus} {epithet}")
                subspecies = []
                if not small and self.rng.random() < 0.25:
                    sub = self._child((*chain, taxon.taxon_id), "subspecies",
                                      f"{genus} {epithet} {self.names.word('subspecies')}")
                    subspecies.append(sub.taxon_id)
                ids = (*[t for t in chain if self.by_id[t].rank in RANK_COLUMNS], taxon.taxon_id)
                species = _Species(taxon.taxon_id, ids, (*names, epithet), taxon.name, tuple(subspecies))
                (self.excluded_species if small else self.species).append(species)
            return
        for _ in range(1 if small else _BRANCHING[rank]):
            child = self._child(chain, rank, self.names.word(rank))
            child_chain = (*chain, child.taxon_id)
            for between, p in _INTERMEDIATE.get(rank, ()):
                if not small and self.rng.random() < p:
                    inner = self._child(child_chain, between, self.names.word(between))
                    child_chain = (*child_chain, inner.taxon_id)
            if rank == "genus":
                self.genera.append(child)
            self._grow(child, child_chain, [*names, child.name], rest, small)

    def chain_of(self, taxon_id: int) -> tuple[int, ...]:
        taxon = self.by_id[taxon_id]
        return (*taxon.ancestry, taxon_id)

    # The odd taxa: each returns a taxon id an observation can be put on.

    def inactive_species(self, genus: _Taxon) -> int:
        taxon = self._child(self.chain_of(genus.taxon_id), "species", f"{genus.name} {self.names.word('species')}")
        taxon.active = False
        return taxon.taxon_id

    def malformed_species(self, genus: _Taxon, variant: int) -> int:
        chain = self.chain_of(genus.taxon_id)
        taxon = self._child(chain, "species", f"{genus.name} {self.names.word('species')}")
        parts = [str(t) for t in chain]
        if variant % 2 == 0:
            parts[2] = "x" + parts[2]  # a non-numeric id
        else:
            parts.insert(2, "")  # an empty step: "48460/1//..."
        taxon.ancestry_text = "/".join(parts)
        return taxon.taxon_id

    def stale_species(self, species: _Species, variant: int) -> int:
        """A species whose ancestry no longer matches its parents': the family swapped for another one
        (a taxon moved without its descendants' ancestry updated), or an ancestor that is not in taxa."""
        genus_chain = self.chain_of(species.ranks[5])
        taxon = self._child(genus_chain, "species", f"{species.binomial.split()[0]} {self.names.word('species')}")
        if variant % 2 == 0:
            family = species.ranks[4]
            other = next(t for t in self.taxa if t.rank == "family" and t.taxon_id != family
                         and t.ancestry[:3] == self.by_id[family].ancestry[:3])
            taxon.ancestry = tuple(other.taxon_id if t == family else t for t in genus_chain)
        else:
            taxon.ancestry = (*genus_chain[:3], 9_999_000 + variant, *genus_chain[3:])
        return taxon.taxon_id

    def familyless_species(self, species: _Species) -> int:
        """A species whose genus hangs directly under an order: a lineage without a family."""
        order_chain = self.chain_of(species.ranks[3])
        genus = self._child(order_chain, "genus", self.names.word("genus"))
        return self._child((*order_chain, genus.taxon_id), "species",
                           f"{genus.name} {self.names.word('species')}").taxon_id

    def broken_rows(self, n: int) -> list[str]:
        """Taxa lines with an empty name (unusable on their own)."""
        lines = []
        for _ in range(n):
            taxon = _Taxon(self.new_id(), (LIFE_TAXON_ID, 1), "species", "")
            lines.append(taxon.line())
        return lines


# --- observers -----------------------------------------------------------------------------------

_GIVEN = ("Ana", "Ben", "Chloé", "Dmitri", "Eun-ji", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kalani", "Lena")
_FAMILY = ("Okafor", "O'Brien", "Nguyen", "Müller", "Silva", "Kowalski", "Haddad", "Tanaka", "Moreau", "Dubois")


@dataclass(frozen=True)
class _Observer:
    observer_id: int
    login: str
    name: str
    """As written: a name, ``None`` or empty."""

    def line(self) -> str:
        return f"{self.observer_id}\t{self.login}\t{self.name}"


def _make_observers(rng: np.random.Generator, n: int) -> list[_Observer]:
    observers = []
    ids = np.sort(rng.choice(np.arange(1, 50 * n), size=n, replace=False))
    for i, observer_id in enumerate(ids.tolist()):
        login = f"naturalist{observer_id}"
        draw = rng.random()
        if draw < 0.2:
            name = "None"
        elif draw < 0.23:
            name = ""
        else:
            name = f"{_GIVEN[i % len(_GIVEN)]} {_FAMILY[int(rng.integers(len(_FAMILY)))]}"
            if i % 37 == 5:
                name = f'{name.split()[0]} "Birdy" {name.split()[1]}'
        observers.append(_Observer(observer_id, login, name))
    return observers


# --- rows ----------------------------------------------------------------------------------------


def _uuids(rng: np.random.Generator, n: int) -> list[str]:
    hexes = rng.bytes(16 * n).hex()
    return [f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"
            for h in (hexes[32 * i:32 * i + 32] for i in range(n))]


_LICENSES = ("CC-BY-NC", "CC-BY", "CC0", "CC-BY-SA", "CC-BY-NC-SA", "CC-BY-ND", "CC-BY-NC-ND")
_LICENSE_P = np.array([0.6, 0.12, 0.08, 0.04, 0.08, 0.03, 0.05])
_EXTENSIONS = ("jpg", "jpeg", "JPG", "png", "jpe")
_EXTENSION_P = np.array([0.86, 0.06, 0.04, 0.03, 0.01])
_GRADES = ("research", "needs_id", "casual")
_GRADE_P = np.array([0.68, 0.24, 0.08])
_ELIGIBLE_LICENSES = ("CC-BY-NC", "CC-BY", "CC0", "cc-by-nc", "CC-BY-NC", "Cc0")
_ELIGIBLE_EXTENSIONS = ("jpg", "jpeg", "JPG", "jpg", "png")


@dataclass
class _Observation:
    uuid: str
    observer_id: int | str
    taxon_id: int | str
    quality_grade: str = "research"
    observed_on: str = "2023-06-14"
    latitude: str = "44.5647340000"
    longitude: str = "-123.2620280000"
    accuracy: str = "12"

    def line(self, anomaly: bool) -> str:
        fields = [self.uuid, str(self.observer_id), self.latitude, self.longitude, self.accuracy,
                  str(self.taxon_id), self.quality_grade, self.observed_on]
        if anomaly:
            fields.append("0.9731")
        return "\t".join(fields)


def _photo_line(photo_uuid: str, photo_id: int, observation: str, observer_id: int | str, extension: str,
                license_: str, position: int) -> str:
    return f"{photo_uuid}\t{photo_id}\t{observation}\t{observer_id}\t{extension}\t{license_}\t1536\t2048\t{position}"


class _Planter:
    """Writes the planted photos' rows and keeps the manifest's tallies."""

    def __init__(self, rng: np.random.Generator, tree: _Tree, observers: list[_Observer], config: ExportConfig):
        self.rng, self.tree, self.config = rng, tree, config
        self.observers = observers
        self.by_observer = {o.observer_id: o for o in observers}
        self.photo_lines: list[str] = []
        self.observation_lines: list[str] = []
        self.extra_taxa_lines: list[str] = []
        self.extra_observer_lines: list[str] = []
        self.next_photo_id = 5_000_000
        self.eligible: list[PlantedPhoto] = []
        self.planted: dict[str, list[int]] = {kind: [] for kind in PHOTO_DEFECTS}
        self.row_issues: dict[str, Counter[str]] = {t: Counter() for t in TABLES}
        self.pool = observers[:6]  # prolific observers: the per-observer cap has something to cap
        self.common = tree.species[::9][:12]  # frequent species: the per-species cap too

    # ids and rows

    def photo_id(self) -> int:
        self.next_photo_id += int(self.rng.integers(1, 7))
        return self.next_photo_id

    def uuid(self) -> str:
        return _uuids(self.rng, 1)[0]

    def observation(self, observer_id: int | str, taxon_id: int | str, **changes: str) -> _Observation:
        observation = _Observation(self.uuid(), observer_id, taxon_id, **changes)
        self.observation_lines.append(observation.line(self.config.anomaly_score))
        return observation

    def photo(self, photo_id: int, observations: Sequence[_Observation | str], observer_id: int | str,
              license_: str = "CC-BY-NC", extension: str = "jpg") -> list[str]:
        photo_uuid = self.uuid()
        lines = [_photo_line(photo_uuid, photo_id, o if isinstance(o, str) else o.uuid, observer_id, extension,
                             license_, 0) for o in observations]
        self.photo_lines.extend(lines)
        return lines

    def pick_observer(self) -> _Observer:
        return self.observers[int(self.rng.integers(30, len(self.observers)))]

    # species choices

    def pick(self, pool: Sequence[_Species] | None = None) -> _Species:
        pool = pool or self.tree.species
        return pool[int(self.rng.integers(len(pool)))]

    def partner(self, species: _Species, rank: str) -> _Species:
        """A species whose lineage parts from ``species``'s exactly at ``rank``."""
        level = RANK_COLUMNS.index(rank)
        options = [s for s in self.tree.species
                   if s.ranks[:level] == species.ranks[:level] and s.ranks[level] != species.ranks[level]]
        return options[int(self.rng.integers(len(options)))]

    # the eligible photos

    def plant_eligible(self, n: int) -> None:
        i = 0
        while len(self.eligible) < n:
            rank = DIVERGENCE_RANKS[i % len(DIVERGENCE_RANKS)]
            first = self.pick(self.common if i % 2 == 0 else None)
            second = self.partner(first, rank)
            # Two photos in three come from a few prolific observers (so the per-observer cap has something to
            # cap, as on iNaturalist), the rest from anyone.
            observer = self.pool[i % len(self.pool)] if i % 3 else self.pick_observer()
            taxon_a = first.subspecies[0] if first.subspecies and i % 4 == 1 else first.taxon_id
            obs_a = self.observation(observer.observer_id, taxon_a)
            obs_b = self.observation(observer.observer_id, second.taxon_id)
            n_photos = 2 if i % 8 == 3 and len(self.eligible) + 2 <= n else 1
            for k in range(n_photos):
                photo_id = self.photo_id()
                license_ = _ELIGIBLE_LICENSES[(i + k) % len(_ELIGIBLE_LICENSES)]
                extension = _ELIGIBLE_EXTENSIONS[(i + k) % len(_ELIGIBLE_EXTENSIONS)]
                lines = self.photo(photo_id, (obs_a, obs_b), observer.observer_id, license_, extension)
                if i % 9 == 4:
                    self.photo_lines.append(lines[0])  # the same row twice: a duplicate, not a third observation
                    self.row_issues["photos"]["duplicate_row"] += 1
                self.eligible.append(self._expected(photo_id, rank, first, second, (obs_a, obs_b), observer,
                                                    license_, extension, n_photos))
            i += 1

    def _expected(self, photo_id: int, rank: str, first: _Species, second: _Species,
                  observations: tuple[_Observation, _Observation], observer: _Observer, license_: str,
                  extension: str, n_photos: int) -> PlantedPhoto:
        from cladebench.curate.sources.inquire import parse_license

        name = attribution_name(observer.login, observer.name)
        parsed = parse_license(license_)
        assert parsed is not None and name is not None
        return PlantedPhoto(
            photo_id=photo_id, divergence_rank=rank, species_ids=(first.taxon_id, second.taxon_id),
            observation_uuids=(observations[0].uuid, observations[1].uuid), observer_id=observer.observer_id,
            license=license_, extension=extension, image_url=photo_url(photo_id, extension),
            attribution=parsed.attribution(name), scientific_names=(first.binomial, second.binomial),
            n_photos_sharing_observation_pair=n_photos,
        )

    # the defects: each builds a photo that fails one check and passes every check before it

    def plant_defects(self) -> None:
        for kind in PHOTO_DEFECTS:
            plant = getattr(self, f"_plant_{kind}")
            for variant in range(self.config.n_defects):
                self.planted[kind].append(plant(variant))
        self._plant_row_defects()

    def _pair(self, variant: int, *, observer: _Observer | None = None, taxon_b: int | str | None = None,
              rank: str = "family", license_: str = "CC-BY-NC", **changes_b: str) -> tuple[int, list[str]]:
        """A two-observation photo, eligible unless the keyword arguments make it not."""
        observer = observer or self.observers[10 + variant]
        first = self.pick()
        second = self.partner(first, rank)
        obs_a = self.observation(observer.observer_id, first.taxon_id)
        obs_b = self.observation(observer.observer_id, second.taxon_id if taxon_b is None else taxon_b, **changes_b)
        photo_id = self.photo_id()
        return photo_id, self.photo(photo_id, (obs_a, obs_b), observer.observer_id, license_)

    def _plant_invalid_photo_row(self, variant: int) -> int:
        photo_id, lines = self._pair(variant)
        fields = lines[1].split("\t")
        if variant % 2 == 0:
            fields[5] = ""  # no license
        else:
            fields = fields[:4]  # a truncated line
        self.photo_lines[self.photo_lines.index(lines[1])] = "\t".join(fields)
        self.row_issues["photos"]["missing_fields"] += 1
        return photo_id

    def _plant_more_than_two_observations(self, variant: int) -> int:
        observer = self.observers[12 + variant]
        first = self.pick()
        species = (first, self.partner(first, "order"), self.partner(first, "family"))
        observations = [self.observation(observer.observer_id, s.taxon_id) for s in species]
        photo_id = self.photo_id()
        self.photo(photo_id, observations, observer.observer_id)
        return photo_id

    def _plant_inconsistent_photo_rows(self, variant: int) -> int:
        photo_id, lines = self._pair(variant)
        fields = lines[1].split("\t")
        fields[5] = "CC0"
        self.photo_lines[self.photo_lines.index(lines[1])] = "\t".join(fields)
        return photo_id

    def _plant_unknown_observation(self, variant: int) -> int:
        observer = self.observers[14 + variant]
        obs_a = self.observation(observer.observer_id, self.pick().taxon_id)
        photo_id = self.photo_id()
        self.photo(photo_id, (obs_a, self.uuid()), observer.observer_id)  # the second is in no observations row
        return photo_id

    def _plant_invalid_observation_row(self, variant: int) -> int:
        if variant % 2 == 0:
            self.row_issues["observations"]["missing_fields"] += 1
            return self._pair(variant, quality_grade="")[0]
        self.row_issues["observations"]["invalid_value"] += 1
        return self._pair(variant, observed_on="2023-02-30")[0]

    def _plant_ambiguous_observation(self, variant: int) -> int:
        photo_id, _ = self._pair(variant)
        self.observation_lines.append(self.observation_lines[-1])  # the second observation written twice
        return photo_id

    def _plant_observer_mismatch(self, variant: int) -> int:
        observer = self.observers[16 + variant]
        first = self.pick()
        obs_a = self.observation(observer.observer_id, first.taxon_id)
        obs_b = self.observation(self.observers[20 + variant].observer_id, self.partner(first, "class").taxon_id)
        photo_id = self.photo_id()
        self.photo(photo_id, (obs_a, obs_b), observer.observer_id)
        return photo_id

    def _plant_not_research_grade(self, variant: int) -> int:
        return self._pair(variant, quality_grade=("needs_id", "casual")[variant % 2])[0]

    def _plant_unknown_taxon(self, variant: int) -> int:
        return self._pair(variant, taxon_b=(8_888_000 + variant) if variant % 2 == 0 else "")[0]

    def _plant_malformed_ancestry(self, variant: int) -> int:
        genus = self.tree.genera[int(self.rng.integers(len(self.tree.genera)))]
        taxon = self.tree.malformed_species(genus, variant)
        self.row_issues["taxa"]["malformed_ancestry"] += 1
        return self._pair(variant, taxon_b=taxon)[0]

    def _plant_inactive_taxon(self, variant: int) -> int:
        genus = self.tree.genera[int(self.rng.integers(len(self.tree.genera)))]
        return self._pair(variant, taxon_b=self.tree.inactive_species(genus))[0]

    def _plant_ancestry_mismatch(self, variant: int) -> int:
        return self._pair(variant, taxon_b=self.tree.stale_species(self.pick(), variant))[0]

    def _plant_incomplete_lineage(self, variant: int) -> int:
        if variant % 2 == 0:
            return self._pair(variant, taxon_b=self.tree.familyless_species(self.pick()))[0]
        return self._pair(variant, taxon_b=self.pick().ranks[5])[0]  # identified to genus only

    def _plant_kingdom_not_included(self, variant: int) -> int:
        excluded = self.tree.excluded_species[variant % len(self.tree.excluded_species)]
        return self._pair(variant, taxon_b=excluded.taxon_id)[0]

    def _plant_same_species(self, variant: int) -> int:
        observer = self.observers[10 + variant]
        species = next(s for s in self.tree.species[variant:] if s.subspecies)
        obs_a = self.observation(observer.observer_id, species.taxon_id)
        obs_b = self.observation(observer.observer_id, species.subspecies[0] if variant % 2 else species.taxon_id)
        photo_id = self.photo_id()
        self.photo(photo_id, (obs_a, obs_b), observer.observer_id)
        return photo_id

    def _plant_same_genus(self, variant: int) -> int:
        return self._pair(variant, rank="species")[0]

    def _plant_license_not_allowed(self, variant: int) -> int:
        return self._pair(variant, license_=("CC-BY-SA", "CC-BY-NC-ND")[variant % 2])[0]

    def _plant_unknown_observer(self, variant: int) -> int:
        if variant % 2 == 0:
            ghost = _Observer(7_770_000 + variant, "ghost", "Nobody")  # in no observers row
        else:
            ghost = _Observer(7_780_000 + variant, "", "No Login")
            self.extra_observer_lines.append(ghost.line())
            self.row_issues["observers"]["missing_fields"] += 1
        return self._pair(variant, observer=ghost)[0]

    def _plant_row_defects(self) -> None:
        for _ in range(self.config.n_defects):
            photo_id = self.photo_id()
            line = _photo_line(self.uuid(), photo_id, self.uuid(), self.observers[0].observer_id, "jpg", "CC0", 0)
            self.photo_lines.append(line + "\textra")  # one field too many: the reader rejects the line
        self.row_issues["photos"]["malformed_line"] += self.config.n_defects
        self.extra_taxa_lines.extend(self.tree.broken_rows(self.config.n_defects))
        self.row_issues["taxa"]["missing_fields"] += self.config.n_defects
        # A taxon written twice; one no observation is on, so the duplicate changes nothing else.
        twice = self.tree.by_id[self.tree.inactive_species(self.tree.genera[0])]
        self.extra_taxa_lines.append(twice.line())
        self.row_issues["taxa"]["duplicate_taxon_id"] += 1


# --- background ----------------------------------------------------------------------------------


class _Background:
    """The bulk of an export: observations with one to four photos each, every photo on one observation."""

    def __init__(self, rng: np.random.Generator, tree: _Tree, observers: list[_Observer], config: ExportConfig):
        self.rng, self.config = rng, config
        taxa = [s.taxon_id for s in tree.species]
        taxa += [t for s in tree.species for t in s.subspecies] + [s.taxon_id for s in tree.excluded_species]
        taxa += [g.taxon_id for g in tree.genera[:20]]
        weights = 1.0 / np.arange(1, len(taxa) + 1) ** 0.8  # a long tail, as on iNaturalist
        self.taxa = np.array(taxa)[rng.permutation(len(taxa))]
        self.taxa_p = weights / weights.sum()
        self.observers = np.array([o.observer_id for o in observers])
        weights = 1.0 / np.arange(1, len(observers) + 1) ** 1.1
        self.observer_p = weights / weights.sum()
        self.next_photo_id = 10_000_000

    def chunks(self, n_photo_rows: int) -> Iterator[tuple[list[str], list[str]]]:
        """(observation lines, photo lines) of ``chunk_rows`` observations at a time, ``n_photo_rows`` photo
        rows in all."""
        left = n_photo_rows
        while left > 0:
            n = self.config.chunk_rows
            per_obs = self.rng.choice(4, size=n, p=[0.55, 0.25, 0.12, 0.08]) + 1
            cumulative = np.cumsum(per_obs)
            if cumulative[-1] >= left:
                last = int(np.searchsorted(cumulative, left))
                per_obs = per_obs[:last + 1]
                per_obs[-1] -= int(cumulative[last] - left)
                n = last + 1
            yield self._chunk(n, per_obs)
            left -= int(per_obs.sum())

    def _chunk(self, n: int, per_obs: np.ndarray) -> tuple[list[str], list[str]]:
        rng = self.rng
        uuids = _uuids(rng, n)
        observers = rng.choice(self.observers, size=n, p=self.observer_p).tolist()
        taxa = rng.choice(self.taxa, size=n, p=self.taxa_p).tolist()
        grades = rng.choice(len(_GRADES), size=n, p=_GRADE_P).tolist()
        latitude = rng.uniform(-60, 70, size=n).tolist()
        longitude = rng.uniform(-180, 180, size=n).tolist()
        accuracy = rng.integers(1, 5000, size=n).tolist()
        days = rng.integers(0, 3650, size=n)
        dates = (np.datetime64("2015-01-01") + days).astype(str).tolist()
        anomaly = rng.uniform(0, 3, size=n).tolist()
        observation_lines = []
        for i in range(n):
            grade = _GRADES[grades[i]]
            where = ("", "") if grade == "casual" and i % 3 == 0 else (f"{latitude[i]:.10f}", f"{longitude[i]:.10f}")
            line = (f"{uuids[i]}\t{observers[i]}\t{where[0]}\t{where[1]}\t{accuracy[i] if i % 4 else ''}\t"
                    f"{taxa[i]}\t{grade}\t{dates[i]}")
            observation_lines.append(line + (f"\t{anomaly[i]:.5f}" if self.config.anomaly_score else ""))
        total = int(per_obs.sum())
        owner = np.repeat(np.arange(n), per_obs)
        starts = np.cumsum(per_obs) - per_obs
        position = (np.arange(total) - np.repeat(starts, per_obs)).tolist()
        photo_uuids = _uuids(rng, total)
        gaps = rng.integers(1, 4, size=total)
        photo_ids = (self.next_photo_id + np.cumsum(gaps)).tolist()
        self.next_photo_id = photo_ids[-1] if photo_ids else self.next_photo_id
        licenses = rng.choice(len(_LICENSES), size=total, p=_LICENSE_P).tolist()
        extensions = rng.choice(len(_EXTENSIONS), size=total, p=_EXTENSION_P).tolist()
        widths = rng.integers(300, 2049, size=total).tolist()
        owner_list = owner.tolist()
        photo_lines = [
            f"{photo_uuids[j]}\t{photo_ids[j]}\t{uuids[o]}\t{observers[o]}\t{_EXTENSIONS[extensions[j]]}\t"
            f"{_LICENSES[licenses[j]]}\t{widths[j]}\t{2048 if widths[j] < 2048 else 1536}\t{position[j]}"
            for j, o in enumerate(owner_list)
        ]
        return observation_lines, photo_lines


# --- writing -------------------------------------------------------------------------------------


def _open_for_writing(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return gzip.open(path, "wt", encoding="utf-8", newline="\n", compresslevel=1)
    return path.open("w", encoding="utf-8", newline="\n")


class _Writer:
    """One export file, header first, written a chunk of lines at a time."""

    def __init__(self, handle: TextIO, header: Sequence[str]) -> None:
        self.handle = handle
        self.rows = 0
        self.handle.write("\t".join(header) + "\n")

    def write(self, lines: Sequence[str]) -> None:
        if lines:
            self.handle.write("\n".join(lines) + "\n")
            self.rows += len(lines)


def write_export(export_dir: str | Path, config: ExportConfig | None = None) -> ExportManifest:
    """Write an iNat open-data export with planted co-observed photos into ``export_dir``; see the module
    docstring. Returns what was planted and the counts a correct builder reports."""
    config = config or ExportConfig()
    export_dir = Path(export_dir)
    export_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([config.seed, 0x1A7])
    tree = _Tree(rng)
    observers = _make_observers(rng, config.n_observers)
    planter = _Planter(rng, tree, observers, config)
    planter.plant_eligible(config.n_coobserved)
    planter.plant_defects()
    n_background = config.n_photos - len(planter.photo_lines)
    if n_background < 0:
        raise CladebenchError(f"n_photos={config.n_photos} is fewer than the {len(planter.photo_lines)} planted "
                              "photo rows")

    suffix = ".csv.gz" if config.compress else ".csv"
    files = {t: export_dir / f"{t}{suffix}" for t in TABLES}
    headers = {t: HEADERS[t][0] for t in TABLES}
    if not config.anomaly_score:
        headers["observations"] = OBSERVATIONS_2022
    with contextlib.ExitStack() as stack:
        writers = {t: _Writer(stack.enter_context(_open_for_writing(files[t])), headers[t]) for t in TABLES}
        writers["taxa"].write([t.line() for t in tree.taxa] + planter.extra_taxa_lines)
        writers["observers"].write([o.line() for o in observers] + planter.extra_observer_lines)
        # The planted rows go in after the first background chunk, shuffled, so that the rows of one photo are
        # not next to each other (nothing in the format promises they are).
        planted = {"photos": planter.photo_lines, "observations": planter.observation_lines}
        background = _Background(rng, tree, observers, config)
        single = 0
        placed = False
        for observation_lines, photo_lines in background.chunks(n_background):
            writers["observations"].write(observation_lines)
            writers["photos"].write(photo_lines)
            single += len(photo_lines)
            if not placed:
                for table, lines in planted.items():
                    writers[table].write([lines[i] for i in rng.permutation(len(lines))])
                placed = True
        if not placed:
            for table, lines in planted.items():
                writers[table].write(lines)

    photo_outcomes = {"single_observation": single, **{k: len(v) for k, v in planter.planted.items()}}
    return ExportManifest(
        export_dir=export_dir, config=config, files=files, rows={t: w.rows for t, w in writers.items()},
        eligible=tuple(sorted(planter.eligible, key=lambda p: p.photo_id)),
        planted={k: tuple(v) for k, v in planter.planted.items()}, photo_outcomes=photo_outcomes,
        row_issues={t: dict(sorted(c.items())) for t, c in planter.row_issues.items() if c},
        observers_without_name=sum(attribution_name(None, o.name) is None for o in observers)
        + sum(1 for line in planter.extra_observer_lines if line.split("\t")[2] in ("", "None")),
    )


def write_manifest(manifest: ExportManifest, path: str | Path) -> Path:
    """The manifest as JSON (for benchmarks that generate once and build many times)."""
    path = Path(path)
    path.write_text(json.dumps(manifest.as_dict(), indent=1, sort_keys=True))
    return path


__all__ = [
    "DIVERGENCE_RANKS",
    "HEADERS",
    "KINGDOM_IDS",
    "LIFE_TAXON_ID",
    "OBSERVATIONS_2022",
    "PHOTO_DEFECTS",
    "PHOTO_SIZES",
    "RANK_LEVELS",
    "REQUIRED",
    "ROW_DEFECTS",
    "SQL_TYPES",
    "TABLES",
    "ExportConfig",
    "ExportManifest",
    "PlantedPhoto",
    "attribution_name",
    "export_file",
    "observation_url",
    "photo_page_url",
    "photo_url",
    "read_header",
    "taxon_url",
    "unread_export_file",
    "write_export",
    "write_manifest",
]
