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

Two conditions, so the value of the hint is measured on the same targets
(:data:`~cladebench.tasks.lineage.targets.CONDITIONS`):

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
  taxonomy that encodes every species once (the hinted condition alone: ``conditions='hint'``).
  (:data:`TEXT_BLOCK` and :data:`CHUNK_CELLS` live in :mod:`cladebench.tasks.lineage.contrastive`.)
- ``vlm`` (an OpenAI-compatible chat endpoint, ``openai-compatible:NAME@URL``): the photo and a prompt
  that gives the hint and asks for exactly the ranks below it as a JSON object ("One organism in this
  photo belongs to Animalia > Arthropoda > Insecta. Name its order, family, genus and species. ...").
  JSON mode is requested unless ``vlm_json=False`` (for endpoints that reject ``response_format``); the
  answer is read by :func:`cladebench.tasks.lineage.parse.parse_lineage_answer` either way, tolerant of prose,
  code fences and ``Order: X`` lines. An unreadable answer is scored wrong and counted. The no-hint
  prompt (all seven ranks, one request per photo) is asked only with ``conditions='both'`` or ``'nohint'``.

Metrics (:func:`~cladebench.tasks.lineage.metrics.lineage_metrics`), for each condition ``C`` in
``hint``/``nohint``, over the *scored* targets (at least one rank below the hint with a known true name); names
are compared up to case and whitespace, the species as its binomial:

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

The pieces live in one module per job: :mod:`~cladebench.tasks.lineage.config` (the config),
:mod:`~cladebench.tasks.lineage.targets` (targets, conditions, scores), :mod:`~cladebench.tasks.lineage.contrastive`
and :mod:`~cladebench.tasks.lineage.vlm` (the two model kinds), :mod:`~cladebench.tasks.lineage.parse` (reading
VLM answers), :mod:`~cladebench.tasks.lineage.metrics`; this module runs the task and builds its predictions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

import pyarrow as pa

from cladebench.errors import CladebenchError
from cladebench.models.spec import ANSWERS, EMBEDS_IMAGES, EMBEDS_TEXTS, first_fitting
from cladebench.registry import Registry
from cladebench.tasks.common import Predictions
from cladebench.tasks.lineage.config import LineageConfig
from cladebench.tasks.lineage.contrastive import predict_contrastive
from cladebench.tasks.lineage.targets import (
    CONDITIONS,
    Completion,
    Predicted,
    Score,
    Target,
    conditions_for,
    rank_name,
    score_target,
)
from cladebench.tasks.lineage.vlm import predict_vlm
from cladebench.taxonomy import RANKS, Rank

if TYPE_CHECKING:
    import lance

    from cladebench.models.spec import ImageTextEncoder, Model

PREDICTORS: Registry[Callable[..., Predicted]] = Registry("lineage predictor")
"""Predictor name (``clip``: candidates ranked by cosine; ``vlm``: lineages named by a VLM) -> predictor;
:data:`PREDICTOR_NEEDS` says which models each takes."""
PREDICTORS.add("clip", predict_contrastive)
PREDICTORS.add("vlm", predict_vlm)

PREDICTOR_NEEDS: Mapping[str, frozenset[str]] = MappingProxyType({
    "clip": frozenset({EMBEDS_IMAGES, EMBEDS_TEXTS}), "vlm": frozenset({ANSWERS})})
"""Predictor -> what it needs of a model, tried in this order."""
MODEL_NEEDS: tuple[frozenset[str], ...] = tuple(PREDICTOR_NEEDS.values())
"""What lineage needs of a model: any one predictor's needs."""


def predictor_for(encoder: Model | ImageTextEncoder) -> str:
    """The first predictor whose needs the model meets (the plan refused a model that meets none)."""
    return first_fitting("lineage", PREDICTOR_NEEDS, encoder)


# --- the task ------------------------------------------------------------------------------------


def _condition_columns(condition: str, targets: Sequence[Target], completions: Sequence[Completion],
                       scores: Sequence[Score | None], kind: str) -> dict[str, object]:
    c = condition
    columns: dict[str, object] = {}
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
    columns: dict[str, object] = {
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


def lineage(dataset: lance.LanceDataset, encoder: Model, config: LineageConfig) -> Predictions:
    """Complete both organisms' lineages in every photo, with and without the hint; see the module docstring."""
    if encoder is None:
        raise CladebenchError("lineage needs a model: a CLIP-style model or openai-compatible:NAME@URL")
    kind = predictor_for(encoder)
    conditions = conditions_for(kind, config)
    predicted = PREDICTORS.get_named(kind)(dataset, encoder, config, conditions)
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
