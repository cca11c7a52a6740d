"""Lineage completion (iNat Co-Observed) by divergence rank: how the value of the hint depends on where the two
organisms of a photo part.

Organisms that part at kingdom leave six ranks to name below the hint; organisms that part at genus
leave one. Exact completion with and without the hint is shown per divergence rank for every lineage
run, then, per run with the hint, the accuracy at each named rank for each divergence rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.report.formatting import split_metric
from cladebench.report.panels import Panel, PanelSeries, make_panel
from cladebench.report.runs import ReportRun
from cladebench.report.sections.base import ReportContext, register_section
from cladebench.tasks import known_task
from cladebench.tasks.lineage.targets import CONDITIONS  # the task's conditions, as its metric names start
from cladebench.taxonomy import RANK_COLUMNS

if TYPE_CHECKING:
    from markupsafe import Markup

BREAKDOWN = "divergence"
"""Metric prefix of the divergence-rank breakdown (``divergence=class/hint_exact``)."""


def divergence_ranks(run: ReportRun) -> list[str]:
    """Divergence ranks a run has metrics for, from kingdom down."""
    found = {split_metric(name)[0].split("=", 1)[1] for name in run.record.metrics
             if split_metric(name)[0].startswith(BREAKDOWN + "=")}
    return [r for r in RANK_COLUMNS if r in found] + sorted(found - set(RANK_COLUMNS))


def _name(rank: str, metric: str) -> str:
    return f"{BREAKDOWN}={rank}{GROUP_SEPARATOR}{metric}"


def lineage_panels(runs: Sequence[ReportRun], *, chart: bool) -> list[Panel]:
    runs = [run for run in runs if divergence_ranks(run)]
    if not runs:
        return []
    ranks = list(dict.fromkeys(r for run in runs for r in divergence_ranks(run)))
    # One run: the series are its conditions; several: run and condition.
    label = (lambda run, c: c) if len(runs) == 1 else (lambda run, c: f"{run.name} {c}")
    series = [PanelSeries(label(run, condition), run.record.metrics, [_name(r, f"{condition}_exact") for r in ranks])
              for run in runs for condition in CONDITIONS
              if any(_name(r, f"{condition}_exact") in run.record.metrics for r in ranks)]
    title = "exact completion by divergence rank" + ("" if len(runs) > 1 else f" ({runs[0].name})")
    panels = [make_panel(title, "exact", ranks, series, chart=chart)]
    for run in runs:
        named = [r for r in RANK_COLUMNS if any(_name(d, f"hint_accuracy_{r}") in run.record.metrics for d in ranks)]
        per_rank = [PanelSeries(f"diverge at {d}", run.record.metrics, [_name(d, f"hint_accuracy_{r}") for r in named])
                    for d in divergence_ranks(run)]
        if named and per_rank:
            panels.append(make_panel(f"{run.name}: accuracy at each rank below the hint, by divergence rank",
                                     "hint_accuracy", named, per_rank, chart=chart))
    return panels


SECTION = "lineage"
"""The section's name (and its template's), by which a task asks for it (:attr:`cladebench.tasks.Task
.report_sections`)."""


def _shown_here(run: ReportRun) -> bool:
    task = known_task(run.task)
    return task is not None and SECTION in task.report_sections


@register_section(SECTION, "Lineage completion by divergence rank", order=70)
def lineage_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    panels = lineage_panels([run for run in runs if _shown_here(run)], chart=context.format == "html")
    return context.render(SECTION, panels=panels) if panels else None
