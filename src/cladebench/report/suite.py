"""The report of a suite folder (``DIR/report.html``): the models × benchmarks leaderboard at the top, then each
benchmark's own sections, as ``cladebench report`` draws them for that benchmark's runs.

Why a module of its own: a suite's report is made of every finished run in its results table, which may come from
several suites (a model added next week joins the same leaderboard), and its runs are read once and shared by the
leaderboard and by each benchmark's sections. Each benchmark's sections get a context of their own (a section's
cached comparison belongs to its benchmark's runs) and anchors named after the benchmark, on the same page template
as every report.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from cladebench import __version__
from cladebench.errors import CladebenchError, UsageError
from cladebench.evaluate.suite.results import require_results
from cladebench.paths import atomic_write

REPORT_FILE = "report.html"
"""The report's file in the suite folder."""


def render_suite_report(root: Path, *, max_gallery: int = 12) -> str:
    """The HTML report of the suite folder ``root``."""
    from cladebench.report.render import FORMATS
    from cladebench.report.runs import load_runs
    from cladebench.report.sections import ordered_sections
    from cladebench.report.sections.base import ReportContext
    from cladebench.report.sections.suite import SUITE_KEY, SuiteData

    every = require_results(root).to_pylist()
    checked = [r for r in every if r.get("current") is not False]
    replaced = [r for r in every if r.get("current") is False and r["status"] == "finished"]
    refused = [r for r in checked if r["status"] == "unverified"]
    rows = [r for r in checked if r["status"] == "finished" and r["run"]]
    skipped = [r for r in checked if r["status"] == "skipped"]
    paths = list(dict.fromkeys(r["run"] for r in rows))
    output = FORMATS["html"]
    environment = output.environment()
    if not paths and not refused:
        runs: tuple = ()
        sections: list = []
    else:
        runs = load_runs([root / p for p in paths]) if paths else ()
        by_path = dict(zip(paths, runs, strict=True))
        context = ReportContext(format=output.name, environment=environment, max_gallery=max_gallery,
                                cache={SUITE_KEY: SuiteData(rows=rows, runs=by_path, refused=refused,
                                                                  replaced=replaced,
                                                                  skipped=[r for r in checked
                                                                           if r["status"] == "skipped"])})
        everything = ordered_sections()
        suite_section = next(s for s in everything if s.name == SUITE_KEY)
        sections = []
        fragment = suite_section.render(runs, context)
        if fragment is not None:
            sections.append((suite_section, fragment))
        for benchmark in benchmark_order(rows):
            mine = [by_path[p] for p in dict.fromkeys(r["run"] for r in rows if r["benchmark"] == benchmark)]
            own = ReportContext(format=output.name, environment=environment, max_gallery=max_gallery)
            for section in everything:
                if section.name == SUITE_KEY:
                    continue
                fragment = section.render(mine, own)
                if fragment is not None:
                    named = dataclasses.replace(section, name=f"{benchmark}-{section.name}",
                                                title=f"{benchmark}: {section.title}")
                    sections.append((named, fragment))
    return output.finish(environment.get_template(output.page).render(
        title=suite_title(rows, skipped), runs=runs, sections=sections, version=__version__, left_out=[],
        skipped=skipped, answers=[], pooled=[], pooled_summary=""))


def suite_title(rows: list[dict], skipped: list[dict]) -> str:
    """The report's title: models × benchmarks the suite covered (skipped cells included), and how many runs ran
    and how many were skipped, so a board with gaps never reads as complete."""
    models = list(dict.fromkeys(r["model"] for r in [*rows, *skipped]))
    benchmarks = list(dict.fromkeys(r["benchmark"] for r in [*rows, *skipped]))
    ran = len(dict.fromkeys(r["run"] for r in rows))
    return (f"cladebench suite: {len(models)} model{'s' * (len(models) != 1)} × {len(benchmarks)} "
            f"benchmark{'s' * (len(benchmarks) != 1)}, {ran} run{'s' * (ran != 1)}, {len(skipped)} skipped")


def benchmark_order(rows: list[dict]) -> list[str]:
    """The benchmarks of the rows in the order `cladebench benchmarks` lists them (unknown names last)."""
    from cladebench.benchmarks import BENCHMARKS

    known = list(BENCHMARKS)
    names = dict.fromkeys(r["benchmark"] for r in rows)
    return sorted(names, key=lambda name: (known.index(name) if name in known else len(known), name))


def check_report_target(out: Path) -> None:
    """Refuse to replace ``out`` unless it is absent or a suite report cladebench wrote (its generator line and
    title say so): a suite folder may be one the user keeps other files in, and a ``report.html`` of theirs there is
    never overwritten. A usage error, raised before the suite runs anything."""
    from cladebench.paths import NOT_OURS, WRONG_KIND, write_refusal
    from cladebench.report.render import written_report

    def a_suite_report(path: Path) -> bool:
        try:
            with open(path, "rb") as handle:
                head = handle.read(4096).decode("utf-8", errors="replace")
        except OSError as exc:
            raise UsageError(f"{path} cannot be read to check it is a suite report ({exc.strerror}); move it or "
                             "choose another --out") from None
        return written_report(path) and "<title>cladebench suite" in head

    refusal = write_refusal(out, folder=False, ours=a_suite_report)
    if refusal == WRONG_KIND:
        raise UsageError(f"{out} is a folder; the suite writes its report to that name: move it or choose another "
                         "--out")
    if refusal == NOT_OURS:
        raise UsageError(f"{out} is not a suite report cladebench wrote; the suite would replace it: move it, choose "
                         "another --out, or pass --no-report")


def write_suite_report(root: str | Path, out: str | Path | None = None, *, max_gallery: int = 12) -> Path:
    """Write the report of the suite folder ``root`` to ``out`` (``root/report.html``), whole or not at all; a file
    there that is not a suite report cladebench wrote is never replaced (:func:`check_report_target`)."""
    root = Path(root)
    out = Path(out) if out is not None else root / REPORT_FILE
    check_report_target(out)
    try:
        import jinja2  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as missing:
        raise CladebenchError(f"reports need {missing.name}: pip install 'cladebench[report]'") from None
    text = render_suite_report(root, max_gallery=max_gallery)
    return atomic_write(out, text)
