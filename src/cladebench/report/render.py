"""Rendering a report: run records in, one HTML page or one Markdown document out.

Each output format is an entry of :data:`FORMATS`: its page template and its jinja2 environment. HTML
is autoescaped; Markdown escapes every data string through :func:`.escaping.markdown_finalize`. Both
use ``StrictUndefined``, so a template that names a missing field fails loudly instead of printing
nothing. The sections (the :mod:`.sections` package) fill the page in their registered order.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal, TextIO

import jinja2
from markupsafe import Markup, escape

from cladebench import __version__
from cladebench.console import note, warn
from cladebench.registry import look_up
from cladebench.report.escaping import markdown_finalize
from cladebench.report.formatting import format_count, format_number, short_hash
from cladebench.report.narrow import label_table_cells
from cladebench.report.runs import POOLED_SUMMARY, ReportRun, by_task, is_pooled_summary, load_runs
from cladebench.report.sections import ordered_sections
from cladebench.report.sections.base import ReportContext

TEMPLATES_DIR = Path(__file__).parent / "templates"
"""Page and section templates: ``<name>.<format>.j2``."""


BREAK_AFTER = re.compile(r"([|/_=;])")
"""Characters after which a long name in a table header may wrap (``Animalia|Plantae/top1_species``)."""


LONG_WORD = 24
"""Characters of a word without a separator after which it may wrap too: a 300-character group name would
otherwise widen its column (and the page) or overprint the next cell, while a word of a name a person reads
(a run's, a taxon's) is shorter and never broken."""

_LONG = re.compile(rf"[^\s|/_=;&<>]{{{LONG_WORD + 1},}}")


def _wrappable(match: re.Match[str]) -> str:
    word = match.group(0)
    return "<wbr>".join(word[i:i + LONG_WORD] for i in range(0, len(word), LONG_WORD))


def breakable_html(text: object) -> Markup:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each of :data:`BREAK_AFTER`, so a long
    group or metric name wraps at its own separators instead of widening its column or breaking mid-word, and
    every :data:`LONG_WORD` characters of a word longer than that."""
    escaped = _LONG.sub(_wrappable, str(escape(str(text))))
    return Markup(BREAK_AFTER.sub(r"\1<wbr>", escaped))


def _environment(breakable: Callable[[object], object], *, autoescape: bool,
                 finalize: Callable[..., object] | None = None) -> jinja2.Environment:
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES_DIR), undefined=jinja2.StrictUndefined,
                                     trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                                     autoescape=autoescape, finalize=finalize)
    environment.filters.update(number=format_number, count=format_count, short_hash=short_hash, breakable=breakable)
    return environment


@dataclass(frozen=True)
class OutputFormat:
    """How a report is written in one format."""

    name: Literal["html", "md"]
    """Format name, as ``--format`` takes it."""
    page: str
    """Template of the whole document."""
    environment: Callable[[], jinja2.Environment]
    """Makes the format's jinja2 environment."""
    finish: Callable[[str], str] = str
    """The rendered page -> the page written (HTML labels its table cells for narrow screens)."""


FORMATS: Mapping[str, OutputFormat] = MappingProxyType({
    "html": OutputFormat("html", "report.html.j2", lambda: _environment(breakable_html, autoescape=True),
                         label_table_cells),
    "md": OutputFormat("md", "report.md.j2", lambda: _environment(lambda text: text, autoescape=False,
                                                                  finalize=markdown_finalize)),
})
"""Format name -> how to write it (a fixed table: ``look_up`` names the known ones)."""


WRITTEN_BY = ('<meta name="generator" content="cladebench', "run record(s), written by cladebench ")
"""What the head of a report cladebench wrote holds (the HTML page's generator line, the Markdown page's opening
sentence): a file at a report's path is replaced only when it holds one of these."""


def written_report(path: Path) -> bool:
    """Whether the file at ``path`` is a report cladebench wrote (:data:`WRITTEN_BY` in its first 4 KiB); a file
    that cannot be read is not."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    return any(marker in head for marker in WRITTEN_BY)


def default_title(runs: Sequence[ReportRun]) -> str:
    tasks = ", ".join(dict.fromkeys(run.task for run in runs))
    return f"cladebench report: {len(runs)} run{'s' if len(runs) != 1 else ''} ({tasks})"


PROGRESS_AFTER = 3.0
"""Seconds a report is made in silence; past them, each part it starts is said on stderr (a report of a handful
of runs takes less, one of fifty more)."""


class ProgressLine:
    """``report: <what> (<seconds> s)`` lines on stderr, only once :data:`PROGRESS_AFTER` seconds have passed."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.enabled = enabled
        self.stream = stream
        self.started = time.monotonic()

    def __call__(self, what: str) -> None:
        elapsed = time.monotonic() - self.started
        if self.enabled and elapsed >= PROGRESS_AFTER:
            line = f"report: {what} ({elapsed:.0f} s)"
            if self.stream is None:
                note(line)
            else:
                print(line, file=self.stream, flush=True)


def refuse_unrelated_runs(runs: Sequence[ReportRun]) -> None:
    """Runs of one task whose evaluated examples share nothing are refused (exit 2, one line naming both datasets),
    as ``compare`` refuses them: a leaderboard of them would rank answers to different questions."""
    from cladebench.evaluate.overlap import refuse_unrelated

    for same_task in by_task(runs).values():
        with_rows = [run for run in same_task if run.predictions is not None]
        if len(with_rows) > 1:
            refuse_unrelated([run.path for run in with_rows], [run.record for run in with_rows],
                             [run.predictions for run in with_rows], [run.index for run in with_rows])


def render_report(run_paths: Sequence[str | Path], *, format: str = "html", title: str | None = None,
                  max_gallery: int = 12, progress: bool = False) -> str:
    """The report of ``run_paths`` as text in ``format``; ``progress``: see :class:`ProgressLine`."""
    say = ProgressLine(progress)
    output = look_up(FORMATS, "report format", format)
    left_out: list[str] = []
    runs = load_runs(run_paths, left_out=left_out)
    for line in left_out:  # said whether or not progress is, and on the page
        warn(f"report: {line}")
    refuse_unrelated_runs(runs)
    environment = output.environment()
    context = ReportContext(format=output.name, environment=environment, max_gallery=max_gallery)
    sections = []
    ordered = ordered_sections()
    for number, section in enumerate(ordered, start=1):
        say(f"{len(runs)} runs: {section.name} ({number} of {len(ordered)} sections)")
        if (fragment := section.render(runs, context)) is not None:
            sections.append((section, fragment))
    say("the answer")
    from cladebench.report.answer import answers

    pooled = [run.index for run in runs if is_pooled_summary(run, runs)]
    say("writing the page")
    page = environment.get_template(output.page).render(title=title or default_title(runs), runs=runs,
                                                        sections=sections, version=__version__, left_out=left_out,
                                                        answers=answers(runs), pooled=pooled,
                                                        pooled_summary=POOLED_SUMMARY)
    return output.finish(page)
