"""The benchmarks a CrypticBio curation can cut (``subsets:``): each one's section, file name and row choice.

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


Why a module: a subset is a section of the config, a published file name and a choice of rows, and all
three belong together; :data:`SUBSETS` is the registry the config's ``subsets`` keys are checked against.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench.errors import CladebenchError, SchemaError, UsageError, undecodable_at
from cladebench.registry import Registry
from cladebench.taxonomy import Lineage, Rank

if TYPE_CHECKING:
    import pyarrow as pa

# numpy and pyarrow are imported where the rows are selected: `build crypticbio --help` reads the subset configs.

# --- the sections --------------------------------------------------------------------------------

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



# --- choosing rows ------------------------------------------------------------------------------

def sample_key(seed: int, url: str) -> str:
    """The per-row sampling key: MD5 of ``"<seed>:<url>"`` (stable across runs, platforms and row orders)."""
    return hashlib.md5(f"{seed}:{url}".encode(), usedforsecurity=False).hexdigest()


def sample_per_species(table: pa.Table, per_species: int | None, seed: int) -> pa.Table:
    """Rows ordered by species, then sampling key; at most ``per_species`` per species (all when None)."""
    import numpy as np
    import pyarrow as pa

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
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.fill_null(pc.is_in(table.column(column), value_set=pa.array(sorted(values), pa.string())), False)


@dataclass(frozen=True)
class SubsetContext:
    """What the subsets share: the kept rows, the seed, and the unseen window (taken out of Common's pool)."""

    kept: pa.Table
    """Every row the checks and filters kept, one per photo URL."""
    seed: int
    """Seed of every per-species sample."""
    common: CommonSubset | None = None
    """Common's rule, when configured (its species are also CommonUnseen's)."""
    window: WindowSubset | None = None
    """CommonUnseen's window, when configured (taken out of Common's pool)."""

    def in_window(self) -> pa.Array:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        window = self.window
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
        import pyarrow.compute as pc

        return self.kept.filter(pc.invert(self.in_window()))

    def common_species(self) -> set[str]:
        rule = self.common or CommonSubset()
        return {name for name, n in _species_counts(self.common_pool()).items() if n > rule.more_than}


@dataclass(frozen=True)
class Chosen:
    """A subset's rows and what it wants reported."""

    rows: pa.Table
    notes: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class SubsetKind:
    """A benchmark subset: its config key, its published file name, and how its rows are chosen."""

    name: str
    file_name: str
    select: Callable[[Any, SubsetContext], Chosen]
    doc: str
    default_name_column: str | None = None


SUBSETS: Registry[SubsetKind] = Registry("subset")
"""Registry of subsets, in the order they are cut and reported."""


def subset_kind(name: str, file_name: str, doc: str, default_name_column: str | None = None
                ) -> Callable[[Callable[[Any, SubsetContext], Chosen]], Callable[[object, SubsetContext], Chosen]]:
    """A decorator: register the decorated row choice as the subset ``name`` (cut in registration order)."""

    def register(select: Callable[[object, SubsetContext], Chosen]) -> Callable[[object, SubsetContext], Chosen]:
        SUBSETS.add(name, SubsetKind(name, file_name, select, doc, default_name_column))
        return select

    return register


@subset_kind("common", "CrypticBio-Common.csv", "species with more than N rows, an equal sample of each")
def _common(config: CommonSubset, context: SubsetContext) -> Chosen:
    pool = context.common_pool()
    species = context.common_species()
    rows = sample_per_species(pool.filter(_isin(pool, "scientific_name", species)), config.per_species,
                              context.seed)
    return Chosen(rows, {"qualifying_species": len(species), "pool_species": len(_species_counts(pool))})


@subset_kind("common_unseen", "CrypticBio-CommonUnseen.csv", "Common's species, observed in a date window")
def _common_unseen(config: WindowSubset, context: SubsetContext) -> Chosen:
    window = context.kept.filter(context.in_window())
    species = context.common_species()
    rows = window.filter(_isin(window, "scientific_name", species))
    return Chosen(sample_per_species(rows, config.per_species, context.seed),
                  {"rows_in_window": window.num_rows, "window": f"{config.start or '…'} to {config.end or '…'}"})


def _species_list(config: SpeciesListSubset, kind: SubsetKind, context: SubsetContext) -> Chosen:
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
def _endangered(config: SpeciesListSubset, context: SubsetContext) -> Chosen:
    return _species_list(config, SUBSETS["endangered"], context)


@subset_kind("invasive", "CrypticBio-Invasive.csv", "species on an invasive-species list the user supplies",
             "Species")
def _invasive(config: SpeciesListSubset, context: SubsetContext) -> Chosen:
    return _species_list(config, SUBSETS["invasive"], context)


@subset_kind("curated", "CrypticBio-Curated.csv", "every species the filters kept")
def _curated(config: AllSubset, context: SubsetContext) -> Chosen:
    return Chosen(sample_per_species(context.kept, config.per_species, context.seed))


def species_key(name: str) -> str:
    """A name without its authorship (``"Podarcis muralis (Laurenti, 1768)"`` -> ``"Podarcis muralis"``)."""
    lineage = Lineage.from_row({"scientificName": name})
    binomial = lineage.scientific_name
    return binomial if binomial is not None and lineage[Rank.SPECIES] is not None else " ".join(name.split())


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




__all__ = [
    "SUBSETS",
    "AllSubset",
    "Chosen",
    "CommonSubset",
    "SpeciesListSubset",
    "SubsetContext",
    "SubsetKind",
    "WindowSubset",
    "read_species_list",
    "sample_key",
    "sample_per_species",
    "species_key",
    "subset_kind",
]
