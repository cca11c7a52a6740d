"""The geo task's split: observation groups to fit, validation and test by a seeded hash, or a prior fitted elsewhere.

Why a module of its own: which rows may fit the prior and which are scored is the honesty of the whole task
(a prior counted from test rows would flatter it), so it is one piece with its own tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError
from cladebench.tasks.common import (
    LabelSet,
)
from cladebench.tasks.geo.config import AUTO_GROUP_KEY, DATE, LATITUDE, LONGITUDE, PARTS, GeoPriorConfig
from cladebench.tasks.geo.prior import (
    year_fractions,
)
from cladebench.taxonomy import RANK_COLUMNS, Lineage, lineages_from_table

if TYPE_CHECKING:
    import lance


# --- the split -------------------------------------------------------------------------------------


def assign_parts(groups: Sequence[str] | np.ndarray, fractions: Sequence[float], seed: int) -> np.ndarray:
    """Part index (into ``fractions``) of each row: a seeded SHA-256 of its group, read as a number in [0, 1),
    falls into the part whose cumulative share it lies under. Rows of one group share a part; a group's part
    depends only on the seed and its key."""
    shares = np.asarray(fractions, dtype=np.float64)
    if shares.ndim != 1 or (shares < 0).any() or shares.sum() <= 0:
        raise CladebenchError(f"split shares must be non-negative and not all zero, got {list(fractions)}")
    bounds = np.cumsum(shares / shares.sum())
    codes, inverse = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    draws = np.array([int.from_bytes(hashlib.sha256(f"{seed}\x00{g}".encode()).digest()[:8], "big") / 2.0**64
                      for g in codes])
    part = np.minimum(np.searchsorted(bounds, draws, side="right"), len(shares) - 1)
    return part[inverse]


def resolve_group_key(table: pa.Table, key: str, names: Sequence[str]) -> str:
    """The group column the split uses: ``auto`` is source_id when the rows have values in it, else uuid."""
    if key == "auto":
        present = AUTO_GROUP_KEY in table.column_names and table.column(AUTO_GROUP_KEY).null_count < table.num_rows
        return AUTO_GROUP_KEY if present else "uuid"
    if key != "uuid" and key not in names:
        raise SchemaError(f"prior_group_key {key!r} is not a column of the dataset")
    return key


def group_values(table: pa.Table, key: str) -> np.ndarray:
    """Each row's group as a string; a row without one is its own group (its uuid)."""
    uuids = np.asarray(table.column("uuid").to_pylist(), dtype=object)
    if key == "uuid" or key not in table.column_names:
        return uuids
    values = np.asarray(table.column(key).cast(pa.string()).to_pylist(), dtype=object)
    missing = np.array([v is None for v in values], dtype=bool)
    values[missing] = np.array(["\x00uuid:" + u for u in uuids[missing]], dtype=object)
    return values


@dataclass(frozen=True)
class Place:
    """Where and when each row was observed (NaN where unknown)."""

    latitudes: np.ndarray
    """Decimal degrees."""
    longitudes: np.ndarray
    """Decimal degrees."""
    fractions: np.ndarray
    """Place in the year, in [0, 1) (:func:`cladebench.tasks.geo.prior.year_fractions`)."""

    @classmethod
    def of(cls, table: pa.Table) -> Place:
        n = table.num_rows

        def floats(name: str) -> np.ndarray:
            if name not in table.column_names:
                return np.full(n, np.nan)
            return np.asarray(table.column(name).cast(pa.float64()).fill_null(np.nan).to_numpy(), dtype=np.float64)

        fractions = year_fractions(table.column(DATE)) if DATE in table.column_names else np.full(n, np.nan)
        return cls(floats(LATITUDE), floats(LONGITUDE), fractions)

    def take(self, index: np.ndarray) -> Place:
        return Place(self.latitudes[index], self.longitudes[index], self.fractions[index])


@dataclass(frozen=True)
class Split:
    """Which evaluated rows validate and test, and the fit observations of the prior."""

    validation: np.ndarray
    """Indices of validation rows among the evaluated rows."""
    test: np.ndarray
    """Indices of test rows among the evaluated rows."""
    fit_labels: np.ndarray
    """Label index of each fit observation (-1: its taxon is not in the label set)."""
    fit_place: Place
    """Where and when each fit observation was made."""
    info: dict[str, object]
    """The split's description for the run record."""


def label_indices(lineages: Sequence[Lineage], labels: LabelSet) -> np.ndarray:
    """Each row's label index in ``labels`` (-1 when its taxon is not a label, or it has no name at the rank)."""
    index = labels.index_of(lineages)
    rank = labels.rank
    return np.array([index.get(lin.match_key(rank), -1) if lin.names[rank] else -1 for lin in lineages],
                    dtype=np.int64)


def naming_columns(names: Sequence[str]) -> list[str]:
    """The naming columns a dataset has among the ranks, scientific and common name (published tables differ)."""
    return [c for c in (*RANK_COLUMNS, "scientific_name", "common_name") if c in names]


def _part_counts(parts: np.ndarray, groups: np.ndarray, chosen: Sequence[int]) -> dict[str, dict[str, int]]:
    return {PARTS[p]: {"rows": int((parts == p).sum()), "groups": int(np.unique(groups[parts == p]).size)}
            for p in chosen}


def plan_split(dataset: lance.LanceDataset, rows: pa.Table, labels: LabelSet, group_key: str,
               config: GeoPriorConfig) -> Split:
    """The validation and test rows and the prior's fit observations (see the module docstring)."""
    if len(config.prior_split) != 3:
        raise CladebenchError(f"prior_split takes three shares (fit, validation, test), got {config.prior_split}")
    groups = group_values(rows, group_key)
    lineages = lineages_from_table(rows.select(naming_columns(rows.column_names)))
    separate = config.prior_dataset is not None or config.prior_fit_where is not None
    base = {"seed": config.prior_seed, "sampling_unit": group_key, "group_key": config.prior_group_key,
            "shares": list(config.prior_split)}
    if not separate:
        parts = assign_parts(groups, config.prior_split, config.prior_seed)
        fit = np.flatnonzero(parts == 0)
        info = {**base, "kind": "seeded SHA-256 of each observation group into fit / validation / test",
                "prior_fit_source": "fit share of the evaluated rows", **_part_counts(parts, groups, (0, 1, 2))}
        split = Split(np.flatnonzero(parts == 1), np.flatnonzero(parts == 2),
                      label_indices([lineages[i] for i in fit], labels), Place.of(rows).take(fit), info)
    else:
        fit_dataset = store.open_dataset(config.prior_dataset) if config.prior_dataset else dataset
        names = fit_dataset.schema.names
        wanted = ["uuid", *naming_columns(names), *(c for c in (LATITUDE, LONGITUDE, DATE) if c in names)]
        if group_key != "uuid" and group_key in names:
            wanted.append(group_key)
        fit_rows = store.read(fit_dataset, columns=wanted, where=config.prior_fit_where)
        if fit_rows.num_rows == 0:
            raise CladebenchError(f"no fit rows for the prior: {config.prior_fit_where!r} selects nothing in "
                                  f"{fit_dataset.uri}")
        fit_groups = set(group_values(fit_rows, group_key).tolist())
        fit_uuids = set(fit_rows.column("uuid").to_pylist())
        uuids = rows.column("uuid").to_pylist()
        overlap = np.array([u in fit_uuids or g in fit_groups for u, g in zip(uuids, groups, strict=True)], dtype=bool)
        parts = assign_parts(groups, (0.0, *config.prior_split[1:]), config.prior_seed)
        parts[overlap] = -1
        fit_lineages = lineages_from_table(fit_rows.select(naming_columns(fit_rows.column_names)))
        info = {**base, "kind": "seeded SHA-256 of each observation group into validation / test",
                "prior_fit_source": {"dataset": config.prior_dataset or "the evaluated dataset",
                                     "where": config.prior_fit_where, "rows": fit_rows.num_rows},
                "excluded_as_in_fit_set": int(overlap.sum()), **_part_counts(parts, groups, (1, 2))}
        split = Split(np.flatnonzero(parts == 1), np.flatnonzero(parts == 2), label_indices(fit_lineages, labels),
                      Place.of(fit_rows), info)
    for name, index in (("validation", split.validation), ("test", split.test)):
        if index.size == 0:
            raise CladebenchError(f"the split left no {name} rows ({split.info}); evaluate more observations or "
                                  "change prior_split")
    return split
