"""Lineage completion with a contrastive image-text model: a sorted candidate tree, text embeddings in cached blocks,
and a greedy top-down completion over the species under each hint.

Why a module of its own: this path never builds an images x all-species matrix and encodes only the blocks of
candidates some hint needs (see the task's docstring, :mod:`cladebench.tasks.lineage.task`); it is one
cohesive piece with its own memory bounds (:data:`TEXT_BLOCK`, :data:`CHUNK_CELLS`).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError
from cladebench.store.embeddings import normalise_rows
from cladebench.tasks.common import logit_scale_of, softmax, text_image_column
from cladebench.tasks.lineage.config import LineageConfig
from cladebench.tasks.lineage.targets import (
    CONDITIONS,
    NOTHING,
    Completion,
    Predicted,
    Target,
    pair_columns,
    rank_name,
    read_targets,
)
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Lineage, Rank

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder

TEXT_BLOCK = 8192
"""Candidates per block of text embeddings: blocks are encoded and cached whole, so the cache is shared by
runs whose hints touch the same part of a taxonomy."""
CHUNK_CELLS = 1 << 24
"""Most image x candidate similarities held at once (64 MiB of float32), whatever the number of candidates."""
SPAN_END = "\U0010ffff"
"""Sorts after every name: ``prefix + (SPAN_END,)`` bounds the candidates under ``prefix``."""


# --- contrastive models --------------------------------------------------------------------------


def _sortable(names: Sequence[str | None]) -> tuple[str, ...]:
    return tuple("" if n is None else n for n in names)


def _run_starts(columns: Sequence[pa.Array]) -> list[np.ndarray]:
    """For sorted rank columns, per rank the rows where a new taxon starts (any rank down to it changes)."""
    n = len(columns[0])
    changed = np.zeros(n, dtype=bool)
    if n:
        changed[0] = True
    starts = []
    for column in columns:
        if n > 1:
            differs = pc.not_equal(column.slice(1), column.slice(0, n - 1))
            changed[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
        starts.append(np.flatnonzero(changed))
    return starts


class CandidateTree:
    """Candidate species sorted by their names, so that every taxon is one contiguous run of them.

    Sorting and the runs are done by Arrow and numpy (a 1.1M-species taxonomy in seconds); Arrow orders
    strings by their UTF-8 bytes, which is Python's order of code points, so :meth:`span` can bisect the
    same order with Python tuples.
    """

    def __init__(self, lineages: Iterable[Lineage], source: str) -> None:
        given = list(lineages)
        kept = [lin for lin in given if lin.names[Rank.GENUS] is not None and lin.names[Rank.SPECIES] is not None]
        self.source = source
        self.without_species = len(given) - len(kept)
        """Lineages left out for lacking a genus or a species name: no binomial to predict."""
        columns = {r.column: pa.array([lin.names[r] or "" for lin in kept], pa.string()) for r in RANKS}
        order = pc.sort_indices(pa.table(columns), sort_keys=[(c, "ascending") for c in RANK_COLUMNS]).to_numpy()
        ordered = [columns[c].take(order) for c in RANK_COLUMNS]
        # The same species listed twice is adjacent after sorting (a stable sort: the first listed is kept).
        first = _run_starts(ordered)[-1]
        ordered = [column.take(first) for column in ordered]
        self.lineages: list[Lineage] = [kept[i] for i in order[first]]
        self.keys: list[tuple[str, ...]] = list(zip(*(column.to_pylist() for column in ordered), strict=True))
        self.starts: list[np.ndarray] = _run_starts(ordered)
        """Per rank, the index of the first candidate of each taxon."""

    def __len__(self) -> int:
        return len(self.lineages)

    def span(self, prefix: Sequence[str | None]) -> tuple[int, int]:
        """The slice of candidates whose lineage starts with ``prefix`` (everything for an empty prefix)."""
        key = _sortable(prefix)
        return bisect.bisect_left(self.keys, key), bisect.bisect_left(self.keys, (*key, SPAN_END))

    def index(self, lineage: Lineage) -> int | None:
        """Position of a species among the candidates, or ``None``."""
        key = _sortable(lineage.names)
        i = bisect.bisect_left(self.keys, key)
        return i if i < len(self.keys) and self.keys[i] == key else None

    def complete(self, probs: np.ndarray, lo: int, hi: int, first: Rank) -> int:
        """Greedy top-down: from ``first`` down, the taxon with the most mass among the children of the one
        chosen above; returns the chosen species' index. ``probs`` covers candidates ``lo:hi``."""
        a, b = lo, hi
        for rank in RANKS[first:]:
            runs = self.starts[rank]
            bounds = runs[np.searchsorted(runs, a):np.searchsorted(runs, b)]
            mass = np.add.reduceat(probs[a - lo:b - lo], bounds - a)
            chosen = int(np.argmax(mass))
            a, b = int(bounds[chosen]), (int(bounds[chosen + 1]) if chosen + 1 < bounds.size else b)
        return a

    def digest(self) -> str:
        """SHA-256 of the sorted candidate lineages (names tab-separated, one per line): names the candidate set
        in provenance."""
        digest = hashlib.sha256()
        for key in self.keys:
            digest.update(("\t".join(key) + "\n").encode())
        return digest.hexdigest()


def _read_table_csv(path: Path, delimiter: str) -> pa.Table:
    import pyarrow.csv as pacsv

    return pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter=delimiter),
                          convert_options=pacsv.ConvertOptions(strings_can_be_null=True))


def _read_table_parquet(path: Path) -> pa.Table:
    import pyarrow.parquet as pq

    return pq.read_table(path)


TAXONOMY_READERS: dict[str, Callable[[Path], pa.Table]] = {
    ".csv": lambda path: _read_table_csv(path, ","),
    ".tsv": lambda path: _read_table_csv(path, "\t"),
    ".parquet": _read_table_parquet,
}
"""File suffix -> reader of a taxonomy of candidate lineages."""


def read_taxonomy(path: str | Path) -> list[Lineage]:
    """Lineages from a taxonomy file with rank columns (any spelling :meth:`Lineage.from_row` accepts)."""
    path = Path(path)
    reader = TAXONOMY_READERS.get(path.suffix.lower())
    if reader is None:
        raise CladebenchError(f"{path}: lineage candidates must be 'benchmark' or a file ending in "
                              f"{', '.join(TAXONOMY_READERS)}")
    if not path.is_file():
        raise CladebenchError(f"lineage candidates file not found: {path}")
    try:
        table = reader(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CladebenchError(f"{path}: not a readable taxonomy: {exc}") from None
    columns = [c for c in table.column_names if c != "image"]
    lineages = []
    for batch in table.select(columns).to_batches(max_chunksize=65536):
        for row in batch.to_pylist():
            lineages.append(Lineage.from_row({k: (None if v is None else str(v)) for k, v in row.items()}))
    return lineages


def candidate_tree(spec: str, targets: Sequence[Target]) -> CandidateTree:
    """The candidates named by ``lineage_candidates``: the benchmark's species or a taxonomy file."""
    if spec == "benchmark":
        return CandidateTree((t.lineage for t in targets), "benchmark")
    return CandidateTree(read_taxonomy(spec), str(spec))


def candidate_text_embeddings(tree: CandidateTree, spans: Iterable[tuple[int, int]], encoder: Encoder,
                              config: LineageConfig) -> tuple[np.ndarray, int]:
    """Unit text embeddings of the candidates in the blocks the spans touch (other rows stay zero), and how
    many candidates that was."""
    from cladebench.models import class_text_embeddings

    blocks = sorted({b for lo, hi in spans if hi > lo for b in range(lo // TEXT_BLOCK, (hi - 1) // TEXT_BLOCK + 1)})
    text: np.ndarray | None = None
    encoded = 0
    for block in blocks:
        lo, hi = block * TEXT_BLOCK, min(len(tree), (block + 1) * TEXT_BLOCK)
        labels = [lineage.label(config.name_style) for lineage in tree.lineages[lo:hi]]
        vectors = class_text_embeddings(encoder, labels, config.templates)
        if text is None:
            # np.zeros maps untouched pages lazily: blocks no hint reaches cost no memory.
            text = np.zeros((len(tree), vectors.shape[1]), dtype=np.float32)
        text[lo:hi] = vectors
        encoded += hi - lo
    return (text if text is not None else np.zeros((len(tree), 1), dtype=np.float32)), encoded


@dataclass(frozen=True)
class Query:
    """One image to complete below a prefix (a hint, or nothing)."""

    row: int
    prefix: tuple[str | None, ...]


def rank_queries(queries: Sequence[Query], images: np.ndarray, tree: CandidateTree, text: np.ndarray,
                 scale: float) -> list[int | None]:
    """The species each query completes to (``None`` when no candidate lies under its prefix).

    Queries with the same prefix share a slice of candidates and are scored together, in chunks of at
    most :data:`CHUNK_CELLS` similarities.
    """
    by_span: dict[tuple[int, int], list[int]] = {}
    for i, query in enumerate(queries):
        by_span.setdefault(tree.span(query.prefix), []).append(i)
    chosen: list[int | None] = [None] * len(queries)
    for (lo, hi), members in by_span.items():
        if hi <= lo:
            continue
        step = max(1, CHUNK_CELLS // (hi - lo))
        for start in range(0, len(members), step):
            chunk = members[start:start + step]
            logits = images[[queries[i].row for i in chunk]] @ text[lo:hi].T
            logits *= np.float32(scale)
            probs = softmax(logits)
            for i, row in zip(chunk, probs, strict=True):
                first = Rank(len(queries[i].prefix))
                chosen[i] = tree.complete(row, lo, hi, first)
    return chosen


def _image_column(dataset: lance.LanceDataset, encoder: Encoder, column: str | None) -> tuple[str, dict[str, object]]:
    return text_image_column(dataset, encoder, column, task="lineage")


def predict_contrastive(dataset: lance.LanceDataset, encoder: Encoder, config: LineageConfig,
                        conditions: Sequence[str]) -> Predicted:
    """Completions of a CLIP-style model from stored image embeddings (see the module docstring)."""
    from cladebench.store.embeddings import valid_embeddings

    column, meta = _image_column(dataset, encoder, config.column)
    selected = dataset.count_rows(filter=config.where)
    rows, vectors = valid_embeddings(dataset, column, where=config.where, columns=pair_columns(dataset),
                                     dim=getattr(encoder, "dim", None))
    if rows.num_rows == 0:
        raise CladebenchError(f"no photos with embeddings in {column!r} match the filter {config.where!r}")
    found = read_targets(rows)
    tree = candidate_tree(config.lineage_candidates, found.targets)
    if not len(tree):
        raise CladebenchError(f"no candidate species (with genus and species) in {tree.source}")
    # Unscored targets (nothing below the hint) are not asked; a photo's no-hint query serves both its targets.
    wanted = {c: [Query(t.row, CONDITIONS[c].prefix(t)) if t.scored_ranks else None for t in found.targets]
              for c in conditions}
    unique = sorted({q for qs in wanted.values() for q in qs if q is not None}, key=lambda q: (q.row, _sortable(
        q.prefix)))
    text, encoded = candidate_text_embeddings(tree, {tree.span(q.prefix) for q in unique}, encoder, config)
    scale = logit_scale_of(config, encoder)
    species = dict(zip(unique, rank_queries(unique, normalise_rows(vectors), tree, text, scale), strict=True))
    completions = {c: [_ranked(tree, t, q, species) for t, q in zip(found.targets, wanted[c], strict=True)]
                   for c in conditions}
    info = {
        "column": column, "embedding_metadata": meta, "name_style": config.name_style,
        "templates": config.templates, "logit_scale": scale,
        "logit_scale_source": "learned" if config.logit_scale == "learned" else "fixed",
        "label_set": {"kind": "candidate species", "rank": "species", "size": len(tree), "sha256": tree.digest(),
                      "source": tree.source, "rows_without_species": tree.without_species,
                      "species_text_encoded": encoded},
        "completion_rule": "softmax over the candidates under the prefix; at each rank below it, the taxon with "
                           "the most probability among the children of the one chosen above",
        "photos_without_embedding": selected - rows.num_rows,
    }
    labels = [lin.label(config.name_style) for lin in tree.lineages] if tree.source == "benchmark" else []
    return Predicted(found, completions, info, labels)


def _ranked(tree: CandidateTree, target: Target, query: Query | None,
            species: dict[Query, int | None]) -> Completion:
    if query is None:
        return NOTHING
    lo, hi = tree.span(query.prefix)
    true_index = tree.index(target.lineage)
    inside = true_index is not None and lo <= true_index < hi
    chosen = species[query]
    if chosen is None:
        return Completion((None,) * len(RANKS), "no_candidates", candidates=0, true_in_candidates=False)
    first = len(query.prefix)
    names = tuple(rank_name(tree.lineages[chosen], r) if r >= first else None for r in RANKS)
    return Completion(names, "ranked", candidates=hi - lo, true_in_candidates=inside)
