"""``cladebench compare``: which differences between runs on the same examples are more than noise.

Two models a point apart on a few hundred images are usually tied. Runs evaluated on the same
examples are compared pairwise against the first run (the reference) with a paired bootstrap over
the units the task scores (:func:`cladebench.metrics.paired_bootstraps`: images for zero-shot hits,
query images for few-shot on identical splits, queries for retrieval and rerank, targets for
lineage): both runs are resampled with the same draw, so what they share cancels. When several runs
are compared against the reference on one metric of one group, their p-values are adjusted together
by Holm's method (that is the family), and a difference "holds" when Holm rejects; otherwise the runs
are reported as tied (BioBench marks ties the same way). Intervals are each difference's own,
unadjusted.

Pairing needs comparable runs (:func:`comparability_of`): the same examples, rank, label set, split,
shots and gallery. Predictions are aligned by ``uuid``, not by row order, so runs written in different
orders still pair correctly; runs on different example sets are refused unless the comparison is
explicitly restricted to the examples they share; a run that differs otherwise is shown, said in words
(:func:`incomparable`) and not paired. Metrics that are neither means of a per-example 0/1 column
(:func:`accuracy_columns`) nor of a task's per-unit values are shown untested. The text ends with the
verdict: the best run, its paired difference to each other run, better in how many groups.

One module on purpose: reading the runs, deciding which can be paired, pairing them and the verdict are
one chain that ``compare``, the report's leaderboard and the suite board call as one, and the text is
the comparison's own rendering; split, each piece would reach into the others' intermediate state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError, SchemaError, UsageError, unknown_name
from cladebench.evaluate.comparability import (  # noqa: F401  (comparability_of, label_set_size: compare's API)
    comparability_of,
    computed_on,
    incomparable,
    label_set_size,
)
from cladebench.evaluate.labels import distinct_labels
from cladebench.evaluate.overlap import refuse_unrelated
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.metrics import PairedComparison, holm, lower_is_better, paired_bootstraps
from cladebench.metrics.hierarchy import paired_ratio_bootstrap

CORRECTION = ("Holm-Bonferroni, one family per metric and group: the runs tested against one reference on that "
              "metric of that group (not across groups or metrics)")
"""The family each Holm correction spans, as tables and the JSON say it."""

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
    metrics: dict[str, dict[str, object]]
    """Stored metric estimates (value, Wilson interval, n), as in run.json."""
    evaluated_rows: int
    """Examples in the run's predictions."""

    def to_dict(self) -> dict[str, object]:
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

    def to_dict(self) -> dict[str, object]:
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
    unit: str | None = None
    """What the paired test resamples ("images", "queries", "query images"), None when there is no test."""
    computed_on: tuple[str, ...] = ()
    """Per run, what its stored value was computed on (:func:`computed_on`): ``45 images, 9 classes``."""
    unpaired: tuple[tuple[int, str], ...] = ()
    """(run, why in words) for each run that reports the metric but cannot be paired with the reference."""

    def to_dict(self) -> dict[str, object]:
        return {"metric": self.metric, "columns": list(self.columns) if self.columns else None,
                "unit": self.unit, "computed_on": list(self.computed_on), "estimates": list(self.estimates),
                "differences": [d.to_dict() for d in self.differences], "note": self.note}


@dataclass(frozen=True)
class Verdict:
    """The answer for one metric over every group that reports it: the best run and how each other run compares."""

    metric: str
    """The metric's own name (``top1_species``), over its groups (``G/top1_species``) and the pooled value."""
    best: int
    """Index of the run best in the most groups (the first such run on a tie)."""
    unit: str | None
    """What the paired tests resample."""
    against: tuple[tuple[int, dict[str, Any]], ...]
    """Per other run: ``better``, ``tied``, ``worse`` (how many groups the best run is better, tied or worse in
    against it, Holm-adjusted per group across the runs), ``groups`` (groups paired) and ``pooled`` (the paired
    difference run - best on the pooled value, or on the only group, with its verdict; None when not paired)."""

    def to_dict(self) -> dict[str, object]:
        return {"metric": self.metric, "best": self.best, "unit": self.unit,
                "against": [{"run": run, **{k: v for k, v in tally.items() if k != "pooled"},
                             "pooled": None if tally.get("pooled") is None else
                             {**tally["pooled"][0].to_dict(), "verdict": tally["pooled"][1]}}
                            for run, tally in self.against]}


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
    verdicts: tuple[Verdict, ...] = ()
    """The answer per metric: the best run and its paired difference to each other run."""
    overlap: tuple[tuple[int, int], ...] = ()
    """Per run, (examples it shares with the reference, examples it evaluated) (:func:`~cladebench.evaluate.overlap.
    example_overlap`)."""

    def to_dict(self) -> dict[str, object]:
        return {"task": self.task, "reference": 0, "runs": [r.to_dict() for r in self.runs],
                "examples": {"compared": self.examples, "intersected": self.intersected,
                             "shared_with_reference": [shared for shared, _ in self.overlap],
                             "evaluated": [own for _, own in self.overlap]},
                "settings": {"n_resamples": self.n_resamples, "seed": self.seed, "alpha": self.alpha,
                             "confidence": self.confidence, "correction": CORRECTION,
                             "intervals": "unadjusted: each difference's own percentile interval"},
                "metrics": [m.to_dict() for m in self.metrics], "verdicts": [v.to_dict() for v in self.verdicts]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def _checked_predictions(path: Path, record: RunRecord) -> pa.Table:
    """A run's predictions, refused (one line naming the run) unless every metric its record stores is what they
    give (:func:`~cladebench.evaluate.verify.read_checked`): a number edited by hand, predictions missing, changed
    or without their SHA-256 never reach a comparison, whichever metric is compared."""
    from cladebench.evaluate.verify import read_checked

    table, problem = read_checked(path, record)
    if problem is not None or table is None:
        raise SchemaError(f"{path}: not compared: {problem}")
    return _pairable(path, table)


def _pairable(path: Path, table: pa.Table) -> pa.Table:
    if "uuid" not in table.column_names:
        raise SchemaError(f"{path}: predictions have no uuid column, so they cannot be paired with another run")
    return table


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


def _other_truths(reference: pa.Table, other: pa.Table, same_labels: bool) -> tuple[int, int]:
    """(examples both runs evaluated that carry another true label in one than in the other, examples shared).

    The rows' fingerprint is their uuids: a dataset whose curator corrected a label keeps it, and two runs on its
    versions would be paired on questions with other answers. A truth is the label's index where the predictions
    keep it (two taxa may share a common name), within its group. Over one label list the truths must be equal;
    over two (another name style or order of the same taxa), each truth of one run must stand for one of the
    other."""
    column = next((c for c in ("true_index", "true_label")
                   if c in reference.column_names and c in other.column_names), None)
    if column is None:
        return 0, 0
    truths = []
    for table in (reference, other):
        groups = table.column("group").to_pylist() if "group" in table.column_names else [None] * table.num_rows
        truths.append(dict(zip(table.column("uuid").to_pylist(),
                               zip(groups, table.column(column).to_pylist(), strict=True), strict=True)))
    shared = truths[0].keys() & truths[1].keys()
    forward: dict[object, object] = {}
    backward: dict[object, object] = {}
    differ = 0
    for uuid in shared:
        a, b = truths[0][uuid], truths[1][uuid]
        if (a != b) if same_labels else (forward.setdefault(a, b) != b or backward.setdefault(b, a) != a):
            differ += 1
    return differ, len(shared)


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


def _task_hook(task_name: str) -> object:
    from cladebench.tasks import get_task

    try:
        return get_task(task_name)
    except CladebenchError:
        return None


def _in_group(table: pa.Table, group: str) -> pa.Table | None:
    if not group:
        return table
    if "group" not in table.column_names:
        return None
    return table.filter(pc.equal(table.column("group"), group))


@dataclass(frozen=True)
class _Units:
    """One run's per-unit values of one metric: unit keys (sorted, as text) and their values; for a metric that is
    a ratio of sums (mistake severity: heights over mistakes), each unit's weight in the denominator too."""

    keys: np.ndarray
    values: np.ndarray
    weights: np.ndarray | None = None


def _unit_values(task: Any, record: RunRecord, table: pa.Table, group: str, metric: str) -> _Units | None:
    """A run's per-unit values of a metric from its task's hook (per query, per query image...), or None."""
    if task is None or task.per_unit is None:
        return None
    table = _in_group(table, group)
    if table is None:
        return None
    try:
        values = task.per_unit(table, record.provenance.get("task") or {}).get(metric)
    except (KeyError, ValueError, pa.ArrowException):  # predictions without the columns the hook reads
        return None
    if values is None:
        return None
    keys = np.asarray([str(key) for key in values[0]], dtype=object)
    numbers = np.asarray(values[1], dtype=np.float64)
    finite = np.isfinite(numbers)
    order = np.argsort(keys[finite].astype(str), kind="stable")
    weights = None if len(values) < 3 else np.asarray(values[2], dtype=np.float64)[finite][order]
    return _Units(keys[finite][order].astype(str), numbers[finite][order], weights)


def _hit_units(table: pa.Table, columns: tuple[str, str], group: str) -> _Units:
    """A run's 0/1 hits on the rows it scored, keyed by their position among the aligned examples."""
    hits, scored = _column(table, columns[0]), _scored(table, columns[1], group)
    positions = np.flatnonzero(scored)
    return _Units(positions, hits[positions].astype(np.float64))


def _pair(run: _Units, reference: _Units) -> tuple[np.ndarray, np.ndarray]:
    """The two runs' values on the units both scored, in one order; for a ratio, each run's (values, weights) as
    the two rows of one array."""
    _, in_run, in_reference = np.intersect1d(run.keys, reference.keys, assume_unique=True, return_indices=True)
    if run.weights is not None and reference.weights is not None:
        return (np.stack([run.values[in_run], run.weights[in_run]]),
                np.stack([reference.values[in_reference], reference.weights[in_reference]]))
    return run.values[in_run], reference.values[in_reference]


@dataclass(frozen=True)
class _Job:
    """One metric's pairs against one reference: the runs paired and the per-unit values of each pair."""

    metric: str
    reference: int
    runs: list[int]
    pairs: list[tuple[np.ndarray, np.ndarray]]
    notes: list[str]
    columns: tuple[str, str] | None
    unit: str | None
    unpaired: list[tuple[int, str]]


class _Runs:
    """The runs of a comparison, read once: records, predictions (as written and aligned), tasks and units."""

    def __init__(self, paths: Sequence[Path], records: Sequence[RunRecord], full_tables: Sequence[pa.Table],
                 tables: Sequence[pa.Table] | None):
        self.paths, self.records, self.full_tables, self.tables = paths, records, full_tables, tables
        self.ranks = [_label_rank(record) for record in records]
        self.task = _task_hook(records[0].task)
        self._units: dict[tuple[int, str], _Units | None] = {}

    def estimates(self, metric: str) -> tuple[dict[str, object] | None, ...]:
        return tuple(record.metrics.get(metric) for record in self.records)

    def units(self, index: int, metric: str, columns: tuple[str, str] | None) -> _Units | None:
        if (index, metric) not in self._units:
            group, _, base = metric.rpartition(GROUP_SEPARATOR)
            if columns is not None:
                self._units[index, metric] = (None if self.tables is None
                                              else _hit_units(self.tables[index], columns, group))
            else:
                self._units[index, metric] = _unit_values(self.task, self.records[index], self.full_tables[index],
                                                          group, base)
        return self._units[index, metric]

    def job(self, metric: str, reference: int) -> _Job | str:
        """The pairs of ``metric`` against run ``reference``, or why the metric has no paired test."""
        estimates = self.estimates(metric)
        group, _, base = metric.rpartition(GROUP_SEPARATOR)
        known_groups = set((self.records[0].provenance.get("groups") or {}).get("values") or ())
        if group not in known_groups and "=" in group:  # COLUMN=VALUE: a breakdown, unless a group is so named
            return "a breakdown of the predictions: no paired test"
        columns = accuracy_columns(base, self.ranks[reference])
        unit = None
        if columns is None:
            if self.units(reference, metric, None) is None:
                return "not a mean of per-example hits nor of per-unit values: no paired test"
            unit = getattr(self.task, "unit", "images")
        notes: list[str] = []
        unpaired: list[tuple[int, str]] = []
        testable = []
        for index, estimate in enumerate(estimates):
            if estimate is None or estimate.get("value") is None:
                notes.append(f"run [{index + 1}] does not report it" if estimate is None
                             else f"run [{index + 1}] has no value for it{_reason(estimate)}")
                continue
            if index != reference:
                reason = incomparable(self.records[reference], self.records[index], group)
                if reason:
                    notes.append(f"run [{index + 1}] not paired: {reason}")
                    unpaired.append((index, reason))
                    continue
            if columns is not None:
                table = self.full_tables[index]
                if accuracy_columns(base, self.ranks[index]) != columns or not set(columns) <= set(table.column_names):
                    notes.append(f"run [{index + 1}] has no per-image hits for it")
                    continue
            elif self.units(index, metric, None) is None:
                notes.append(f"run [{index + 1}] has no per-{unit} values for it")
                continue
            testable.append(index)
        if columns is not None and self.tables is None:
            notes.append("the predictions hold several rows per example, so examples cannot be paired")
        if reference not in testable or (columns is not None and self.tables is None):
            return _Job(metric, reference, [], [], notes, columns, unit, unpaired)
        runs, pairs = [], []
        reference_units = self.units(reference, metric, columns)
        for index in testable:
            if index == reference:
                continue
            run_units = self.units(index, metric, columns)
            assert run_units is not None and reference_units is not None  # a testable run has its units
            a, b = _pair(run_units, reference_units)
            if not a.size:
                notes.append(f"run [{index + 1}] shares no scored {unit or 'example'} with run [{reference + 1}]")
                continue
            if a.ndim == 2 and not (a[1].any() and b[1].any()):  # a ratio over mistakes: none, no ratio
                notes.append(f"run [{index}] or run [{reference}] makes no mistake on the {unit or 'example'}s "
                             "they share")
                continue
            runs.append(index)
            pairs.append((a, b))
        return _Job(metric, reference, runs, pairs, notes, columns, unit, unpaired)


def _reason(estimate: dict[str, object]) -> str:
    reason = estimate.get("reason") or estimate.get("left_out")
    return f" ({reason})" if reason else ""


def _tested(jobs: Sequence[_Job], *, n_resamples: int, seed: int, alpha: float,
            confidence: float) -> list[tuple[Difference, ...]]:
    """Every job's pairs bootstrapped at once (one draw per block for pairs of one size), then Holm per metric; a
    ratio's pairs (two rows each: values and weights) by :func:`cladebench.metrics.hierarchy.paired_ratio_bootstrap`.
    """
    flat = [pair for job in jobs for pair in job.pairs]
    means = [pair for pair in flat if pair[0].ndim == 1]
    mean_results = iter(paired_bootstraps(means, n_resamples=n_resamples, confidence=confidence, seed=seed)
                        if means else [])
    results = iter([next(mean_results) if a.ndim == 1 else paired_ratio_bootstrap(
        a[0], a[1], b[0], b[1], n_resamples=n_resamples, confidence=confidence, seed=seed) for a, b in flat])
    out: list[tuple[Difference, ...]] = []
    for job in jobs:
        tested = [(index, next(results)) for index in job.runs]
        if not tested:
            out.append(())
            continue
        adjusted, reject = holm(np.array([paired.p_value for _, paired in tested]), alpha)
        out.append(tuple(Difference(run=index, paired=paired, p_adjusted=float(p), holds=bool(r))
                         for (index, paired), p, r in zip(tested, adjusted, reject, strict=True)))
    return out


def _matching(metric: str, names: Sequence[str]) -> list[str]:
    """The metrics called ``metric``: itself, or that metric of every group and breakdown (``G/top1_species``)."""
    if metric in names:
        return [name for name in names if name == metric or name.rpartition(GROUP_SEPARATOR)[2] == metric]
    return [name for name in names if name.rpartition(GROUP_SEPARATOR)[2] == metric]


def compare_runs(paths: Sequence[Path], *, metric: str | None = None, n_resamples: int = 10_000, seed: int = 0,
                 alpha: float = 0.05, confidence: float = 0.95, intersect: bool = False,
                 in_every_group: bool = True,
                 read: Sequence[tuple[RunRecord, pa.Table]] | None = None) -> Comparison:
    """Compare run records of one task on the same examples; the first run is the reference.

    Every metric of the reference (or only ``metric``, in every group that reports it) is listed for every run
    with its stored value and interval; metrics that are means of per-example hits or of per-unit values (per
    query, per query image) get, for each other comparable run, the paired bootstrap difference run - reference
    with its percentile interval and p-value, Holm-adjusted across those runs. Runs that cannot be paired (another
    rank, label set, split or shots: :func:`incomparable`) are shown and said, never paired. Runs evaluated on
    different examples are an error unless ``intersect``, which compares on the examples every run evaluated. The
    verdict (:class:`Verdict`) names the best run of each metric and its paired difference to every other run.
    ``in_every_group`` False compares ``metric`` alone, not also that metric of every group (a report's cell).
    ``read``: each path's record and predictions, already read and checked (:func:`~cladebench.evaluate.verify.
    read_checked`; a report holds them), so a report that compares its runs on every metric reads each run once.
    """
    paths = [Path(p) for p in paths]
    if len(paths) < 2:
        raise UsageError("compare needs at least two run records")
    records = [RunRecord.read_given(path) for path in paths] if read is None else [record for record, _ in read]
    for record, path in zip(records[1:], paths[1:], strict=True):
        if record.task != records[0].task:
            raise CladebenchError(f"{paths[0]} is a {records[0].task} run and {path} a {record.task} run: "
                                  "only runs of the same task can be compared")
    full_tables = ([_checked_predictions(path, record) for path, record in zip(paths, records, strict=True)]
                   if read is None else [_pairable(path, table) for path, (_, table) in zip(paths, read, strict=True)])
    if read is None:
        RunRecord.given_once(paths)
    overlap = refuse_unrelated(paths, records, full_tables)
    names = list(records[0].metrics)
    if metric is not None:
        names = [metric] if not in_every_group and metric in names else _matching(metric, names)
        if not names:
            bases = dict.fromkeys(name.rpartition(GROUP_SEPARATOR)[2] for name in records[0].metrics)
            raise unknown_name("metric", metric, bases)
    # A run scored differently (another split, rank, shots) is shown and never paired, so its examples need not
    # be the reference's: a few-shot run on other splits evaluates other query images.
    pairable = [0] + [i for i in range(1, len(records)) if incomparable(records[0], records[i]) is None]
    aligned, n_shared, intersected = _aligned([full_tables[i] for i in pairable], [paths[i] for i in pairable],
                                              intersect)
    for i in pairable[1:]:
        same_labels = (comparability_of(records[0])["label_set_sha256"]
                       == comparability_of(records[i])["label_set_sha256"])
        differ, shared = _other_truths(full_tables[0], full_tables[i], same_labels)
        if differ:
            raise CladebenchError(
                f"{paths[0]} and {paths[i]}: {differ} of the {shared} examples both evaluated carry another true "
                "label in one than in the other (another version of the dataset?), so they are not compared")
    tables = None
    if aligned is not None:
        by_index = dict(zip(pairable, aligned, strict=True))
        tables = [by_index.get(i, table) for i, table in enumerate(full_tables)]  # the others are never read
    runs = _Runs(paths, records, full_tables, tables)
    jobs = [runs.job(name, 0) for name in names]
    real = [job for job in jobs if isinstance(job, _Job)]
    tested = iter(_tested(real, n_resamples=n_resamples, seed=seed, alpha=alpha, confidence=confidence))
    metrics = []
    unit = getattr(runs.task, "unit", None)
    for name, job in zip(names, jobs, strict=True):
        estimates = runs.estimates(name)
        on = tuple(computed_on(record, name, unit) for record in records)
        if isinstance(job, str):
            metrics.append(MetricComparison(name, None, estimates, (), note=job, computed_on=on))
        else:
            metrics.append(MetricComparison(name, job.columns or ("per-query", name), estimates, next(tested),
                                            note="; ".join(job.notes) or None, unit=job.unit or "images",
                                            computed_on=on, unpaired=tuple(job.unpaired)))
    labels = distinct_labels([str(record.label) for record in records], [record.config for record in records],
                             [_folder(path) for path in paths], [record.task for record in records])
    compared = tuple(
        ComparedRun(path=path, model_id=record.model_name(), label=label, label_rank=rank,
                    metrics=record.metrics, evaluated_rows=table.num_rows)
        for record, path, label, rank, table in zip(records, paths, labels, runs.ranks, full_tables, strict=True))
    verdicts = _verdicts(runs, metrics, n_resamples=n_resamples, seed=seed, alpha=alpha, confidence=confidence)
    return Comparison(task=records[0].task, runs=compared, metrics=tuple(metrics), examples=n_shared,
                      intersected=intersected, n_resamples=n_resamples, seed=seed, alpha=alpha,
                      confidence=confidence, verdicts=verdicts, overlap=tuple(overlap))


def _best(metric: str, estimates: Sequence[dict[str, Any] | None], among: Sequence[int]) -> int | None:
    values = [(e["value"], i) for i in among if (e := estimates[i]) and e.get("value") is not None]
    if not values:
        return None
    return max(values, key=lambda v: (-v[0] if lower_is_better(metric) else v[0], -v[1]))[1]


def _verdicts(runs: _Runs, metrics: Sequence[MetricComparison], *, n_resamples: int, seed: int, alpha: float,
              confidence: float) -> tuple[Verdict, ...]:
    """Per base metric (``top1_species`` over every group): the best run, and each other run's paired difference
    to it, pooled and group by group (how many groups it is better, tied or worse in)."""
    tested = [entry for entry in metrics if entry.columns is not None]
    by_base: dict[str, list[MetricComparison]] = {}
    for entry in tested:
        by_base.setdefault(entry.metric.rpartition(GROUP_SEPARATOR)[2], []).append(entry)
    verdicts = []
    for base, entries in by_base.items():
        n_runs = len(runs.records)
        wins = [0] * n_runs
        for entry in entries:
            # the best among the runs paired with the reference (a run at another rank, on another split, is no
            # rival); where none is, nothing was compared and no run is best
            among = [0, *(difference.run for difference in entry.differences)]
            best = _best(base, entry.estimates, among) if len(among) > 1 else None
            if best is not None:
                wins[best] += 1
        if not any(wins):
            continue
        best = max(range(n_runs), key=lambda i: (wins[i], -i))
        if best == 0:  # the reference is the best: its tests are the ones already made
            tested_against = [(entry, entry.differences) for entry in entries]
        else:
            jobs = [runs.job(entry.metric, best) for entry in entries]
            real = [(entry, job) for entry, job in zip(entries, jobs, strict=True) if isinstance(job, _Job)]
            results = _tested([job for _, job in real], n_resamples=n_resamples, seed=seed, alpha=alpha,
                              confidence=confidence)
            tested_against = [(entry, differences) for (entry, _), differences in zip(real, results, strict=True)]
        against: dict[int, dict[str, Any]] = {}
        for entry, differences in tested_against:
            pooled = not entry.metric.rpartition(GROUP_SEPARATOR)[0]
            for difference in differences:
                tally = against.setdefault(difference.run, {"better": 0, "tied": 0, "worse": 0, "groups": 0,
                                                             "pooled": None, "metric": entry.metric})
                # run - best: the best is better where the difference holds against the run
                worse = difference.paired.difference > 0 if lower_is_better(base) else difference.paired.difference < 0
                verdict = "tied" if not difference.holds else "better" if worse else "worse"
                if pooled and len(entries) > 1:
                    tally["pooled"] = (difference, verdict)
                    continue
                tally[verdict] += 1
                tally["groups"] += 1
                if verdict != "tied":  # best - run, per group where it holds: how much the groups say
                    tally.setdefault("sizes", []).append(-difference.paired.difference)
                if len(entries) == 1:
                    tally["pooled"] = (difference, verdict)
        if not against:  # no other run was paired on it: nothing says the best is better than anyone
            continue
        verdicts.append(Verdict(metric=base, best=best, unit=entries[0].unit,
                                against=tuple(sorted(against.items()))))
    return tuple(verdicts)


def _folder(path: Path) -> str:
    """The folder a run was written to (``--out``), by name: what tells apart two runs with the same settings."""
    return (path if path.is_dir() else path.parent).resolve().name
