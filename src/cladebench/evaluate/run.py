"""``cladebench eval``: run a registered task on a dataset with a model and write its run record.

The flow is the same for every task: open the dataset, narrow the rows (filter, training exposure, clade) and
split them into the dataset's separate challenges when it has them (:mod:`~cladebench.evaluate.selection`, before
any model loads), predict (one row per example),
compute metrics from the predictions, gather provenance, write ``run.json`` and ``predictions.parquet``.

Some datasets hold several benchmarks in one table: Fine-Grained Challenges' ``challenge_group`` rows
(Peromyscus, Ixodidae, zebras) are separate problems with their own label sets, and pooling them would
let the easiest group hide the hardest. Such partition columns are evaluated group by group (each with
its own label set), and their metrics are reported per group as ``GROUP/metric`` and never pooled.
Breakdowns are different: the same predictions, scored on subsets (``taxonomic_group=Aves/top1_species``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench import store
from cladebench.config import OPTION, config_to_dict
from cladebench.errors import CladebenchError, NotEvaluableError, UsageError
from cladebench.evaluate.checks import check_before_model, check_eval_settings
from cladebench.evaluate.labels import check_label
from cladebench.evaluate.record import (
    RunRecord,
    check_out_outside_dataset,
    command_line,
    dataset_provenance,
    metric_definitions,
)
from cladebench.evaluate.reviewed import check_labels_from_reviews, reviewed_labels
from cladebench.evaluate.selection import (
    LEFT_OUT,
    and_filters,
    exposure_filter,
    left_out_metrics,
    none_evaluable,
    select_groups,
)
from cladebench.metrics import display_scale
from cladebench.models import registry as model_registry
from cladebench.models.spec import ModelSpec, model_kind
from cladebench.provenance import software_versions
from cladebench.registry import Registry
from cladebench.tasks.fewshot import FewShotConfig
from cladebench.tasks.geo.config import GeoPriorConfig
from cladebench.tasks.labelled_rows import label_digest
from cladebench.tasks.lineage.config import LineageConfig
from cladebench.tasks.rerank import RerankConfig
from cladebench.tasks.retrieval import RetrievalTaskConfig
from cladebench.tasks.zeroshot import ZeroShotConfig
from cladebench.templates import get_templates

GROUP_SEPARATOR = "/"
"""Between a group (or breakdown) and a metric name: ``Peromyscus/top1_species``."""


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """What every evaluation needs, whatever the task; each task's eval config adds the task's own fields."""

    dataset: str
    """Path or URI of the Lance dataset (with an emb_* column made by `cladebench embed` for this model), or the
    name of a benchmark (see `cladebench benchmarks`)."""
    out: Path = field(metadata=OPTION)
    """Directory for run.json and predictions.parquet."""
    model: str | None = None
    """The model whose embeddings are evaluated (same forms as for `embed`); fewshot and retrieval on a --column
    need none (the column's metadata names the model in the record)."""
    task: str | None = None
    """Registered task; default: the named benchmark's task, else zeroshot (each task's eval config fixes it)."""
    revision: str | None = None
    """Model revision instead of the pinned one."""
    label: str | None = None
    """Name of the run in reports and comparisons; default: the model as named and the settings that differ from
    the task's defaults (e.g. 'bioclip · sci')."""
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

    def __post_init__(self) -> None:
        # The task config mixed in after this class checks its own settings (ranges, names) first; then the
        # settings every evaluation shares, so any value that is wrong without a dataset is refused here.
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        check_eval_settings(self)
        check_label(self.label)
        check_labels_from_reviews(self)


EVAL_CONFIGS: Registry[type[EvalConfig]] = Registry("task")
"""Each registered task's eval config (``cladebench eval <task>``): the shared fields and the task's own, nothing
of another task's."""


@EVAL_CONFIGS.register("zeroshot")
@dataclass(frozen=True, kw_only=True)
class ZeroShotEvalConfig(EvalConfig, ZeroShotConfig):
    """Zero-shot classification: the images against text embeddings of the benchmark's taxa at --rank; writes
    run.json + predictions.parquet."""

    task: str = field(default="zeroshot", init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register("fewshot")
@dataclass(frozen=True, kw_only=True)
class FewShotEvalConfig(EvalConfig, FewShotConfig):
    """Few-shot classification on the stored image embeddings (SimpleShot, linear probe, kNN) over seeded,
    group-aware splits; writes run.json + predictions.parquet."""

    task: str = field(default="fewshot", init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register("retrieval")
@dataclass(frozen=True, kw_only=True)
class RetrievalEvalConfig(EvalConfig, RetrievalTaskConfig):
    """Image-to-image retrieval on the stored embeddings: same taxon at --rank is relevant (mAP, MRR, P@k, R@k);
    writes run.json + predictions.parquet."""

    task: str = field(default="retrieval", init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register("rerank")
@dataclass(frozen=True, kw_only=True)
class RerankEvalConfig(EvalConfig, RerankConfig):
    """Rerank each query's candidates by a CLIP-style cosine or a VLM endpoint's P(Yes) (INQUIRE's AP, nDCG,
    MRR); writes run.json + predictions.parquet."""

    task: str = field(default="rerank", init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register("lineage")
@dataclass(frozen=True, kw_only=True)
class LineageEvalConfig(EvalConfig, LineageConfig):
    """Lineage completion on photos of two organisms, with and without the hint; writes run.json +
    predictions.parquet."""

    task: str = field(default="lineage", init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


@EVAL_CONFIGS.register("geo")
@dataclass(frozen=True, kw_only=True)
class GeoEvalConfig(EvalConfig, GeoPriorConfig):
    """Zero-shot fused with a place and season prior (or a location embedding); writes run.json +
    predictions.parquet."""

    task: str = field(default="geo", init=False)
    """The task this config runs (fixed: `eval TASK` picks the config)."""


def eval_config(*, task: str | None = None, **fields: Any) -> EvalConfig:
    """The eval config of ``task`` built from ``fields``; without a task, the named benchmark's (when ``dataset``
    names one and no folder of that name exists), else zeroshot's. An unknown task is a usage error."""
    if task is None:
        from cladebench.evaluate.benchmarks import get_benchmark

        dataset = str(fields.get("dataset", ""))
        benchmark = get_benchmark(dataset)
        task = benchmark.task if benchmark is not None and not Path(dataset).exists() else "zeroshot"
    return EVAL_CONFIGS.get_named(task)(**fields)


def task_config(task_config_class: type, config: EvalConfig) -> Any:
    """The task's own config, filled from the fields of the same name."""
    names = {f.name for f in dataclasses.fields(task_config_class)}
    return task_config_class(**{k: v for k, v in config_to_dict(config).items() if k in names})


def _breakdown_metrics(task: Any, predictions: Any, dataset: Any, columns: Sequence[str],
                       missing: dict[str, int]) -> dict[str, Any]:
    """Metrics of the same predictions restricted to each value of each breakdown column; predictions whose row
    has no value in a column are in none of its breakdowns, and are counted into ``missing[column]``."""
    if not columns:
        return {}
    uuids = predictions.table.column("uuid")
    out: dict[str, Any] = {}
    for column in columns:
        if column not in dataset.schema.names:
            raise UsageError(f"--breakdown {column!r}: no such column in {dataset.uri}")
        lookup = store.read(dataset, columns=["uuid", column])
        index = pc.index_in(uuids, value_set=lookup.column("uuid"))
        values = pc.take(lookup.column(column), index)
        if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
            # A list-valued group (CrypticBio's cryptic_group: the species and its look-alikes) is one group.
            values = pc.binary_join(values, " | ")
        values = values.cast(pa.string())
        missing[column] = missing.get(column, 0) + values.null_count
        for value in sorted(set(values.drop_null().to_pylist())):
            mask = pc.equal(values, value).fill_null(False)
            subset = dataclasses.replace(predictions, table=predictions.table.filter(mask))
            for name, estimate in task.metrics(subset).items():
                out[f"{column}={value}{GROUP_SEPARATOR}{name}"] = estimate
    return out


def _model_provenance(config: EvalConfig, spec: ModelSpec | None, encoder: Any, info: dict[str, Any]
                      ) -> dict[str, Any]:
    """The record's model: what the built model describes (the revision actually loaded), else the spec resolved
    from --model, else what the evaluated column's metadata says."""
    embedding = info.get("embedding_metadata", {})
    if encoder is not None and model_kind(encoder) == "vlm":
        model_id, revision, text_precision, named_by = encoder.model_id, None, None, "--model"
    elif encoder is not None:
        described = encoder.describe()
        model_id, revision, text_precision = described["model_id"], described.get("revision"), described.get(
            "precision")
        named_by = "--model"
    elif spec is not None:
        model_id, revision, text_precision, named_by = spec.id, spec.revision, None, "--model"
    else:
        # A stored column evaluated without a model: what its metadata says is all that is known of the model.
        model_id, revision, text_precision = embedding.get("model"), embedding.get("revision"), None
        named_by = "the embedding column's metadata" if model_id else None
    provenance = {
        "id": model_id, "revision": revision, "named_by": named_by,
        "image_embeddings": {"column": info.get("column"), "model": embedding.get("model"),
                             "revision": embedding.get("revision"), "preprocessing": embedding.get("preprocessing"),
                             "precision": embedding.get("precision"), "source": embedding.get("source")},
        "text_precision": text_precision, "logit_scale": info.get("logit_scale"),
        "logit_scale_source": info.get("logit_scale_source"),
    }
    if encoder is None and config.model is None:
        provenance["note"] = (f"the stored column {info.get('column')!r} was evaluated without a model"
                              + ("" if model_id else "; its metadata names none"))
    return provenance


def load_model(spec: ModelSpec, config: EvalConfig) -> Any:
    """The model an evaluation scores with, built from the resolved --model: an encoder (torch is imported here,
    not before), or a stand-in for a model behind an endpoint."""
    from cladebench.models.build import build_model

    return build_model(spec, device=config.device)


def _embed_if_missing(uri: str, config: EvalConfig, encoder: Any) -> None:
    """Benchmarks built into the cache are embedded on first use with a model, as a user would by hand."""
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.tasks.common import find_embedding_column

    try:
        find_embedding_column(store.open_dataset(uri), encoder.model_id)
    except CladebenchError:
        print(f"[eval] embedding {uri} with {encoder.model_id} (once; kept in the dataset)", file=sys.stderr)
        embed_dataset(EmbedConfig(dataset=uri, model=config.model, revision=config.revision, device=config.device),
                      encoder=encoder)


def _require_model(config: EvalConfig, task: Any, settings: Any, encoder: Any) -> None:
    """A usage error when the task needs a model and none was named: tasks with a text tower always do, tasks on
    stored vectors only to find the column holding the model's embeddings."""
    if config.model is not None or encoder is not None:
        return
    if task.uses_encoder:
        raise UsageError(f"the {task.name} task needs --model (its text tower or endpoint scores the images)")
    if getattr(settings, "column", None) is None:
        raise UsageError(f"the {task.name} task needs --column emb_* (the stored vectors to evaluate) or --model "
                         "(to find the column holding its embeddings)")


def _stored_column(dataset: Any, spec: ModelSpec | None, settings: Any) -> Any:
    """Settings of a task on stored vectors with the column filled in: the one given, else the one holding the
    model's embeddings. A column given with a model must not hold another model's vectors (the record would name
    the wrong model)."""
    from cladebench.tasks.common import column_metadata, find_embedding_column

    column = getattr(settings, "column", "unset")
    if column == "unset" or spec is None:
        return settings
    model_id = model_registry.require_encoder(spec).id
    if column is None:
        return dataclasses.replace(settings, column=find_embedding_column(dataset, model_id))
    if column in dataset.schema.names:
        named = column_metadata(dataset, column).get("model")
        if named and named != model_id:
            raise UsageError(f"--column {column!r} holds embeddings of {named}, not of --model {model_id}; drop "
                             "--model to evaluate the column as it is")
    return settings


def run_eval(config: EvalConfig, *, encoder: Any = None) -> tuple[RunRecord, Path]:
    """Predict, score, and write the run record; returns it and the path of run.json."""
    from cladebench.evaluate.benchmarks import resolve, with_benchmark_defaults
    from cladebench.tasks import get_task

    config = with_benchmark_defaults(config)  # a benchmark's protocol settings count in the checks below
    check_out_outside_dataset(config.out, config.dataset)
    store.check_writable(config.out, folder=True)  # a read-only or file --out is found before any work
    if config.task is not None:  # settings and the need for a model are checked before a benchmark is fetched
        _require_model(config, get_task(config.task), task_config(get_task(config.task).config, config), encoder)
    # The model name is resolved once, here: the model built, the column looked up and the record all use it.
    # A model handed in (the Python API) brings its own spec, or describes itself: its name is then a label.
    if encoder is not None:
        spec = getattr(encoder, "spec", None)
    else:
        spec = None if config.model is None else model_registry.resolve_model(config.model, revision=config.revision)
    uri, config, benchmark = resolve(config)
    task = get_task(config.task or "zeroshot")
    settings = task_config(task.config, config)
    _require_model(config, task, settings, encoder)
    reviewed = reviewed_labels(uri, config.out) if config.labels_from_reviews else None
    if reviewed is not None:  # the task runs on a clone holding the reviewed labels; only reviewed rows are scored
        uri = reviewed.uri
    dataset = store.open_dataset(uri)
    where = and_filters(getattr(settings, "where", None), exposure_filter(config, dataset))
    check_before_model(dataset, config, settings, where)  # columns, filter, group-by: seconds before a model
    # The groups read one column: a filter that selects nothing is found before a model loads too.
    group_column, groups, rows_without_group, group_filters = select_groups(dataset, uri, config, settings, where)
    if encoder is None and task.uses_encoder and spec is not None:
        encoder = load_model(spec, config)
    if benchmark is not None and encoder is not None and model_kind(encoder) == "clip":
        _embed_if_missing(uri, config, encoder)
        dataset = store.open_dataset(uri)  # with the column just embedded
    if not task.uses_encoder:
        settings = _stored_column(dataset, spec, settings)

    metrics: dict[str, Any] = {}
    breakdown_missing: dict[str, int] = {}
    tables, label_sets, inspection, infos = [], {}, {}, {}
    left_out: dict[str, str] = {}
    metric_names: list[str] = []
    for group in groups:
        group_where = where if group is None else and_filters(where, group_filters[group])
        try:
            predictions = task.predict(dataset, encoder, dataclasses.replace(settings, where=group_where))
        except NotEvaluableError as error:
            if group is None:
                raise
            left_out[group] = str(error)  # the protocol is per group: the others are still evaluated
            continue
        except CladebenchError as error:
            if group is None:
                raise
            raise type(error)(f"{group_column} {group!r}: {error}") from None
        if reviewed is not None:
            predictions = reviewed.restrict(predictions)
        prefix = "" if group is None else f"{group}{GROUP_SEPARATOR}"
        task_metrics = task.metrics(predictions)
        metric_names.extend(name for name in task_metrics if name not in metric_names)
        for name, estimate in {**task_metrics,
                               **_breakdown_metrics(task, predictions, dataset, config.breakdown,
                                                  breakdown_missing)}.items():
            metrics[prefix + name] = estimate
        table = predictions.table
        if group is not None:
            table = table.append_column("group", pa.array([group] * table.num_rows, pa.string()))
        tables.append(table)
        info = predictions.info
        infos[group] = info
        label_sets[group] = {**info.get("label_set", {}), **recorded_labels(predictions.labels)}
        if info.get("inspection"):
            inspection[group or "all"] = info["inspection"]
    if not infos:
        raise none_evaluable(group_column, left_out)
    for group, reason in left_out.items():
        metrics.update(left_out_metrics(metric_names, group, reason, GROUP_SEPARATOR))
    table = pa.concat_tables(tables, promote_options="permissive")
    info = next(iter(infos.values()))
    provenance = {
        "dataset": dataset_provenance(dataset, uri, where=where,
                                      # unique, in first-seen order: few-shot predicts each image once per draw
                                      evaluated_uuids=pc.unique(table.column("uuid")).to_pylist()),
        "exposure": {"unseen_only": config.unseen_only, "not_seen_by": config.not_seen_by},
        "groups": {"column": group_column, "values": [g for g in groups if g is not None],
                   "rows_without_group": rows_without_group, "pooled": group_column is None,
                   # group -> why it was not evaluated (its metrics are recorded without a value, with the reason)
                   "left_out": left_out},
        "breakdown": list(config.breakdown),
        "breakdown_rows_without_value": breakdown_missing,
        "split": info.get("split") or {"kind": "none: every selected row with an embedding is evaluated",
                                       "seed": None, "sampling_unit": "image"},
        "label_set": label_sets[None] if group_column is None else None,
        "label_sets": None if group_column is None else label_sets,
        "model": _model_provenance(config, spec, encoder, info),
        "prompts": ({"name_style": info["name_style"], "templates_name": info.get("templates"),
                     "templates": list(get_templates(info.get("templates", "bioclip")))}
                    if "name_style" in info else None),
        # Grouped runs: the first group's settings stand for all (they are the same settings); each group's own
        # counts are in task_by_group, and the filter recorded is the user's, not the first group's.
        "task": {**_task_info(info), **({"where": where} if "where" in info else {})},
        "task_by_group": None if group_column is None else {g: _task_info(i) for g, i in infos.items()},
        "split_by_group": (None if group_column is None or "split" not in info
                           else {g: i.get("split") for g, i in infos.items()}),
        "metrics": metric_definitions(sorted({name.rsplit(GROUP_SEPARATOR, 1)[-1] for name in metrics})),
        "software": software_versions(),
        "command": command_line(),
        "labels_from_reviews": None if reviewed is None else reviewed.provenance,
    }
    provenance["dataset"]["benchmark"] = benchmark.name if benchmark is not None else None
    provenance["dataset"]["benchmark_source"] = benchmark.provenance if benchmark is not None else None
    record = RunRecord(task=task.name, metrics=metrics, provenance=provenance, config=config_to_dict(config),
                       label=None if config.label is None else config.label.strip(), inspection=inspection)
    path = record.write(config.out, table)
    return record, path


LABELS_IN_RECORD = 10_000
"""Label sets up to this size are listed whole in ``run.json``; a larger one (a tree-of-life set has 1.1M species,
70 MB of JSON) is recorded by its count, its digest and its source (the label set's own fields), which identify it
as well, without making every reader of the record (report, compare, serve, suite) parse it."""


def recorded_labels(labels: Sequence[str]) -> dict[str, Any]:
    """What a run record keeps of a run's label strings: ``labels`` (the list, or None above
    :data:`LABELS_IN_RECORD`), ``labels_count`` and ``labels_sha256`` (SHA-256 of the JSON list, as the tasks'
    ``sha256`` of a label set), so two runs' label sets compare equal or not whatever their size."""
    labels = list(labels)
    listed = len(labels) <= LABELS_IN_RECORD
    return {"labels": labels if listed else None, "labels_count": len(labels), "labels_sha256": label_digest(labels),
            **({} if listed else {"labels_omitted": f"{len(labels):,} labels, more than the {LABELS_IN_RECORD:,} a "
                                  "run record lists; labels_sha256 and the label set's source identify them"})}


def _task_info(info: dict[str, Any]) -> dict[str, Any]:
    """What a task reported about how it ran, without what the record keeps elsewhere."""
    return {k: v for k, v in info.items()
            if k not in ("embedding_metadata", "label_set", "inspection", "split", "name_style", "templates")}


def label_set_sizes(record: RunRecord) -> dict[str, int]:
    """Label-set size per group ("all" when pooled): chance is one over it. Groups without a label set (a VLM
    naming taxa freely has none) are left out, so a run without any gives an empty dict."""
    pooled = record.provenance.get("label_set")
    if pooled:
        return {"all": pooled["size"]} if pooled.get("size") is not None else {}
    return {g: s["size"] for g, s in (record.provenance.get("label_sets") or {}).items()
            if s and s.get("size") is not None}


def format_metrics(record: RunRecord) -> str:
    """One line per metric: value and interval, as percentages, with n; then one line per left-out group, why."""
    lines = []
    width = max((len(name) for name in record.metrics), default=16)
    for name, estimate in record.metrics.items():
        if estimate.get(LEFT_OUT):  # its group's line below says why, once rather than per metric
            continue
        scale, unit = display_scale(name)
        extra = f"  std={scale * estimate['std']:.2f}" if estimate.get("std") is not None and np.isfinite(
            estimate["std"]) else ""
        low, high = estimate.get("low"), estimate.get("high")
        interval = (f"[{scale * low:6.2f}, {scale * high:6.2f}]" if low is not None and high is not None
                    else "[no interval]")
        value = estimate.get("value")
        shown = f"{scale * value:6.2f}{unit}" if value is not None and np.isfinite(value) else "undefined"
        lines.append(f"  {name:<{width}} {shown}  {interval}  n={estimate.get('n')}{extra}")
    groups = record.provenance.get("groups") or {}
    for group, reason in (groups.get("left_out") or {}).items():
        lines.append(f"  {group}{GROUP_SEPARATOR}*  n/a: {groups.get('column')} {group!r} left out: {reason}")
    return "\n".join(lines)
