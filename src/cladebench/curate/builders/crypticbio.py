"""Curate CrypticBio-style benchmarks from observation metadata, as CrypticBio-Curate does, driven by a YAML file.

CrypticBio (Manolache et al., 2025; ``gmanolache/CrypticBio``) ships GBIF research-grade metadata of
cryptic species (one row per photo: ``scientificName``, ``year``/``month``/``day``,
``decimalLatitude``/``decimalLongitude``, ``url``, the ranks, ``vernacularName`` as a list literal and,
in the full release, ``crypticGroup``) and four benchmarks cut from it. Its curation tool takes a
``config.yaml``; this builder reads one of the same shape, filters the metadata, cuts the subsets and
writes them in the published benchmark format (so ``cladebench load crypticbio`` and
:func:`cladebench.curate.sources.crypticbio.read_crypticbio` read them), or fetches their photos into Lance.

The config (``cladebench build crypticbio --config config.yaml``; relative paths are relative to the
YAML file)::

    dataset:
      metadata: [CrypticBio-part1.parquet, more.csv]   # one path or a list; CSV (.csv, .csv.gz) or Parquet
      out: curated/                                    # output folder (must be new unless overwrite: true)
      seed: 0
    filters:                  # every key optional; see FILTER_KEYS
      kingdom: Animalia       # a scalar means equality
      class: [Aves, Insecta]  # a list means membership ...
      year: [2015, 2024]      # ... except for ordered keys, where it is an inclusive [from, to] range
      month: [11, 2]          # month and longitude wrap around: November to February
      latitude: [35, 72]      # latitude + longitude: a coordinate box
      longitude: [-25, 45]
      vernacular_name: true   # a boolean means "has one" (true) or "has none" (false)
      cryptic_group: true
    generate_pairs:           # cryptic species pairs, and from them each species' group
      identifications: ids.parquet     # observation_id, taxon, current ...
      observations: obs.parquet        # ... observation_id, community_taxon (see cladebench.curate.cryptic_groups)
      min_observations: 5
      min_fraction: 0.01
    subsets:                  # without this section: one subset, "curated", of every row kept
      common: {more_than: 150, per_species: 100}
      common_unseen: {start: 2025-01-01}
      endangered: {species_list: redlist.csv}              # IUCN export: scientificName column
      invasive: {species_list: gisd.csv, name_column: Species}
    download:                 # fetch the photos into <subset>.lance (DownloadConfig's keys, and cache_dir)
      concurrency: 16
      ray: auto               # optional: fetch on this Ray cluster (cache_dir on a filesystem every node sees)

**The filter rule, once for every key.** A key names a column (:data:`FILTER_KEYS`); its value's YAML
type says what it means: a boolean means not null (``true``) or null (``false``); a list means
membership (for list-valued columns: any member shared), except that for ordered keys (numbers,
dates) it is an inclusive ``[from, to]`` range with ``null`` for an open end; any other scalar means
equality (for list-valued columns: contains). Text matches exactly. A row whose value is missing
fails every condition on that key except ``false``. YAML 1.1 reads unquoted ``yes``/``no``/``on``/``off``
as booleans: quote such names.

**Every row is accounted for.** A row is dropped by the first of these that it fails, and counted
under that reason: the data checks (:data:`ROW_CHECKS`: no name or URL, numbers that do not parse,
impossible dates, coordinates out of range, malformed list strings, a name that resolves to no
species of the row's genus, a missing or unknown licence), then the filters in :data:`FILTER_KEYS`
order, then ``duplicate_url`` (a photo already kept). An empty cell, a Parquet NaN or the text
``nan`` is a missing value, not a bad one; a row missing a date part keeps a null date, as the
published reader does. A CSV line the reader cannot split into the header's fields is
``malformed_line``. Each filter's own count (rows that fail it, among rows passing the data checks,
whatever the other filters say) is reported as well, since the first-reason count of a later filter
hides rows an earlier one already took. Rows dropped by a data check are listed in
``rejected.parquet``; filter names and species-list names that match no row are reported.

**Cryptic groups.** ``generate_pairs`` makes directed pairs "A is confused with B" from one source:
an identification history (mined by :func:`cladebench.curate.cryptic_groups.mine_cryptic_pairs`, with its
thresholds), a lookup TSV, or an undirected ``source,target`` pair list; A's group is A and its
confusables. Without the section, the metadata's cryptic group column (``crypticGroup``) is used when
present. A row's ``cryptic_group`` (what the filter tests) is its species' confusables, the species
itself excluded: ``cryptic_group: true`` keeps species with at least one, and a species the source
does not know has none.

**Subsets** (:data:`SUBSETS`), each sampled per species by a seeded hash of the photo URL, so the
sample does not depend on row order and a species' sample does not change when other species come
or go:

- ``common``: species with more than ``more_than`` rows, ``per_species`` rows each. When
  ``common_unseen`` is configured its window is taken out of Common's pool first (counts included),
  so the two never share a photo.
- ``common_unseen``: rows observed in ``[start, end]`` (inclusive; undated rows are never in it) of
  the species Common's rule selects.
- ``endangered``, ``invasive``: the species a user list names (a CSV: IUCN Red List exports have
  ``scientificName``, GISD exports ``Species``); names match after dropping authorship.
- ``curated``: every species kept, optionally capped per species.

**Output** (``dataset.out``), staged in a hidden sibling folder and renamed into place only when
complete, so a failure leaves nothing half-written (:mod:`cladebench.curate.staging`: ``dataset.out``
may not be, be inside or contain a file the config reads, the YAML file included; ``overwrite: true``
replaces only a previous output of this builder, which its marker ``.cladebench-output.json``
identifies): ``CrypticBio-<Subset>.csv`` per subset in the
published column order; ``cryptic_groups.tsv`` (the lookup :func:`read_cryptic_lookup` reads) and
``cryptic_pairs.parquet`` (pairs with their evidence) when groups are known; ``rejected.parquet``;
``README.md`` (the card: per-subset and per-taxonomic-group counts, drops by reason, cryptic-group
statistics); ``build.json``. With ``download``: ``<subset>.lance`` and its ``.failures.parquet`` per
non-empty subset, built by :func:`cladebench.curate.sources.crypticbio.build_crypticbio_dataset`.

**Memory.** Files are read as a stream of Arrow batches, each normalised, checked and filtered in
DuckDB; only kept rows are held, so memory follows the curated size, not the metadata's.

Example:
    >>> parse_condition("class", ["Aves", "Insecta"]).describe()
    'class in [Aves, Insecta]'
    >>> parse_condition("year", [2015, None]).describe()
    'year from 2015'
    >>> parse_condition("vernacular_name", True).describe()
    'vernacular_name present'
"""

from __future__ import annotations

import ast
import contextlib
import csv
import dataclasses
import datetime
import hashlib
import json
import math
import time
import types
import typing
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.config import OPTION, config_to_dict
from cladebench.curate import cryptic_groups
from cladebench.curate.builders.duckdb_errors import duckdb_interrupts
from cladebench.curate.fetch import DownloadConfig
from cladebench.curate.sources.crypticbio import CSV_COLUMNS, read_cryptic_lookup
from cladebench.curate.staging import OutputTarget, staged_output
from cladebench.errors import CladebenchError, SchemaError, UsageError, undecodable_at, unknown_name
from cladebench.taxonomy import Lineage, Rank

if TYPE_CHECKING:
    import duckdb

# --- config ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetSection:
    """``dataset``: where the metadata is and where the curated benchmark goes."""

    metadata: tuple[Path, ...]
    """CrypticBio-style metadata, one file or a list: CSV (.csv, .csv.gz) or Parquet, with the published
    benchmark columns (scientificName, year, month, day, decimalLatitude, decimalLongitude, url, kingdom ..
    genus, vernacularName)."""
    out: Path
    """Output folder; it must not exist (or be empty) unless overwrite is true; apart from every input."""
    seed: int = 0
    """Seed of every per-species sample; the same metadata, config and seed give the same files."""
    cryptic_group_column: str | None = None
    """Column holding each row's cryptic group (a list, or a list string in CSV); default: crypticGroup when the
    file has it. Ignored when generate_pairs is configured."""
    license_column: str | None = None
    """Column holding each photo's licence; default: license when the file has it. With one, a row whose licence
    is missing or not recognised is dropped, and the license filter applies to the parsed code (cc-by, ...)."""
    overwrite: bool = False
    """Replace out if it is a previous output of this builder (its marker file says so), only once the new build is
    complete; anything else at out is refused."""
    batch_rows: int = 65_536
    """Rows of a Parquet file read at once (CSV files are read in blocks of about 8 MB)."""

    def __post_init__(self) -> None:
        if not self.metadata:
            raise UsageError("metadata: at least one file is needed")
        if self.seed < 0:
            raise UsageError(f"seed must be >= 0, got {self.seed}")
        if self.batch_rows < 1:
            raise UsageError(f"batch_rows must be at least 1, got {self.batch_rows}")


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


@dataclass(frozen=True)
class FiltersSection:
    """``filters``: the conditions every kept row meets, parsed by :func:`parse_condition`."""

    conditions: tuple[Condition, ...] = ()
    """In :data:`FILTER_KEYS` order, whatever the YAML order (so reports of two configs line up)."""


@dataclass(frozen=True)
class PairsSection:
    """``generate_pairs``: cryptic species pairs from one source, and each species' group from them."""

    identifications: Path | None = None
    """Identification history to mine pairs from (CSV/Parquet: observation_id, taxon, current)."""
    observations: Path | None = None
    """Community taxa of those observations (CSV/Parquet: observation_id, community_taxon)."""
    lookup: Path | None = None
    """Instead: a lookup TSV, anchor<TAB>species,species,... (as small_lookup_cryptic_group.tsv)."""
    edges: Path | None = None
    """Instead: a source,target pair list, read as undirected (each species joins the other's group)."""
    min_observations: int = 5
    """Mining: B joins A's group when at least this many observations of A carry an ID of B ..."""
    min_fraction: float = 0.01
    """... and they are at least this fraction of A's observations."""
    count_withdrawn: bool = True
    """Mining: count withdrawn identifications (a corrected mistake is evidence of confusion)."""

    def __post_init__(self) -> None:
        given = [n for n in ("identifications", "lookup", "edges") if getattr(self, n) is not None]
        if len(given) != 1:
            raise UsageError(f"give exactly one source of pairs: identifications (with observations), lookup or "
                             f"edges; got {given or 'none'}")
        if (self.identifications is None) != (self.observations is None):
            raise UsageError("identifications and observations go together")
        self.mining()  # checks the thresholds

    def mining(self) -> cryptic_groups.MiningConfig:
        return cryptic_groups.MiningConfig(self.min_observations, self.min_fraction, self.count_withdrawn)


@dataclass(frozen=True)
class DownloadSection:
    """``download``: fetch the photos of every subset into Lance (the other keys are :class:`DownloadConfig`'s)."""

    enabled: bool = True
    """Fetch (false keeps the section in the file but writes metadata only)."""
    cache_dir: Path | None = None
    """Where fetched photos are kept between runs (default: the cladebench cache, downloads/); a rerun resumes."""
    fetch: DownloadConfig = field(default_factory=DownloadConfig)
    """Concurrency, timeouts, retries and checks."""


@dataclass(frozen=True)
class CommonSubset:
    """``subsets.common``: the species seen most, an equal number of photos each."""

    more_than: int = 150
    """Species with more than this many rows (in Common's pool) qualify."""
    per_species: int | None = 100
    """Rows sampled per species (null: all)."""


@dataclass(frozen=True)
class WindowSubset:
    """``subsets.common_unseen``: Common's species, observed in a date window (e.g. after a training cutoff)."""

    start: datetime.date | None = None
    """First day of the window (inclusive; null: open)."""
    end: datetime.date | None = None
    """Last day of the window (inclusive; null: open)."""
    per_species: int | None = None
    """Rows sampled per species (null: all in the window)."""

    def __post_init__(self) -> None:
        if self.start is None and self.end is None:
            raise UsageError("common_unseen needs a start or an end date")
        if self.start is not None and self.end is not None and self.start > self.end:
            raise UsageError(f"common_unseen: start {self.start} is after end {self.end}")


@dataclass(frozen=True)
class SpeciesListSubset:
    """``subsets.endangered`` / ``subsets.invasive``: the species a user list names."""

    species_list: Path
    """A CSV export (IUCN Red List, GISD, ...) with one species per row."""
    name_column: str | None = None
    """Its column of names (default: scientificName for endangered, Species for invasive)."""
    per_species: int | None = 100
    """Rows sampled per species (null: all)."""


@dataclass(frozen=True)
class AllSubset:
    """``subsets.curated``: every species kept by the filters."""

    per_species: int | None = None
    """Rows sampled per species (null: all)."""


@dataclass(frozen=True)
class SubsetsSection:
    """``subsets``: which benchmarks to cut; without the section, ``curated`` alone."""

    common: CommonSubset | None = None
    """CrypticBio-Common: the most observed species, an equal sample of each."""
    common_unseen: WindowSubset | None = None
    """CrypticBio-CommonUnseen: Common's species in a date window, kept out of Common."""
    endangered: SpeciesListSubset | None = None
    """CrypticBio-Endangered: species on a red list."""
    invasive: SpeciesListSubset | None = None
    """CrypticBio-Invasive: species on an invasive-species list."""
    curated: AllSubset | None = None
    """Every species the filters kept (the default when no subset is named)."""

    def __post_init__(self) -> None:
        for name in ("common", "common_unseen", "endangered", "invasive", "curated"):
            per_species = getattr(getattr(self, name), "per_species", None)
            if per_species is not None and per_species < 1:
                raise UsageError(f"{name}.per_species must be at least 1 (or null for all), got {per_species}")
        if self.common is not None and self.common.more_than < 0:
            raise UsageError(f"common.more_than must be >= 0, got {self.common.more_than}")

    def configured(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SUBSETS if getattr(self, name) is not None}


@dataclass(frozen=True)
class CrypticBioCurateConfig:
    """A whole ``config.yaml`` (see the module docstring)."""

    dataset: DatasetSection
    """The metadata, the output folder, the seed."""
    filters: FiltersSection = FiltersSection()
    """Conditions every kept row meets (none: every valid row)."""
    generate_pairs: PairsSection | None = None
    """Where cryptic groups come from (none: the metadata's cryptic group column, if any)."""
    subsets: SubsetsSection = SubsetsSection(curated=AllSubset())
    """The benchmarks to cut."""
    download: DownloadSection | None = None
    """Fetch the photos into Lance (none: metadata only)."""
    source: Path | None = None
    """The YAML file it came from, when it came from one."""


@dataclass(frozen=True)
class CrypticBioBuildConfig:
    """Curate CrypticBio-style benchmarks from metadata (``cladebench build crypticbio``)."""

    config: Path = field(metadata=OPTION)
    """The YAML file: dataset, filters, generate_pairs, subsets and download sections."""


# --- YAML -> config: one generic parser, errors that name the key --------------------------------


def _describe_type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe_type(a) for a in typing.get_args(annotation))
    if origin is tuple:
        return f"a list of {_describe_type(typing.get_args(annotation)[0])}"
    names = {bool: "true/false", int: "an integer", float: "a number", str: "text", Path: "a path",
             datetime.date: "a date (YYYY-MM-DD)", type(None): "null"}
    return names.get(annotation, "a mapping" if dataclasses.is_dataclass(annotation) else str(annotation))


def _coerce(value: Any, annotation: Any, where: str, base_dir: Path, expected: str | None = None) -> Any:
    """``value`` checked against (and converted to) ``annotation``; a :class:`UsageError` naming ``where``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        if value is None and not dataclasses.is_dataclass(inner):
            return None
        # An empty YAML key of a section type (``common:``) means "with its defaults", not "absent".
        return _coerce({} if value is None else value, inner, where, base_dir, _describe_type(annotation))
    if origin is tuple:
        items = value if isinstance(value, list) else [value]
        return tuple(_coerce(v, typing.get_args(annotation)[0], f"{where}[{i}]", base_dir)
                     for i, v in enumerate(items))
    if dataclasses.is_dataclass(annotation):
        return _parse_section(annotation, value, where, base_dir)
    converted = _SCALARS.get(annotation, lambda v, _: _NO)(value, base_dir) if value is not None else _NO
    if converted is _NO:
        raise UsageError(f"{where}: expected {expected or _describe_type(annotation)}, got {value!r} "
                         f"({type(value).__name__})")
    return converted


_NO = object()


def _date(value: Any, _: Path) -> Any:
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value.strip())
        except ValueError:
            return _NO
    return _NO


_SCALARS: dict[Any, Callable[[Any, Path], Any]] = {
    bool: lambda v, _: v if isinstance(v, bool) else _NO,
    int: lambda v, _: v if isinstance(v, int) and not isinstance(v, bool) else _NO,
    float: lambda v, _: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else _NO,
    str: lambda v, _: v if isinstance(v, str) else _NO,
    Path: lambda v, base: (base / Path(v).expanduser()) if isinstance(v, str) and v.strip() else _NO,
    datetime.date: _date,
}
"""YAML scalar -> field type converters; each returns ``_NO`` for a value of the wrong type."""


def _parse_section(cls: type, raw: Any, section: str, base_dir: Path, *, extra_keys: Sequence[str] = ()) -> Any:
    """Build the frozen dataclass ``cls`` from a YAML mapping: unknown keys, wrong types and missing keys are
    errors naming the key and ``section``."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"{section}: expected a mapping of keys, got {raw!r} ({type(raw).__name__})")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in raw:
        if key not in fields:
            raise UsageError(f"{section}: {unknown_name('key', str(key), [*fields, *extra_keys])}")
    values = {key: _coerce(value, hints[key], f"{section}.{key}", base_dir) for key, value in raw.items()}
    missing = [name for name, f in fields.items() if name not in values and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise UsageError(f"{section}: missing required key(s) {missing}")
    try:
        return cls(**values)
    except UsageError as error:
        raise UsageError(f"{section}: {error}") from None
    except CladebenchError as error:  # a config class's own checks (DownloadConfig's)
        raise UsageError(f"{section}: {error}") from None


def _parse_download(raw: Any, base_dir: Path) -> DownloadSection:
    own = {"enabled", "cache_dir"}
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"download: expected a mapping of keys, got {raw!r}")
    fetch = _parse_section(DownloadConfig, {k: v for k, v in raw.items() if k not in own}, "download", base_dir,
                           extra_keys=sorted(own))
    section = _parse_section(DownloadSection, {k: v for k, v in raw.items() if k in own}, "download", base_dir)
    return dataclasses.replace(section, fetch=fetch)


def _parse_filters(raw: Any) -> FiltersSection:
    if raw is None:
        return FiltersSection()
    if not isinstance(raw, Mapping):
        raise UsageError(f"filters: expected a mapping of keys, got {raw!r} ({type(raw).__name__})")
    parsed = {str(key): parse_condition(str(key), value) for key, value in raw.items()}
    return FiltersSection(tuple(parsed[key] for key in FILTER_KEYS if key in parsed))


SECTIONS: dict[str, Callable[[Any, Path], Any]] = {
    "dataset": lambda raw, base: _parse_section(DatasetSection, raw, "dataset", base),
    "filters": lambda raw, _: _parse_filters(raw),
    "generate_pairs": lambda raw, base: _parse_section(PairsSection, raw, "generate_pairs", base),
    "subsets": lambda raw, base: _parse_section(SubsetsSection, raw, "subsets", base),
    "download": _parse_download,
}
"""Top-level sections of a config and their parsers."""


def parse_config(raw: Any, *, base_dir: str | Path | None = None, source: str | Path | None = None
                 ) -> CrypticBioCurateConfig:
    """A config from an already loaded YAML document (a mapping); relative paths resolve against ``base_dir``."""
    where = f"{source}: " if source is not None else ""
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}a config is a mapping of sections ({', '.join(SECTIONS)}), got {type(raw).__name__}")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    try:
        for key in raw:
            if key not in SECTIONS:
                raise UsageError(str(unknown_name("config section", str(key), SECTIONS)))
        if "dataset" not in raw:
            raise UsageError("the dataset section is required (metadata, out)")
        parsed = {key: SECTIONS[key](value, base) for key, value in raw.items()}
        if "subsets" in parsed and not parsed["subsets"].configured():
            raise UsageError("subsets: name at least one of " + ", ".join(SUBSETS))
    except UsageError as error:
        raise UsageError(f"{where}{error}") from None
    return CrypticBioCurateConfig(**parsed, source=Path(source) if source is not None else None)


def _unique_key_loader() -> type:
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (PyYAML keeps the last
    silently, so a second ``year:`` would quietly replace the first)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, typing.Hashable) and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice",
                                                            key_node.start_mark)
                seen.add(key) if isinstance(key, typing.Hashable) else None
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def load_config(path: str | Path) -> CrypticBioCurateConfig:
    """Read a ``config.yaml``; paths in it are relative to its folder."""
    import yaml

    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path}: a folder, not a config file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such config file") from None
    except UnicodeDecodeError as error:
        raise UsageError(f"{path}: not UTF-8 text ({undecodable_at(error)}); a config file is UTF-8 YAML") from None
    except OSError as error:
        raise CladebenchError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        raw = yaml.load(text, Loader=_unique_key_loader())
    except yaml.YAMLError as error:
        raise UsageError(f"{path}: not valid YAML: {' '.join(str(error).split())}") from None
    return parse_config(raw, base_dir=path.resolve().parent, source=path)


# --- the filter rule -------------------------------------------------------------------------------


def _text(value: Any) -> Any:
    return value.strip() if isinstance(value, str) and value.strip() else _NO


def _number(value: Any) -> Any:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else _NO


@dataclass(frozen=True)
class ValueKind:
    """How one kind of column is compared: what a YAML value must be, and the SQL of each operation."""

    name: str
    expected: str
    """What a value of this kind is, for error messages."""
    scalar: Callable[[Any], Any]
    """One YAML value -> the value compared (``_NO`` when it is not of this kind)."""
    ordered: bool
    """A list means an inclusive [from, to] range (rather than membership)."""
    sql: Mapping[str, str]
    """Operation -> SQL with ``{c}`` for the column and ``?`` for the values (ranges are built in code)."""


_PRESENCE = {"present": "{c} IS NOT NULL", "absent": "{c} IS NULL"}
TEXT = ValueKind("text", "text", _text, False, {"in": "list_contains(?, {c})", "equals": "{c} = ?", **_PRESENCE})
NUMBER = ValueKind("number", "a number", _number, True, {"equals": "{c} = ?", **_PRESENCE})
DATE = ValueKind("date", "a date (YYYY-MM-DD)", lambda v: _date(v, Path()), True, {"equals": "{c} = ?", **_PRESENCE})
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


FILTER_KEYS: dict[str, FilterKey] = {}
"""Registry of filter keys, in the order their drops are attributed."""


def filter_key(name: str, column: str, kind: ValueKind, doc: str, *, cyclic: bool = False) -> FilterKey:
    FILTER_KEYS[name] = FilterKey(name, column, kind, doc, cyclic)
    return FILTER_KEYS[name]


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


def parse_condition(key: str, value: Any) -> Condition:
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


def _scalar(spec: FilterKey, value: Any, where: str) -> Any:
    converted = spec.kind.scalar(value)
    if converted is _NO:
        raise UsageError(f"{where}: expected {spec.kind.expected}, got {value!r} ({type(value).__name__})")
    return converted


def _membership(spec: FilterKey, values: list[Any]) -> Condition:
    if not values:
        raise UsageError(f"filters.{spec.name}: an empty list matches nothing; remove the key or name values")
    converted = [_scalar(spec, v, f"filters.{spec.name}[{i}]") for i, v in enumerate(values)]
    return Condition(spec.name, "in", tuple(dict.fromkeys(converted)))


def _range(spec: FilterKey, values: list[Any]) -> Condition:
    where = f"filters.{spec.name}"
    if len(values) != 2 or all(v is None for v in values):
        raise UsageError(f"{where}: a list is an inclusive [from, to] range (null for an open end), got {values!r}")
    low, high = (None if v is None else _scalar(spec, v, f"{where}[{i}]") for i, v in enumerate(values))
    if low is not None and high is not None and low > high and not spec.cyclic:
        raise UsageError(f"{where}: from {low} is after to {high}")
    return Condition(spec.name, "between", (low, high))


def condition_sql(condition: Condition) -> tuple[str, list[Any]]:
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
             "(cladebench.curate.sources.inquire.parse_license)"),
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


def _normalise_sql(filters: Sequence[Condition]) -> tuple[str, list[Any]]:
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

    def __init__(self, fn: Callable[[str], Any]) -> None:
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
    from cladebench.curate.sources.inquire import parse_license

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
class _Tally:
    rows: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    failing: Counter[str] = field(default_factory=Counter)
    kept: list[pa.Table] = field(default_factory=list)
    rejected: list[pa.Table] = field(default_factory=list)
    names_seen: set[str] = field(default_factory=set)


def _evaluate(con: duckdb.DuckDBPyConnection, prepared: pa.Table, query: str, params: list[Any],
              filters: Sequence[Condition], tally: _Tally, wanted_names: set[str]) -> None:
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


def _read_and_filter(config: CrypticBioCurateConfig, groups: Mapping[str, tuple[str, ...]] | None
                     ) -> tuple[_Tally, pa.Table, list[tuple[int, str]]]:
    """Every metadata row checked and filtered; the kept rows (duplicates of a URL removed) and the tallies."""
    import duckdb

    filters = config.filters.conditions
    query, params = _normalise_sql(filters)
    wanted = {v for c in filters if c.key == "scientific_name" for v in c.values}
    tally = _Tally()
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
    tally.dropped[DUPLICATE_URL] += duplicates
    return tally, kept, malformed


def _drop_duplicate_urls(kept: pa.Table) -> tuple[pa.Table, int]:
    """The first row (file, then row order) of each URL: one photo is one benchmark example."""
    order = pc.add(pc.multiply(kept.column("_file"), 1 << 40), kept.column("_row"))
    keyed = pa.table({"url": kept.column("url"), "_order": order})
    first = keyed.group_by("url", use_threads=False).aggregate([("_order", "min")]).column("_order_min")
    keep = pc.is_in(order, value_set=first)
    return kept.filter(keep), kept.num_rows - int(pc.sum(keep).as_py() or 0)


# --- subsets ---------------------------------------------------------------------------------------


def sample_key(seed: int, url: str) -> str:
    """The per-row sampling key: MD5 of ``"<seed>:<url>"`` (stable across runs, platforms and row orders)."""
    return hashlib.md5(f"{seed}:{url}".encode(), usedforsecurity=False).hexdigest()


def sample_per_species(table: pa.Table, per_species: int | None, seed: int) -> pa.Table:
    """Rows ordered by species, then sampling key; at most ``per_species`` per species (all when None)."""
    keys = pa.array([sample_key(seed, url) for url in table.column("url").to_pylist()], pa.string())
    ordered = table.append_column("_key", keys).sort_by(
        [("scientific_name", "ascending"), ("_key", "ascending"), ("url", "ascending")]).drop_columns(["_key"])
    if per_species is None or ordered.num_rows == 0:
        return ordered
    names = np.asarray(ordered.column("scientific_name").to_pylist(), dtype=object)
    starts = np.r_[True, names[1:] != names[:-1]]
    group = np.cumsum(starts) - 1
    rank = np.arange(len(names)) - np.flatnonzero(starts)[group]
    return ordered.filter(pa.array(rank < per_species))


def _species_counts(table: pa.Table) -> dict[str, int]:
    counts = table.group_by("scientific_name", use_threads=False).aggregate([("url", "count")])
    return dict(zip(counts.column("scientific_name").to_pylist(), counts.column("url_count").to_pylist(),
                    strict=True))


def _isin(table: pa.Table, column: str, values: Iterable[str]) -> pa.Array:
    return pc.fill_null(pc.is_in(table.column(column), value_set=pa.array(sorted(values), pa.string())), False)


@dataclass(frozen=True)
class _Context:
    """What the subsets share: the kept rows, the seed, and the unseen window (taken out of Common's pool)."""

    kept: pa.Table
    seed: int
    subsets: SubsetsSection

    def in_window(self) -> pa.Array:
        window = self.subsets.common_unseen
        observed = self.kept.column("observed_on")
        if window is None:
            return pa.array(np.zeros(self.kept.num_rows, dtype=bool))
        mask = pc.is_valid(observed)
        if window.start is not None:
            mask = pc.and_(mask, pc.greater_equal(observed, pa.scalar(window.start, pa.date32())))
        if window.end is not None:
            mask = pc.and_(mask, pc.less_equal(observed, pa.scalar(window.end, pa.date32())))
        return pc.fill_null(mask, False)

    def common_pool(self) -> pa.Table:
        return self.kept.filter(pc.invert(self.in_window()))

    def common_species(self) -> set[str]:
        rule = self.subsets.common or CommonSubset()
        return {name for name, n in _species_counts(self.common_pool()).items() if n > rule.more_than}


@dataclass(frozen=True)
class Chosen:
    """A subset's rows and what it wants reported."""

    rows: pa.Table
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SubsetKind:
    """A benchmark subset: its config key, its published file name, and how its rows are chosen."""

    name: str
    file_name: str
    select: Callable[[Any, _Context], Chosen]
    doc: str
    default_name_column: str | None = None


SUBSETS: dict[str, SubsetKind] = {}
"""Registry of subsets, in the order they are cut and reported."""


def subset_kind(name: str, file_name: str, doc: str, default_name_column: str | None = None
                ) -> Callable[[Callable[[Any, _Context], Chosen]], Callable[[Any, _Context], Chosen]]:
    def register(select: Callable[[Any, _Context], Chosen]) -> Callable[[Any, _Context], Chosen]:
        SUBSETS[name] = SubsetKind(name, file_name, select, doc, default_name_column)
        return select

    return register


@subset_kind("common", "CrypticBio-Common.csv", "species with more than N rows, an equal sample of each")
def _common(config: CommonSubset, context: _Context) -> Chosen:
    pool = context.common_pool()
    species = context.common_species()
    rows = sample_per_species(pool.filter(_isin(pool, "scientific_name", species)), config.per_species,
                              context.seed)
    return Chosen(rows, {"qualifying_species": len(species), "pool_species": len(_species_counts(pool))})


@subset_kind("common_unseen", "CrypticBio-CommonUnseen.csv", "Common's species, observed in a date window")
def _common_unseen(config: WindowSubset, context: _Context) -> Chosen:
    window = context.kept.filter(context.in_window())
    species = context.common_species()
    rows = window.filter(_isin(window, "scientific_name", species))
    return Chosen(sample_per_species(rows, config.per_species, context.seed),
                  {"rows_in_window": window.num_rows, "window": f"{config.start or '…'} to {config.end or '…'}"})


def _species_list(config: SpeciesListSubset, kind: SubsetKind, context: _Context) -> Chosen:
    column = config.name_column or kind.default_name_column or "scientificName"
    listed = read_species_list(config.species_list, column)
    keys = {species_key(n): n for n in listed}
    present = {n: species_key(n) for n in _species_counts(context.kept)}
    matched = {name for name, key in present.items() if key in keys}
    rows = context.kept.filter(_isin(context.kept, "scientific_name", matched))
    found_keys = {present[n] for n in matched}
    unmatched = [name for key, name in keys.items() if key not in found_keys]
    return Chosen(sample_per_species(rows, config.per_species, context.seed), {
        "species_listed": len(keys), "species_matched": len(found_keys), "species_unmatched": len(unmatched),
        "unmatched_examples": unmatched[:20],
    })


@subset_kind("endangered", "CrypticBio-Endangered.csv", "species on a red list the user supplies", "scientificName")
def _endangered(config: SpeciesListSubset, context: _Context) -> Chosen:
    return _species_list(config, SUBSETS["endangered"], context)


@subset_kind("invasive", "CrypticBio-Invasive.csv", "species on an invasive-species list the user supplies",
             "Species")
def _invasive(config: SpeciesListSubset, context: _Context) -> Chosen:
    return _species_list(config, SUBSETS["invasive"], context)


@subset_kind("curated", "CrypticBio-Curated.csv", "every species the filters kept")
def _curated(config: AllSubset, context: _Context) -> Chosen:
    return Chosen(sample_per_species(context.kept, config.per_species, context.seed))


def species_key(name: str) -> str:
    """A name without its authorship (``"Podarcis muralis (Laurenti, 1768)"`` -> ``"Podarcis muralis"``)."""
    lineage = Lineage.from_row({"scientificName": name})
    return lineage.scientific_name if lineage[Rank.SPECIES] is not None else " ".join(name.split())


def read_species_list(path: str | Path, name_column: str) -> list[str]:
    """The names in one column of a CSV (an IUCN Red List or GISD export), blanks and repeats dropped."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"species list {path} {'is a folder' if path.is_dir() else 'does not exist'}")
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            if name_column not in (reader.fieldnames or []):
                raise SchemaError(f"{path}: no column {name_column!r} (set name_column); columns: "
                                  f"{reader.fieldnames}")
            names = [(row[name_column] or "").strip() for row in reader]
    except UnicodeDecodeError as error:
        raise CladebenchError(f"species list {path}: not UTF-8 text ({undecodable_at(error)})") from None
    except csv.Error as error:  # a field longer than csv.field_size_limit(), a NUL byte, ...
        raise CladebenchError(f"species list {path}: cannot be read as CSV: {error}") from None
    except OSError as error:
        raise CladebenchError(f"species list {path}: {error.strerror or error}") from None
    return list(dict.fromkeys(n for n in names if n))


# --- cryptic groups --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Groups:
    """Species -> (species, *confusables) where the source knows the species (confusables may be none)."""

    groups: dict[str, tuple[str, ...]]
    pairs: pa.Table
    source: str
    mining: dict[str, Any] | None = None


def _load_groups(section: PairsSection) -> _Groups:
    if section.identifications is not None and section.observations is not None:
        observations = cryptic_groups.read_table(section.observations)
        mined = cryptic_groups.mine_cryptic_pairs(cryptic_groups.read_table(section.identifications), observations,
                                                  section.mining())
        groups = cryptic_groups.groups_from_pairs(mined.pairs)
        community = pc.unique(pc.cast(observations.column("community_taxon"), pa.string())).drop_null()
        known = {name: (name,) for name in community.to_pylist()}
        return _Groups(known | groups, mined.pairs, f"mined from {section.identifications.name}", mined.as_dict())
    if section.lookup is not None:
        lookup = read_cryptic_lookup(section.lookup)
        return _Groups(lookup, cryptic_groups.pairs_from_groups(lookup), f"lookup {section.lookup.name}")
    assert section.edges is not None
    pairs = cryptic_groups.symmetric(cryptic_groups.read_edges(section.edges))
    return _Groups(cryptic_groups.groups_from_pairs(pairs), pairs, f"edges {section.edges.name} (undirected)")


def _groups_from_rows(kept: pa.Table) -> _Groups:
    """Per species, the confusables its rows name (in order of first appearance), from the metadata column."""
    groups: dict[str, list[str]] = {}
    for name, members in zip(kept.column("scientific_name").to_pylist(), kept.column("cryptic_group").to_pylist(),
                             strict=True):
        if members is None:
            continue
        group = groups.setdefault(name, [name])
        group.extend(m for m in members if m not in group)
    final = {name: tuple(groups[name]) for name in sorted(groups)}
    return _Groups(final, cryptic_groups.pairs_from_groups(final), "the metadata's cryptic group column")


# --- output ----------------------------------------------------------------------------------------


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return repr(list(value))
    return str(value)


_CSV_SOURCES: dict[str, str] = {
    "scientificName": "scientific_name", "year": "year", "month": "month", "day": "day",
    "decimalLatitude": "latitude", "decimalLongitude": "longitude", "url": "url", "kingdom": "kingdom",
    "phylum": "phylum", "class": "class", "order": "order", "family": "family", "genus": "genus",
    "vernacularName": "vernacular_names",
}
"""Published CSV column -> kept column."""


def write_benchmark_csv(rows: pa.Table, path: Path) -> None:
    """Rows in the published CrypticBio column order and value format (float date parts, list literals)."""
    columns = [rows.column(_CSV_SOURCES[c]).to_pylist() for c in CSV_COLUMNS]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        writer.writerows([_csv_value(v) for v in values] for values in zip(*columns, strict=True))


def _counts(values: Iterable[Any]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(Counter(values).items(), key=lambda kv: (-kv[1], str(kv[0])))}


@dataclass(frozen=True)
class CrypticBioCurationSummary:
    """What a curation wrote, and where every metadata row went."""

    out: Path
    rows_read: int
    """Data rows the readers split into fields (malformed lines not included)."""
    malformed_lines: int
    kept: int
    """Rows passing every check and filter, one per photo URL: the pool the subsets are cut from."""
    dropped: dict[str, int]
    """Rows dropped, by the first reason (data checks, then ``filter:<key>``, then duplicate_url)."""
    failing: dict[str, int]
    """Per filter: rows (passing the data checks) that fail it, whatever the other filters say."""
    filters: list[str]
    unmatched_filter_names: list[str]
    subsets: dict[str, dict[str, Any]]
    cryptic: dict[str, Any]
    downloads: dict[str, dict[str, Any]]
    seed: int
    elapsed_s: float
    config: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, "out": str(self.out)}

    def describe(self) -> str:
        lines = [f"{self.out}: {self.kept} of {self.rows_read} rows kept ({self.malformed_lines} malformed lines) "
                 f"in {self.elapsed_s:.1f} s"]
        lines += [f"  {name}: {info['rows']} rows, {info['species']} species -> {info['file']}"
                  for name, info in self.subsets.items()]
        if self.dropped:
            lines.append("  dropped: " + ", ".join(f"{k} {v}" for k, v in self.dropped.items()))
        lines += [f"  {name}: {info['written']} photos in {info['dataset']}, {info['failed']} failed"
                  for name, info in self.downloads.items()]
        return "\n".join(lines)


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_card(summary: CrypticBioCurationSummary) -> str:
    """The dataset card (README.md) of a curation."""
    subsets = summary.subsets
    parts = [
        f"# CrypticBio curation: {summary.out.name}",
        "",
        "Benchmarks cut from CrypticBio-style metadata (Manolache et al., 2025, `gmanolache/CrypticBio`) by "
        "`cladebench build crypticbio`. Files follow the published benchmark format: "
        f"`{', '.join(CSV_COLUMNS)}`. Seed {summary.seed}; every per-species sample orders rows by "
        "MD5(`<seed>:<url>`).",
        "",
        "## Subsets",
        "",
        _table(["subset", "file", "rows", "species", "species with a cryptic group", "notes"],
               [(name, f"`{info['file']}`", info["rows"], info["species"], info.get("species_with_group", "–"),
                 "; ".join(f"{k}: {v}" for k, v in info["notes"].items() if k != "unmatched_examples") or "–")
                for name, info in subsets.items()]),
        "",
        "## Rows per taxonomic group",
        "",
        "The taxonomic group is the `class` value (CrypticBio files Squamata there).",
        "",
    ]
    groups = sorted({g for info in subsets.values() for g in info["taxonomic_groups"]})
    parts.append(_table(["taxonomic group", *subsets], [(g, *(info["taxonomic_groups"].get(g, 0)
                                                              for info in subsets.values())) for g in groups]))
    parts += [
        "", "## Rows read and dropped", "",
        f"{summary.rows_read} rows read, {summary.malformed_lines} malformed lines skipped, {summary.kept} rows kept "
        "(one per photo URL). A row is counted under the first reason that drops it; the last column counts, for "
        "each filter on its own, the rows passing the data checks that fail it.",
        "",
        _table(["reason", "rows dropped (first reason)", "rows failing it (on its own)"],
               [(reason, count, summary.failing.get(reason, "–")) for reason, count in summary.dropped.items()]),
        "",
        "Filters: " + ("; ".join(f"`{f}`" for f in summary.filters) if summary.filters else "none") + ".",
    ]
    if summary.unmatched_filter_names:
        parts += ["", "Filter names that match no valid row: "
                  + ", ".join(f"`{n}`" for n in summary.unmatched_filter_names) + "."]
    for name, info in subsets.items():
        examples = info["notes"].get("unmatched_examples")
        if examples:
            parts += ["", f"{name}: list names with no row (first {len(examples)}): "
                      + ", ".join(f"`{n}`" for n in examples) + "."]
    parts += ["", "## Cryptic groups", ""]
    cryptic = summary.cryptic
    if not cryptic:
        parts.append("No cryptic groups: neither generate_pairs nor a cryptic group column.")
    else:
        stats = cryptic["statistics"]
        parts += [
            f"Source: {cryptic['source']}. {stats['groups']} species known to the source, {stats['pairs']} "
            f"directed pairs; group size (the species included) min {stats['size_min']}, median "
            f"{stats['size_median']}, mean {stats['size_mean']}, max {stats['size_max']}. Of the {stats['species']} "
            f"species written, {stats['species_with_group']} have at least one confusable species.",
        ]
        if cryptic.get("mining"):
            mining = cryptic["mining"]
            parts += ["", f"Mining: B joins A's group when at least {mining['min_observations']} observations of A "
                      f"(and at least {mining['min_fraction']} of them) carry an identification of B; withdrawn "
                      f"identifications {'counted' if mining['count_withdrawn'] else 'ignored'}. "
                      f"{mining['candidates']} candidate pairs, {mining['below_min_observations']} below the "
                      f"observation count, {mining['below_min_fraction']} below the fraction, {mining['pairs']} kept.",
                      "", _table(["identifications", "count"], mining["identifications"].items())]
    if summary.downloads:
        parts += ["", "## Photos", "",
                  _table(["subset", "dataset", "photos written", "failed", "failures by reason"],
                         [(n, f"`{d['dataset']}`" if d["dataset"] else "none (no photo fetched)", d["written"],
                           d["failed"],
                           ", ".join(f"{k} {v}" for k, v in d["failed_by_reason"].items()) or "–")
                          for n, d in summary.downloads.items()])]
    parts += ["", "## Data checks", "", _table(["reason", "meaning"], [(c.reason, c.doc) for c in ROW_CHECKS]
                                               + [(DUPLICATE_URL, "a photo URL already kept from an earlier row"),
                                                  (MALFORMED_LINE, "a CSV line with more or fewer fields than "
                                                   "the header")]), ""]
    return "\n".join(parts)


def _rejected_table(tally: _Tally, malformed: list[tuple[int, str]], files: Sequence[Path]) -> pa.Table:
    schema = pa.schema([("file", pa.string()), ("row", pa.int64()), ("reason", pa.string()),
                        ("scientific_name", pa.string()), ("url", pa.string()), ("text", pa.string())])
    names = pa.array([p.name for p in files], pa.string())
    tables = [pa.table({"file": names.take(t.column("_file")), "row": t.column("_row"), "reason": t.column("_reason"),
                        "scientific_name": t.column("scientific_name"), "url": t.column("url"),
                        "text": pa.nulls(t.num_rows, pa.string())}, schema=schema) for t in tally.rejected]
    if malformed:
        tables.append(pa.table({
            "file": [files[i].name for i, _ in malformed], "row": pa.nulls(len(malformed), pa.int64()),
            "reason": [MALFORMED_LINE] * len(malformed), "scientific_name": pa.nulls(len(malformed), pa.string()),
            "url": pa.nulls(len(malformed), pa.string()), "text": [t[:1000] for _, t in malformed],
        }, schema=schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


WRITER = "build crypticbio"
"""The output's marker names this writer; ``overwrite: true`` replaces only such a folder
(:mod:`cladebench.curate.staging`)."""


def _inputs(config: CrypticBioCurateConfig) -> tuple[Path, ...]:
    """What the build reads (the YAML file included): the output may be none of these, inside none, contain none."""
    paths: list[Path | None] = [config.source, *config.dataset.metadata]
    if config.generate_pairs is not None:
        pairs = config.generate_pairs
        paths += [pairs.identifications, pairs.observations, pairs.lookup, pairs.edges]
    paths += [getattr(subset, "species_list", None) for subset in config.subsets.configured().values()]
    if config.download is not None and config.download.enabled:
        paths.append(config.download.cache_dir)
    return tuple(Path(p) for p in paths if p is not None)


def _download(section: DownloadSection, staging: Path, written: Mapping[str, tuple[Path, int]],
              lookup: Path | None) -> dict[str, dict[str, Any]]:
    """One Lance dataset per non-empty subset. A subset none of whose photos could be fetched gets no dataset
    (Lance cannot hold an image-less row) but keeps its failures table and is reported, rather than sinking
    the other subsets' builds."""
    import pyarrow.parquet as pq

    from cladebench.curate.sources.crypticbio import build_crypticbio_dataset, failures_path_for, subset_name

    results: dict[str, dict[str, Any]] = {}
    for name, (csv_path, rows) in written.items():
        if rows == 0:
            continue
        dataset_path = staging / f"{csv_path.stem}.lance"
        failures_path = failures_path_for(dataset_path)
        try:
            build = build_crypticbio_dataset(csv_path, dataset_path, lookup=lookup, download_config=section.fetch,
                                             download_dir=section.cache_dir, subset=subset_name(csv_path))
        except CladebenchError:
            if dataset_path.exists() or not failures_path.is_file():
                raise
            reasons = _counts(pq.read_table(failures_path).column("reason").to_pylist())
            results[name] = {"dataset": None, "failures": failures_path.name, "rows": rows, "written": 0,
                             "failed": rows, "failed_by_reason": reasons}
            continue
        results[name] = {"dataset": dataset_path.name, "failures": failures_path.name, "rows": build.rows,
                         "written": build.written, "failed": build.failed, "failed_by_reason": build.failed_by_reason}
    return results


def _resolve(config: str | Path | CrypticBioBuildConfig | CrypticBioCurateConfig) -> CrypticBioCurateConfig:
    if isinstance(config, CrypticBioCurateConfig):
        return config
    return load_config(config.config if isinstance(config, CrypticBioBuildConfig) else config)


def _config_record(config: CrypticBioCurateConfig) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, (Path, datetime.date)):
            return str(value)
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items()}
        return value

    record = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return {k: plain(config_to_dict(v) if dataclasses.is_dataclass(v) else v) for k, v in record.items()}


def build_crypticbio(config: str | Path | CrypticBioBuildConfig | CrypticBioCurateConfig
                     ) -> CrypticBioCurationSummary:
    """Curate CrypticBio-style benchmarks as a config says (a YAML path or a parsed config); see the module
    docstring for what is written to ``dataset.out``."""
    import pyarrow.parquet as pq

    started = time.monotonic()
    config = _resolve(config)
    out = config.dataset.out
    target = OutputTarget(out, writer=WRITER, overwrite=config.dataset.overwrite, inputs=_inputs(config),
                          out_option="dataset.out", overwrite_option="overwrite: true")
    with staged_output(target) as staging:  # checks the output first, before anything is read
        source_groups = _load_groups(config.generate_pairs) if config.generate_pairs is not None else None
        tally, kept, malformed = _read_and_filter(
            config, None if source_groups is None else source_groups.groups)
        groups = source_groups or (_groups_from_rows(kept) if kept.column("cryptic_group").null_count
                                   < kept.num_rows else None)
        context = _Context(kept, config.dataset.seed, config.subsets)
        subsets: dict[str, dict[str, Any]] = {}
        written: dict[str, tuple[Path, int]] = {}
        species_written: set[str] = set()
        for name, subset_config in config.subsets.configured().items():
            kind = SUBSETS[name]
            chosen = kind.select(subset_config, context)
            path = staging / kind.file_name
            write_benchmark_csv(chosen.rows, path)
            written[name] = (path, chosen.rows.num_rows)
            species = set(chosen.rows.column("scientific_name").to_pylist())
            species_written |= species
            subsets[name] = {
                "file": kind.file_name, "rows": chosen.rows.num_rows, "species": len(species),
                "taxonomic_groups": _counts(chosen.rows.column("class").to_pylist()), "notes": chosen.notes,
            }
            if groups is not None:
                subsets[name]["species_with_group"] = sum(len(groups.groups.get(s, ())) > 1 for s in species)
        cryptic: dict[str, Any] = {}
        lookup_path = None
        if groups is not None:
            relevant = {s: groups.groups[s] for s in sorted(species_written) if s in groups.groups}
            lookup_path = cryptic_groups.write_lookup(relevant, staging / "cryptic_groups.tsv")
            pq.write_table(groups.pairs, staging / "cryptic_pairs.parquet")
            cryptic = {"source": groups.source, "mining": groups.mining,
                       "statistics": cryptic_groups.group_statistics(groups.groups, species_written)}
        pq.write_table(_rejected_table(tally, malformed, config.dataset.metadata), staging / "rejected.parquet")
        downloads = {}
        if config.download is not None and config.download.enabled:
            downloads = _download(config.download, staging, written, lookup_path)
        # Data checks and duplicates when they dropped something; every configured filter, even at zero.
        dropped = {c.reason: tally.dropped[c.reason] for c in ROW_CHECKS if tally.dropped[c.reason]}
        dropped |= {f"filter:{c.key}": tally.dropped[f"filter:{c.key}"] for c in config.filters.conditions}
        dropped |= {DUPLICATE_URL: tally.dropped[DUPLICATE_URL]} if tally.dropped[DUPLICATE_URL] else {}
        if tally.rows != kept.num_rows + sum(dropped.values()):  # every row in exactly one bin
            raise AssertionError(f"row accounting: {tally.rows} read, {kept.num_rows} kept, dropped {dropped}")
        wanted = [v for c in config.filters.conditions if c.key == "scientific_name" for v in c.values]
        summary = CrypticBioCurationSummary(
            out=out, rows_read=tally.rows, malformed_lines=len(malformed), kept=kept.num_rows, dropped=dropped,
            failing=dict(tally.failing), filters=[c.describe() for c in config.filters.conditions],
            unmatched_filter_names=[n for n in wanted if n not in tally.names_seen], subsets=subsets,
            cryptic=cryptic, downloads=downloads, seed=config.dataset.seed,
            elapsed_s=time.monotonic() - started, config=_config_record(config),
        )
        (staging / "README.md").write_text(render_card(summary), encoding="utf-8")
        (staging / "build.json").write_text(json.dumps(summary.as_dict(), indent=2, default=str) + "\n",
                                            encoding="utf-8")
    return summary


__all__ = [
    "FILTER_KEYS",
    "ROW_CHECKS",
    "SECTIONS",
    "SUBSETS",
    "AllSubset",
    "CommonSubset",
    "Condition",
    "CrypticBioBuildConfig",
    "CrypticBioCurateConfig",
    "CrypticBioCurationSummary",
    "DatasetSection",
    "DownloadSection",
    "FiltersSection",
    "PairsSection",
    "SpeciesListSubset",
    "SubsetsSection",
    "WindowSubset",
    "build_crypticbio",
    "condition_sql",
    "load_config",
    "parse_condition",
    "parse_config",
    "read_species_list",
    "sample_key",
    "sample_per_species",
    "species_key",
    "write_benchmark_csv",
]
