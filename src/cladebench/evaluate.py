"""``cladebench eval``: run a registered task on a dataset with a model and write its run record.

The flow is the same for every task: open the dataset, load the encoder, predict (one row per
example), compute metrics from the predictions, gather provenance, write ``run.json`` and
``predictions.parquet``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cladebench import store
from cladebench.config import OPTION, config_to_dict
from cladebench.results import RunRecord, command_line, dataset_provenance, metric_definitions, software_versions
from cladebench.tasks.zeroshot import ZeroShotConfig
from cladebench.templates import get_templates


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """What every evaluation needs, whatever the task; each task adds its own fields (see below)."""

    dataset: str
    """Path or URI of the Lance dataset (with an emb_* column made by `cladebench embed` for this model)."""
    model: str = field(metadata=OPTION)
    """The model whose embeddings are evaluated (same forms as for `embed`)."""
    out: Path = field(metadata=OPTION)
    """Directory for run.json and predictions.parquet."""
    task: str = "zeroshot"
    """Registered task (zeroshot)."""
    revision: str | None = None
    """Model revision instead of the pinned one."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the text tower runs."""


@dataclass(frozen=True, kw_only=True)
class ZeroShotEvalConfig(EvalConfig, ZeroShotConfig):
    """Evaluate a model on a dataset by zero-shot classification and write a run record."""


def task_config(task_config_class: type, config: EvalConfig) -> Any:
    """The task's own config, filled from the fields of the same name."""
    names = {f.name for f in dataclasses.fields(task_config_class)}
    return task_config_class(**{k: v for k, v in config_to_dict(config).items() if k in names})


def run_eval(config: EvalConfig, *, encoder: Any = None) -> tuple[RunRecord, Path]:
    """Predict, score, and write the run record; returns it and the path of run.json."""
    from cladebench.models import load_encoder
    from cladebench.tasks import get_task

    task = get_task(config.task)
    dataset = store.open_dataset(config.dataset)
    if encoder is None:
        encoder = load_encoder(config.model, revision=config.revision, device=config.device)
    settings = task_config(task.config, config)
    predictions = task.predict(dataset, encoder, settings)
    metrics = task.metrics(predictions)
    info = predictions.info
    described = encoder.describe()
    embedding = info.get("embedding_metadata", {})
    provenance = {
        "dataset": dataset_provenance(dataset, config.dataset, where=getattr(config, "where", None),
                                      evaluated_uuids=predictions.table.column("uuid").to_pylist()),
        "split": {"kind": "none: every selected row with an embedding is evaluated", "seed": None,
                  "sampling_unit": "image"},
        "label_set": {**info.get("label_set", {}), "labels": predictions.labels},
        "model": {
            "id": described["model_id"], "revision": described.get("revision"),
            "image_embeddings": {"column": info.get("column"), "model": embedding.get("model"),
                                 "revision": embedding.get("revision"),
                                 "preprocessing": embedding.get("preprocessing"),
                                 "precision": embedding.get("precision")},
            "text_precision": described.get("precision"), "logit_scale": info.get("logit_scale"),
            "logit_scale_source": info.get("logit_scale_source"),
        },
        "prompts": {"name_style": info.get("name_style"), "templates_name": info.get("templates"),
                    "templates": list(get_templates(info.get("templates", "bioclip")))},
        "metrics": metric_definitions(list(metrics)),
        "software": software_versions(),
        "command": command_line(),
    }
    record = RunRecord(task=task.name, metrics=metrics, provenance=provenance, config=config_to_dict(config))
    path = record.write(config.out, predictions.table)
    return record, path


def format_metrics(record: RunRecord) -> str:
    """One line per metric: value and interval, as percentages, with n."""
    lines = []
    for name, estimate in record.metrics.items():
        lines.append(f"  {name:<16} {100 * estimate['value']:6.2f}%  "
                     f"[{100 * estimate['low']:6.2f}, {100 * estimate['high']:6.2f}]  n={estimate['n']}")
    return "\n".join(lines)
