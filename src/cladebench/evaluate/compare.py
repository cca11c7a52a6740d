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
from cladebench.evaluate.labels import distinct_labels
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.metrics import PairedComparison, display_scale, holm, lower_is_better, paired_bootstraps, signed

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

    def to_dict(self) -> dict[str, object]:
        return {"task": self.task, "reference": 0, "runs": [r.to_dict() for r in self.runs],
                "examples": {"compared": self.examples, "intersected": self.intersected},
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
    """One run's per-unit values of one metric: unit keys (sorted, as text) and their values."""

    keys: np.ndarray
    values: np.ndarray


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
    return _Units(keys[finite][order].astype(str), numbers[finite][order])


def _hit_units(table: pa.Table, columns: tuple[str, str], group: str) -> _Units:
    """A run's 0/1 hits on the rows it scored, keyed by their position among the aligned examples."""
    hits, scored = _column(table, columns[0]), _scored(table, columns[1], group)
    positions = np.flatnonzero(scored)
    return _Units(positions, hits[positions].astype(np.float64))


def _pair(run: _Units, reference: _Units) -> tuple[np.ndarray, np.ndarray]:
    """The two runs' values on the units both scored, in one order."""
    _, in_run, in_reference = np.intersect1d(run.keys, reference.keys, assume_unique=True, return_indices=True)
    return run.values[in_run], reference.values[in_reference]


COMPARABILITY_KEYS = ("rows_sha256", "label_set", "rank", "split_sha256", "shots", "gallery")
"""What two runs must share to be paired: the rows evaluated, the label set (its taxa, whatever their name style),
its rank, the split and shots, and the gallery a query searches."""


def _scoped(value: object, group: str) -> Any:
    """A provenance entry for one group of a grouped run: its own entry where the record keeps one per group."""
    if isinstance(value, dict) and group and isinstance(value.get(group), dict):
        return value[group]
    return value


def comparability_of(record: RunRecord, group: str = "") -> dict[str, object]:
    """What decides whether two runs can be paired (:data:`COMPARABILITY_KEYS`), for the whole run or one group.

    Read from the record's ``provenance.comparability`` where it has one (``evaluate.plan.comparability_key``:
    the label set per group in ``label_sets_sha256``, the gallery as its rule); a record written before it has
    the same facts derived from what every record holds: the evaluated rows' fingerprint, the label set's digest
    (``labels_sha256``, or the task's ``sha256``), its rank, the split's fingerprint, the shots and the gallery's
    group key. Either way one group's own label set and split are taken, and each fact has one form, so a record
    with the entry and one without compare alike. A fact a record does not hold is None (None equals None).
    """
    provenance = record.provenance
    label_set = _label_set_entry(record, group)
    task = provenance.get("task") or {}
    split = (_scoped(provenance.get("split_by_group"), group) if group else None) or provenance.get("split") or {}
    shots = record.config.get("shots", task.get("shots"))
    gallery = (task.get("exclusions") or {}).get("group_key")
    facts = {
        "rows_sha256": (provenance.get("dataset") or {}).get("evaluated_fingerprint"),
        "label_set_sha256": label_set.get("labels_sha256") or label_set.get("sha256"),
        "rank": label_set.get("rank") or task.get("rank") or record.config.get("rank"),
        "split_sha256": split.get("fingerprint"),
        "shots": shots,
        "gallery": gallery,
    }
    stored = provenance.get("comparability")
    if isinstance(stored, dict) and stored:
        per_group = stored.get("label_sets_sha256")
        own = per_group.get(group or "None") if isinstance(per_group, dict) else None
        facts.update({key: stored[key] for key in ("rows_sha256", "rank", "shots") if stored.get(key) is not None})
        if own is not None or not isinstance(per_group, dict):
            facts["label_set_sha256"] = own if own is not None else stored.get("label_set_sha256")
        # Only a drawn split (few-shot, geo: one with a fingerprint) is a fact: the key's digest of splits of kind
        # "none" differs between a grouped and a pooled run, though neither drew anything.
        splits = [provenance.get("split"), *(provenance.get("split_by_group") or {}).values()]
        if facts["split_sha256"] is None and not group and any((s or {}).get("fingerprint") for s in splits):
            facts["split_sha256"] = stored.get("split_sha256")
        if isinstance(stored.get("gallery"), dict):
            facts["gallery"] = stored["gallery"].get("group_key")
    if isinstance(facts["shots"], (list, tuple)):
        facts["shots"] = sorted(int(k) for k in facts["shots"]) or None
    facts["taxa_sha256"] = _taxa(record, group)
    facts["label_set"] = facts["taxa_sha256"] or facts["label_set_sha256"]
    return facts


def _taxa(record: RunRecord, group: str) -> str | None:
    """The digest of a run's (group's) taxa whatever their name style (:meth:`~cladebench.tasks.common.LabelSet
    .taxa_digest`), or None for a record written before runs kept it (or a task whose labels are not taxa)."""
    own = _label_set_entry(record, group).get("taxa_sha256")
    if own:
        return str(own)
    stored = record.provenance.get("comparability") or {}
    per_group = stored.get("taxa_sets_sha256") if isinstance(stored, dict) else None
    found = per_group.get(group or "None") if isinstance(per_group, dict) else None
    return str(found) if found else None


def _shots_words(record: RunRecord, group: str, shots: object) -> str:
    label_set = _label_set_entry(record, group)
    size, candidates = label_set.get("size"), label_set.get("candidates")
    rank = label_set.get("rank") or "class"
    shots = shots if isinstance(shots, list) else [shots]
    if size is not None and candidates is not None and size < candidates:  # the most shots decide the classes
        return f"{max(shots)}-shot scores {size} of {candidates} {rank}"
    return "/".join(str(k) for k in shots) + "-shot"


def incomparable(reference: RunRecord, other: RunRecord, group: str = "") -> str | None:
    """What keeps ``other`` from being paired with ``reference`` (on one group), in words, or None.

    The rows evaluated are not among the reasons: :func:`compare_runs` refuses runs on different rows unless told
    to pair the rows they share (``intersect``)."""
    a, b = comparability_of(reference, group), comparability_of(other, group)
    reasons = []
    if a["rank"] != b["rank"]:
        reasons.append(f"{b['rank'] or 'no'} rank vs {a['rank'] or 'no'} rank")
    if a["shots"] != b["shots"]:
        reasons.append(f"{_shots_words(other, group, b['shots'])} vs {_shots_words(reference, group, a['shots'])}")
    elif a["rank"] == b["rank"] and a["taxa_sha256"] and b["taxa_sha256"]:
        # Both records name their taxa: the same taxa under scientific and common names are one label set (such
        # runs compare the name styles on the same images and taxa, which is what that comparison is for).
        if a["taxa_sha256"] != b["taxa_sha256"]:
            reasons.append(_other_taxa(reference, other, group, a["rank"]))
    elif a["label_set_sha256"] != b["label_set_sha256"] and a["rank"] == b["rank"]:
        sizes = [label_set_size(record, group) for record in (other, reference)]
        styles = [_name_style(record, group) for record in (other, reference)]
        # A record written before taxa were kept: its label strings' digest differs between name styles of the
        # same taxa, so two styles with as many labels are taken as one label set.
        if sizes[0] != sizes[1] or styles[0] == styles[1] or None in styles:
            told = f" ({sizes[0]} vs {sizes[1]} labels)" if None not in sizes else ""
            reasons.append(f"different label sets{told}")
    if a["split_sha256"] != b["split_sha256"] and a["shots"] == b["shots"]:
        reasons.append("different few-shot splits (support and query images drawn differently)")
    if a["gallery"] != b["gallery"]:
        reasons.append(f"gallery without same-{b['gallery']} images vs without same-{a['gallery']} images")
    return "; ".join(reasons) or None


TAXA_NAMED = 3
"""Labels named in words when two runs' taxa differ (the rest are counted)."""


def _other_taxa(reference: RunRecord, other: RunRecord, group: str, rank: object) -> str:
    """``different taxa (9 vs 12 species; only in this run: A, B; only in the reference: C and 2 more)``: the
    labels are named where both runs list theirs in one name style."""
    sizes = [label_set_size(record, group) for record in (other, reference)]
    said = f"{sizes[0]} vs {sizes[1]} {rank or 'labels'}" if None not in sizes else ""
    entries = [_label_set_entry(record, group) for record in (other, reference)]
    listed = [entry.get("labels") for entry in entries]
    styles = [_name_style(record, group) for record in (other, reference)]
    first, second = listed
    if isinstance(first, list) and isinstance(second, list) and styles[0] == styles[1]:
        mine, theirs = set(map(str, first)), set(map(str, second))
        for words, names in (("only in this run", mine - theirs), ("only in the reference", theirs - mine)):
            if names:
                shown = sorted(names)[:TAXA_NAMED]
                more = len(names) - len(shown)
                said += f"{'; ' if said else ''}{words}: {', '.join(shown)}{f' and {more} more' if more else ''}"
    return f"different taxa ({said})" if said else "different taxa"


def _label_set_entry(record: RunRecord, group: str) -> dict[str, Any]:
    return (_scoped(record.provenance.get("label_sets"), group) if group else None) \
        or record.provenance.get("label_set") or {}


def _name_style(record: RunRecord, group: str) -> str | None:
    style = _label_set_entry(record, group).get("name_style") or (record.provenance.get("prompts") or {}).get(
        "name_style") or record.config.get("name_style")
    return str(style) if style else None


def label_set_size(record: RunRecord, group: str = "") -> int | None:
    """Labels a run (one group of it) was scored against, or None where the record does not say."""
    label_set = _label_set_entry(record, group)
    size = label_set.get("size", label_set.get("labels_count"))
    return int(size) if isinstance(size, int) else None


def computed_on(record: RunRecord, metric: str, unit: str | None = None) -> str:
    """What one stored number was computed on, in words: ``45 images, 9 classes``, ``5 reps of 120 query images,
    3 classes``, ``250 queries``. ``unit`` names what the task's paired test resamples (images by default)."""
    estimate = record.metrics.get(metric)
    if not estimate:
        return ""
    group = metric.rpartition(GROUP_SEPARATOR)[0]
    parts = []
    n = estimate.get("n")
    if "per_repetition" in estimate or "query_examples" in estimate:  # a mean over repetitions
        queries = estimate.get("query_examples")
        parts.append(f"{n} reps" + (f" of {queries:,} {unit or 'query images'} in all" if queries else ""))
    elif isinstance(n, int):
        parts.append(f"{n:,} {unit or 'images'}")
    classes = estimate.get("classes") or label_set_size(record, group if group else "")
    if classes:
        parts.append(f"{classes:,} classes")
    return ", ".join(parts)


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
                notes.append(f"run [{index}] does not report it" if estimate is None
                             else f"run [{index}] has no value for it{_reason(estimate)}")
                continue
            if index != reference:
                reason = incomparable(self.records[reference], self.records[index], group)
                if reason:
                    notes.append(f"run [{index}] not paired: {reason}")
                    unpaired.append((index, reason))
                    continue
            if columns is not None:
                table = self.full_tables[index]
                if accuracy_columns(base, self.ranks[index]) != columns or not set(columns) <= set(table.column_names):
                    notes.append(f"run [{index}] has no per-image hits for it")
                    continue
            elif self.units(index, metric, None) is None:
                notes.append(f"run [{index}] has no per-{unit} values for it")
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
                notes.append(f"run [{index}] shares no scored {unit or 'example'} with run [{reference}]")
                continue
            runs.append(index)
            pairs.append((a, b))
        return _Job(metric, reference, runs, pairs, notes, columns, unit, unpaired)


def _reason(estimate: dict[str, object]) -> str:
    reason = estimate.get("reason") or estimate.get("left_out")
    return f" ({reason})" if reason else ""


def _tested(jobs: Sequence[_Job], *, n_resamples: int, seed: int, alpha: float,
            confidence: float) -> list[tuple[Difference, ...]]:
    """Every job's pairs bootstrapped at once (one draw per block for pairs of one size), then Holm per metric."""
    flat = [pair for job in jobs for pair in job.pairs]
    results = iter(paired_bootstraps(flat, n_resamples=n_resamples, confidence=confidence, seed=seed) if flat else [])
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
                      confidence=confidence, verdicts=verdicts)


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
            group = entry.metric.rpartition(GROUP_SEPARATOR)[0]
            # the best among the runs that can be paired with the reference: a run at another rank is not a rival
            among = [i for i in range(n_runs)
                     if i == 0 or incomparable(runs.records[0], runs.records[i], group) is None]
            best = _best(base, entry.estimates, among)
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
                if len(entries) == 1:
                    tally["pooled"] = (difference, verdict)
        verdicts.append(Verdict(metric=base, best=best, unit=entries[0].unit,
                                against=tuple(sorted(against.items()))))
    return tuple(verdicts)


def _folder(path: Path) -> str:
    """The folder a run was written to (``--out``), by name: what tells apart two runs with the same settings."""
    return (path if path.is_dir() else path.parent).resolve().name


def _estimate_cell(estimate: dict[str, Any] | None, metric: str) -> str:
    if estimate is None:
        return f"{'n/a':>8}  {'':16}"
    scale, unit = display_scale(metric)
    low, high = estimate.get("low"), estimate.get("high")
    value = estimate.get("value")  # null in run.json where the value was not a finite number
    # no interval beside an undefined value: over no image, Wilson's is [0, 100], which says nothing of it
    interval = (f"[{scale * low:6.2f}, {scale * high:6.2f}]" if low is not None and high is not None
                and value is not None else "")
    shown = f"{scale * value:7.2f}{unit or ' '}" if value is not None else f"{'undefined':>8}"
    return f"{shown}  {interval:<16}"


def _difference_cell(difference: Difference | None, is_reference: bool, stored_n: set[int], metric: str) -> str:
    if is_reference:
        return "reference"
    if difference is None:
        return "(not paired)"
    paired = difference.paired
    scale, _ = display_scale(metric)
    # Said when the paired units are not the ones behind the stored values (scored in one run only, intersected).
    fewer = f"  (on {paired.n:,} paired examples)" if stored_n and stored_n != {paired.n} else ""
    return (f"{scale * paired.difference:+7.2f}  [{scale * paired.low:+7.2f}, {scale * paired.high:+7.2f}]  "
            f"{difference.p_adjusted:8.4f}  {'holds' if difference.holds else 'tied'}{fewer}")


def _stored_units(entry: MetricComparison, index: int) -> int | None:
    """How many units run ``index``'s stored value was computed on; None for a mean over repetitions (its n counts
    repetitions, not the query images that are paired)."""
    estimate = entry.estimates[index]
    if estimate is None or "per_repetition" in estimate:
        return None
    return estimate.get("n")


def format_verdicts(comparison: Comparison) -> list[str]:
    """The answer, one line per metric: the best run, its paired difference to each other run (best - other, with
    the unadjusted interval) on the pooled value, and in how many groups it is better, tied or worse."""
    if not comparison.verdicts:
        return []
    lines = [f"verdict (best - other, paired bootstrap, {100 * comparison.confidence:g}% unadjusted interval; "
             f"better/worse when Holm-adjusted p <= {comparison.alpha:g}):"]
    for verdict in comparison.verdicts:
        scale, unit = display_scale(verdict.metric)
        points = " points" if unit == "%" else ""
        best = comparison.runs[verdict.best]
        parts = []
        for run, tally in verdict.against:
            said = f"vs [{run}] {comparison.runs[run].label}"
            if tally.get("pooled") is not None:
                difference, word = tally["pooled"]
                d = difference.paired
                said += (f": {signed(-scale * d.difference)}{points} [{signed(-scale * d.high)}, "
                         f"{signed(-scale * d.low)}] "
                         f"on {d.n:,} {verdict.unit or 'examples'}, {word}")
            if tally["groups"] > 1 or (tally["groups"] and tally.get("pooled") is None):
                said += (f"{',' if tally.get('pooled') is not None else ':'} better in {tally['better']} of "
                         f"{tally['groups']} groups (tied in {tally['tied']}, worse in {tally['worse']})")
            parts.append(said)
        lines.append(f"  {verdict.metric}: best [{verdict.best}] {best.label}" + ("; " if parts else "")
                     + "; ".join(parts))
    return lines


def format_comparison(comparison: Comparison) -> str:
    """The comparison as text: the runs, one block per metric with one line per run, then the verdict."""
    lines = [f"{comparison.task}: {len(comparison.runs)} runs on {comparison.examples:,} shared examples"
             + (" (only the examples every run evaluated)" if comparison.intersected else "")]
    for index, run in enumerate(comparison.runs):
        lines.append(f"  [{index}] {run.label}  {run.path}" + ("  (reference)" if index == 0 else ""))
    lines.append(
        f"delta: run - reference in points, paired bootstrap ({comparison.n_resamples:,} resamples of the units "
        f"named under 'computed on', seed {comparison.seed}), {100 * comparison.confidence:g}% percentile interval "
        f"(unadjusted); p adjusted by Holm, one family per metric and group (the runs tested on it); 'holds' when "
        f"adjusted p <= {comparison.alpha:g}, otherwise 'tied'")
    if comparison.intersected:
        lines.append("values are as stored (each run's own examples); deltas use the shared examples")
    width = max([16, *(len(entry.metric) for entry in comparison.metrics)])  # per-group names are long
    on_width = max([11, *(len(on) for entry in comparison.metrics for on in entry.computed_on)])
    header = (f"{'metric':<{width}} {'run':>4}  {'value':>8}  {'stored interval':<16}  {'computed on':<{on_width}}  "
              f"{'delta':>7}  {'interval':<18}  {'p (Holm)':>8}")
    lines += ["", header]
    for entry in comparison.metrics:
        by_run = {d.run: d for d in entry.differences}
        for index, estimate in enumerate(entry.estimates):
            name = entry.metric if index == 0 else ""
            tested = entry.columns is not None
            stored_n = {n for n in (_stored_units(entry, 0), _stored_units(entry, index)) if n is not None}
            cell = (_difference_cell(by_run.get(index), index == 0, stored_n, entry.metric) if tested
                    else "" if index else "no paired test")
            on = entry.computed_on[index] if entry.computed_on else ""
            line = (f"{name:<{width}} {f'[{index}]':>4}  {_estimate_cell(estimate, entry.metric)}  "
                    f"{on:<{on_width}}  {cell}")
            lines.append(line.rstrip())
        if entry.note:
            lines.append(f"{'':<{width}} note: {entry.note}")
    verdicts = format_verdicts(comparison)
    return "\n".join(lines + (["", *verdicts] if verdicts else []))
