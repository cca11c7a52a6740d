"""The verbs ``suite`` (every named benchmark's standard protocol for several models, resumable, into one folder)
and ``results`` (that folder's results table, printed as Markdown, CSV, JSON or LaTeX).

``suite`` runs the suite (:mod:`cladebench.evaluate.suite`), then writes the folder's report with
:mod:`cladebench.report.suite` (the report is a higher layer than evaluation, so the two meet here). Progress lines
and skips go to stderr; the summary to stdout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from cladebench.cli.verbs import verb

if TYPE_CHECKING:
    from cladebench.evaluate.suite.plan import SuiteConfig


def _stderr(line: str) -> None:
    from cladebench.console import note

    note(line)


@verb("suite", "cladebench.evaluate.suite.plan:SuiteConfig",
      "every named benchmark's standard protocol for several models, resumable: runs/, "
                            "results.parquet and report.html in --out")
def _suite(config: SuiteConfig) -> int:
    from cladebench.errors import CladebenchError
    from cladebench.evaluate.suite import run_suite

    if config.report:  # a report.html of the user's in --out is refused before any run, not replaced after them
        from cladebench.report.suite import REPORT_FILE, check_report_target

        check_report_target(config.out / REPORT_FILE)
    logged, finished_run = _mlflow_as_it_goes() if config.mlflow else ({}, None)
    summary = run_suite(config, progress=_stderr if config.progress else None, finished_run=finished_run)
    runs = {p.key: p for p in summary.runs}
    print(f"suite: {len(summary.runs)} runs: {len(summary.executed)} run now, {len(summary.reused)} reused, "
          f"{len(summary.skipped)} skipped")
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for key, reason in summary.skipped.items():  # one line per benchmark, model and reason, naming the runs
        p = runs[key]
        grouped.setdefault((p.benchmark.name, p.model, reason), []).append(p.protocol)
    for (benchmark, model, reason), protocols in grouped.items():
        print(f"  skipped {benchmark} with {model} ({'; '.join(protocols)}): {reason}")
    print(f"results: {summary.results}")
    if config.mlflow:
        print(f"mlflow: {logged['new']} run{'s' * (logged['new'] != 1)} logged, {logged['there']} there already, "
              f"experiment {logged['experiment']!r} at {logged['uri']}")
        from cladebench.evaluate.labels import one_line

        for line in logged["left_out"]:
            print(f"  not logged: {one_line(line)}")
    if config.report:
        from cladebench.report.suite import write_suite_report

        print(f"report: {write_suite_report(config.out)}")
    if not summary.executed and not summary.reused:
        raise CladebenchError(f"no run of the suite could run ({len(summary.skipped)} skipped, reasons above)")
    return 0


class _Said(TypedDict, total=False):
    """What the suite's MLflow logging counted, to say it: runs logged, runs there already, where, and why not."""

    new: int
    there: int
    uri: str
    experiment: str
    left_out: list[str]


def _mlflow_as_it_goes() -> tuple[_Said, Callable[[Path, list[dict[str, object]]], None]]:
    """The tracker opened before any run (no mlflow, or a store it cannot open, is one line before an hour of runs)
    and the function that logs each run the suite finishes; the counts it keeps, to say them."""
    from cladebench.errors import CladebenchError
    from cladebench.export.checked import suite_run
    from cladebench.export.mlflow_runs import Tracker
    from cladebench.export.tracked import REPORT_MISSING

    tracker = Tracker()
    said: _Said = {"new": 0, "there": 0, "uri": tracker.uri, "experiment": tracker.experiment,
                            "left_out": [] if tracker.report else [REPORT_MISSING]}

    def log(path: Path, rows: list[dict[str, object]]) -> None:
        run, why = suite_run(path, rows)
        if run is None:
            assert why is not None  # suite_run says why when it gives no run
            said["left_out"].append(why)
            return
        try:
            _, new, notes = tracker.log(run)
        except CladebenchError as error:  # the tracker's failure never ends the suite: `export mlflow` catches up
            said["left_out"].append(f"{path}: {error}")
            return
        said["new" if new else "there"] += 1
        said["left_out"].extend(notes)

    return said, log


@dataclass(frozen=True)
class ResultsConfig:
    """Print a suite folder's results: models × benchmarks (each benchmark's headline), or every row of the table
    (one per benchmark, protocol, model and metric); every number checked against its run record first."""

    folder: Path
    """The suite's --out folder (holding results.parquet)."""
    view: Literal["pivot", "rows"] = "pivot"
    """pivot: models × benchmarks, one headline per benchmark and group; rows: every row of the table."""
    format: Literal["md", "csv", "json", "latex"] = "md"
    """md: a Markdown table (values on their display scale, skipped runs apart); csv or json: every row of the
    current runs, every column as stored; latex: a booktabs table for a paper (the pivot's cells, best in bold,
    ties marked, skipped runs in its notes; --view rows: every row)."""
    interval: Literal["bounds", "halfwidth"] = "bounds"
    """How --format latex gives an interval: bounds ([lo, hi]) or halfwidth (± half its width, which hides an
    asymmetric interval's shape)."""
    metric: str | None = None
    """pivot on this metric instead of each benchmark's headline (its own name, e.g. mistake_severity_species or
    hdist5_species: how wrong the wrong answers are); rows and csv/json show every metric already."""
    superseded: bool = False
    """With csv or json, also the rows of runs a newer run of the same benchmark, model and protocol replaced
    (their current column false, superseded saying by which run and why)."""
    label: str = "tab:cladebench-results"
    """The \\label of the --format latex table."""

    def __post_init__(self) -> None:
        from cladebench.escaping import latex_key

        latex_key(self.label)  # a label TeX cannot read is refused before the table is read


@verb("results", ResultsConfig, "a suite folder's results table (benchmark × protocol × model × metric) as Markdown, "
                                "CSV, JSON or LaTeX")
def _results(config: ResultsConfig) -> int:
    from cladebench.evaluate.suite import format_results, require_results
    from cladebench.evaluate.suite.results import format_pivot

    table = require_results(config.folder)
    if config.format == "latex":  # the report layer's escaping: the two meet here
        from cladebench.export.latex import format_latex, format_latex_rows

        write = format_latex if config.view == "pivot" else format_latex_rows
        print(write(table, config.folder, interval=config.interval, label=config.label))
        return 0
    pivot = config.view == "pivot" and config.format == "md"
    print(format_pivot(table, config.folder, config.metric) if pivot
          else format_results(table, config.format, superseded=config.superseded))
    return 0
