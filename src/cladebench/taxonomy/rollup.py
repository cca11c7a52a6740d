"""Species-to-taxon roll-up: sum species probabilities into the taxa of a higher rank with one sparse product.

A module apart because only the tasks that score above the label rank need it (and scipy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cladebench.taxonomy.lineage import Lineage, Rank

if TYPE_CHECKING:
    import scipy.sparse


@dataclass(frozen=True)
class Membership:
    """A sparse species x taxon matrix at one rank: ``matrix[i, j] = 1`` iff species i is in taxon j.

    Species probabilities roll up to the rank by one sparse product, ``probs @ matrix``, which is
    what pybioclip does with a Python dict per image (its issue #147); here it is one call for a
    whole batch. A species with no name at the rank belongs to no taxon there, so its row is empty
    and its probability does not count toward any taxon at that rank.
    """

    rank: Rank
    """The rank the columns are taxa of."""
    matrix: scipy.sparse.csr_matrix
    """Shape (number of species, number of taxa), float32 ones."""
    taxa: tuple[tuple[str | None, ...], ...]
    """Column j's taxon, as its prefix of names (kingdom .. rank), so homonyms stay apart."""

    @property
    def labels(self) -> list[str]:
        """The name at the rank for each column (not unique across kingdoms; use :attr:`taxa`)."""
        return [str(t[-1]) for t in self.taxa]

    def roll_up(self, species_probs: Any) -> Any:
        """Sum species probabilities (n_images x n_species) into taxon probabilities at the rank.

        Dense in, dense out. A scipy sparse matrix (e.g. each image's top-k species of a
        1.1M-species taxonomy) stays sparse: one sparse product, which costs in proportion to the
        stored probabilities rather than to images x species (``bench/rollup_taxonomy.py``).
        """
        import numpy as np
        import scipy.sparse

        if scipy.sparse.issparse(species_probs):
            return scipy.sparse.csr_matrix(species_probs @ self.matrix)
        return np.asarray(self.matrix.T @ np.asarray(species_probs).T).T


def membership_matrix(species: Sequence[Lineage], rank: Rank | str) -> Membership:
    """Build the species x taxon membership matrix for ``rank`` over the given species."""
    import numpy as np
    import scipy.sparse

    rank = Rank.parse(rank)
    columns: dict[tuple[str | None, ...], int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for i, lineage in enumerate(species):
        if lineage.names[rank] is None:
            continue
        key = lineage.key(rank)
        j = columns.setdefault(key, len(columns))
        rows.append(i)
        cols.append(j)
    matrix = scipy.sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.float32), (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
        shape=(len(species), len(columns)),
    )
    return Membership(rank=rank, matrix=matrix, taxa=tuple(columns))


def unique_species(lineages: Iterable[Lineage]) -> list[Lineage]:
    """Distinct species-level lineages in first-seen order (common names of the first kept)."""
    seen: dict[tuple[str | None, ...], Lineage] = {}
    for lineage in lineages:
        seen.setdefault(lineage.names, lineage)
    return list(seen.values())
