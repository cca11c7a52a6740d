"""Per-group and per-breakdown results: each headline metric over a task's challenge groups and over the values
of each breakdown column, one series per run.

Challenge groups (``GROUP/metric``) are separate benchmarks with their own label sets, so they are
shown side by side and never pooled. Breakdowns (``column=value/metric``) are the same predictions scored
per value of a column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.report.headline import headline_bases
from cladebench.report.panels import Panel, PanelSeries, make_panel
from cladebench.report.runs import ReportRun, by_task
from cladebench.report.sections.base import ReportContext, register_section
from cladebench.tasks import known_task

if TYPE_CHECKING:
    from markupsafe import Markup


def _shown_elsewhere(task: str) -> tuple[str, ...]:
    """Breakdown columns a section of the task's own shows in more detail (so not repeated here)."""
    known = known_task(task)
    return known.breakdowns_apart if known is not None else ()


def _panels(task: str, runs: Sequence[ReportRun], context: ReportContext) -> list[tuple[Panel, bool]]:
    """(panel, whether the leaderboard lists its numbers): a challenge-group panel's values and intervals are the
    leaderboard's per-group cells, so its HTML shows the chart alone (each number once on the page)."""
    bases = list(dict.fromkeys(b for run in runs for b in headline_bases(run)))
    panels = []
    groups = list(dict.fromkeys(g for run in runs for g in run.groups))
    for base in bases:
        names = [f"{g}{GROUP_SEPARATOR}{base}" for g in groups]
        series = [PanelSeries(run.name, run.record.metrics, names) for run in runs
                  if any(n in run.record.metrics for n in names)]
        if series:
            panel = make_panel(f"{task}: {base} by challenge group", base, groups, series,
                               chart=context.format == "html")
            panels.append((panel, panel.chart is not None))
    breakdowns = list(dict.fromkeys(p for run in runs for p in run.breakdowns()))
    columns = [c for c in dict.fromkeys(p.split("=", 1)[0] for p in breakdowns)
               if c not in _shown_elsewhere(task)]
    for column in columns:
        values = [p for p in breakdowns if p.split("=", 1)[0] == column]
        for base in bases:
            names = [f"{p}{GROUP_SEPARATOR}{base}" for p in values]
            series = [PanelSeries(run.name, run.record.metrics, names) for run in runs
                      if any(n in run.record.metrics for n in names)]
            if series:
                panels.append((make_panel(f"{task}: {base} by {column}", base,
                                          [p.split("=", 1)[1] for p in values], series,
                                          chart=context.format == "html"), False))
    return panels


@register_section("groups", "By challenge group and breakdown", order=20, folded=True)
def groups_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    panels = [panel for task, task_runs in by_task(runs).items() for panel in _panels(task, task_runs, context)]
    return context.render("groups", panels=panels) if panels else None
