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
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench import console, store
from cladebench.config import config_to_dict
from cladebench.errors import CladebenchError, NotEvaluableError
from cladebench.evaluate.configs import EvalConfig
from cladebench.evaluate.plan import EvalPlan, comparability_key, off_protocol_line, plan_eval
from cladebench.evaluate.record import RunRecord, command_line, dataset_provenance, metric_definitions
from cladebench.evaluate.selection import LEFT_OUT, left_out_metrics, none_evaluable
from cladebench.metrics import display_scale
from cladebench.models import registry as model_registry
from cladebench.models.spec import EMBEDS_IMAGES, EMBEDS_TEXTS, Model, ModelSpec, model_capabilities
from cladebench.provenance import software_versions
from cladebench.tasks.common import label_digest
from cladebench.templates import get_templates

if TYPE_CHECKING:
    import lance

    from cladebench.benchmarks import Located
    from cladebench.tasks import Task
    from cladebench.tasks.common import Predictions
    from cladebench.tasks.configs import TaskSettings

GROUP_SEPARATOR = "/"
"""Between a group (or breakdown) and a metric name: ``Peromyscus/top1_species``."""


BREAKDOWN_PREFIX = "by:"
"""Prefix of the predictions' columns holding each row's value of a ``--breakdown`` column, so a breakdown's metrics
are recomputed from the predictions alone (verifying a record needs no dataset)."""


def _with_breakdown_values(table: pa.Table, dataset: lance.LanceDataset, columns: Sequence[str]) -> pa.Table:
    """The predictions with one ``by:<column>`` text column per breakdown column (null where the row has none)."""
    uuids = table.column("uuid")
    for column in columns:
        lookup = store.read(dataset, columns=list(dict.fromkeys(["uuid", column])))  # --breakdown uuid: one read
        values = pc.take(lookup.column(column), pc.index_in(uuids, value_set=lookup.column("uuid")))
        if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
            # A list-valued group (CrypticBio's cryptic_group: the species and its look-alikes) is one group;
            # an empty list is no value, as a null is.
            values = pc.if_else(pc.greater(pc.list_value_length(values), 0), pc.binary_join(values, " | "), None)
        table = table.append_column(BREAKDOWN_PREFIX + column, values.cast(pa.string()))
    return table


def breakdown_metrics(task: Task, predictions: Predictions, columns: Sequence[str]
                      ) -> tuple[dict[str, object], dict[str, int]]:
    """Metrics of the same predictions restricted to each value of each breakdown column, and per column the
    predictions whose row has no value (in none of its breakdowns)."""
    out: dict[str, object] = {}
    missing: dict[str, int] = {}
    for column in columns:
        values = predictions.table.column(BREAKDOWN_PREFIX + column)
        missing[column] = values.null_count
        for value in sorted(set(values.drop_null().to_pylist())):
            mask = pc.equal(values, value).fill_null(False)
            subset = dataclasses.replace(predictions, table=predictions.table.filter(mask))
            for name, estimate in task.metrics(subset).items():
                out[f"{column}={value}{GROUP_SEPARATOR}{name}"] = estimate
    return out, missing


def _model_provenance(config: EvalConfig, spec: ModelSpec | None, encoder: Any, info: dict[str, Any]
                      ) -> dict[str, object]:
    """The record's model: what the built model describes (the revision actually loaded), else the spec resolved
    from --model, else what the evaluated column's metadata says."""
    embedding = info.get("embedding_metadata", {})
    model_id: str | None
    named_by: str | None
    if encoder is not None:  # an endpoint describes itself too: its id, no revision, no precision
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


def load_model(spec: ModelSpec, config: EvalConfig) -> Model:
    """The model an evaluation scores with, from the resolved --model: a model with a text tower built on first use
    of its weights (a run whose text embeddings are all cached never imports torch), else the model as built (a
    stand-in for a model behind an endpoint, an image-only encoder)."""
    from cladebench.models.build import build_model
    from cladebench.models.deferred import DeferredEncoder

    if spec.can(EMBEDS_TEXTS):
        return DeferredEncoder(spec, config.device)
    return build_model(spec, device=config.device)


def _embed_if_missing(dataset: lance.LanceDataset, uri: str, config: EvalConfig, encoder: Any) -> lance.LanceDataset:
    """Benchmarks built into the cache are embedded on first use with a model, as a user would by hand; returns
    the dataset to read (reopened after embedding, which wrote a new version)."""
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.tasks.common import find_embedding_column

    try:
        find_embedding_column(dataset, encoder.model_id)
        return dataset
    except CladebenchError:
        console.note(f"[eval] embedding {uri} with {encoder.model_id} (once; kept in the dataset)")
        assert config.model is not None  # the encoder was built from --model
        embed_dataset(EmbedConfig(dataset=uri, model=config.model, revision=config.revision, device=config.device),
                      encoder=encoder)
        return store.open_dataset(uri)


def _stored_column(dataset: lance.LanceDataset, spec: ModelSpec | None, settings: TaskSettings) -> TaskSettings:
    """Settings of a task on stored vectors with the column filled in: the one given, else the one holding the
    model's embeddings. A column given with a model must not hold another model's vectors (the record would name
    the wrong model)."""
    from cladebench.errors import UsageError
    from cladebench.store.embeddings import names_model
    from cladebench.tasks.common import column_metadata, find_embedding_column

    column = settings.column
    if spec is None:
        return settings
    model_id = model_registry.require_encoder(spec).id
    if column is None:
        return dataclasses.replace(settings, column=find_embedding_column(dataset, model_id))
    if column in dataset.schema.names:
        named = column_metadata(dataset, column).get("model")
        if named and not names_model(str(named), spec):  # another tool's spelling of the id is the same model
            raise UsageError(f"--column {column!r} holds embeddings of {named!r}, which is no spelling of --model "
                             f"{model_id}; drop --model to evaluate the column as it is")
    return settings


@dataclass
class _Scored:
    """What the task run gave: per group its predictions' info and label set, the metrics, the joined table."""

    metrics: dict[str, object] = field(default_factory=dict)
    tables: list[pa.Table] = field(default_factory=list)
    infos: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    label_sets: dict[str | None, dict[str, object]] = field(default_factory=dict)
    inspection: dict[str, object] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)
    breakdown_missing: dict[str, int] = field(default_factory=dict)
    spot_check: dict[str, object] | None = None
    table: pa.Table | None = None
    """Every group's predictions in one table (the run's predictions.parquet)."""


def run_eval(config: EvalConfig, *, encoder: object = None, located: Located | None = None) -> tuple[RunRecord, Path]:
    """Plan (resolve and check, no model), predict, score, and write the run record; returns it and the path of
    run.json. ``encoder`` and ``located``: a model already built and a benchmark's data already found (a suite)."""
    plan = plan_eval(config, encoder=encoder, located=located)
    note = off_protocol_line(plan)
    if note is not None:
        console.warn(f"[eval] {note}")
    encoder, settings, dataset = _model_and_settings(plan, encoder)
    scored = _predict_and_score(plan, encoder, settings, dataset)
    record = _record(plan, scored, encoder, dataset)
    return record, record.write(plan.config.out, scored.table)


def _model_and_settings(plan: EvalPlan, encoder: Any) -> tuple[object, TaskSettings, lance.LanceDataset]:
    """The model built (the one heavy step of a run, after every check), the task settings with the stored
    column filled in, and the dataset the run reads (the plan's, reopened only when embedding it changed it)."""
    if encoder is None and plan.task.uses_encoder and plan.spec is not None:
        encoder = load_model(plan.spec, plan.config)
    dataset = plan.dataset
    assert dataset is not None  # plan_eval opened it
    if plan.located is not None and encoder is not None and EMBEDS_IMAGES in model_capabilities(encoder):
        dataset = _embed_if_missing(dataset, plan.uri, plan.config, encoder)
    settings = plan.settings
    if not plan.task.uses_encoder:
        settings = _stored_column(dataset, plan.spec, settings)
    return encoder, settings, dataset


def _predict_and_score(plan: EvalPlan, encoder: object, settings: TaskSettings, dataset: lance.LanceDataset) -> _Scored:
    """Each group predicted and scored on its own (a group the task cannot evaluate is left out with its reason);
    breakdowns scored on the same predictions."""
    task, breakdown = plan.task, plan.config.breakdown
    scored = _Scored()
    metric_names: list[str] = []
    for group in plan.groups:
        planned = plan.label_sets.get(group)
        try:
            predictions = task.predict(dataset, encoder, plan.group_settings(group, settings),
                                       **({} if planned is None else {"label_set": planned}))
        except NotEvaluableError as error:
            if group is None:
                raise
            scored.left_out[group] = str(error)  # the protocol is per group: the others are still evaluated
            continue
        except CladebenchError as error:
            if group is None:
                raise
            raise type(error)(f"{plan.group_column} {group!r}: {error}") from None
        if plan.reviewed is not None:
            predictions = plan.reviewed.restrict(predictions)
        predictions = dataclasses.replace(predictions,
                                          table=_with_breakdown_values(predictions.table, dataset, breakdown))
        prefix = "" if group is None else f"{group}{GROUP_SEPARATOR}"
        task_metrics = task.metrics(predictions)
        metric_names.extend(name for name in task_metrics if name not in metric_names)
        by_value, missing = breakdown_metrics(task, predictions, breakdown)
        for column, count in missing.items():
            scored.breakdown_missing[column] = scored.breakdown_missing.get(column, 0) + count
        for name, estimate in {**task_metrics, **by_value}.items():
            scored.metrics[prefix + name] = estimate
        table = predictions.table
        if group is not None:
            table = table.append_column("group", pa.array([group] * table.num_rows, pa.string()))
        scored.tables.append(table)
        info = predictions.info
        for skip in info.get("shots_skipped") or ():  # a shot count the data does not allow; the others ran
            where = "" if group is None else f"{plan.group_column} {group!r}: "
            console.warn(f"[eval] {where}{skip['shots']}-shot skipped: {skip['reason']}")
        scored.infos[group] = info
        scored.label_sets[group] = {**info.get("label_set", {}),
                                    **recorded_labels(predictions.labels, sha256=getattr(planned, "sha256", None))}
        if info.get("inspection"):
            scored.inspection[group or "all"] = info["inspection"]
    if not scored.infos:
        raise none_evaluable(plan.group_column, scored.left_out)
    scored.spot_check = _spot_check(dataset, encoder, next(iter(scored.infos.values())))
    for group, reason in scored.left_out.items():
        scored.metrics.update(left_out_metrics(metric_names, group, reason, GROUP_SEPARATOR))
    scored.table = pa.concat_tables(scored.tables, promote_options="permissive")
    return scored


def _spot_check(dataset: lance.LanceDataset, encoder: object, info: dict[str, Any]) -> dict[str, object] | None:
    """The stored column checked against a fresh forward pass when the run loaded the model's weights anyway
    (:func:`~cladebench.embed.spot_check.spot_check_column`); None when no weights were loaded (a run whose text
    embeddings were all cached loads none, and is not made to) or the task read no stored column of the model."""
    column, metadata = info.get("column"), info.get("embedding_metadata") or {}
    if not isinstance(column, str) or not getattr(encoder, "built", False) \
            or column not in dataset.schema.names:  # a deferred encoder, built
        return None
    if metadata.get("model") != getattr(encoder, "model_id", None):
        return None
    from cladebench.embed.spot_check import spot_check_column

    return {"column": column, **spot_check_column(dataset, column, encoder, metadata)}


SPLIT_SETTINGS = ("seed", "repetitions", "shots", "min_test_per_class", "sampling_unit", "group_key", "test_fraction")
"""A split's settings (not its counts): what a grouped run's top-level split repeats when every group shares it."""


def _grouped_split(infos: Mapping[str | None, Mapping[str, Any]]) -> dict[str, object] | None:
    """A grouped run's top-level split: what every group's split shares (seed, shots, sampling unit ...), and a
    fingerprint of all of them (SHA-256 of the groups' fingerprints by group), never one group's split standing
    for the others; each group's own is in ``split_by_group``. None when the task draws no split."""
    import hashlib
    import json

    splits = {str(g): dict(i["split"]) for g, i in infos.items() if i.get("split")}
    if not splits:
        return None
    first = next(iter(splits.values()))
    shared = {k: v for k, v in first.items()
              if k in SPLIT_SETTINGS and all(s.get(k) == v for s in splits.values())}
    digest = hashlib.sha256(json.dumps({g: s.get("fingerprint") for g, s in sorted(splits.items())},
                                       sort_keys=True).encode()).hexdigest()
    return {**shared, "kind": f"per group: {len(splits)} groups, each its own split (split_by_group)",
            "groups": sorted(splits), "fingerprint": digest}


def _record(plan: EvalPlan, scored: _Scored, encoder: object, dataset: lance.LanceDataset) -> RunRecord:
    """The run record: the metrics, and the provenance of every number (the plan, the data, the model)."""
    config, infos, label_sets = plan.config, scored.infos, scored.label_sets
    grouped = plan.group_column is not None
    info = next(iter(infos.values()))
    assert scored.table is not None  # joined by _predict_and_score
    # unique, in first-seen order: few-shot predicts each image once per draw
    evaluated = pc.unique(scored.table.column("uuid")).to_pylist()
    data = dataset_provenance(dataset, plan.uri, where=plan.where, evaluated_uuids=evaluated,
                              fingerprint=plan.fingerprint)
    data["benchmark"] = plan.benchmark
    data["benchmark_source"] = plan.located.provenance if plan.located is not None else None
    provenance = {
        "dataset": data,
        "rows": row_accounting(plan, scored.table, len(evaluated)),
        "plan": plan.provenance(),
        "comparability": comparability_key(plan, infos, label_sets, data["evaluated_fingerprint"]),
        "exposure": {"unseen_only": config.unseen_only, "not_seen_by": config.not_seen_by},
        "groups": {"column": plan.group_column, "values": [g for g in plan.groups if g is not None],
                   "rows_without_group": plan.rows_without_group, "pooled": not grouped,
                   # group -> why it was not evaluated (its metrics are recorded without a value, with the reason)
                   "left_out": scored.left_out},
        "breakdown": list(config.breakdown),
        "breakdown_rows_without_value": scored.breakdown_missing,
        "vectors_spot_check": scored.spot_check,
        "split": ((_grouped_split(infos) if grouped else info.get("split"))
                  or {"kind": "none: every selected row with an embedding is evaluated", "seed": None,
                      "sampling_unit": "image"}),
        "label_set": None if grouped else label_sets[None],
        "label_sets": label_sets if grouped else None,
        "model": _model_provenance(config, plan.spec, encoder, info),
        "prompts": ({"name_style": info["name_style"], "templates_name": info.get("templates"),
                     "templates": list(get_templates(info.get("templates", "bioclip")))}
                    if "name_style" in info else None),
        # Grouped runs: the first group's settings stand for all (they are the same settings); each group's own
        # counts are in task_by_group, and the filter recorded is the user's, not the first group's.
        "task": {**_task_info(info), **({"where": plan.where} if "where" in info else {})},
        "task_by_group": {g: _task_info(i) for g, i in infos.items()} if grouped else None,
        "split_by_group": ({g: i.get("split") for g, i in infos.items()} if grouped and "split" in info else None),
        "metrics": metric_definitions(sorted({name.rsplit(GROUP_SEPARATOR, 1)[-1] for name in scored.metrics})),
        "software": software_versions(),
        "command": command_line(),
        "labels_from_reviews": None if plan.reviewed is None else plan.reviewed.provenance,
    }
    return RunRecord(task=plan.task.name, metrics=scored.metrics, provenance=provenance,
                     config=config_to_dict(config), label=None if config.run_name is None else config.run_name.strip(),
                     inspection=scored.inspection)


LABELS_IN_RECORD = 10_000
"""Label sets up to this size are listed whole in ``run.json``; a larger one (a tree-of-life set has 1.1M species,
70 MB of JSON) is recorded by its count, its digest and its source (the label set's own fields), which identify it
as well, without making every reader of the record (report, compare, serve, suite) parse it."""


def recorded_labels(labels: Sequence[str], *, sha256: str | None = None) -> dict[str, object]:
    """What a run record keeps of a run's label strings: ``labels`` (the list, or None above
    :data:`LABELS_IN_RECORD`), ``labels_count`` and ``labels_sha256`` (SHA-256 of the JSON list, as the tasks'
    ``sha256`` of a label set), so two runs' label sets compare equal or not whatever their size. ``sha256``: the
    hash the plan computed when it built the label set (not computed again)."""
    labels = list(labels)
    listed = len(labels) <= LABELS_IN_RECORD
    digest = label_digest(labels) if sha256 is None else sha256
    return {"labels": labels if listed else None, "labels_count": len(labels), "labels_sha256": digest,
            **({} if listed else {"labels_omitted": f"{len(labels):,} labels, more than the {LABELS_IN_RECORD:,} a "
                                  "run record lists; labels_sha256 and the label set's source identify them"})}


def row_accounting(plan: EvalPlan, table: pa.Table, evaluated: int) -> dict[str, object]:
    """What became of the selected rows: how many were evaluated, and every row left out by reason (no group
    value; no review, with ``--labels-from-reviews``; not predicted by the task: no usable vector, e.g. a photo
    that failed to download, or no label at the rank; predicted but not scored at the label rank, e.g. a
    genus-only row at species)."""
    left_out: dict[str, int] = {}
    if plan.rows_without_group:
        left_out[f"no {plan.group_column} value"] = plan.rows_without_group
    not_predicted = plan.rows_selected - plan.rows_without_group - evaluated
    without_review = min(plan.rows_without_review, max(not_predicted, 0))  # never scored, whatever their vector
    if without_review:
        left_out["no agreed review (--labels-from-reviews scores only rows reviewers agree on)"] = without_review
        not_predicted -= without_review
    if not_predicted > 0:
        reason = plan.task.not_predicted
        left_out[reason] = not_predicted
    if "scored" in table.column_names:
        unscored = table.filter(pc.invert(table.column("scored").fill_null(False)))
        count = len(pc.unique(unscored.column("uuid")))
        if count:
            rank = getattr(plan.settings, "rank", "the label rank")
            left_out[f"predicted, not scored at {rank}: no {rank} in the label set (e.g. genus-only rows)"] = count
    return {"selected": plan.rows_selected, "evaluated": evaluated, "left_out": left_out}


def label_notes(record: RunRecord) -> list[str]:
    """The console's lines on label sets whose labels a reader could confuse: distinct labels that differ only
    by look-alike characters, and one text standing for several taxa."""
    sets = record.provenance.get("label_sets") or {"": record.provenance.get("label_set") or {}}
    lines = [mixed_script_line(name, entry)
             for name, entry in ((record.provenance.get("plan") or {}).get("mixed_script_names") or {}).items()]
    for group, labels in sets.items():
        where = f"{group}: " if group else ""
        for pair in (labels or {}).get("lookalikes") or []:
            lines.append(f"{where}labels differ only by look-alike characters: {' / '.join(map(str, pair))}")
        for text in (labels or {}).get("shared_texts") or []:
            lines.append(f"{where}one label text stands for several taxa: {text!r} (scored by taxon, not by text)")
    return lines


def mixed_script_line(name: str, entry: Mapping[str, Any]) -> str:
    """One warning on a name whose words mix scripts: its foreign letters by code point (they look Latin), and
    the rows that carry it, so the name can be fixed where it was written."""
    foreign = sorted({c for word in entry.get("words") or [] for c in word
                      if c.isalpha() and not unicodedata.name(c, "").startswith("LATIN")})
    letters = ", ".join(f"{c} U+{ord(c):04X} {unicodedata.name(c, '?').lower()}" for c in foreign)
    rows, uuids = int(entry.get("rows") or 0), [str(u) for u in entry.get("uuids") or []]
    shown = ", ".join(uuids) + (f" and {rows - len(uuids)} more" if rows > len(uuids) else "")
    return (f"warning: name {name!r} mixes Latin with other scripts' letters ({letters}), a class of its own "
            f"unless corrected; {rows} row(s): {shown}")


def rows_line(record: RunRecord) -> str | None:
    """The console's line on rows left out, by reason (None when every selected row was evaluated and scored)."""
    rows = record.provenance.get("rows") or {}
    left_out = rows.get("left_out") or {}
    if not left_out:
        return None
    return (f"{rows.get('evaluated')} of {rows.get('selected')} selected rows evaluated; left out: "
            + "; ".join(f"{count} {reason}" for reason, count in left_out.items()))


def _task_info(info: dict[str, object]) -> dict[str, object]:
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
        if value is None and estimate.get("reason"):  # undefined, and why (top-5 of five labels, no positives...)
            lines.append(f"  {name:<{width}}    n/a  {estimate['reason']}")
            continue
        if value is None or not np.isfinite(value):
            # no interval beside it: over no example Wilson's is [0, 100], which says nothing (as compare and report)
            lines.append(f"  {name:<{width}} undefined  n={estimate.get('n')}")
            continue
        lines.append(f"  {name:<{width}} {scale * value:6.2f}{unit}  {interval}  n={estimate.get('n')}{extra}")
    groups = record.provenance.get("groups") or {}
    for group, reason in (groups.get("left_out") or {}).items():
        lines.append(f"  {group}{GROUP_SEPARATOR}*  n/a: {groups.get('column')} {group!r} left out: {reason}")
    return "\n".join(lines)
