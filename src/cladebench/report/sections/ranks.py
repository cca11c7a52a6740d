"""Accuracy at every rank (``top1_kingdom`` ... ``top1_species``): how far up the tree a model's mistakes reach.

Zero-shot runs score the species probabilities rolled up to each higher rank, so a model that confuses
sister species but never genera shows high genus and low species accuracy. One panel per challenge group
(or one for a pooled run), ranks from kingdom down, one series per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.report.panels import Panel, PanelSeries, make_panel
from cladebench.report.runs import ReportRun, by_task
from cladebench.report.sections.base import ReportContext, register_section
from cladebench.taxonomy import RANK_COLUMNS

if TYPE_CHECKING:
    from markupsafe import Markup

RANK_METRIC = "top1_{rank}"
"""The per-rank metric charted."""


def _name(prefix: str, rank: str) -> str:
    base = RANK_METRIC.format(rank=rank)
    return f"{prefix}{GROUP_SEPARATOR}{base}" if prefix else base


def _panels(task: str, runs: Sequence[ReportRun], context: ReportContext) -> list[Panel]:
    prefixes = list(dict.fromkeys(p for run in runs for p in (run.groups or ("",))))
    panels = []
    for prefix in prefixes:
        ranks = [r for r in RANK_COLUMNS if any(_name(prefix, r) in run.record.metrics for run in runs)]
        if len(ranks) < 2:
            continue
        names = [_name(prefix, r) for r in ranks]
        series = [PanelSeries(run.name, run.record.metrics, names) for run in runs
                  if any(n in run.record.metrics for n in names)]
        where = f" ({prefix})" if prefix else ""
        panels.append(make_panel(f"{task}: top-1 accuracy by rank{where}", RANK_METRIC.format(rank="rank"), ranks,
                                 series, chart=context.format == "html"))
    return panels


@register_section("ranks", "Accuracy by taxonomic rank", order=30, folded=True)
def ranks_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    panels = [panel for task, task_runs in by_task(runs).items() for panel in _panels(task, task_runs, context)]
    return context.render("ranks", panels=panels) if panels else None
