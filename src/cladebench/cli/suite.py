"""The verbs ``suite`` (every named benchmark's standard protocol for several models, resumable, into one folder)
and ``results`` (that folder's results table, printed as Markdown, CSV or JSON).

``suite`` runs the suite (:mod:`cladebench.evaluate.suite`), then writes the folder's report with
:mod:`cladebench.report.suite` (the report is a higher layer than evaluation, so the two meet here). Progress lines
and skips go to stderr; the summary to stdout.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cladebench.cli.verbs import verb

if TYPE_CHECKING:
    from cladebench.evaluate.suite.plan import SuiteConfig


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@verb("suite", "cladebench.evaluate.suite.plan:SuiteConfig",
      "every named benchmark's standard protocol for several models, resumable: runs/, "
                            "results.parquet and report.html in --out")
def _suite(config: SuiteConfig) -> int:
    from cladebench.errors import CladebenchError
    from cladebench.evaluate.suite import run_suite

    if config.report:  # a report.html of the user's in --out is refused before any run, not replaced after them
        from cladebench.report.suite import REPORT_FILE, check_report_target

        check_report_target(config.out / REPORT_FILE)
    summary = run_suite(config, progress=_stderr if config.progress else None)
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
    if config.report:
        from cladebench.report.suite import write_suite_report

        print(f"report: {write_suite_report(config.out)}")
    if not summary.executed and not summary.reused:
        raise CladebenchError(f"no run of the suite could run ({len(summary.skipped)} skipped, reasons above)")
    return 0


@dataclass(frozen=True)
class ResultsConfig:
    """Print a suite folder's results: models × benchmarks (each benchmark's headline), or every row of the table
    (one per benchmark, protocol, model and metric); every number checked against its run record first."""

    folder: Path
    """The suite's --out folder (holding results.parquet)."""
    view: Literal["pivot", "rows"] = "pivot"
    """pivot: models × benchmarks, one headline per benchmark and group; rows: every row of the table."""
    format: Literal["md", "csv", "json"] = "md"
    """md: a Markdown table (values on their display scale, skipped runs apart); csv or json: every row of the
    current runs, every column as stored."""
    superseded: bool = False
    """With csv or json, also the rows of runs a newer run of the same benchmark, model and protocol replaced
    (their current column false, superseded saying by which run and why)."""


@verb("results", ResultsConfig, "a suite folder's results table (benchmark × protocol × model × metric) as Markdown, "
                                "CSV or JSON")
def _results(config: ResultsConfig) -> int:
    from cladebench.evaluate.suite import format_results, require_results
    from cladebench.evaluate.suite.results import format_pivot

    table = require_results(config.folder)
    pivot = config.view == "pivot" and config.format == "md"
    print(format_pivot(table, config.folder) if pivot
          else format_results(table, config.format, superseded=config.superseded))
    return 0
