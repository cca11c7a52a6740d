"""Reliability diagrams and ECE of zero-shot runs, per challenge group (groups are separate label sets, so their
probabilities are not pooled)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from markupsafe import Markup

from cladebench.report.calibration import BINS, ECE_DEFINITION, Reliability, reliability
from cladebench.report.runs import ReportRun
from cladebench.report.sections.base import ReportContext, register_section

NEEDED = ("top5_probs", "correct_top1", "scored")
"""Predictions columns the calibration is computed from (zero-shot's): the top-1 probability is top5_probs[0]."""

POOLED = "all"
"""Name of the single group of a run evaluated without challenge groups."""


@dataclass(frozen=True)
class GroupCalibration:
    group: str
    reliability: Reliability
    accuracy: float
    confidence: float


@dataclass(frozen=True)
class RunCalibration:
    run: ReportRun
    groups: tuple[GroupCalibration, ...]
    chart: str | None


def _top1_probability(run: ReportRun) -> np.ndarray:
    return np.array([probs[0] if probs else np.nan for probs in run.column("top5_probs")], dtype=np.float64)


def run_calibration(run: ReportRun, *, chart: bool) -> RunCalibration | None:
    """Reliability per group of a run's scored images, or None when its predictions have no top-1 probability."""
    if run.predictions is None or not set(NEEDED) <= set(run.predictions.column_names):
        return None
    confidence = _top1_probability(run)
    correct = np.array(run.column("correct_top1"), dtype=bool)
    scored = np.array([bool(s) for s in run.column("scored")], dtype=bool) & np.isfinite(confidence)
    groups = np.array([str(g) for g in run.column("group")] or [POOLED] * len(scored), dtype=object)
    out = []
    for group in dict.fromkeys(groups[scored].tolist()):
        mask = scored & (groups == group)
        result = reliability(confidence[mask], correct[mask])
        out.append(GroupCalibration(group=group, reliability=result, accuracy=float(correct[mask].mean()),
                                    confidence=float(confidence[mask].mean())))
    if not out:
        return None
    uri = None
    if chart:
        from cladebench.report.plots import reliability_diagram, reliability_small_multiples

        draw = reliability_small_multiples if len(out) > 1 else reliability_diagram  # a panel per group
        uri = draw([(f"{g.group} (ECE {g.reliability.ece:.3f})", g.reliability.confidence,
                     g.reliability.accuracy, g.reliability.counts) for g in out], title=run.name)
    return RunCalibration(run=run, groups=tuple(out), chart=uri)


@register_section("calibration", "Calibration of zero-shot probabilities", order=40)
def calibration_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    calibrations = [c for run in runs if (c := run_calibration(run, chart=context.format == "html")) is not None]
    if not calibrations:
        return None
    return context.render("calibration", calibrations=calibrations, definition=Markup(ECE_DEFINITION), bins=BINS)
