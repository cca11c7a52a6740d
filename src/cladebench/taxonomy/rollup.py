"""Species-to-taxon roll-up: sum species probabilities into the taxa of every higher rank.

Two ways, with the same answers: :class:`Membership`, a sparse species x taxon matrix at one rank (one sparse
product, any species order), and :class:`LineageRuns`, for species kept in lineage order, where every taxon is
a contiguous run of columns and rolling up is a segmented sum (``np.add.reduceat``) at memory speed, for
dense blocks and sparse matrices alike. A module apart because only the tasks that score above the label rank
need it (and scipy).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cladebench.taxonomy.lineage import RANKS, Lineage, Rank

if TYPE_CHECKING:
    import numpy as np
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

    def roll_up(self, species_probs: object) -> object:
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


def lineage_order(species: Sequence[Lineage]) -> list[int]:
    """Positions that put ``species`` in lineage order: sorted by their names, kingdom first, a missing name
    before any name. In that order every taxon at every rank is one contiguous run (every prefix of the sorted
    tuples is), which is what :class:`LineageRuns` needs; it is also the order :func:`label_set` gives."""
    return sorted(range(len(species)), key=lambda i: tuple("" if n is None else n for n in species[i].names))


@dataclass(frozen=True)
class RankRuns:
    """One rank's taxa as contiguous runs of lineage-ordered species (see :class:`LineageRuns`)."""

    rank: Rank
    """The rank the runs are taxa of."""
    starts: np.ndarray
    """int64: where each run begins, as a position among the runs of the next narrower rank (for the rank just
    above the labels: among the species). Runs cover every position; the first starts at 0."""
    named: np.ndarray
    """int64: the runs that are taxa (those whose lineages name the rank), in order; a run of lineages without a
    name at the rank belongs to no taxon, as in :class:`Membership`."""
    taxa: tuple[tuple[str | None, ...], ...]
    """Each named run's taxon, as its prefix of names (kingdom .. rank): the columns of :class:`Membership` for the
    same species, in the same order."""
    taxon_of_run: np.ndarray
    """int64: for every run, its column among :attr:`taxa`, or -1 for an unnamed run."""
    matrix: scipy.sparse.csr_matrix
    """CSR float32 (runs x positions of the narrower rank): row j has ones over run j's contiguous positions, so
    ``matrix @ columns`` is the segmented sum of a species-major block (see :class:`LineageRuns`)."""
    run_of_position: np.ndarray
    """int32: for every position of the narrower rank (for the rank just above the labels: every species), the run
    it is in; a gather with it moves entries up one rank."""

    @property
    def labels(self) -> list[str]:
        """The name at the rank for each taxon (not unique across kingdoms; use :attr:`taxa`)."""
        return [str(t[-1]) for t in self.taxa]


@dataclass(frozen=True)
class LineageRuns:
    """Roll-up over species kept in lineage order, where every taxon is a contiguous run of species columns.

    Rolling a dense block of species probabilities up is then a segmented sum over the run starts, done once for
    the rank just above the species and then rank by rank over the runs below (a family is a run of genera), so
    the block is read once whatever the number of ranks, where :meth:`Membership.roll_up` reads it once per
    rank. The segmented sum runs on a species-major block (species x images, :meth:`roll_up_columns`, the
    layout the streaming scorer produces) as the product with each rank's run matrix, which adds contiguous
    image-wide rows and goes at memory speed; ``np.add.reduceat`` along the rows of an images-major block gives
    the same sums but pays about 100 ns per (image, run), 5-20 times slower at the 129,303 genera of the
    iNaturalist taxonomy (measured in ``bench/rollup_taxonomy.py``'s development). :meth:`roll_up` takes the
    usual images x species and transposes once. A sparse (CSR) block is rolled up over its stored entries only
    (``np.add.reduceat`` over the runs of each row's sorted entries). Answers equal :class:`Membership`'s
    (``bench/rollup_taxonomy.py`` compares both with pybioclip's per-image dict loop).

    The species must be in lineage order (:func:`lineage_order`); :func:`lineage_runs` refuses any other.
    """

    n_species: int
    """Columns of the species blocks rolled up."""
    ranks: tuple[RankRuns, ...]
    """Narrowest rank first (genus for species labels), up to kingdom."""
    run_of_species: object
    """int32: the run of the narrowest rank each species column is in (its ``run_of_position``)."""

    def rank(self, rank: Rank | str) -> RankRuns:
        """The runs of one rank."""
        rank = Rank.parse(rank)
        return next(r for r in self.ranks if r.rank == rank)

    def species_ends(self) -> list[np.ndarray]:
        """Per rank (narrowest first), where each run ends among the species (exclusive, int64): a run of the
        species block ``ends[j - 1]..ends[j]``, the first from 0. What a scorer streaming the species in
        lineage order needs to know when a taxon's sum is complete."""
        import numpy as np

        out = []
        starts = None
        for runs in self.ranks:  # each rank's starts are positions among the narrower rank's runs
            starts = np.asarray(runs.starts if starts is None else starts[runs.starts], dtype=np.int64)
            out.append(np.append(starts[1:], self.n_species))
        return out

    def run_sums(self, columns: object) -> list[np.ndarray]:
        """Per rank (narrowest first), the sum over every run, named or not, of a species-major block
        (species x images); each rank's from the narrower one's."""
        if not self.ranks:  # labels at kingdom: no rank above them
            return []
        sums = [self.ranks[0].matrix @ columns]
        for runs in self.ranks[1:]:
            sums.append(runs.matrix @ sums[-1])
        return sums

    def roll_up_columns(self, columns: object) -> dict[Rank, np.ndarray]:
        """Taxon probabilities at every rank (taxa x images) from a dense species-major block (species x images,
        rows in lineage order; C-contiguous is the fast case)."""
        import numpy as np

        columns = np.asarray(columns)
        if columns.shape[0] != self.n_species:
            raise ValueError(f"species probabilities have {columns.shape[0]} rows, the runs {self.n_species}")
        return {runs.rank: sums[runs.named] for runs, sums in zip(self.ranks, self.run_sums(columns), strict=True)}

    def roll_up(self, species_probs: object) -> dict[Rank, object]:
        """Taxon probabilities at every rank from species probabilities (images x species, columns in lineage
        order): dense in, dense out (images x taxa; one segmented sum per rank); a scipy sparse matrix in, CSR
        out per rank (segmented sums over the stored entries, so the cost follows them, not images x species)."""
        import numpy as np
        import scipy.sparse

        if scipy.sparse.issparse(species_probs):
            return self._roll_up_sparse(scipy.sparse.csr_matrix(species_probs))
        block = np.asarray(species_probs)
        if block.shape[1] != self.n_species:
            raise ValueError(f"species probabilities have {block.shape[1]} columns, the runs {self.n_species}")
        return {rank: taxa.T for rank, taxa in self.roll_up_columns(np.ascontiguousarray(block.T)).items()}

    def top(self, species_probs: object, chunk: int = 1024) -> dict[Rank, tuple[np.ndarray, np.ndarray]]:
        """Each image's most probable taxon at every rank and its probability, from dense images x species
        probabilities: rolled up ``chunk`` images at a time with float64 sums (the streaming scorer's precision,
        so both zero-shot paths agree to 1e-6 at 50,000 species, where float32 sums drift by more), a tie to the
        lower column."""
        import numpy as np

        block = np.asarray(species_probs)
        out = {r.rank: (np.zeros(len(block), dtype=np.int64), np.zeros(len(block))) for r in self.ranks}
        for start in range(0, len(block), chunk):
            stop = min(start + chunk, len(block))
            rolled = self.roll_up_columns(np.ascontiguousarray(block[start:stop].T, dtype=np.float64))
            for rank, taxa in rolled.items():
                if taxa.shape[0]:
                    best = taxa.argmax(axis=0)
                    out[rank][0][start:stop] = best
                    out[rank][1][start:stop] = taxa[best, np.arange(stop - start)]
        return out

    def _roll_up_sparse(self, probs: scipy.sparse.csr_matrix) -> dict[Rank, object]:
        import numpy as np
        import scipy.sparse

        if probs.shape[1] != self.n_species:
            raise ValueError(f"species probabilities have {probs.shape[1]} columns, the runs {self.n_species}")
        if not probs.has_sorted_indices:
            probs = probs.sorted_indices()
        n_rows = probs.shape[0]
        indptr = np.asarray(probs.indptr, dtype=np.int64)
        run = self.ranks[0].run_of_position[probs.indices]
        data = probs.data
        out: dict[Rank, object] = {}
        for level, runs in enumerate(self.ranks):
            if level:  # the runs of this rank that hold each run of the narrower one
                run = runs.run_of_position[run]
            # Entries are sorted by row, then by run (columns are in lineage order): a segment starts where the
            # run changes or a row starts.
            new = np.empty(run.size, dtype=bool)
            if run.size:
                new[0] = True
                np.not_equal(run[1:], run[:-1], out=new[1:])
                new[indptr[1:-1][indptr[1:-1] < run.size]] = True
            first = np.flatnonzero(new)
            data = np.add.reduceat(data, first) if first.size else data
            run = run[first]
            indptr = np.searchsorted(first, indptr)  # each row's first segment
            taxon = runs.taxon_of_run[run]
            if len(runs.taxa) == len(runs.taxon_of_run):  # every run is a taxon: nothing to leave out
                out[runs.rank] = scipy.sparse.csr_matrix((data, taxon, indptr), shape=(n_rows, len(runs.taxa)))
                continue
            kept = taxon >= 0
            kept_before = np.concatenate(([0], np.cumsum(kept)))  # named segments before each position
            picked = np.flatnonzero(kept)
            out[runs.rank] = scipy.sparse.csr_matrix((data[picked], taxon[picked], kept_before[indptr]),
                                                     shape=(n_rows, len(runs.taxa)))
        return out


def top_taxa(rolled: np.ndarray | scipy.sparse.csr_matrix) -> tuple[object, object]:
    """Each row's most probable taxon and its probability, from a dense or CSR roll-up at one rank; a tie goes
    to the lower column (as ``argmax`` does), and a row without probability gets taxon 0 and probability 0."""
    import numpy as np
    import scipy.sparse

    if not scipy.sparse.issparse(rolled):
        rolled = np.asarray(rolled)
        best = rolled.argmax(axis=1)
        return best, rolled[np.arange(len(best)), best]
    rolled = scipy.sparse.csr_matrix(rolled)
    if not rolled.has_sorted_indices:
        rolled = rolled.sorted_indices()
    n_rows = rolled.shape[0]
    best = np.zeros(n_rows, dtype=np.int64)
    value = np.zeros(n_rows, dtype=rolled.dtype)
    counts = np.diff(rolled.indptr)
    filled = np.flatnonzero(counts)
    if filled.size:
        top = np.maximum.reduceat(rolled.data, rolled.indptr[filled])
        row_max = np.zeros(n_rows, dtype=rolled.dtype)
        row_max[filled] = top
        row = np.repeat(np.arange(n_rows), counts)
        at_max = np.flatnonzero(rolled.data == row_max[row])
        rows_at_max, first = np.unique(row[at_max], return_index=True)  # the first, lowest column, per row
        best[rows_at_max] = rolled.indices[at_max[first]]
        value[filled] = top
    return best, value


def lineage_runs(species: Sequence[Lineage], label_rank: Rank | str = Rank.SPECIES) -> LineageRuns:
    """The runs of every rank above ``label_rank`` over ``species`` (labels at that rank, in lineage order).

    A :class:`ValueError` when they are not in lineage order (a taxon in two runs): sort them with
    :func:`lineage_order` first. Costs one comparison of neighbouring names per rank (a second or two at the
    1.1M species of the iNaturalist taxonomy).
    """
    import numpy as np
    import scipy.sparse

    label_rank = Rank.parse(label_rank)
    ranks = RANKS[:label_rank]
    n = len(species)
    changed = np.zeros(max(n - 1, 0), dtype=bool)
    starts_by_rank: list[np.ndarray] = []
    for rank in ranks:  # kingdom first: a run ends where the name at this rank or at any broader one changes
        names = np.array([lin.names[rank] for lin in species], dtype=object)
        changed |= names[1:] != names[:-1]
        starts_by_rank.append(np.flatnonzero(np.concatenate(([n > 0], changed))))
    built: list[RankRuns] = []
    narrower: np.ndarray | None = None
    for rank, starts in reversed(list(zip(ranks, starts_by_rank, strict=True))):
        keys = [species[i].key(rank) for i in starts]
        if len(set(keys)) != len(keys):
            raise ValueError(f"species are not in lineage order: a {rank.column} taxon is split into several runs "
                             "(sort them with lineage_order)")
        named = np.array([i for i, key in enumerate(keys) if key[-1] is not None], dtype=np.int64)
        taxon_of_run = np.full(len(keys), -1, dtype=np.int64)
        taxon_of_run[named] = np.arange(len(named))
        # Positions among the narrower rank's runs (every boundary of a broader rank is one of a narrower rank).
        local = np.asarray(starts if narrower is None else np.searchsorted(narrower, starts), dtype=np.int64)
        positions = n if narrower is None else len(narrower)
        matrix = scipy.sparse.csr_matrix(
            (np.ones(positions, dtype=np.float32), np.arange(positions), np.append(local, positions)),
            shape=(len(local), positions))
        run_of_position = np.repeat(np.arange(len(local), dtype=np.int32), np.diff(np.append(local, positions)))
        built.append(RankRuns(rank=rank, starts=local, named=named, taxa=tuple(keys[i] for i in named),
                              taxon_of_run=taxon_of_run, matrix=matrix, run_of_position=run_of_position))
        narrower = starts
    run_of_species = built[0].run_of_position if built else np.zeros(n, dtype=np.int32)
    return LineageRuns(n_species=n, ranks=tuple(built), run_of_species=run_of_species)
