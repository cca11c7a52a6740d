"""Rendering a report: run records in, one HTML page or one Markdown document out.

Each output format is an entry of :data:`FORMATS`: its page template and its jinja2 environment. HTML
is autoescaped; Markdown escapes every data string through :func:`.escaping.markdown_finalize`. Both
use ``StrictUndefined``, so a template that names a missing field fails loudly instead of printing
nothing. The sections (the :mod:`.sections` package) fill the page in their registered order.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal, TextIO

import jinja2
from markupsafe import Markup, escape

from cladebench import __version__
from cladebench.registry import look_up
from cladebench.report.escaping import markdown_finalize
from cladebench.report.formatting import format_count, format_number, short_hash
from cladebench.report.runs import ReportRun, load_runs
from cladebench.report.sections import ordered_sections
from cladebench.report.sections.base import ReportContext

TEMPLATES_DIR = Path(__file__).parent / "templates"
"""Page and section templates: ``<name>.<format>.j2``."""


BREAK_AFTER = re.compile(r"([|/_=;])")
"""Characters after which a long name in a table header may wrap (``Animalia|Plantae/top1_species``)."""


def breakable_html(text: object) -> Markup:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each of :data:`BREAK_AFTER`, so a long
    group or metric name wraps at its own separators instead of widening its column or breaking mid-word."""
    return Markup(BREAK_AFTER.sub(r"\1<wbr>", str(escape(str(text)))))


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


FORMATS: Mapping[str, OutputFormat] = MappingProxyType({
    "html": OutputFormat("html", "report.html.j2", lambda: _environment(breakable_html, autoescape=True)),
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
            print(f"report: {what} ({elapsed:.0f} s)", file=self.stream or sys.stderr, flush=True)


def render_report(run_paths: Sequence[str | Path], *, format: str = "html", title: str | None = None,
                  max_gallery: int = 12, progress: bool = False) -> str:
    """The report of ``run_paths`` as text in ``format``; ``progress``: see :class:`ProgressLine`."""
    say = ProgressLine(progress)
    output = look_up(FORMATS, "report format", format)
    left_out: list[str] = []
    runs = load_runs(run_paths, left_out=left_out)
    for line in left_out:  # said whether or not progress is, and on the page
        print(f"report: {line}", file=sys.stderr, flush=True)
    environment = output.environment()
    context = ReportContext(format=output.name, environment=environment, max_gallery=max_gallery)
    sections = []
    ordered = ordered_sections()
    for number, section in enumerate(ordered, start=1):
        say(f"{len(runs)} runs: {section.name} ({number} of {len(ordered)} sections)")
        if (fragment := section.render(runs, context)) is not None:
            sections.append((section, fragment))
    say("writing the page")
    return environment.get_template(output.page).render(title=title or default_title(runs), runs=runs,
                                                        sections=sections, version=__version__, left_out=left_out)
