"""The eval configs: what every evaluation takes, and each task's own settings on top (``cladebench eval <task>``).

Why a module of its own: the configs are what the command line, the suite and the Python API build and check
before anything runs; the run (:mod:`.run`) only reads them, through the plan (:mod:`.plan`). It imports no
pyarrow, scipy or task code, so the command line's help and usage errors cost none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from cladebench.config import INTERNAL, OPTION
from cladebench.registry import Registry
from cladebench.tasks import DEFAULT_TASK
from cladebench.tasks.configs import RerankConfig, RetrievalTaskConfig, ZeroShotConfig
from cladebench.tasks.fewshot.config import FewShotConfig
from cladebench.tasks.geo.config import GeoPriorConfig
from cladebench.tasks.lineage.config import LineageConfig


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """What every evaluation needs, whatever the task; each task's eval config adds the task's own fields."""

    SHOWN: ClassVar[tuple[str, ...]] = ("out", "model", "run_name", "where", "group_by", "breakdown", "data")
    """The options every `eval TASK --help` lists, before the task's own (:data:`cladebench.config.SHOWN`); every
    other field is a setting given by key."""

    dataset: str
    """Path or URI of the Lance dataset, or a benchmark's name (`cladebench benchmarks`). A dataset holds an emb_*
    column made by `cladebench embed` for this model."""
    out: Path = field(metadata=OPTION)
    """Directory for run.json and predictions.parquet."""
    model: str | None = None
    """The model whose embeddings are evaluated (same forms as for `embed`); fewshot and retrieval on a --column
    need none (the column's metadata names the model in the record)."""
    task: str | None = None
    """Registered task; default: the named benchmark's task, else zeroshot (each task's eval config fixes it)."""
    revision: str | None = None
    """Model revision instead of the pinned one."""
    run_name: str | None = None
    """Name of the run in reports and comparisons (the record's `label`); default: the model as named and the
    settings that differ from the task's defaults (e.g. 'bioclip · sci')."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the text tower runs."""
    where: str | None = None
    """SQL filter selecting the evaluated rows (parsed against the dataset's schema before any model loads)."""
    group_by: str = "auto"
    """Evaluate each value of this column as its own benchmark (own label set, metrics GROUP/name, never
    pooled); 'auto' = challenge_group when the dataset has it; 'none' = one pooled evaluation."""
    breakdown: tuple[str, ...] = ()
    """Columns to break the metrics down by (same predictions, scored per value), e.g. taxonomic_group."""
    unseen_only: bool = False
    """Only rows whose seen_in_training list is empty (no listed model trained on them); rows without a list
    (unknown exposure) are left out."""
    not_seen_by: str | None = None
    """Only rows not seen in training by this model (as named in seen_in_training, e.g. bioclip-2); rows without
    a list (unknown exposure) are left out."""
    data: Path | None = None
    """A named benchmark's local mirror: a folder in its published layout (default: $CLADEBENCH_MIRROR/<name> when
    that folder exists, else the published source)."""
    labels_from_reviews: bool = False
    """Score against the labels experts gave in `cladebench serve` instead of the dataset's: only reviewed rows
    whose reviewers agree are scored (disagreements, 'not identifiable' and unknown uuids are counted, not scored);
    recorded as such in the run record."""
    is_benchmark: bool | None = field(default=None, metadata=INTERNAL)
    """Whether :attr:`dataset` names a benchmark, when :func:`eval_config` has decided it already (to choose the
    task); None: the plan decides. Either way it is decided once."""
    given: tuple[str, ...] = field(default=(), metadata=INTERNAL)
    """The settings the user gave (the command line and :func:`eval_config` fill it): a benchmark's protocol never
    replaces them. Empty (a config class called directly): each setting that differs from its default counts."""

    def __post_init__(self) -> None:
        # The task config mixed in after this class checks its own settings (ranges, names) first; then the
        # settings every evaluation shares, so any value that is wrong without a dataset is refused here.
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        # imported here: `cladebench eval TASK --help` reads these classes, and the checks read datasets (pyarrow)
        from cladebench.evaluate.checks import check_eval_settings
        from cladebench.evaluate.labels import check_run_name
        from cladebench.evaluate.reviewed import check_labels_from_reviews

        check_eval_settings(self)
        check_run_name(self.run_name)
        check_labels_from_reviews(self)


EVAL_CONFIGS: Registry[type[EvalConfig]] = Registry("task")
"""Each registered task's eval config (``cladebench eval <task>``): the shared fields and the task's own, nothing
of another task's."""


@EVAL_CONFIGS.register(ZeroShotConfig.TASK)
@dataclass(frozen=True, kw_only=True)
class ZeroShotEvalConfig(EvalConfig, ZeroShotConfig):
    """Zero-shot classification: the images against text embeddings of the benchmark's taxa at --rank; writes
    run.json + predictions.parquet."""

    task: str = field(default=ZeroShotConfig.TASK, init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register(FewShotConfig.TASK)
@dataclass(frozen=True, kw_only=True)
class FewShotEvalConfig(EvalConfig, FewShotConfig):
    """Few-shot classification on the stored image embeddings (SimpleShot, linear probe, kNN) over seeded,
    group-aware splits; writes run.json + predictions.parquet."""

    task: str = field(default=FewShotConfig.TASK, init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register(RetrievalTaskConfig.TASK)
@dataclass(frozen=True, kw_only=True)
class RetrievalEvalConfig(EvalConfig, RetrievalTaskConfig):
    """Image-to-image retrieval on the stored embeddings: same taxon at --rank is relevant (mAP, MRR, P@k, R@k);
    writes run.json + predictions.parquet."""

    task: str = field(default=RetrievalTaskConfig.TASK, init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register(RerankConfig.TASK)
@dataclass(frozen=True, kw_only=True)
class RerankEvalConfig(EvalConfig, RerankConfig):
    """Rerank each query's candidates by a CLIP-style cosine or a VLM endpoint's P(Yes) (INQUIRE's AP, nDCG,
    MRR); writes run.json + predictions.parquet."""

    task: str = field(default=RerankConfig.TASK, init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register(LineageConfig.TASK)
@dataclass(frozen=True, kw_only=True)
class LineageEvalConfig(EvalConfig, LineageConfig):
    """Lineage completion on photos of two organisms, with and without the hint; writes run.json +
    predictions.parquet."""

    task: str = field(default=LineageConfig.TASK, init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register(GeoPriorConfig.TASK)
@dataclass(frozen=True, kw_only=True)
class GeoEvalConfig(EvalConfig, GeoPriorConfig):
    """Zero-shot fused with a place and season prior (or a location embedding); writes run.json +
    predictions.parquet."""

    task: str = field(default=GeoPriorConfig.TASK, init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


def eval_config(*, task: str | None = None, **fields: Any) -> EvalConfig:
    """The eval config of ``task`` built from ``fields``; without a task, the named benchmark's (when ``dataset``
    names one and no folder of that name exists), else zeroshot's. An unknown task is a usage error."""
    fields.setdefault("given", tuple(fields))  # the keywords passed are the settings given
    if task is None:
        from cladebench.benchmarks import named_benchmark

        benchmark = named_benchmark(str(fields.get("dataset", "")), data=fields.get("data"))
        task = benchmark.task if benchmark is not None else DEFAULT_TASK
        fields["is_benchmark"] = benchmark is not None  # the plan reads this decision rather than taking it again
    return EVAL_CONFIGS.get_named(task)(**fields)
