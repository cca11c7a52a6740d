"""Per-query average precision of rerank runs (INQUIRE-Rerank): the spread behind the mean AP.

Two models with the same mAP can differ in kind: one fair on every query, the other perfect on some
and hopeless on others. Each query's AP is computed from the run's predictions with the task's own code
(:func:`cladebench.tasks.rerank.per_query_table`, INQUIRE's definition, x100); queries with no relevant
candidate are undefined and left out, as in the mean. The hardest queries are listed with their text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cladebench.report.runs import ReportRun
from cladebench.report.sections.base import ReportContext, register_section

if TYPE_CHECKING:
    from markupsafe import Markup

NEEDED = ("query_id", "query", "relevant", "score")
"""Predictions columns of a rerank run."""
HARDEST = 5
"""Lowest-AP queries listed per run."""
BINS = tuple(range(0, 101, 10))
"""Histogram bins of AP (x100)."""


@dataclass(frozen=True)
class HardQuery:
    query_id: object
    query: str
    ap: float
    positives: int


@dataclass(frozen=True)
class RunAP:
    run: ReportRun
    metric: str
    """The AP metric's name (``ap@100``)."""
    queries: int
    defined: int
    mean: float
    median: float
    values: np.ndarray
    hardest: tuple[HardQuery, ...]


def run_ap(run: ReportRun) -> RunAP | None:
    """Per-query AP of a rerank run, or None when the predictions are not a rerank table."""
    if run.predictions is None or not set(NEEDED) <= set(run.predictions.column_names):
        return None
    from cladebench.metrics.retrieval import metric_names
    from cladebench.tasks.common import Predictions
    from cladebench.tasks.rerank import per_query_table

    k = int((run.record.provenance.get("task") or {}).get("rerank_k") or run.record.config.get("rerank_k") or 100)
    scored = per_query_table(Predictions(table=run.predictions, labels=[], info={"rerank_k": k}))
    table = scored["scores"]
    ap = np.asarray(table.ap, dtype=np.float64)
    defined = np.asarray(table.defined, dtype=bool)
    texts = dict(zip(run.column("query_id"), run.column("query"), strict=True))
    order = [i for i in np.argsort(np.where(defined, ap, np.inf), kind="stable") if defined[i]][:HARDEST]
    hardest = tuple(HardQuery(query_id=scored["query_ids"][i], query=str(texts[scored["query_ids"][i]]),
                              ap=float(ap[i]), positives=int(table.count_pos[i])) for i in order)
    values = ap[defined]
    return RunAP(run=run, metric=metric_names(k)["ap"], queries=int(defined.size), defined=int(defined.sum()),
                 mean=float(values.mean()) if values.size else float("nan"),
                 median=float(np.median(values)) if values.size else float("nan"), values=values, hardest=hardest)


@register_section("rerank_ap", "Per-query average precision (rerank)", order=60)
def rerank_ap_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    results = [r for run in runs if (r := run_ap(run)) is not None]
    if not results:
        return None
    chart = None
    if context.format == "html":
        from cladebench.report.plots import histogram

        chart = histogram([(r.run.name, r.values) for r in results], bins=BINS, xlabel=f"{results[0].metric} per query")
    return context.render("rerank_ap", results=results, chart=chart)
