"""Steered lineage completion on photos of two organisms (iNat Co-Observed, ``dcher95/inat-coobserved``).

Data: each row is one photo that shows two organisms of different species; ``organisms`` holds the two
(a list of two structs with the seven rank columns, ``observation_uuid``, ``scientific_name`` and
``common_name``, as :meth:`cladebench.synthetic.World.pair_table` writes it).

Targets: each organism of a photo is a target in turn, so a photo gives two rows of predictions. The
*divergence rank* is the broadest rank at which the two lineages differ
(:func:`cladebench.taxonomy.divergence_rank`, computed from the lineages; a ``divergence_rank`` column
that disagrees is counted, not trusted). The *hint* is the target's lineage down to and including that
rank: it is the least that tells which of the two organisms is meant. The model names the ranks below
the hint. A target whose organisms part only at species (or never) has nothing below its hint: it is
kept in the predictions, marked unscored and counted.

Two conditions, so the value of the hint is measured on the same targets (:data:`CONDITIONS`):

- ``hint``: the model is told the hint and names the ranks below it.
- ``nohint``: the model names the whole lineage from the photo alone. It cannot know which organism is
  meant, so one answer per photo is scored against both targets (at most one can be right below the
  divergence rank): the gap to ``hint`` is what steering buys. It is scored on the same ranks as
  ``hint`` (those below the target's hint), so every number has a paired counterpart.

Models, by kind (:data:`PREDICTORS`):

- ``clip`` (a contrastive image-text encoder): the photo's stored embedding (an ``emb_*`` column made
  with the model) against the text embeddings of candidate species, restricted to the species under the
  hint (all candidates without a hint); softmax over those (the model's learned logit scale, or a fixed
  one) and a greedy top-down completion: at each rank below the hint, the taxon with the most probability
  mass among the children of the one chosen above, so the predicted lineage is always a real path of the
  candidate tree. Candidates are the benchmark's species (both organisms of every evaluated photo) or a
  taxonomy file (CSV/TSV/Parquet of lineages, e.g. the 1.1M-species iNat taxonomy). Candidates are
  sorted by their names, so every taxon is one contiguous run: the species under a hint are one slice,
  found by bisection, and the roll-up to a rank is a segment sum (``np.add.reduceat``). Text embeddings
  are computed (and cached, :func:`cladebench.models.class_text_embeddings`) in fixed blocks of
  :data:`TEXT_BLOCK` sorted candidates, only for blocks that hold a candidate under some hint, so a run
  with hints over a whole taxonomy encodes a small part of it, and the cache serves every later run.
  Images are scored against a slice in chunks of at most :data:`CHUNK_CELLS` similarities: no
  images x all-species matrix is ever built. Without a hint every candidate is needed; over a whole
  taxonomy that encodes every species once (turn it off with ``nohint=False``).
- ``vlm`` (an OpenAI-compatible chat endpoint, ``openai-compatible:NAME@URL``): the photo and a prompt
  that gives the hint and asks for exactly the ranks below it as a JSON object ("One organism in this
  photo belongs to Animalia > Arthropoda > Insecta. Name its order, family, genus and species. ...").
  JSON mode is requested unless ``vlm_json=False`` (for endpoints that reject ``response_format``); the
  answer is read by :func:`cladebench.tasks.lineage.parse.parse_lineage_answer` either way, tolerant of prose,
  code fences and ``Order: X`` lines. An unreadable answer is scored wrong and counted. The no-hint
  prompt (all seven ranks, one request per photo) is asked only with ``vlm_nohint=True``.

Metrics (:func:`lineage_metrics`), for each condition ``C`` in ``hint``/``nohint``, over the *scored*
targets (at least one rank below the hint with a known true name); names are compared up to case and
whitespace, the species as its binomial:

- ``C_accuracy_<rank>``: share of targets whose predicted name at the rank is the true one, over the
  targets for which the rank is below the hint and its true name is known. Wilson interval.
- ``C_exact``: share of targets with every scored rank right. Wilson interval.
- ``C_depth``: mean number of scored ranks right in a row from the first rank below the hint down (the
  depth of the correct prefix; 0 when the first is wrong). Percentile bootstrap over photos (the two
  targets of a photo share it, so photos are the resampling unit).
- ``C_lca_distance``: mean of (m - depth) / m, m the number of scored ranks: the ranks between the lowest
  common ancestor of prediction and truth and the species, as a share of the ranks there were to name.
  0 for an exact completion, 1 when the first rank below the hint is already wrong. Bootstrap over photos.
- ``C_named_other``: share of targets whose prediction, at its deepest predicted rank among those asked,
  names the *other* organism (equal to its name there and not to the target's). Wilson interval.
- ``nohint_hint_agreement``: share of targets whose no-hint prediction equals the hint at every hinted
  rank with a known name: the model went for this organism on its own. Wilson interval.
- ``C_unparseable`` (VLM): share of targets whose answer could not be read. Wilson interval.

Each is also broken down by divergence rank (``divergence=class/hint_exact``) and by the unordered pair
of the two organisms' kingdoms (``kingdom_pair=Animalia|Plantae/hint_exact``).

Predictions: one row per (photo, target): ``uuid``, ``target`` (0 or 1), ``organism_uuid``,
``divergence_rank``, ``kingdom_pair``, ``hint`` (the hinted names joined by " > "), ``n_below_hint``,
``scored``, ``true_<rank>`` (the species as a binomial), ``other_species``; and per condition ``C``:
``C_pred_<rank>`` (what the model named; null where it was not asked or named nothing), ``C_correct_<rank>``
(null where the rank is not scored), ``C_exact``, ``C_depth``, ``C_lca_distance``, ``C_named_other``,
``C_status`` (``ranked``, ``no_candidates``, a parse status such as ``json`` or ``unparseable``,
``bad_image``, ``invalid_response`` (an answer over the VLM client's size cap, never cached),
``nothing_to_complete``), and ``C_candidates``/``C_true_in_candidates`` (contrastive) or
``C_answer`` (the VLM's raw text).
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import string
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError
from cladebench.metrics import WILSON, Estimate, accuracy, bootstrap_ci, define_metric, register_display
from cladebench.models.spec import model_kind
from cladebench.tasks.common import Predictions, logit_scale_of, normalize_rows, softmax, text_image_column
from cladebench.tasks.lineage.parse import UNPARSEABLE, names_match, parse_lineage_answer
from cladebench.tasks.rerank import check_vlm_settings
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Lineage, Rank, divergence_rank

if TYPE_CHECKING:
    import lance

TEXT_BLOCK = 8192
"""Candidates per block of text embeddings: blocks are encoded and cached whole, so the cache is shared by
runs whose hints touch the same part of a taxonomy."""
CHUNK_CELLS = 1 << 24
"""Most image x candidate similarities held at once (64 MiB of float32), whatever the number of candidates."""
BOOTSTRAP_RESAMPLES = 2000
"""Resamples for the bootstrap intervals of mean depth and LCA distance (seeded: a rerun gives the same)."""
SPAN_END = "\U0010ffff"
"""Sorts after every name: ``prefix + (SPAN_END,)`` bounds the candidates under ``prefix``."""

DEFAULT_LINEAGE_PROMPT = (
    "One organism in this photo belongs to {hint}. Name its {ranks}. Answer with only a JSON object of the "
    "form {schema}, using scientific names (the species as a binomial, Genus species)."
)
DEFAULT_NOHINT_PROMPT = (
    "Name an organism in this photo: its {ranks}. Answer with only a JSON object of the form {schema}, using "
    "scientific names (the species as a binomial, Genus species)."
)


@dataclass(frozen=True)
class LineageConfig:
    """How a lineage-completion run is set up; every field is recorded in the run record."""

    column: str | None = None
    """Embedding column with the photos' vectors (contrastive models); by default the one naming the model."""
    where: str | None = None
    """SQL filter selecting the evaluated photos."""
    lineage_candidates: str = "benchmark"
    """Candidate species of contrastive models: 'benchmark' (both organisms of every evaluated photo) or a
    CSV/TSV/Parquet file of lineages (rank columns kingdom..species or scientific_name), e.g. a whole taxonomy."""
    hint: bool = True
    """Complete lineages from the hint; off, only the no-hint condition is run."""
    nohint: bool = True
    """Contrastive models: also complete without the hint (same image vectors; over a whole taxonomy this
    encodes every species once)."""
    vlm_nohint: bool = False
    """VLMs: also ask without the hint for all seven ranks (one more request per photo)."""
    name_style: str = "taxon"
    """Candidate label strings of contrastive models: sci, com, taxon, taxon_com or mixed."""
    templates: str = "bioclip"
    """Template set (bioclip, photo, openai-imagenet, raw) or one template containing {c}."""
    logit_scale: str = "learned"
    """'learned' (the model's own scale) or a number: it sets how sharply probability mass is rolled up."""
    lineage_prompt: str = DEFAULT_LINEAGE_PROMPT
    """VLM prompt with the hint: {hint} (names joined by ' > '), {ranks} (the ranks below it, in words) and
    {schema} (the JSON object asked for); literal braces doubled."""
    lineage_nohint_prompt: str = DEFAULT_NOHINT_PROMPT
    """VLM prompt without the hint: {ranks} (all seven) and {schema}; literal braces doubled."""
    vlm_concurrency: int = 8
    """Requests in flight at once to a VLM endpoint."""
    vlm_deadline_s: float = 60.0
    """Seconds one VLM request may take in all (attempts and the waits between them): an endpoint that never
    answers, or trickles its answer, costs this much per request, then the request fails, saying so."""
    vlm_max_response_bytes: int = 2**20
    """Largest VLM answer read; a bigger body is an invalid response, never cached."""
    vlm_json: bool = True
    """Ask the endpoint for JSON mode (response_format json_object); turn off where it is rejected: the
    prompt still asks for JSON and every answer is read tolerantly."""

    def __post_init__(self) -> None:
        check_vlm_settings(self)


# --- targets -------------------------------------------------------------------------------------


def rank_name(lineage: Lineage, rank: Rank) -> str | None:
    """The name at a rank as answers give it: the species as its binomial (subspecies dropped)."""
    if rank != Rank.SPECIES:
        return lineage.names[rank]
    genus, species = lineage.names[Rank.GENUS], lineage.names[Rank.SPECIES]
    return f"{genus} {species.split()[0]}" if genus and species else None


@dataclass(frozen=True)
class Target:
    """One organism of a photo, to be named from the photo (and, with the hint, the top of its lineage)."""

    row: int
    """Position of the photo among the rows read (its image or vector)."""
    uuid: str
    """The photo's uuid."""
    index: int
    """Which organism of the photo (0 or 1)."""
    organism_uuid: str | None
    """The organism's own observation uuid."""
    lineage: Lineage
    """The target's true lineage."""
    other: Lineage
    """The other organism's lineage."""
    divergence: Rank | None
    """Broadest rank at which the two differ; ``None`` when they never do."""

    @property
    def below_hint(self) -> tuple[Rank, ...]:
        """Ranks the hinted model is asked for."""
        return () if self.divergence is None else RANKS[self.divergence + 1:]

    @property
    def scored_ranks(self) -> tuple[Rank, ...]:
        """Ranks below the hint with a known true name: what both conditions are scored on."""
        return tuple(r for r in self.below_hint if rank_name(self.lineage, r) is not None)

    @property
    def hint_ranks(self) -> tuple[Rank, ...]:
        return RANKS if self.divergence is None else RANKS[: self.divergence + 1]

    @property
    def hint_text(self) -> str:
        return " > ".join(n for n in (self.lineage.names[r] for r in self.hint_ranks) if n)

    @property
    def kingdom_pair(self) -> str:
        """The two kingdoms, sorted and joined by '|', so a pair reads the same from either organism."""
        kingdoms = (self.lineage.names[Rank.KINGDOM], self.other.names[Rank.KINGDOM])
        return "|".join(sorted(k or "unknown" for k in kingdoms))


@dataclass(frozen=True)
class TargetSet:
    """The targets of a run and what was skipped on the way."""

    targets: list[Target]
    rows_skipped: dict[str, int]
    """Reason -> photos not turned into targets (never silently)."""
    divergence_column_disagreements: int
    """Photos whose stored ``divergence_rank`` differs from the one computed from their lineages."""


def _stated_rank(value: Any) -> Rank | None:
    try:
        return None if value is None else Rank.parse(value)
    except CladebenchError:
        return None


def read_targets(rows: pa.Table) -> TargetSet:
    """Two targets per photo from ``uuid``, ``organisms`` and (when present) ``divergence_rank``."""
    uuids = rows.column("uuid").to_pylist()
    pairs = rows.column("organisms").to_pylist()
    stated = (rows.column("divergence_rank").to_pylist() if "divergence_rank" in rows.column_names
              else [None] * len(uuids))
    targets: list[Target] = []
    skipped: Counter[str] = Counter()
    disagreements = 0
    for row, (uuid, pair, given) in enumerate(zip(uuids, pairs, stated, strict=True)):
        if not pair or len(pair) != 2 or None in pair:
            skipped["not_two_organisms"] += 1
            continue
        lineages = [Lineage.from_row(organism) for organism in pair]
        rank = divergence_rank(*lineages)
        if given is not None and _stated_rank(given) != rank:
            disagreements += 1
        for index in (0, 1):
            targets.append(Target(row=row, uuid=uuid, index=index, organism_uuid=pair[index].get("observation_uuid"),
                                  lineage=lineages[index], other=lineages[1 - index], divergence=rank))
    return TargetSet(targets, dict(skipped), disagreements)


# --- conditions, completions and scores ----------------------------------------------------------

@dataclass(frozen=True)
class Condition:
    """What a model is given and asked under one condition."""

    asked: Callable[[Target], tuple[Rank, ...]]
    """The ranks the model names for a target."""
    prefix: Callable[[Target], tuple[str | None, ...]]
    """The names it is given (the candidates of a contrastive model lie under them)."""
    prompt_field: str
    """The config field holding the VLM prompt."""


CONDITIONS: dict[str, Condition] = {
    "hint": Condition(asked=lambda t: t.below_hint, prefix=lambda t: t.lineage.key(t.divergence),
                      prompt_field="lineage_prompt"),
    "nohint": Condition(asked=lambda t: RANKS, prefix=lambda t: (), prompt_field="lineage_nohint_prompt"),
}
"""Condition name -> what it gives and asks."""

NOHINT_ENABLED: dict[str, Callable[[LineageConfig], bool]] = {
    "clip": lambda config: config.nohint,
    "vlm": lambda config: config.vlm_nohint,
}
"""Model kind -> whether the no-hint condition runs beside the hinted one."""


def conditions_for(kind: str, config: LineageConfig) -> tuple[str, ...]:
    """The conditions a run scores, in order."""
    if not config.hint:
        return ("nohint",)
    return ("hint", "nohint") if NOHINT_ENABLED[kind](config) else ("hint",)


@dataclass(frozen=True)
class Completion:
    """What a model named for one target under one condition."""

    names: tuple[str | None, ...]
    """Seven names (the species as a binomial); ``None`` where not asked or not named."""
    status: str
    """How it came about: ``ranked``, ``no_candidates``, a parse status, ``bad_image``, ``invalid_response``,
    ``nothing_to_complete``."""
    answer: str | None = None
    """The VLM's raw answer."""
    candidates: int | None = None
    """Candidate species the contrastive model chose among."""
    true_in_candidates: bool | None = None
    """Whether the target's species was among them."""


NOTHING = Completion(names=(None,) * len(RANKS), status="nothing_to_complete")
"""The completion of a target with no rank below its hint (it is not asked)."""


@dataclass(frozen=True)
class Score:
    """One target's completion scored (see the module docstring for the definitions)."""

    correct: dict[Rank, bool]
    """Scored rank -> whether the predicted name is the true one."""
    exact: bool
    depth: int
    lca_distance: float
    named_other: bool
    hint_agreement: bool
    """The prediction equals the hint at every hinted rank with a known name."""


def score_target(target: Target, completion: Completion, asked: Sequence[Rank]) -> Score | None:
    """Score a completion; ``None`` for a target with no scored rank."""
    ranks = target.scored_ranks
    if not ranks:
        return None
    correct = {r: names_match(completion.names[r], rank_name(target.lineage, r)) for r in ranks}
    depth = next((i for i, r in enumerate(ranks) if not correct[r]), len(ranks))
    named = [r for r in asked if completion.names[r] is not None]
    deepest = named[-1] if named else None
    named_other = deepest is not None and names_match(completion.names[deepest], rank_name(target.other, deepest)) \
        and not names_match(completion.names[deepest], rank_name(target.lineage, deepest))
    hinted = [r for r in target.hint_ranks if rank_name(target.lineage, r) is not None]
    agreement = all(names_match(completion.names[r], rank_name(target.lineage, r)) for r in hinted)
    return Score(correct=correct, exact=depth == len(ranks), depth=depth,
                 lca_distance=(len(ranks) - depth) / len(ranks), named_other=bool(named_other),
                 hint_agreement=agreement)


@dataclass(frozen=True)
class Predicted:
    """What a predictor hands back to :func:`lineage`."""

    found: TargetSet
    completions: dict[str, list[Completion]]
    """Condition -> one completion per target, in target order."""
    info: dict[str, Any]
    """Provenance gathered while predicting."""
    labels: list[str]
    """Candidate label strings when they are the benchmark's own (a taxonomy file is named by path and digest)."""


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


def candidate_text_embeddings(tree: CandidateTree, spans: Iterable[tuple[int, int]], encoder: Any,
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


def _image_column(dataset: lance.LanceDataset, encoder: Any, column: str | None) -> tuple[str, dict[str, Any]]:
    return text_image_column(dataset, encoder, column, task="lineage")


def _pair_columns(dataset: lance.LanceDataset) -> tuple[str, ...]:
    if "organisms" not in dataset.schema.names:
        raise SchemaError(f"{dataset.uri} has no 'organisms' column: lineage completion needs photos of two "
                          "organisms, each with its lineage (as iNat Co-Observed and `World.pair_table` have)")
    extra = ("divergence_rank",) if "divergence_rank" in dataset.schema.names else ()
    return ("uuid", "organisms", *extra)


def predict_contrastive(dataset: lance.LanceDataset, encoder: Any, config: LineageConfig,
                        conditions: Sequence[str]) -> Predicted:
    """Completions of a CLIP-style model from stored image embeddings (see the module docstring)."""
    from cladebench.store.embeddings import valid_embeddings

    column, meta = _image_column(dataset, encoder, config.column)
    selected = dataset.count_rows(filter=config.where)
    rows, vectors = valid_embeddings(dataset, column, where=config.where, columns=_pair_columns(dataset),
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
    species = dict(zip(unique, rank_queries(unique, normalize_rows(vectors), tree, text, scale), strict=True))
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


# --- VLMs ----------------------------------------------------------------------------------------


def ranks_in_words(ranks: Sequence[Rank]) -> str:
    """'order, family, genus and species'."""
    words = [r.column for r in ranks]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def json_schema_text(ranks: Sequence[Rank]) -> str:
    """The object a VLM is asked for: '{"order": "...", "family": "...", ...}'."""
    return "{" + ", ".join(f'"{r.column}": "..."' for r in ranks) + "}"


PROMPT_FIELDS: dict[str, set[str]] = {"lineage_prompt": {"hint", "ranks", "schema"},
                                      "lineage_nohint_prompt": {"ranks", "schema"}}
"""Config field -> the placeholders its template may use."""


def check_prompts(config: LineageConfig) -> None:
    """Every prompt uses only its own placeholders, and the hinted one gives the hint."""
    for name, allowed in PROMPT_FIELDS.items():
        template = getattr(config, name)
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
        except ValueError as exc:
            raise CladebenchError(f"{name}: {exc} in {template!r} (write literal braces as {{{{ and }}}})") from None
        if not fields <= allowed:
            raise CladebenchError(f"{name} may use {sorted(allowed)}, got {sorted(fields)} in {template!r}")
    if "hint" not in {f for _, f, _, _ in string.Formatter().parse(config.lineage_prompt) if f}:
        raise CladebenchError(f"lineage_prompt must give the hint with {{hint}}: {config.lineage_prompt!r}")


def vlm_prompt(target: Target, condition: str, config: LineageConfig) -> str:
    """The question for one target under one condition."""
    spec = CONDITIONS[condition]
    ranks = spec.asked(target)
    template = getattr(config, spec.prompt_field)
    return template.format(hint=target.hint_text, ranks=ranks_in_words(ranks), schema=json_schema_text(ranks))


@dataclass(frozen=True)
class Reply:
    """A VLM's answer to one question."""

    text: str | None
    cached: bool
    failure: str | None
    """Why no answer exists, as ``status: reason`` (``bad_image``: the image does not decode;
    ``invalid_response``: an answer the client refused, such as one over its size cap); ``None`` when answered."""


async def ask_all(questions: Sequence[tuple[str, bytes]], model_id: str, config: LineageConfig) -> list[Reply]:
    """Every (prompt, image) question, concurrently, answers in order; the first endpoint error is raised."""
    from tqdm import tqdm

    from cladebench.images import ImageDecodeError
    from cladebench.models.endpoint import parse_endpoint
    from cladebench.models.vlm import InvalidResponseError, VLMClient, VLMConfig

    vlm_config = VLMConfig(concurrency=config.vlm_concurrency, request_deadline_s=config.vlm_deadline_s,
                           max_response_bytes=config.vlm_max_response_bytes)
    async with VLMClient(parse_endpoint(model_id), vlm_config) as vlm:
        with tqdm(total=len(questions), desc="asking", unit="question", leave=False) as bar:

            async def one(prompt: str, image: bytes) -> Reply:
                try:
                    result = await vlm.chat(prompt, image, json_mode=config.vlm_json)
                except ImageDecodeError as exc:
                    return Reply(None, False, f"bad_image: {exc.reason}")
                except InvalidResponseError as exc:  # one refused answer, not a reason to stop every question
                    return Reply(None, False, f"invalid_response: {exc.reason}")
                finally:
                    bar.update(1)
                return Reply(result.text, result.cached, None)

            tasks = [asyncio.ensure_future(one(p, i)) for p, i in questions]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                # One failure (a 4xx, retries exhausted) stops the rest; answers already in are cached.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise


def _parsed(reply: Reply, asked: Sequence[Rank]) -> Completion:
    if reply.text is None:
        return Completion((None,) * len(RANKS), (reply.failure or "bad_image").partition(":")[0],
                          answer=reply.failure)
    parsed = parse_lineage_answer(reply.text, asked)
    names = tuple(parsed.names[r.column] if r in asked else None for r in RANKS)
    return Completion(names, parsed.status, answer=reply.text)


def predict_vlm(dataset: lance.LanceDataset, encoder: Any, config: LineageConfig,
                conditions: Sequence[str]) -> Predicted:
    """Completions of a VLM behind an OpenAI-compatible endpoint (see the module docstring)."""
    check_prompts(config)
    rows = store.read(dataset, columns=[*_pair_columns(dataset), "image"], where=config.where)
    if rows.num_rows == 0:
        raise CladebenchError(f"no photos of {dataset.uri} match the filter {config.where!r}")
    found = read_targets(rows)
    images = rows.column("image")
    keys = {c: [(t.row, vlm_prompt(t, c, config)) if t.scored_ranks else None for t in found.targets]
            for c in conditions}
    unique = sorted({k for ks in keys.values() for k in ks if k is not None})
    replies = dict(zip(unique, asyncio.run(ask_all([(p, images[r].as_py()) for r, p in unique], encoder.model_id,
                                                   config)), strict=True))
    completions = {c: [NOTHING if k is None else _parsed(replies[k], CONDITIONS[c].asked(t))
                       for t, k in zip(found.targets, keys[c], strict=True)] for c in conditions}
    info = {
        "vlm_prompts": {c: getattr(config, CONDITIONS[c].prompt_field) for c in conditions},
        "vlm_json_mode": config.vlm_json, "vlm_concurrency": config.vlm_concurrency,
        "questions": len(unique), "answered": sum(r.text is not None for r in replies.values()),
        "cached": sum(r.cached for r in replies.values()),
    }
    return Predicted(found, completions, info, [])


PREDICTORS: dict[str, Callable[..., Predicted]] = {
    "clip": predict_contrastive,
    "vlm": predict_vlm,
}
"""Model kind (:func:`cladebench.models.spec.model_kind`) -> predictor."""


# --- the task ------------------------------------------------------------------------------------


def _condition_columns(condition: str, targets: Sequence[Target], completions: Sequence[Completion],
                       scores: Sequence[Score | None], kind: str) -> dict[str, Any]:
    c = condition
    columns: dict[str, Any] = {}
    for rank in RANKS:
        columns[f"{c}_pred_{rank.column}"] = pa.array([x.names[rank] for x in completions], pa.string())
    for rank in RANKS:
        columns[f"{c}_correct_{rank.column}"] = pa.array(
            [None if s is None else s.correct.get(rank) for s in scores], pa.bool_())
    columns[f"{c}_exact"] = pa.array([None if s is None else s.exact for s in scores], pa.bool_())
    columns[f"{c}_depth"] = pa.array([None if s is None else s.depth for s in scores], pa.int64())
    columns[f"{c}_lca_distance"] = pa.array([None if s is None else s.lca_distance for s in scores], pa.float64())
    columns[f"{c}_named_other"] = pa.array([None if s is None else s.named_other for s in scores], pa.bool_())
    if c == "nohint":
        columns["nohint_hint_agreement"] = pa.array([None if s is None else s.hint_agreement for s in scores],
                                                    pa.bool_())
    columns[f"{c}_status"] = pa.array([x.status for x in completions], pa.string())
    if kind == "vlm":
        columns[f"{c}_answer"] = pa.array([x.answer for x in completions], pa.string())
    else:
        columns[f"{c}_candidates"] = pa.array([x.candidates for x in completions], pa.int64())
        columns[f"{c}_true_in_candidates"] = pa.array([x.true_in_candidates for x in completions], pa.bool_())
    return columns


def predictions_table(targets: Sequence[Target], completions: dict[str, list[Completion]],
                      scores: dict[str, list[Score | None]], kind: str) -> pa.Table:
    """One row per (photo, target); see the module docstring for the columns."""
    columns: dict[str, Any] = {
        "uuid": pa.array([t.uuid for t in targets], pa.string()),
        "target": pa.array([t.index for t in targets], pa.int8()),
        "organism_uuid": pa.array([t.organism_uuid for t in targets], pa.string()),
        "divergence_rank": pa.array([None if t.divergence is None else t.divergence.column for t in targets],
                                    pa.string()),
        "kingdom_pair": pa.array([t.kingdom_pair for t in targets], pa.string()),
        "hint": pa.array([t.hint_text for t in targets], pa.string()),
        "n_below_hint": pa.array([len(t.below_hint) for t in targets], pa.int8()),
        "scored": pa.array([bool(t.scored_ranks) for t in targets], pa.bool_()),
    }
    for rank in RANKS:
        columns[f"true_{rank.column}"] = pa.array([rank_name(t.lineage, rank) for t in targets], pa.string())
    columns["other_species"] = pa.array([rank_name(t.other, Rank.SPECIES) for t in targets], pa.string())
    for condition, made in completions.items():
        columns.update(_condition_columns(condition, targets, made, scores[condition], kind))
    return pa.table(columns)


def lineage(dataset: lance.LanceDataset, encoder: Any, config: LineageConfig) -> Predictions:
    """Complete both organisms' lineages in every photo, with and without the hint; see the module docstring."""
    if encoder is None:
        raise CladebenchError("lineage needs a model: a CLIP-style model or openai-compatible:NAME@URL")
    kind = model_kind(encoder)
    conditions = conditions_for(kind, config)
    predicted = PREDICTORS[kind](dataset, encoder, config, conditions)
    found, completions, info = predicted.found, predicted.completions, predicted.info
    targets = found.targets
    if not targets:
        raise CladebenchError(f"no photo of {dataset.uri} (filter {config.where!r}) has two organisms")
    scores = {c: [score_target(t, x, CONDITIONS[c].asked(t)) for t, x in zip(targets, completions[c], strict=True)]
              for c in conditions}
    table = predictions_table(targets, completions, scores, kind)
    scored = sum(bool(t.scored_ranks) for t in targets)
    info.update({
        "kind": kind, "conditions": list(conditions), "where": config.where,
        "targets": {"photos": len({t.uuid for t in targets}), "targets": len(targets), "scored": scored,
                    "nothing_below_hint": len(targets) - scored, "rows_skipped": found.rows_skipped,
                    "divergence_column_disagreements": found.divergence_column_disagreements},
        "statuses": {c: dict(Counter(x.status for x in completions[c])) for c in conditions},
        "split": {"kind": "none: every selected photo is evaluated", "seed": None,
                  "sampling_unit": "organism in a photo (two targets per photo; bootstrap intervals resample photos)"},
    })
    return Predictions(table=table, labels=predicted.labels, info=info)


# --- metrics -------------------------------------------------------------------------------------


def _definitions() -> None:
    scored = ("over targets with at least one rank below the hint whose true name is known; names equal up to "
              "case and whitespace, the species compared as its binomial")
    texts = {
        "accuracy": "share of targets whose predicted name at the rank is the true one, over the targets for which "
                    "the rank is below the hint and its true name known; " + WILSON,
        "exact": "share of targets with every rank below the hint (with a known true name) right, " + scored + "; "
                 + WILSON,
        "depth": "mean number of ranks right in a row from the first rank below the hint down (the correct "
                 "prefix), " + scored + "; percentile bootstrap over photos",
        "lca_distance": "mean of (m - depth) / m, m the ranks below the hint with a known true name: the ranks from "
                        "the lowest common ancestor of prediction and truth down to species, as a share of those to "
                        "name (0 exact, 1 wrong at the first); " + scored + "; percentile bootstrap over photos",
        "named_other": "share of targets whose prediction at its deepest predicted rank (among those asked) is the "
                       "other organism's name there and not the target's, " + scored + "; " + WILSON,
        "unparseable": "share of targets whose VLM answer could not be read as any name at an asked rank, "
                       + scored + "; " + WILSON,
    }
    for condition in CONDITIONS:
        for name, text in texts.items():
            define_metric(f"{condition}_{name}", f"{condition}: {text}")
    define_metric("nohint_hint_agreement", "share of targets whose no-hint prediction equals the target's names at "
                  "every hinted rank (down to the divergence rank) with a known name, " + scored + "; " + WILSON)
    register_display(r"(no)?hint_depth", 1.0, "")
    register_display(r"(no)?hint_lca_distance", 1.0, "")


_definitions()


def _bool(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, present) of a nullable boolean column."""
    column = table.column(name)
    present = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    values = np.asarray(column.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    return values, present


def _mean(values: np.ndarray, photos: np.ndarray) -> Estimate:
    return bootstrap_ci(values, groups=photos, n_resamples=BOOTSTRAP_RESAMPLES)


def condition_metrics(table: pa.Table, condition: str) -> dict[str, dict[str, Any]]:
    """The metrics of one condition over the rows of ``table`` (see the module docstring)."""
    c = condition
    scored = np.asarray(table.column("scored").to_numpy(zero_copy_only=False), dtype=bool)
    if not scored.any() or f"{c}_exact" not in table.column_names:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for rank in RANK_COLUMNS:
        values, present = _bool(table, f"{c}_correct_{rank}")
        if (present & scored).any():
            out[f"{c}_accuracy_{rank}"] = accuracy(values[present & scored]).to_dict()
    out[f"{c}_exact"] = accuracy(_bool(table, f"{c}_exact")[0][scored]).to_dict()
    photos = np.asarray(table.column("uuid").to_pylist(), dtype=object)[scored]
    for name in ("depth", "lca_distance"):
        values = np.asarray(table.column(f"{c}_{name}").to_numpy(zero_copy_only=False), dtype=np.float64)[scored]
        out[f"{c}_{name}"] = _mean(values, photos).to_dict()
    out[f"{c}_named_other"] = accuracy(_bool(table, f"{c}_named_other")[0][scored]).to_dict()
    if f"{c}_hint_agreement" in table.column_names:
        out[f"{c}_hint_agreement"] = accuracy(_bool(table, f"{c}_hint_agreement")[0][scored]).to_dict()
    if f"{c}_answer" in table.column_names:
        status = np.asarray(table.column(f"{c}_status").to_pylist(), dtype=object)[scored]
        out[f"{c}_unparseable"] = accuracy(status == UNPARSEABLE).to_dict()
    return out


BREAKDOWNS: dict[str, str] = {"divergence": "divergence_rank", "kingdom_pair": "kingdom_pair"}
"""Metric-name prefix -> predictions column whose values the metrics are broken down by."""


def lineage_metrics(predictions: Predictions) -> dict[str, dict[str, Any]]:
    """Every condition's metrics, pooled and broken down by divergence rank and kingdom pair."""
    table = predictions.table
    conditions = predictions.info.get("conditions") or [c for c in CONDITIONS if f"{c}_exact" in table.column_names]
    out: dict[str, dict[str, Any]] = {}
    for condition in conditions:
        out.update(condition_metrics(table, condition))
    for prefix, column in BREAKDOWNS.items():
        values = table.column(column).to_pylist()
        for value in sorted({v for v in values if v is not None}, key=_breakdown_order):
            subset = table.filter(pa.array([v == value for v in values]))
            for condition in conditions:
                for name, estimate in condition_metrics(subset, condition).items():
                    out[f"{prefix}={value}/{name}"] = estimate
    return out


def _breakdown_order(value: str) -> tuple[int, str]:
    """Ranks in taxonomic order, anything else after them alphabetically."""
    return (RANK_COLUMNS.index(value), "") if value in RANK_COLUMNS else (len(RANK_COLUMNS), value)


def per_target_values(table: pa.Table, task_provenance: dict[str, Any]) -> dict[str, tuple[list[Any], np.ndarray]]:
    """Each scored target's value of every pooled metric, keyed by 'uuid#target', so runs pair target by target."""
    keys = [f"{u}#{t}" for u, t in zip(table.column("uuid").to_pylist(), table.column("target").to_pylist(),
                                        strict=True)]
    scored = np.asarray(table.column("scored").to_numpy(zero_copy_only=False), dtype=bool)
    out: dict[str, tuple[list[Any], np.ndarray]] = {}
    for condition in CONDITIONS:
        if f"{condition}_exact" not in table.column_names:
            continue
        columns = {f"{condition}_accuracy_{r}": f"{condition}_correct_{r}" for r in RANK_COLUMNS}
        columns.update({f"{condition}_{m}": f"{condition}_{m}" for m in ("exact", "depth", "lca_distance",
                                                                          "named_other", "hint_agreement")})
        for metric, column in columns.items():
            if column not in table.column_names:
                continue
            present = np.asarray(table.column(column).is_valid().to_numpy(zero_copy_only=False), dtype=bool) & scored
            if not present.any():
                continue
            values = table.column(column).cast(pa.float64()).fill_null(0.0).to_numpy()
            out[metric] = ([k for k, p in zip(keys, present, strict=True) if p], values[present])
        if f"{condition}_answer" in table.column_names:
            status = np.asarray(table.column(f"{condition}_status").to_pylist(), dtype=object)
            out[f"{condition}_unparseable"] = ([k for k, p in zip(keys, scored, strict=True) if p],
                                              (status[scored] == UNPARSEABLE).astype(np.float64))
    return out
