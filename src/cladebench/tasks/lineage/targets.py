"""Targets of lineage completion and how one completion is scored against one target.

Why a module of its own: each organism of a two-organism photo is a target with a hint (its lineage down to the
divergence rank); the conditions (hint, nohint), the completions a model gives and their scores are shared by
the contrastive path, the VLM path and the task that builds the prediction table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cladebench.errors import CladebenchError, SchemaError
from cladebench.registry import look_up
from cladebench.tasks.lineage.config import AUTO_CONDITIONS, CONDITION_CHOICES, LineageConfig
from cladebench.tasks.lineage.parse import names_match
from cladebench.taxonomy import RANKS, Lineage, Rank, divergence_rank

if TYPE_CHECKING:
    import lance


# --- targets -------------------------------------------------------------------------------------


def rank_name(lineage: Lineage, rank: Rank) -> str | None:
    """The name at a rank as answers give it: the species as its binomial (subspecies dropped)."""
    if rank != Rank.SPECIES:
        return lineage.names[rank]
    genus, epithet = lineage.names[Rank.GENUS], lineage.epithet
    return f"{genus} {epithet.split()[0]}" if genus and epithet else None


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


CONDITIONS: Mapping[str, Condition] = MappingProxyType({
    "hint": Condition(asked=lambda t: t.below_hint, prefix=lambda t: tuple(t.lineage.names[r] for r in t.hint_ranks),
                      prompt_field="lineage_prompt"),
    "nohint": Condition(asked=lambda t: RANKS, prefix=lambda t: (), prompt_field="lineage_nohint_prompt"),
})
"""Condition name -> what it gives and asks (in the order the predictions list them)."""

def conditions_for(kind: str, config: LineageConfig) -> tuple[str, ...]:
    """The conditions a run scores, in order (the config checked its ``conditions``)."""
    return CONDITION_CHOICES[config.conditions] or look_up(AUTO_CONDITIONS, "model kind", kind)


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
    info: dict[str, object]
    """Provenance gathered while predicting."""
    labels: list[str]
    """Candidate label strings when they are the benchmark's own (a taxonomy file is named by path and digest)."""


def pair_columns(dataset: lance.LanceDataset) -> tuple[str, ...]:
    """The columns both model kinds read for the targets; a dataset without ``organisms`` is a schema error."""
    if "organisms" not in dataset.schema.names:
        raise SchemaError(f"{dataset.uri} has no 'organisms' column: lineage completion needs photos of two "
                          "organisms, each with its lineage (as iNat Co-Observed and `World.pair_table` have)")
    extra = ("divergence_rank",) if "divergence_rank" in dataset.schema.names else ()
    return ("uuid", "organisms", *extra)
