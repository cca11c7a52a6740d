"""``cladebench report``: run records turned into a page a person can read, or tables for a paper appendix.

One self-contained HTML file (styles inline, charts as SVG data URIs, photos as embedded JPEG
thumbnails; nothing is fetched when it is opened, and a Content-Security-Policy forbids scripts), or a
Markdown document with the same tables. Sections (:mod:`cladebench.report.sections`, a registry)
appear when they apply to the runs given:

- leaderboard: one row per run, headline metrics with intervals, ties after Holm correction among runs
  on the same examples (as ``cladebench compare``);
- per challenge group and breakdown, and per taxonomic rank: bar charts with interval whiskers;
- calibration of zero-shot probabilities: reliability diagrams and ECE, per group;
- most-confused label pairs per group; per-query AP of rerank runs; lineage completion by divergence rank;
- error galleries: the worst predictions with their photos, licenses and attributions;
- provenance: dataset, version, fingerprints, split, label set, model and revision, prompts, metric
  definitions, software, command.

Every string from data (taxon names, attributions, queries, model ids, paths) is escaped for the output
format. jinja2 and matplotlib are imported only when a report is written, so this module (and the CLI
that imports :class:`ReportConfig`) loads without them.

Example:
    >>> from cladebench.report import ReportConfig
    >>> ReportConfig(runs=(Path("runs/a"), Path("runs/b")), out_file=Path("report.html")).format
    'html'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cladebench.config import OPTION
from cladebench.errors import CladebenchError, UsageError
from cladebench.paths import atomic_write

__all__ = ["ReportConfig", "write_report"]


@dataclass(frozen=True)
class ReportConfig:
    """Write a report of run records: an HTML page with charts and galleries, or Markdown tables."""

    runs: tuple[Path, ...]
    """run.json files (or the directories holding them), in the order the report numbers them."""
    out_file: Path = field(metadata=OPTION)
    """File to write (report.html, or report.md with --format md); every --out is a folder, so the one file a
    verb writes is --out-file."""
    format: Literal["html", "md"] = "html"
    """html: one self-contained page; md: the tables as Markdown, for a paper appendix."""
    title: str | None = None
    """Title of the report; by default the number of runs and their tasks."""
    max_gallery: int = 12
    """Most photos per error gallery (0: no galleries)."""
    progress: bool = True
    """Say on stderr which part is being made, once a report has taken a few seconds (many runs)."""


def _require_report_packages() -> None:
    missing = []
    for module in ("jinja2", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise CladebenchError(f"reports need {' and '.join(missing)}: pip install 'cladebench[report]'")


def write_report(run_paths: Sequence[str | Path], out: str | Path, *, format: Literal["html", "md"] = "html",
                 title: str | None = None, max_gallery: int = 12, progress: bool = False) -> Path:
    """Write the report of ``run_paths`` to ``out`` (created atomically: a failed render leaves no half file);
    ``progress``: a line on stderr per part once it has taken :data:`.render.PROGRESS_AFTER` seconds."""
    if max_gallery < 0:
        raise CladebenchError(f"max_gallery must be 0 or more, got {max_gallery}")
    out = Path(out)
    _check_output(out, run_paths)  # before rendering, which reads every run and draws every chart
    _require_report_packages()
    from cladebench.report.render import render_report

    text = render_report(run_paths, format=format, title=title, max_gallery=max_gallery, progress=progress)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, text)
    except OSError as exc:
        from cladebench.errors import environment_error

        raise (environment_error(exc, out) or exc) from None
    return out


def _check_output(out: Path, run_paths: Sequence[str | Path] = ()) -> None:
    """The report is one file: refuse a folder, a file of a run it reads (``--out-file RUN/run.json`` would replace the
    record with its own report), a file of the user's (only a report cladebench wrote is replaced), or a place that
    cannot be written, before any work."""
    from cladebench.evaluate.record import PREDICTIONS_FILE, RUN_FILE
    from cladebench.paths import NOT_OURS, WRONG_KIND, write_refusal
    from cladebench.report.render import written_report

    refusal = write_refusal(out, folder=False, ours=written_report)
    if refusal == WRONG_KIND:
        raise CladebenchError(f"--out-file {out} is a folder; the report is one file: give its name (e.g. "
                              f"{out / 'report.html'})")
    target = out.resolve()
    for given in map(Path, run_paths):
        folder = given if given.is_dir() else given.parent
        for name, path in ((RUN_FILE, given if given.is_file() else folder / RUN_FILE),
                           (PREDICTIONS_FILE, folder / PREDICTIONS_FILE)):
            if path.resolve() == target:
                raise UsageError(f"--out-file {out} is the {name} of the run {given}: the report would replace it; "
                                 f"give the report another name (e.g. {folder / 'report.html'})")
    from cladebench.store import check_writable

    if refusal == NOT_OURS:
        raise UsageError(f"--out-file {out} is a file cladebench did not write; the report would replace it: move it "
                         "or give the report another name")
    check_writable(out)


def run_report(config: ReportConfig) -> Path:
    """The CLI verb's body: write the report described by ``config``."""
    return write_report(config.runs, config.out_file, format=config.format, title=config.title,
                        max_gallery=config.max_gallery, progress=config.progress)
