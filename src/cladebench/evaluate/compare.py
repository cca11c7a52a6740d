"""``cladebench compare``: which differences between runs on the same examples are more than noise.

Two models a point apart on a few hundred images are usually tied. Runs evaluated on the same
examples are compared pairwise against the first run (the reference) with a paired bootstrap over
examples (:func:`cladebench.metrics.paired_bootstrap`): both runs are resampled with the same draw,
so what they share cancels. When several runs are compared against the reference on one metric,
their p-values are adjusted together by Holm's method, and a difference "holds" when Holm rejects;
otherwise the runs are reported as tied (BioBench marks ties the same way).

Pairing needs the same examples. Predictions are aligned by ``uuid``, not by row order, so runs
written in different orders still pair correctly; runs on different example sets are refused unless
the comparison is explicitly restricted to the examples they share. Only metrics that are means of a
per-example 0/1 column can be tested (see :func:`accuracy_columns`); the others are shown untested.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError, SchemaError, unknown_name
from cladebench.evaluate.labels import distinct_labels
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.metrics import PairedComparison, display_scale, holm, paired_bootstrap

STORED_VALUE_TOLERANCE = 1e-9
"""How far a metric recomputed from predictions may be from the value in run.json before the record is distrusted."""


def accuracy_columns(metric: str, label_rank: str | None) -> tuple[str, str] | None:
    """The predictions columns behind a per-example accuracy: (0/1 hit column, mask of scored examples), or None.

    Names follow the zero-shot predictions (:mod:`cladebench.tasks.zeroshot`): at the label rank,
    ``top1_<rank>`` is ``correct_top1`` and ``top5_<rank>`` is ``correct_top5``, both over the rows
    marked ``scored``; at a higher rank, ``top1_<higher>`` is ``correct_<higher>`` over ``scored_<higher>``.
    Any other metric (balanced accuracy, macro-F1, few-shot means over repetitions) is not a mean of
    one column: None. A run without a label rank has no label-rank metrics.
    """
    kind, _, rank = metric.partition("_")
    if not rank:
        return None
    if rank == label_rank:
        return {"top1": ("correct_top1", "scored"), "top5": ("correct_top5", "scored")}.get(kind)
    if kind == "top1":
        return f"correct_{rank}", f"scored_{rank}"
    return None


@dataclass(frozen=True)
class ComparedRun:
    """One run record in a comparison."""

    path: Path
    """The run.json read."""
    model_id: str
    """Model named in the record's provenance."""
    label: str
    """How the comparison names the run: its record's label, made distinct from the other runs' where two share
    one (:func:`cladebench.evaluate.labels.distinct_labels`)."""
    label_rank: str | None
    """Rank of the run's labels (None for a task without one)."""
    metrics: dict[str, dict[str, Any]]
    """Stored metric estimates (value, Wilson interval, n), as in run.json."""
    evaluated_rows: int
    """Examples in the run's predictions."""

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "label": self.label, "model_id": self.model_id, "label_rank": self.label_rank,
                "evaluated_rows": self.evaluated_rows, "metrics": self.metrics}


@dataclass(frozen=True)
class Difference:
    """One run against the reference on one metric: paired difference (run - reference) and the Holm verdict."""

    run: int
    """Index of the run (the reference is 0)."""
    paired: PairedComparison
    """Difference, percentile interval, unadjusted p-value, paired examples."""
    p_adjusted: float
    """Holm-adjusted p-value across the runs tested on this metric."""
    holds: bool
    """Holm rejects "no difference" at the comparison's alpha; otherwise the runs are tied."""

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, **self.paired.to_dict(), "p_adjusted": self.p_adjusted, "holds": self.holds}


@dataclass(frozen=True)
class MetricComparison:
    """Every run's stored value of one metric, and the tested differences against the reference."""

    metric: str
    """Metric name, e.g. top1_species."""
    columns: tuple[str, str] | None
    """(hit column, scored mask) in the predictions, or None when the metric has no per-example test."""
    estimates: tuple[dict[str, Any] | None, ...]
    """Stored estimate per run (None where a run does not report the metric)."""
    differences: tuple[Difference, ...]
    """Tested differences, one per non-reference run that could be tested."""
    note: str | None = None
    """Why some or all runs are not tested, when they are not."""

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "columns": list(self.columns) if self.columns else None,
                "estimates": list(self.estimates), "differences": [d.to_dict() for d in self.differences],
                "note": self.note}


@dataclass(frozen=True)
class Comparison:
    """Runs side by side: stored metrics and paired, Holm-corrected differences against the first run."""

    task: str
    """The task every run evaluated."""
    runs: tuple[ComparedRun, ...]
    """The runs; the first is the reference."""
    metrics: tuple[MetricComparison, ...]
    """One entry per compared metric."""
    examples: int
    """Examples the differences are computed on (all runs share them)."""
    intersected: bool
    """True when runs had different example sets and only the shared examples were compared."""
    n_resamples: int
    """Bootstrap resamples per difference."""
    seed: int
    """Seed of every resampling."""
    alpha: float
    """Family-wise error rate of the Holm correction, per metric."""
    confidence: float
    """Confidence level of the difference intervals."""

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "reference": 0, "runs": [r.to_dict() for r in self.runs],
                "examples": {"compared": self.examples, "intersected": self.intersected},
                "settings": {"n_resamples": self.n_resamples, "seed": self.seed, "alpha": self.alpha,
                             "confidence": self.confidence,
                             "correction": "Holm-Bonferroni across the runs tested on each metric"},
                "metrics": [m.to_dict() for m in self.metrics]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def _read_run(path: Path) -> tuple[RunRecord, pa.Table]:
    record = RunRecord.read_given(path)
    try:
        table = record.predictions(path)
    except (FileNotFoundError, KeyError) as exc:
        raise CladebenchError(f"{path}: its predictions cannot be read ({exc})") from None
    if "uuid" not in table.column_names:
        raise SchemaError(f"{path}: predictions have no uuid column, so they cannot be paired with another run")
    return record, table


def _label_rank(record: RunRecord) -> str | None:
    rank = (record.provenance.get("label_set") or {}).get("rank") or record.config.get("rank")
    return str(rank) if rank else None


def _aligned(tables: Sequence[pa.Table], paths: Sequence[Path],
             intersect: bool) -> tuple[list[pa.Table] | None, int, bool]:
    """Every table reordered to the reference's examples (the shared ones, when ``intersect``).

    Also returns how many examples are shared and whether that is fewer than some run evaluated. The
    tables are None when a run has several rows per example (few-shot predictions: one per repetition),
    which per-example pairing cannot use; the example sets are still checked.
    """
    distinct = [pc.unique(table.column("uuid")) for table in tables]
    reference = distinct[0]
    shared = np.ones(len(reference), dtype=bool)
    for uuids, path in zip(distinct[1:], paths[1:], strict=True):
        present = pc.is_in(reference, value_set=uuids).to_numpy(zero_copy_only=False)
        if not intersect and (not present.all() or len(uuids) != len(reference)):
            raise CladebenchError(
                f"{paths[0]} and {path} were evaluated on different examples: {len(reference)} and "
                f"{len(uuids)} examples, {int(present.sum())} in common; pass --intersect to compare "
                "on the common examples only")
        shared &= present
    n_shared = int(shared.sum())
    if not n_shared:
        raise CladebenchError(f"the runs {', '.join(map(str, paths))} share no example")
    intersected = any(len(uuids) != n_shared for uuids in distinct)
    if any(len(uuids) != table.num_rows for uuids, table in zip(distinct, tables, strict=True)):
        return None, n_shared, intersected
    common = reference.filter(pa.array(shared))
    aligned = [table.take(pc.index_in(common, value_set=table.column("uuid"))) for table in tables]
    return aligned, n_shared, intersected


def _column(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _scored(table: pa.Table, column: str, group: str) -> np.ndarray:
    """Rows scored for a metric: its scored mask, within one group of a grouped run (``GROUP/metric``)."""
    mask = _column(table, column)
    if group:
        if "group" not in table.column_names:
            return np.zeros_like(mask)
        mask &= np.asarray(pc.equal(table.column("group"), group).fill_null(False).to_numpy(zero_copy_only=False))
    return mask


def _check_stored(metric: str, columns: tuple[str, str], estimate: dict[str, Any], table: pa.Table,
                  path: Path) -> None:
    """Refuse a record whose stored value is not what its own predictions give: pairing them would mislead."""
    hits = _column(table, columns[0])[_scored(table, columns[1], metric.rpartition(GROUP_SEPARATOR)[0])]
    value = float(hits.mean()) if hits.size else float("nan")
    stored = estimate.get("value")
    if stored is None and estimate.get("n") == hits.size == 0:
        return  # nothing scored: the value was NaN, which run.json writes as null
    if estimate.get("n") != hits.size or stored is None or abs(value - stored) > STORED_VALUE_TOLERANCE:
        raise SchemaError(f"{path}: run.json gives {metric} = {stored} on n = {estimate.get('n')}, but its predictions "
                          f"give {value} on n = {hits.size}; the record and its predictions disagree")


def _per_unit_values(records: Sequence[RunRecord], tables: Sequence[pa.Table], group: str,
                     metric: str) -> list[dict[Any, float]] | None:
    """Each run's per-unit values of a metric (per query, for rerank) from the task's own hook, or None."""
    from cladebench.tasks import get_task

    try:
        task = get_task(records[0].task)
    except CladebenchError:
        return None
    if task.per_unit is None:
        return None
    out = []
    for record, table in zip(records, tables, strict=True):
        if group:
            if "group" not in table.column_names:
                return None
            table = table.filter(pc.equal(table.column("group"), group))
        values = task.per_unit(table, record.provenance.get("task") or {}).get(metric)
        if values is None:
            return None
        out.append({key: value for key, value in zip(*values, strict=True) if np.isfinite(value)})
    return out


def _compare_units(metric: str, estimates: tuple[dict[str, Any] | None, ...], values: list[dict[Any, float]], *,
                   n_resamples: int, seed: int, alpha: float, confidence: float) -> MetricComparison:
    """Paired bootstrap over the units (queries) every pair of runs scored, Holm across runs."""
    reference = values[0]
    tested: list[tuple[int, PairedComparison]] = []
    notes = []
    for index, run in enumerate(values[1:], start=1):
        shared = sorted(set(reference) & set(run), key=str)
        if not shared:
            notes.append(f"run [{index}] shares no scored query with the reference")
            continue
        a = np.array([run[key] for key in shared])
        b = np.array([reference[key] for key in shared])
        tested.append((index, paired_bootstrap(a, b, n_resamples=n_resamples, confidence=confidence, seed=seed)))
    differences: tuple[Difference, ...] = ()
    if tested:
        adjusted, reject = holm(np.array([paired.p_value for _, paired in tested]), alpha)
        differences = tuple(Difference(run=index, paired=paired, p_adjusted=float(p), holds=bool(r))
                            for (index, paired), p, r in zip(tested, adjusted, reject, strict=True))
    return MetricComparison(metric, ("per-query", metric), estimates, differences, note="; ".join(notes) or None)


def _compare_metric(metric: str, records: Sequence[RunRecord], full_tables: Sequence[pa.Table],
                    tables: Sequence[pa.Table] | None, paths: Sequence[Path], ranks: Sequence[str | None], *,
                    n_resamples: int, seed: int, alpha: float, confidence: float) -> MetricComparison:
    """One metric across the runs: ``full_tables`` as each run wrote them, ``tables`` aligned to shared examples."""
    estimates = tuple(record.metrics.get(metric) for record in records)
    group, _, base = metric.rpartition(GROUP_SEPARATOR)
    known_groups = set((records[0].provenance.get("groups") or {}).get("values") or ())
    if group not in known_groups and "=" in group:  # COLUMN=VALUE: a breakdown, unless a challenge group is so named
        return MetricComparison(metric, None, estimates, (), note="a breakdown of the predictions: no paired test")
    columns = accuracy_columns(base, ranks[0])
    if columns is None:
        unit_values = _per_unit_values(records, full_tables, group, base)
        if unit_values is not None:
            return _compare_units(metric, estimates, unit_values, n_resamples=n_resamples, seed=seed, alpha=alpha,
                                  confidence=confidence)
        return MetricComparison(metric, None, estimates, (), note="not a mean of per-example hits: no paired test")
    notes = []
    testable = []
    for index, (estimate, rank, table) in enumerate(zip(estimates, ranks, full_tables, strict=True)):
        if estimate is None:
            notes.append(f"run [{index}] does not report it")
        elif accuracy_columns(base, rank) != columns or not set(columns) <= set(table.column_names):
            notes.append(f"run [{index}] has no {columns[0]} / {columns[1]} columns for it")
        else:
            _check_stored(metric, columns, estimate, table, paths[index])
            testable.append(index)
    if tables is None:
        notes.append("the predictions hold several rows per example, so examples cannot be paired")
    if 0 not in testable or tables is None:
        return MetricComparison(metric, columns, estimates, (), note="; ".join(notes) or None)
    reference_hits, reference_scored = _column(tables[0], columns[0]), _scored(tables[0], columns[1], group)
    tested: list[tuple[int, PairedComparison]] = []
    for index in testable[1:]:
        hits, scored = _column(tables[index], columns[0]), _scored(tables[index], columns[1], group)
        both = reference_scored & scored
        if not both.any():
            notes.append(f"run [{index}] shares no scored example with the reference")
            continue
        tested.append((index, paired_bootstrap(hits[both], reference_hits[both], n_resamples=n_resamples,
                                               confidence=confidence, seed=seed)))
    differences: tuple[Difference, ...] = ()
    if tested:
        adjusted, reject = holm(np.array([paired.p_value for _, paired in tested]), alpha)
        differences = tuple(Difference(run=index, paired=paired, p_adjusted=float(p), holds=bool(r))
                            for (index, paired), p, r in zip(tested, adjusted, reject, strict=True))
    return MetricComparison(metric, columns, estimates, differences, note="; ".join(notes) or None)


def compare_runs(paths: Sequence[Path], *, metric: str | None = None, n_resamples: int = 10_000, seed: int = 0,
                 alpha: float = 0.05, confidence: float = 0.95, intersect: bool = False) -> Comparison:
    """Compare run records of one task on the same examples; the first run is the reference.

    Every metric of the reference (or only ``metric``) is listed for every run with its stored
    value and interval; per-example accuracies get, for each other run, the paired bootstrap
    difference run - reference with its percentile interval and p-value, Holm-adjusted across those
    runs. Runs evaluated on different examples are an error unless ``intersect``, which compares on
    the examples every run evaluated.
    """
    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise CladebenchError("compare needs at least two run records")
    read = [_read_run(path) for path in paths]
    records = [record for record, _ in read]
    full_tables = [table for _, table in read]
    for record, path in zip(records[1:], paths[1:], strict=True):
        if record.task != records[0].task:
            raise CladebenchError(f"{paths[0]} is a {records[0].task} run and {path} a {record.task} run: "
                                  "only runs of the same task can be compared")
    ranks = [_label_rank(record) for record in records]
    names = list(records[0].metrics)
    if metric is not None:
        if metric not in records[0].metrics:
            raise unknown_name("metric", metric, records[0].metrics)
        names = [metric]
    tables, n_shared, intersected = _aligned(full_tables, paths, intersect)
    metrics = tuple(
        _compare_metric(name, records, full_tables, tables, paths, ranks, n_resamples=n_resamples, seed=seed,
                        alpha=alpha, confidence=confidence)
        for name in names)
    labels = distinct_labels([str(record.label) for record in records], [record.config for record in records],
                             [_folder(path) for path in paths], [record.task for record in records])
    runs = tuple(
        ComparedRun(path=path, model_id=record.model_name(), label=label, label_rank=rank,
                    metrics=record.metrics, evaluated_rows=table.num_rows)
        for record, path, label, rank, table in zip(records, paths, labels, ranks, full_tables, strict=True))
    return Comparison(task=records[0].task, runs=runs, metrics=metrics, examples=n_shared,
                      intersected=intersected, n_resamples=n_resamples, seed=seed, alpha=alpha,
                      confidence=confidence)


def _folder(path: Path) -> str:
    """The folder a run was written to (``--out``), by name: what tells apart two runs with the same settings."""
    return (path if path.is_dir() else path.parent).resolve().name


def _estimate_cell(estimate: dict[str, Any] | None, metric: str) -> str:
    if estimate is None:
        return f"{'n/a':>8}  {'':16}  {'':>6}"
    scale, unit = display_scale(metric)
    low, high = estimate.get("low"), estimate.get("high")
    interval = f"[{scale * low:6.2f}, {scale * high:6.2f}]" if low is not None and high is not None else ""
    value = estimate.get("value")  # null in run.json where the value was not a finite number
    shown = f"{scale * value:7.2f}{unit or ' '}" if value is not None else f"{'undefined':>8}"
    return f"{shown}  {interval:<16}  {estimate['n']:>6}"


def _difference_cell(difference: Difference | None, is_reference: bool, stored_n: set[int], metric: str) -> str:
    if is_reference:
        return "reference"
    if difference is None:
        return "(not tested)"
    paired = difference.paired
    scale, _ = display_scale(metric)
    # Said when the paired examples are not the ones behind the stored values (scored in one run only, intersected).
    fewer = f"  (on {paired.n:,} paired examples)" if stored_n != {paired.n} else ""
    return (f"{scale * paired.difference:+7.2f}  [{scale * paired.low:+7.2f}, {scale * paired.high:+7.2f}]  "
            f"{difference.p_adjusted:8.4f}  {'holds' if difference.holds else 'tied'}{fewer}")


def format_comparison(comparison: Comparison) -> str:
    """The comparison as text: the runs, then one block per metric with one line per run."""
    lines = [f"{comparison.task}: {len(comparison.runs)} runs on {comparison.examples:,} shared examples"
             + (" (only the examples every run evaluated)" if comparison.intersected else "")]
    for index, run in enumerate(comparison.runs):
        lines.append(f"  [{index}] {run.label}  {run.path}" + ("  (reference)" if index == 0 else ""))
    lines.append(
        f"delta: run - reference in points, paired bootstrap ({comparison.n_resamples:,} resamples of examples or "
        f"queries, "
        f"seed {comparison.seed}), {100 * comparison.confidence:g}% percentile interval; p adjusted by Holm across "
        f"the runs on each metric; 'holds' when adjusted p <= {comparison.alpha:g}, otherwise 'tied'")
    if comparison.intersected:
        lines.append("values are as stored (each run's own examples); deltas use the shared examples")
    width = max([16, *(len(entry.metric) for entry in comparison.metrics)])  # per-group names are long
    header = (f"{'metric':<{width}} {'run':>4}  {'value':>8}  {'stored interval':<16}  {'n':>6}  "
              f"{'delta':>7}  {'interval':<18}  {'p (Holm)':>8}")
    lines += ["", header]
    for entry in comparison.metrics:
        by_run = {d.run: d for d in entry.differences}
        for index, estimate in enumerate(entry.estimates):
            name = entry.metric if index == 0 else ""
            tested = entry.columns is not None
            stored_n = {e["n"] for e in (entry.estimates[0], estimate) if e is not None}
            cell = (_difference_cell(by_run.get(index), index == 0, stored_n, entry.metric) if tested
                    else "" if index else "no paired test")
            line = f"{name:<{width}} {f'[{index}]':>4}  {_estimate_cell(estimate, entry.metric)}  {cell}"
            lines.append(line.rstrip())
        if entry.note:
            lines.append(f"{'':<{width}} note: {entry.note}")
    return "\n".join(lines)
