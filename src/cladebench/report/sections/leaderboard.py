"""The leaderboard: one table per task, one row per run, each headline metric with its interval and a tie mark.

Ties are decided as ``cladebench compare`` decides them, by :func:`cladebench.evaluate.compare.compare_runs`:
among comparable runs of one task (the same examples, and the same rank, label set, split, shots and gallery:
:func:`cladebench.evaluate.compare.comparability_of`), the best run on a metric is the reference and every other
run's paired bootstrap difference from it (over images, query images or queries, as the task pairs them) is
Holm-corrected across those runs. A run whose difference Holm does not reject is *tied* with the best; a rejected
one is *worse*. A metric with no paired test (breakdown numbers, a mean with no per-unit values) is marked *not
tested*; a run with no comparable run of its task is *not compared*, and the board says in words what sets it
apart (a difference in numbers measured on other images, ranks or label sets says nothing about the models).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from markupsafe import Markup

from cladebench.errors import CladebenchError
from cladebench.report.formatting import (
    format_interval,
    format_value,
    split_metric,
)
from cladebench.report.headline import headline_metrics
from cladebench.report.runs import POOLED_SUMMARY, ReportRun, by_task, is_pooled_summary
from cladebench.report.sections.base import ReportContext, register_section

if TYPE_CHECKING:
    from cladebench.metrics.intervals import PairedComparison
    from cladebench.tasks import Task

N_RESAMPLES = 10_000
"""Bootstrap resamples per tested difference (as ``cladebench compare``)."""
SEED = 0
"""Seed of the resampling (as ``cladebench compare``)."""
ALPHA = 0.05
"""Family-wise error rate of the Holm correction per metric (as ``cladebench compare``)."""

MARKS: dict[str, str] = {
    "best": "best of the comparable runs (same examples, rank, label set, split and shots)",
    "tied": (f"tied with the best: paired bootstrap difference not significant after Holm's correction (alpha "
             f"{ALPHA}; one family per metric and group: the runs compared with the best on it)"),
    "worse": f"worse than the best: Holm-adjusted p at most {ALPHA}",
    "differs": f"differs from the best (Holm-adjusted p at most {ALPHA}) with a sign the stored values do not show",
    "not tested": "the metric has no paired test (not a mean of per-image or per-query values)",
    "not compared": "no comparable run of this task: the notes say what differs",
}
"""Mark -> what it means; the legend printed under every leaderboard."""


MAX_COLUMNS = 5
"""Most metric columns side by side in one table: with the run's name they fit a 1,400 px window. A part with more
metrics is turned (metrics as rows) when it has at most this many runs, or else split into tables of this many."""
SAID_ONCE = ("not compared", "not tested")
"""Marks said once above a table, not in every cell, when every marked cell of the table has the same one."""


@dataclass(frozen=True)
class Cell:
    """One run's value of one metric."""

    metric: str
    value: str
    interval: str
    n: object
    mark: str
    on: str = ""
    """What the value was computed on: ``45 images, 9 classes``, ``5 reps of 600 query images in all``."""
    unit: str = ""
    """What the paired test behind the mark resamples (``images``, ``queries``), empty when none."""
    reason: str = ""
    """Why the value is n/a, where the record says (top-5 over five labels, most answers unusable...)."""


@dataclass(frozen=True)
class Row:
    run: ReportRun
    cells: tuple[Cell | None, ...]


@dataclass(frozen=True)
class Part:
    """One table of a task's leaderboard: some of its metrics for the runs that have any of them."""

    caption: str | None
    """What the table holds (per challenge group, pooled), or None when the task has one table."""
    metrics: tuple[str, ...]
    """Full metric names, in column (or, turned, row) order."""
    headers: tuple[str, ...]
    """What each metric is called in its header: the group alone in a per-group table (the caption names the metric)."""
    rows: tuple[Row, ...]
    turned: bool
    """Metrics as rows and runs as columns (a part with many metrics and few runs)."""
    said_once: str | None
    """The mark every marked cell had (``not compared``...), said once for the table; the cells then show none."""

    @property
    def columns(self) -> tuple[tuple[str, str, tuple[Cell | None, ...]], ...]:
        """(metric, header, one cell per row) per metric: the turned table's rows."""
        return tuple((metric, header, tuple(row.cells[i] for row in self.rows))
                     for i, (metric, header) in enumerate(zip(self.metrics, self.headers, strict=True)))


@dataclass(frozen=True)
class Board:
    """The leaderboard of one task."""

    task: str
    metrics: tuple[str, ...]
    rows: tuple[Row, ...]
    notes: tuple[str, ...]
    parts: tuple[Part, ...] = ()
    """The tables the board is shown as (see :func:`split_board`)."""


def _facts(run: ReportRun) -> tuple[str, ...]:
    from cladebench.evaluate.comparability import COMPARABILITY_KEYS, comparability_of

    facts = comparability_of(run.record)
    return tuple(str(facts[key]) for key in COMPARABILITY_KEYS if key != "rows_sha256")


def cohorts(runs: Sequence[ReportRun]) -> list[list[ReportRun]]:
    """Runs grouped by what makes them comparable: the examples they were evaluated on, and the rank, label set,
    split, shots and gallery (runs without readable predictions stand alone)."""
    groups: dict[object, list[ReportRun]] = {}
    for run in runs:
        key = (run.examples_key, _facts(run)) if run.examples_key else ("alone", run.index)
        groups.setdefault(key, []).append(run)
    return list(groups.values())


def apart(groups: Sequence[Sequence[ReportRun]]) -> list[str]:
    """Why runs of one task in different cohorts are not compared, in words, once per cohort after the largest."""
    from cladebench.evaluate.comparability import incomparable

    if len(groups) < 2:
        return []
    ordered = sorted(groups, key=len, reverse=True)
    reference = ordered[0][0]
    notes = []
    for cohort in ordered[1:]:
        run = cohort[0]
        why = incomparable(reference.record, run.record)  # what set it apart, which other examples follow from
        if run.examples_key != reference.examples_key:
            why = f"{why}; evaluated on other examples" if why else "evaluated on other examples"
        why = why or "scored differently"
        names = ", ".join(r.name for r in cohort)
        notes.append(f"{names}: not compared with {reference.name}: {why}")
    return notes


class Ties(NamedTuple):
    """The marks of one metric among one cohort's runs."""

    marks: dict[int, str]
    """Run index -> mark."""
    note: tuple[str, str] | None
    """(metric, why some runs were not tested), when some were not."""
    unit: str
    """What the paired test resamples, empty when there was none."""
    differences: dict[int, PairedComparison]
    """Run index -> its paired difference from the best run (run - best, a PairedComparison), where tested."""


def _tie_marks(metric: str, cohort: Sequence[ReportRun]) -> Ties:
    """Mark per run index for one metric among runs on the same examples
    (:func:`cladebench.evaluate.marks.marks_against_best`), and a note when not all were tested."""
    from cladebench.evaluate.marks import marks_against_best

    read = (None if any(run.predictions is None for run in cohort)
            else [(run.record, run.predictions) for run in cohort])  # the runs as the report read them, checked
    found = marks_against_best(metric, [run.path for run in cohort], [run.record.metrics.get(metric) for run in cohort],
                               n_resamples=N_RESAMPLES, seed=SEED, alpha=ALPHA, read=read)
    index = [run.index for run in cohort]
    marks = {index[i]: mark for i, mark in found.marks.items()}
    differences = {index[i]: difference for i, difference in found.differences.items()}
    if found.unpaired:
        note = "; ".join(f"{cohort[i].name}: {why}" for i, why in found.unpaired.items())
        return Ties(marks, (metric, note), found.unit, differences)
    return Ties(marks, (metric, found.note) if found.note else None, found.unit, differences)


NOTE_METRICS = 3
"""Metrics named in a note before the rest are counted (a note shared by every group's metric is said once)."""


def merge_notes(notes: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """``metric: reason`` notes with one line per reason, naming its metrics (the first few, then how many more)."""
    by_reason: dict[str, list[str]] = {}
    for metric, reason in notes:
        if metric not in by_reason.setdefault(reason, []):
            by_reason[reason].append(metric)
    out = []
    for reason, metrics in by_reason.items():
        named = ", ".join(metrics[:NOTE_METRICS])
        more = len(metrics) - NOTE_METRICS
        out.append(f"{named}{f' and {more} more' if more > 0 else ''}: {reason}")
    return tuple(out)


def board(task: str, runs: Sequence[ReportRun]) -> Board:
    """The leaderboard of one task's runs."""
    metrics = tuple(dict.fromkeys(m for run in runs for m in headline_metrics(run)))
    from cladebench.evaluate.comparability import computed_on, label_set_size

    marks: dict[tuple[int, str], str] = {}
    units: dict[tuple[int, str], str] = {}
    differences: dict[tuple[int, str], object] = {}
    notes: list[tuple[str, str]] = []
    groups = cohorts(runs)
    for cohort in groups:
        for metric in metrics:
            ties = _tie_marks(metric, cohort)
            marks.update({(index, metric): mark for index, mark in ties.marks.items()})
            units.update({(index, metric): ties.unit for index in ties.marks})
            differences.update({(index, metric): d for index, d in ties.differences.items()})
            if ties.note:
                notes.append(ties.note)
    rows = []
    for run in runs:
        cells = []
        unit = getattr(_task(run.record.task), "unit", None)
        for metric in metrics:
            estimate = run.record.metrics.get(metric)
            cells.append(None if estimate is None else Cell(
                metric=metric, value=format_value(metric, estimate), interval=format_interval(metric, estimate),
                n=estimate.get("n"), mark=marks.get((run.index, metric), ""),
                on=computed_on(run.record, metric, unit), unit=units.get((run.index, metric), ""),
                reason=_why_none(estimate)))
        rows.append(Row(run=run, cells=tuple(cells)))
    for metric in metrics:  # one column, several label sets: the numbers are not of one problem
        sizes = {label_set_size(run.record, split_metric(metric)[0]) for run in runs if metric in run.record.metrics}
        if len(sizes - {None}) > 1:
            told = " vs ".join(str(n) for n in sorted(n for n in sizes if n is not None))
            notes.append((metric, f"runs score different label sets ({told} labels): not one problem"))
    whole = Board(task=task, metrics=metrics, rows=tuple(rows), notes=())
    parts = split_board(whole)
    # Why a metric has no paired test is said once above a table whose every cell is "not tested": not again below.
    said = {metric for part in parts if part.said_once == "not tested" for metric in part.metrics}
    return replace(whole, parts=parts,
                   notes=(*apart(groups), *merge_notes([note for note in notes if note[0] not in said])))


def _task(name: str) -> Task | None:
    from cladebench.tasks import get_task

    try:
        return get_task(name)
    except CladebenchError:
        return None


def _part(board: Board, caption: str | None, metrics: Sequence[str], headers: Sequence[str], *,
          turn: bool) -> Part:
    positions = [board.metrics.index(m) for m in metrics]
    rows = [Row(run=row.run, cells=tuple(row.cells[i] for i in positions)) for row in board.rows
            if any(row.cells[i] is not None for i in positions)]
    marks = {cell.mark for row in rows for cell in row.cells if cell is not None and cell.mark}
    said_once = next(iter(marks)) if len(marks) == 1 and next(iter(marks)) in SAID_ONCE else None
    if said_once:
        rows = [Row(run=row.run, cells=tuple(None if c is None else replace(c, mark="") for c in row.cells))
                for row in rows]
    return Part(caption=caption, metrics=tuple(metrics), headers=tuple(headers), rows=tuple(rows),
                turned=turn and len(metrics) > MAX_COLUMNS, said_once=said_once)


def split_board(board: Board) -> tuple[Part, ...]:
    """The board as tables that fit the page: the per-group numbers of grouped runs apart from the pooled numbers
    (different kinds of number, on different examples), and a table of more than :data:`MAX_COLUMNS` metrics
    turned (metrics as rows) when it has few runs, or else cut into tables of at most that many metrics."""
    grouped = [m for m in board.metrics if split_metric(m)[0]]
    pooled = [m for m in board.metrics if not split_metric(m)[0]]
    kinds: list[tuple[str | None, list[str], list[str]]] = []
    if grouped:
        bases = list(dict.fromkeys(split_metric(m)[1] for m in grouped))
        one_base = len(bases) == 1
        kinds.append((f"per challenge group: {', '.join(bases)}", grouped,
                      [split_metric(m)[0] if one_base else m for m in grouped]))
    if pooled:
        kinds.append(("pooled over all evaluated examples" if grouped else None, pooled, pooled))
    parts = []
    for caption, metrics, headers in kinds:
        runs = sum(1 for row in board.rows if any(row.cells[board.metrics.index(m)] is not None for m in metrics))
        if len(metrics) <= MAX_COLUMNS or runs <= MAX_COLUMNS:
            parts.append(_part(board, caption, metrics, headers, turn=True))
            continue
        for start in range(0, len(metrics), MAX_COLUMNS):
            piece = slice(start, start + MAX_COLUMNS)
            end = min(start + MAX_COLUMNS, len(metrics))
            numbered = f"{caption or 'metrics'} ({start + 1}-{end} of {len(metrics)})"
            parts.append(_part(board, numbered, metrics[piece], headers[piece], turn=False))
    return tuple(parts)


@register_section("leaderboard", "Leaderboard", order=10)
def leaderboard_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    boards = [board(task, task_runs) for task, task_runs in by_task(runs).items()]
    # The legend is this module's own text, not data: passed as safe so Markdown keeps it as written.
    legend = {mark: Markup(meaning) for mark, meaning in MARKS.items()}
    pooled = {run.index for run in runs if is_pooled_summary(run, runs)}
    return context.render("leaderboard", boards=boards, marks=legend, n_resamples=N_RESAMPLES, alpha=ALPHA,
                          said_once={mark: Markup(MARKS[mark]) for mark in SAID_ONCE}, pooled=pooled,
                          pooled_summary=POOLED_SUMMARY)


def _why_none(estimate: dict[str, object]) -> str:
    """Why a number has no value, as its cell says it: the task's reason, or the group's left out (the group's
    table that said it is folded into this leaderboard, so the reason is said here, once)."""
    if estimate.get("value") is not None:
        return ""
    if estimate.get("reason"):
        return str(estimate["reason"])
    return f"left out: {estimate['left_out']}" if estimate.get("left_out") else ""

