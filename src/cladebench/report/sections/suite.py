"""The suite leaderboard: models × benchmarks, one headline number per benchmark (per challenge group of a grouped
benchmark), with its interval, the best and its Holm ties per column, and published figures beside ours.

Why a section of its own: a suite's report opens with the one table a reader compares models by; the per-task
leaderboard (:mod:`.leaderboard`) shows every headline metric of every run, which across eight benchmarks is too
much to read at once. Each column is one benchmark's :class:`~cladebench.benchmarks.Headline` (zero-shot
species top-1 per Fine-Grained Challenges group, never pooled; CrypticBio under scientific names; INQUIRE-Rerank
AP@100; Co-Observed exact lineage completion). Values are the run records' own (read from the suite's results
table, which copies them); ties are decided exactly as the leaderboard decides them (:func:`.leaderboard._tie_marks`:
paired bootstrap against the best run of the column, Holm-corrected, among runs on the same examples). A figure
that the benchmark's paper or card publishes for the same model under the same protocol is shown beside ours,
marked *published*, with its citation; it never takes part in the ties.

The section applies only to a suite's report (:mod:`cladebench.report.suite` puts the table in the context); any
other report has no suite and no such section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from cladebench.benchmarks import BENCHMARKS, Benchmark, PublishedFigure
from cladebench.evaluate.comparability import computed_on
from cladebench.evaluate.suite.board import Column, board_columns, latest_rows
from cladebench.report.formatting import format_interval, format_value
from cladebench.report.runs import ReportRun
from cladebench.report.sections.base import ReportContext, register_section
from cladebench.report.sections.leaderboard import ALPHA, MARKS, N_RESAMPLES, _task, _tie_marks, apart, cohorts

SUITE_KEY = "suite"
"""Key of :attr:`ReportContext.cache` under which a suite's report passes its :class:`SuiteData`."""


@dataclass(frozen=True)
class SuiteData:
    """What the section reads: the suite's finished result rows and its runs as loaded for the report."""

    rows: Sequence[Mapping[str, object]]
    """Rows of the results table with status finished."""
    runs: Mapping[str, ReportRun]
    """Each row's ``run`` (run.json relative to the suite folder) -> the run loaded for the report."""
    refused: Sequence[Mapping[str, object]] = ()
    """Rows refused as ``unverified`` (their run's numbers do not hold): a model's newest such row is its cell,
    said as refused, so an older run never stands in for it."""
    replaced: Sequence[Mapping[str, object]] = ()
    """Finished rows of runs a newer run replaced: never a cell, but their columns and models stay on the board, so
    a model whose newest run is refused keeps its row, saying so."""
    skipped: Sequence[Mapping[str, object]] = ()
    """Rows of runs that did not run (a task needing a text tower on an image-only model, too few images): shown
    as skipped with their reason."""


@dataclass(frozen=True)
class Published:
    value: str
    interval: str
    citation: str


@dataclass(frozen=True)
class SuiteCell:
    value: str
    interval: str
    n: object
    mark: str
    raw: float | None
    """The stored value (for a reader of the page's data attributes)."""
    run: ReportRun
    published: Published | None
    on: str = ""
    """What the value was computed on (``45 images, 9 classes``)."""
    unit: str = ""
    """What the paired test behind the mark resamples (``images``, ``queries``), empty when none."""


def _published(benchmark: Benchmark, metric: str, model_id: str, revision: str | None) -> Published | None:
    from cladebench.models.registry import resolve_model

    for figure in benchmark.published:
        spec = resolve_model(figure.model)
        if figure.metric == metric and spec.id == model_id and spec.revision in (None, revision):
            return _shown(figure, metric)
    return None


def _shown(figure: PublishedFigure, metric: str) -> Published:
    estimate = {"value": figure.value, "low": figure.low, "high": figure.high}
    return Published(value=str(format_value(metric, estimate)), interval=str(format_interval(metric, estimate)),
                     citation=figure.citation)


def suite_board(data: SuiteData) -> tuple[list[Column], list[str], dict[tuple[str, int], SuiteCell], list[str]]:
    """Columns, models (in the order they entered the table), cells by (model, column index), and notes."""
    rows = [r for r in data.rows if r.get("status") == "finished" and r.get("metric")]
    latest = latest_rows([*rows, *data.refused])
    columns, models, notes = board_columns([*rows, *data.replaced])
    cells: dict[tuple[str, int], SuiteCell] = {}
    for index, column in enumerate(columns):
        keys = {m: (column.benchmark, m, column.protocol, column.metric) for m in models}
        notes.extend(f"{column.benchmark} {column.metric}: {m}'s latest run is not shown: {latest[key]['reason']}"
                     for m, key in keys.items() if key in latest and latest[key]["status"] != "finished")
        present = {m: latest[key] for m, key in keys.items()
                   if key in latest and latest[key]["status"] == "finished" and latest[key]["run"] in data.runs}
        runs = {m: data.runs[row["run"]] for m, row in present.items()}
        marks: dict[int, str] = {}
        units: dict[int, str] = {}
        groups = cohorts(list(runs.values()))
        notes.extend(f"{column.benchmark} {column.metric}: {note}" for note in apart(groups))
        for cohort in groups:
            ties = _tie_marks(column.metric, cohort)
            marks.update(ties.marks)
            units.update({index: ties.unit for index in ties.marks})
            if ties.note:
                notes.append(f"{column.benchmark} {column.metric}: {ties.note[1]}")
        benchmark = BENCHMARKS[column.benchmark]
        for model, row in present.items():
            run = runs[model]
            estimate = run.record.metrics.get(column.metric)  # the record's own numbers, as the table copies them
            cells[(model, index)] = SuiteCell(
                value=str(format_value(column.metric, estimate)), interval=str(format_interval(column.metric,
                                                                                               estimate)),
                n=(estimate or {}).get("n"), mark=marks.get(run.index, ""),
                raw=(estimate or {}).get("value"), run=run,
                published=_published(benchmark, column.metric, row["model_id"], row.get("revision")),
                on=computed_on(run.record, column.metric, getattr(_task(run.record.task), "unit", None)),
                unit=units.get(run.index, ""))
    # A run that could not run (a text-needing task on an image-only model, too few images) is shown as skipped, with
    # its reason, never as a failure or a silent gap.
    notes.extend(f"{r['benchmark']} {r['protocol']}: {r['model']} skipped: {r['reason']}" for r in data.skipped)
    return columns, models, cells, list(dict.fromkeys(notes))


@register_section(SUITE_KEY, "Suite leaderboard", order=5)
def suite_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    data = context.cache.get(SUITE_KEY)
    if not isinstance(data, SuiteData):
        return None  # not a suite's report
    columns, models, cells, notes = suite_board(data)
    if not columns:
        return None
    legend = {mark: Markup(MARKS[mark]) for mark in ("best", "tied", "worse", "differs", "not compared")}
    unpublished = [b.name for b in BENCHMARKS.values() if not b.published
                   and b.name in {column.benchmark for column in columns}]
    return context.render(SUITE_KEY, columns=columns, models=models, cells=cells, notes=notes, marks=legend,
                          n_resamples=N_RESAMPLES, alpha=ALPHA, unpublished=unpublished)
