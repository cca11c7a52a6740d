"""What a report section is, and the registry the sections add themselves to (:data:`SECTIONS`).

Each section is a function ``(runs, context) -> fragment or None`` in a module of this package.

A section looks at the runs it is given and returns its rendered fragment, or None when it does not
apply (no zero-shot run, no rerank run, ...), so a report of one rerank run has no calibration plot and
no empty heading. Sections render through templates named ``<section>.<format>.j2``; a section without a
template for a format (a chart in Markdown) is left out of that format. Adding a section is a module of this
package with one decorated function, its templates, and its name in the package's imports: the page lists
whatever is registered, in ``order``.

This module imports no section, so every section module can import it; the package ``__init__`` imports the
section modules (which registers them) and puts them in page order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jinja2
from markupsafe import Markup

from cladebench.registry import Registry
from cladebench.report.runs import ReportRun

ReportFormat = Literal["html", "md"]


@dataclass
class ReportContext:
    """What every section may use: the output format, its templates, and settings of the whole report."""

    format: ReportFormat
    """Output format: html (one self-contained page) or md (tables for a paper appendix)."""
    environment: jinja2.Environment
    """Templates of this format (autoescaped HTML, or Markdown with every data string escaped)."""
    max_gallery: int = 12
    """Most images per error gallery."""
    cache: dict[str, Any] = field(default_factory=dict)
    """Results shared between sections (a comparison computed once), by key."""

    def has_template(self, section: str) -> bool:
        return f"{section}.{self.format}.j2" in self.environment.list_templates()

    def render(self, section: str, **values: object) -> Markup | None:
        """The section's template for this format filled with ``values``; None when the format has none."""
        if not self.has_template(section):
            return None
        text = self.environment.get_template(f"{section}.{self.format}.j2").render(**values)
        return Markup(text)


SectionRenderer = Callable[[Sequence[ReportRun], ReportContext], Markup | None]


@dataclass(frozen=True)
class Section:
    """A registered report section."""

    name: str
    """Identifier: its templates are ``<name>.html.j2`` / ``<name>.md.j2`` and its HTML anchor is ``#<name>``."""
    title: str
    """Heading shown above the fragment."""
    order: int
    """Position on the page (ascending)."""
    render: SectionRenderer
    """(runs, context) -> rendered fragment, or None when the section does not apply to these runs."""
    folded: bool = False
    """Shown folded (an HTML ``<details>`` opened by its heading): detail a reader looks up, not the answer, so the
    page a person scrolls stays a few screens long."""


SECTIONS: Registry[Section] = Registry("report section")
"""Registry: section name -> section."""


def register_section(name: str, title: str, *, order: int,
                     folded: bool = False) -> Callable[[SectionRenderer], SectionRenderer]:
    """Register a section renderer under ``name`` (as a :class:`Section` with its title, place on the page and
    whether it is shown folded)."""

    def decorate(render: SectionRenderer) -> SectionRenderer:
        SECTIONS.add(name, Section(name=name, title=title, order=order, render=render, folded=folded))
        return render

    return decorate

