"""Tasks: functions ``(dataset, encoder, config) -> Predictions``, one prediction row per example.

Every task is registered in :data:`TASKS` (a :class:`~cladebench.registry.Registry`) with what ``cladebench eval``
needs: its config class, the function that predicts, and the function that turns predictions into metrics.
Metrics are never computed inside a task, so a paired comparison or a re-analysis works from the same rows.
What several tasks share (label sets, embedding-column lookup, vector checks) is in :mod:`cladebench.tasks.common`
and :mod:`cladebench.tasks.labelled_rows`; no task module imports another task's module for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cladebench.models.spec import EMBEDS_IMAGES, EMBEDS_TEXTS
from cladebench.registry import Registry

if TYPE_CHECKING:
    from cladebench.tasks.configs import TaskSettings

IMAGES_AND_TEXTS: tuple[frozenset[str], ...] = (frozenset({EMBEDS_IMAGES, EMBEDS_TEXTS}),)
"""What a task scoring images against texts needs of a model: an image tower and a text tower."""
IMAGES: tuple[frozenset[str], ...] = (frozenset({EMBEDS_IMAGES}),)
"""What a task on image vectors alone needs of a model: that it embeds images (its column holds them)."""


@dataclass(frozen=True)
class LabelSetting:
    """A setting that changes a task's results, and how a run's label says it when it is not the task's default
    (:func:`cladebench.evaluate.labels.default_label`)."""

    field: str
    """The config field (as ``run.json``'s config records it)."""
    said: str = "{}"
    """How the label says it, ``{}`` standing for the value: ``{}`` (``sci``), ``scale {}``, ``{} shots``; a phrase
    without ``{}`` is said as it is (``own prompt``)."""
    file: bool = False
    """Whether the value is a path, said by its last segment (``labels birds.csv``)."""


TEXT_TOWER_SETTINGS = (LabelSetting("name_style"), LabelSetting("templates"), LabelSetting("logit_scale", "scale {}"))
"""The label settings of every task that scores images against texts of names."""


@dataclass(frozen=True)
class Task:
    """A registered task."""

    name: str
    config: type[TaskSettings]
    predict: Callable[..., Any]
    metrics: Callable[[Any], dict[str, Any]]
    description: str
    uses_encoder: bool = True
    """False for tasks on stored image embeddings alone (no text tower to load)."""
    per_unit: Callable[[Any, dict[str, Any]], dict[str, tuple[Any, ...]]] | None = None
    """For metrics that are means over units other than rows (queries): (predictions table, the record's task
    provenance) -> metric -> (unit keys, values), so `compare` can pair runs unit by unit; a metric that is a ratio
    of sums (mistake severity) gives (unit keys, values, weights), the ratio being sum(values) / sum(weights)."""
    unit: str = "images"
    """What the paired comparison resamples, as tables name it ("queries", "query images", "targets")."""
    label_set: Callable[..., object] | None = None
    """(dataset, settings) -> the run's label set (:class:`~cladebench.tasks.common.PlannedLabelSet`, or None where
    the model's run supplies it), for a task that scores against one: the evaluation plan builds it once per group
    before any model loads and hands it to ``predict`` as ``label_set=``."""
    without_label_set: str = ""
    """Why a task with no :attr:`label_set` has none (what its classes or units are instead), as the plan records."""
    needs: tuple[frozenset[str], ...] = IMAGES_AND_TEXTS
    """What the task needs of a model: alternatives, any one of which suffices, each a set of capabilities
    (:data:`cladebench.models.spec.EMBEDS_IMAGES`, ...). The plan checks them against the model's before any
    weights load (:func:`cladebench.models.spec.missing_for`)."""
    label_settings: tuple[LabelSetting, ...] = ()
    """The settings a run's label names where they differ from the task's defaults, in the order it names them;
    settings that change what is reported but not the results (concurrency, deadlines) are left out. Empty: a
    label names the model alone."""
    headline: tuple[str, ...] = ()
    """The metrics a leaderboard leads with, best first (the first is the primary one, shown per challenge group):
    each a regular expression a metric's name matches whole, ``{rank}`` standing for the run's label rank. Empty:
    the report shows the run's first metrics."""
    reviewed_labels: bool = False
    """Whether a row's truth is its own taxon, which a review replaces (``--labels-from-reviews`` applies)."""
    gallery_rule: str | None = None
    """For a task whose queries search a gallery: which images a query's gallery holds (the comparability key
    records it, so runs with other galleries are not paired)."""
    report_sections: tuple[str, ...] = ()
    """The report's sections of the task's own (beyond those every task gets), by the names the report registers
    them under (``lineage``: completion by divergence rank)."""
    breakdowns_apart: tuple[str, ...] = ()
    """Breakdown columns one of its own report sections shows in more detail (the per-group charts leave them out)."""
    error_gallery: str | None = None
    """Which error gallery a report draws of the task's runs, by the key the report registers it under."""
    not_predicted: str = "not predicted: no usable vector (e.g. a photo not retrieved) or no label at the rank"
    """Why a selected row the task did not predict was left out, as the record's row accounting says it."""
    hub_task: str | None = None
    """The nearest Hugging Face Hub task type, for a model card's ``model-index`` (None: the task's own name)."""


TASKS: Registry[Task] = Registry("task")
"""Registered tasks by name (the built-in ones are registered by :func:`get_task` on first use, so importing this
package stays light)."""


def register_task(task: Task) -> Task:
    """Register ``task`` under its own name."""
    return TASKS.add(task.name, task)


def all_tasks() -> Registry[Task]:
    """Every task, the built-in ones loaded: what a digest of every metric definition needs (each task module
    defines its metrics when it is imported)."""
    for builtin in _BUILTIN_TASKS:
        _load_builtin_task(builtin)
    return TASKS


DEFAULT_TASK = "zeroshot"
"""The task ``eval`` runs when none is named (and a benchmark names none)."""


def known_task(name: str) -> Task | None:
    """The task called ``name``, or None for a name this version does not know (a record read from elsewhere): what
    a reader of records asks, where an unknown task is shown with defaults rather than refused."""
    if name in _BUILTIN_TASKS:
        _load_builtin_task(name)
    return TASKS.get(name)


def get_task(name: str) -> Task:
    """The task called ``name``; an unknown name is a usage error that lists the tasks and suggests the closest.

    A built-in task's module is imported when the task is first asked for, alone: a zero-shot run imports none of
    geo's scipy or lineage's parsers."""
    for builtin in ([name] if name in _BUILTIN_TASKS else list(_BUILTIN_TASKS)):
        _load_builtin_task(builtin)
    return TASKS.get_named(name)


@functools.cache
def _load_builtin_task(name: str) -> None:
    """Register the built-in task ``name``, once per process."""
    if name not in TASKS:
        register_task(_BUILTIN_TASKS[name]())


def _zeroshot() -> Task:
    from cladebench.tasks import zeroshot

    return Task(
        name="zeroshot", config=zeroshot.ZeroShotConfig, predict=zeroshot.zero_shot,
        metrics=zeroshot.zero_shot_metrics, label_set=zeroshot.zero_shot_label_set, per_unit=zeroshot.per_image_values,
        # mistake severity beside accuracy: the same accuracy with gentler mistakes is the better model
        headline=("top1_{rank}", "top5_{rank}", "balanced_accuracy_{rank}", "mistake_severity_{rank}"),
        reviewed_labels=True, error_gallery="least-probable-truth", hub_task="zero-shot-image-classification",
        label_settings=(*TEXT_TOWER_SETTINGS, LabelSetting("rank"), LabelSetting("labels", "labels {}", file=True),
                        LabelSetting("candidates", "among {}"), LabelSetting("within", "within {}")),
        description="images against text embeddings of the benchmark's taxa; top-1/top-5 and rolled-up ranks, "
                    "mistake severity and hierarchical distance@1/@5",
    )


def _fewshot() -> Task:
    from cladebench.tasks import fewshot

    return Task(
        name="fewshot", config=fewshot.FewShotConfig, predict=fewshot.few_shot, metrics=fewshot.few_shot_metrics,
        per_unit=fewshot.per_query_image_values, unit="query images",
        headline=(r"[a-z]+(?:-[a-z]+)*_\d+shot",), reviewed_labels=True, hub_task="image-classification",
        label_settings=(LabelSetting("rank"), LabelSetting("shots", "{} shots"), LabelSetting("methods"),
                        LabelSetting("repetitions", "{} reps"), LabelSetting("seed", "seed {}"),
                        LabelSetting("knn_k", "k {}"), LabelSetting("knn_weights")),
        not_predicted="never a query: support images in every repetition, classes too small for the shots, no "
                      "usable vector or no label at the rank",
        description="k labelled images per taxon on frozen embeddings (SimpleShot, linear probe, kNN); "
                    "group-aware seeded splits, mean and t-interval over repetitions",
        uses_encoder=False, needs=IMAGES,
        without_label_set="none decided before the run: the classes are those of each seeded split (taxa with "
                          "enough images for the shots)",
    )


def _retrieval() -> Task:
    from cladebench.tasks import retrieval

    return Task(
        name="retrieval", config=retrieval.RetrievalTaskConfig, predict=retrieval.retrieval,
        metrics=retrieval.retrieval_task_metrics, per_unit=retrieval.per_query_values, unit="queries",
        headline=("map_{rank}", "mrr_{rank}"), reviewed_labels=True, hub_task="image-feature-extraction",
        gallery_rule="every other labelled image outside the query's group",
        label_settings=(LabelSetting("rank"), LabelSetting("k", "k {}"), LabelSetting("group_key", "by {}")),
        description="each image queries every other image outside its own group by exact cosine; same taxon at "
                    "the rank is relevant; mAP, mAP@k, MRR, precision@k, recall@k, also as per-class means",
        uses_encoder=False, needs=IMAGES,
        without_label_set="none: an image is relevant to a query of the same taxon at the rank; nothing is "
                          "classified",
    )


def _rerank() -> Task:
    from cladebench.tasks import rerank

    return Task(
        name="rerank", config=rerank.RerankConfig, predict=rerank.rerank, metrics=rerank.rerank_metrics,
        per_unit=rerank.per_query_values, unit="queries", needs=rerank.MODEL_NEEDS,
        headline=(r"ap@\d+", r"ndcg@\d+", r"mrr@\d+"), error_gallery="top-scored-irrelevant",
        hub_task="zero-shot-image-classification",
        label_settings=(LabelSetting("query_templates", "queries {}"), LabelSetting("rerank_k", "top {}"),
                        LabelSetting("vlm_prompt", "own prompt")),
        without_label_set="none: each query ranks its own candidates",
        description="rank each query's candidates by a CLIP-style cosine or a VLM's P(Yes); INQUIRE's AP, nDCG "
                    "and MRR per query, macro means with bootstrap intervals over queries",
    )


def _lineage() -> Task:
    from cladebench.tasks.lineage.config import LineageConfig
    from cladebench.tasks.lineage.metrics import lineage_metrics, per_target_values
    from cladebench.tasks.lineage.task import MODEL_NEEDS as LINEAGE_NEEDS
    from cladebench.tasks.lineage.task import lineage

    return Task(
        name="lineage", config=LineageConfig, predict=lineage, metrics=lineage_metrics,
        per_unit=per_target_values, unit="targets", needs=LINEAGE_NEEDS,
        headline=("hint_exact", "nohint_exact", "hint_lca_distance", "nohint_hint_agreement"),
        error_gallery="farthest-lineage", hub_task="image-text-to-text",
        report_sections=("lineage",), breakdowns_apart=("divergence",),
        label_settings=(*TEXT_TOWER_SETTINGS, LabelSetting("lineage_candidates", "candidates {}"),
                        LabelSetting("lineage_prompt", "own prompt"),
                        LabelSetting("lineage_nohint_prompt", "own no-hint prompt")),
        without_label_set="none decided before the run: lineages are named freely or among the candidate tree "
                          "the predictor builds",
        description="photos of two organisms: each organism's lineage below the divergence rank, from the photo "
                    "and the hint (and without it); per-rank accuracy, exact completion, correct depth, LCA "
                    "distance, naming the other organism; by divergence rank and kingdom pair",
    )


def _geo() -> Task:
    from cladebench.tasks.geo.config import GeoPriorConfig
    from cladebench.tasks.geo.task import geo, geo_label_set, geo_metrics, per_image_values

    return Task(
        name="geo", config=GeoPriorConfig, predict=geo, metrics=geo_metrics, label_set=geo_label_set,
        per_unit=per_image_values, headline=("fused_top1_{rank}", "image_top1_{rank}", "fused_minus_image_{rank}"),
        reviewed_labels=True, hub_task="zero-shot-image-classification",
        label_settings=(*TEXT_TOWER_SETTINGS, LabelSetting("rank"), LabelSetting("labels", "labels {}", file=True),
                        LabelSetting("candidates", "among {}"), LabelSetting("prior_fusion"),
                        LabelSetting("prior_cell_km", "{} km cells"),
                        LabelSetting("prior_neighbourhood_km", "{} km around"),
                        LabelSetting("prior_season_bins", "{} seasons"), LabelSetting("prior_alpha", "alpha {}"),
                        LabelSetting("prior_seed", "prior seed {}"),
                        LabelSetting("prior_dataset", "prior {}", file=True),
                        LabelSetting("prior_location_column", "location {}")),
        description="zero-shot fused with a place and season prior counted from held-out fit observations (or a "
                    "location embedding); image-only vs fused top-1, paired bootstrap of the gain, weight chosen on "
                    "validation",
    )


_BUILTIN_TASKS: dict[str, Callable[[], Task]] = {
    "zeroshot": _zeroshot, "fewshot": _fewshot, "retrieval": _retrieval, "rerank": _rerank, "lineage": _lineage,
    "geo": _geo,
}
"""The built-in tasks, each made (its module imported) on first use."""
