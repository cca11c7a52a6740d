"""The most-confused label pairs of each challenge group: which species a model takes for which.

Counted from the predictions of zero-shot runs: among scored images whose top-1 label is wrong, the
(true label, predicted label) pairs by count, per group. The share is of the true label's scored
images in that group, so a pair that takes most of a species' images stands out even when the species is rare.
Labels are named by their species (:mod:`..taxon_names`: a ``taxon``-style label's binomial), with the whole
label on hover and the closest taxon the two share beside them, so a mix-up of sister species reads apart from one
across kingdoms.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cladebench.report.runs import ReportRun
from cladebench.report.sections.base import ReportContext, register_section
from cladebench.report.taxon_names import TaxonName, run_name_style, taxon_name

if TYPE_CHECKING:
    from markupsafe import Markup

TOP_PAIRS = 10
"""Pairs listed per group and run."""

NEEDED = ("true_label", "pred_label", "scored", "correct_top1")
"""Predictions columns the pairs are counted from."""


@dataclass(frozen=True)
class ConfusedPair:
    true_label: str
    predicted: str
    count: int
    share: float
    """count / scored images of the true label in the group."""
    true_name: TaxonName | None = None
    """The true label as a species name and lineage."""
    predicted_name: TaxonName | None = None
    """The predicted label as a species name and lineage."""

    @property
    def shared(self) -> str | None:
        """The deepest name both labels' lineages hold; "none" when they share none; None when the labels hold no
        lineage (a style other than ``taxon``), where words in common would say nothing."""
        if self.true_name is None or self.predicted_name is None or None in (self.true_name.lineage,
                                                                            self.predicted_name.lineage):
            return None
        common = "none"
        for a, b in zip(self.true_name.label.split(), self.predicted_name.label.split(), strict=False):
            if a != b:
                break
            common = a
        return common


@dataclass(frozen=True)
class GroupConfusion:
    run: ReportRun
    group: str
    errors: int
    scored: int
    pairs: tuple[ConfusedPair, ...]


def confused_pairs(run: ReportRun, top: int = TOP_PAIRS) -> list[GroupConfusion]:
    """Per group of a run, its ``top`` most frequent (true, predicted) pairs among wrong top-1 predictions."""
    if run.predictions is None or not set(NEEDED) <= set(run.predictions.column_names):
        return []
    rows = zip(run.column("true_label"), run.column("pred_label"), run.column("scored"), run.column("correct_top1"),
               run.column("group") or ["all"] * run.predictions.num_rows, strict=True)
    errors: dict[str, Counter[tuple[str, str]]] = {}
    support: dict[str, Counter[str]] = {}
    for truth, predicted, scored, correct, group in rows:
        if not scored or truth is None:
            continue
        support.setdefault(group, Counter())[truth] += 1
        counts = errors.setdefault(group, Counter())
        if not correct:
            counts[(truth, predicted)] += 1
    style = run_name_style(run.record.provenance)
    out = []
    for group, counts in errors.items():
        # Most frequent first; ties by name, so the list does not depend on row order.
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]
        pairs = tuple(ConfusedPair(true_label=t, predicted=p, count=c, share=c / support[group][t],
                                   true_name=taxon_name(t, style), predicted_name=taxon_name(p, style))
                      for (t, p), c in ranked)
        out.append(GroupConfusion(run=run, group=str(group), errors=sum(counts.values()),
                                  scored=sum(support[group].values()), pairs=pairs))
    return out


@register_section("confusion", "Most-confused pairs", order=50, folded=True)
def confusion_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    confusions = [c for run in runs for c in confused_pairs(run) if c.pairs]
    return context.render("confusion", confusions=confusions, top=TOP_PAIRS) if confusions else None
