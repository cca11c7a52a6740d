"""The YAML config of a CrypticBio curation: its sections as frozen configs, and the one parser that reads them.

Why a module: every section is read by the same generic parser (:func:`parse_config`), driven by the
dataclasses' type hints, so an unknown key, a wrong type or a missing key is an error naming the key
(``dataset.seed: expected an integer, got 'x'``) in every section alike. The filters have a language
of their own (:mod:`.filters`); the subsets' sections live with what they cut (:mod:`.subsets`).
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench.benchmarks.crypticbio.builder.filters import (
    FILTER_KEYS,
    NOT_CONVERTED,
    Condition,
    parse_condition,
    to_date,
)
from cladebench.benchmarks.crypticbio.builder.subsets import (
    SUBSETS,
    AllSubset,
    CommonSubset,
    SpeciesListSubset,
    WindowSubset,
)
from cladebench.config import OPTION
from cladebench.curate.fetch import DownloadConfig
from cladebench.errors import CladebenchError, UsageError, undecodable_at, unknown_name
from cladebench.registry import Registry

if TYPE_CHECKING:
    from cladebench.benchmarks.crypticbio import cryptic_groups


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
        from cladebench.benchmarks.crypticbio import (
            cryptic_groups,  # pyarrow: `build crypticbio --help` reads this class
        )

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

    def configured(self) -> dict[str, object]:
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


def _coerce(value: object, annotation: object, where: str, base_dir: Path, expected: str | None = None) -> object:
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
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _parse_section(annotation, value, where, base_dir)
    converted = NOT_CONVERTED
    if value is not None:
        converted = _SCALARS.get(annotation, lambda v, _: NOT_CONVERTED)(value, base_dir)
    if converted is NOT_CONVERTED:
        raise UsageError(f"{where}: expected {expected or _describe_type(annotation)}, got {value!r} "
                         f"({type(value).__name__})")
    return converted


_SCALARS: dict[Any, Callable[[Any, Path], Any]] = {
    bool: lambda v, _: v if isinstance(v, bool) else NOT_CONVERTED,
    int: lambda v, _: v if isinstance(v, int) and not isinstance(v, bool) else NOT_CONVERTED,
    float: lambda v, _: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else NOT_CONVERTED,
    str: lambda v, _: v if isinstance(v, str) else NOT_CONVERTED,
    Path: lambda v, base: (base / Path(v).expanduser()) if isinstance(v, str) and v.strip() else NOT_CONVERTED,
    datetime.date: lambda v, _: to_date(v),
}
"""YAML scalar -> field type converters; each returns ``NOT_CONVERTED`` for a value of the wrong type."""


def _parse_section(cls: type, raw: object, section: str, base_dir: Path, *, extra_keys: Sequence[str] = ()) -> Any:
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


def _parse_download(raw: object, base_dir: Path) -> DownloadSection:
    own = {"enabled", "cache_dir"}
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise UsageError(f"download: expected a mapping of keys, got {raw!r}")
    fetch = _parse_section(DownloadConfig, {k: v for k, v in raw.items() if k not in own}, "download", base_dir,
                           extra_keys=sorted(own))
    section = _parse_section(DownloadSection, {k: v for k, v in raw.items() if k in own}, "download", base_dir)
    return dataclasses.replace(section, fetch=fetch)


def _parse_filters(raw: object) -> FiltersSection:
    if raw is None:
        return FiltersSection()
    if not isinstance(raw, Mapping):
        raise UsageError(f"filters: expected a mapping of keys, got {raw!r} ({type(raw).__name__})")
    parsed = {str(key): parse_condition(str(key), value) for key, value in raw.items()}
    return FiltersSection(tuple(parsed[key] for key in FILTER_KEYS if key in parsed))


CONFIG_SECTIONS: Registry[Callable[[Any, Path], Any]] = Registry("config section")
"""Top-level sections of a config and their parsers."""
CONFIG_SECTIONS.add("dataset", lambda raw, base: _parse_section(DatasetSection, raw, "dataset", base))
CONFIG_SECTIONS.add("filters", lambda raw, _: _parse_filters(raw))
CONFIG_SECTIONS.add("generate_pairs", lambda raw, base: _parse_section(PairsSection, raw, "generate_pairs", base))
CONFIG_SECTIONS.add("subsets", lambda raw, base: _parse_section(SubsetsSection, raw, "subsets", base))
CONFIG_SECTIONS.add("download", _parse_download)


def parse_config(raw: object, *, base_dir: str | Path | None = None, source: str | Path | None = None
                 ) -> CrypticBioCurateConfig:
    """A config from an already loaded YAML document (a mapping); relative paths resolve against ``base_dir``."""
    where = f"{source}: " if source is not None else ""
    if not isinstance(raw, Mapping):
        raise UsageError(f"{where}a config is a mapping of sections ({', '.join(CONFIG_SECTIONS)}), got "
                         f"{type(raw).__name__}")
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    try:
        for key in raw:
            if key not in CONFIG_SECTIONS:
                raise UsageError(str(unknown_name("config section", str(key), CONFIG_SECTIONS)))
        if "dataset" not in raw:
            raise UsageError("the dataset section is required (metadata, out)")
        parsed = {key: CONFIG_SECTIONS[key](value, base) for key, value in raw.items()}
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
        def construct_mapping(self, node: Any, deep: bool = False) -> object:
            seen: set[object] = set()
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



__all__ = [
    "CONFIG_SECTIONS",
    "CrypticBioBuildConfig",
    "CrypticBioCurateConfig",
    "DatasetSection",
    "DownloadSection",
    "FiltersSection",
    "PairsSection",
    "SubsetsSection",
    "load_config",
    "parse_config",
]
