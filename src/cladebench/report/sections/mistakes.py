"""Where mistakes land on the tree of life: for each run, the share of its mistakes whose lowest common ancestor
with the truth is each rank (same genus, same family, ..., same kingdom, different kingdoms).

Two models with the same accuracy can err very differently: one confusing sister species, the other crossing
phyla. Mistake severity (:mod:`cladebench.metrics.hierarchy`) is the mean of these heights; this section shows
their distribution, counted from each run's predictions (``lca_height`` of the scored, wrongly predicted rows),
with a Wilson interval per share. One panel per task and challenge group, one series per run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow.compute as pc
from markupsafe import Markup

from cladebench.metrics import accuracy
from cladebench.metrics.hierarchy import HEIGHT_COLUMN, lca_rank, lca_ranks
from cladebench.report.panels import Panel, PanelSeries, make_panel
from cladebench.report.runs import ReportRun, by_task
from cladebench.report.sections.base import ReportContext, register_section

CORRECT_COLUMN = "correct_top1"
"""The top-1 hit column the mistakes are read from (zero-shot's)."""


def category(where: str) -> str:
    """How a panel names an LCA rank: ``same genus`` .. ``same kingdom``, ``different kingdoms``."""
    return "different kingdoms" if where == "root" else f"same {where}"


def mistake_shares(run: ReportRun, group: str) -> tuple[str, dict[str, dict[str, object]]] | None:
    """The run's label rank and, per LCA rank, the share of its mistakes there (in ``group``, or all rows), as
    estimates named ``mistakes_at_<rank>``; None when its predictions carry no heights or hold no mistake."""
    table = run.predictions
    if table is None or not {HEIGHT_COLUMN, CORRECT_COLUMN, "scored"} <= set(table.column_names):
        return None
    if group:
        if "group" not in table.column_names:
            return None
        table = table.filter(pc.equal(table.column("group"), group).fill_null(False))
    wrong = pc.and_(table.column("scored").fill_null(False), pc.invert(table.column(CORRECT_COLUMN).fill_null(True)))
    heights = table.filter(wrong).column(HEIGHT_COLUMN).fill_null(0).to_numpy(zero_copy_only=False)
    heights = heights[heights > 0]
    if not heights.size:
        return None
    rank = str((run.record.provenance.get("task") or {}).get("rank") or "species")
    where = np.array([lca_rank(int(h), rank) for h in heights], dtype=object)
    return rank, {f"mistakes_at_{r}": accuracy(where == r).to_dict() for r in lca_ranks(rank)}


def _panels(task: str, runs: Sequence[ReportRun], context: ReportContext) -> list[Panel]:
    panels = []
    for group in dict.fromkeys(g for run in runs for g in (run.groups or ("",))):
        series, ranks = [], None
        for run in runs:
            found = mistake_shares(run, group)
            if found is None or (ranks is not None and found[0] != ranks):
                continue  # runs at another label rank land on other ranks: not one chart
            ranks = found[0]
            series.append(PanelSeries(run.name, found[1], list(found[1])))
        if not series or ranks is None:
            continue
        where = f" ({group})" if group else ""
        panels.append(make_panel(f"{task}: share of mistakes by where they meet the truth{where}", "mistakes_at_rank",
                                 [category(r) for r in lca_ranks(ranks)], series, chart=context.format == "html"))
    return panels


@register_section("mistakes", "Where mistakes land on the tree", order=31, folded=True)
def mistakes_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    panels = [panel for task, task_runs in by_task(runs).items() for panel in _panels(task, task_runs, context)]
    return context.render("mistakes", panels=panels) if panels else None
