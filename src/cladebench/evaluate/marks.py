"""Each run's mark on one metric against the best of the runs (best, tied, worse...): what the report's leaderboard,
the suite's board and ``cladebench results`` show in a cell, all from one paired comparison
(:func:`~cladebench.evaluate.compare.compare_runs` with the best run as its reference), so the three never disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cladebench.errors import CladebenchError
from cladebench.evaluate.compare import compare_runs
from cladebench.evaluate.record import RunRecord
from cladebench.metrics import PairedComparison, lower_is_better


@dataclass(frozen=True)
class BestMarks:
    """Each run's mark on one metric against the best of the runs: ``best`` (only where a difference holds against
    it), ``tied``, ``worse``, ``differs`` (a holding difference whose sign the stored values do not show), ``not
    tested`` or ``not compared``."""

    marks: dict[int, str]
    """Position of the run among those given -> its mark (runs without a value have none)."""
    unit: str
    """What the paired test resamples (``images``, ``queries``), empty when there was none."""
    differences: dict[int, PairedComparison]
    """Position -> the run's paired difference from the best (run - best), where tested."""
    unpaired: dict[int, str]
    """Position -> why the run is not paired with the best (another rank, other taxa...), in words."""
    note: str | None
    """Why the metric, or some runs on it, were not tested or not compared (other than ``unpaired``)."""


def marks_against_best(metric: str, paths: Sequence[Path], estimates: Sequence[dict[str, Any] | None], *,
                       n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05,
                       read: Sequence[tuple[RunRecord, pa.Table]] | None = None) -> BestMarks:
    """The marks of runs (``paths``, their stored ``estimates`` of ``metric``) on one metric: the run with the best
    value is the reference of a :func:`compare_runs` of ``metric`` alone, and each other run is tied with it when
    Holm does not reject, worse when it does. What a leaderboard and ``cladebench results`` show in each cell.
    ``read``: as for :func:`compare_runs`, one per path."""
    values = {i: estimate["value"] for i, estimate in enumerate(estimates)
              if estimate and isinstance(estimate.get("value"), (int, float)) and np.isfinite(estimate["value"])}
    present = list(values)
    if len(present) < 2:
        return BestMarks({i: "not compared" for i in present}, "", {}, {}, None)
    higher = not lower_is_better(metric)
    ordered = sorted(present, key=values.__getitem__, reverse=higher)
    try:
        comparison = compare_runs([paths[i] for i in ordered], metric=metric, n_resamples=n_resamples, seed=seed,
                                  alpha=alpha, in_every_group=False,
                                  read=None if read is None else [read[i] for i in ordered])
    except CladebenchError as error:
        return BestMarks({i: "not compared" for i in present}, "", {}, {}, f"not compared ({error})")
    entry = next(e for e in comparison.metrics if e.metric == metric)
    if entry.columns is None:
        return BestMarks({i: "not tested" for i in present}, "", {}, {}, entry.note)
    by_position = {d.run: d for d in entry.differences}
    unpaired = {ordered[position]: why for position, why in entry.unpaired}
    marks = {ordered[0]: "best" if len(unpaired) < len(ordered) - 1 else "not compared"}  # best of none: not said
    differences = {}
    for position, index in enumerate(ordered[1:], start=1):
        difference = by_position.get(position)
        if difference is not None:
            differences[index] = difference.paired
        if index in unpaired:
            marks[index] = "not compared"
        elif difference is None:
            marks[index] = "not tested"
        elif not difference.holds:
            marks[index] = "tied"
        else:
            worse = difference.paired.difference < 0 if higher else difference.paired.difference > 0
            marks[index] = "worse" if worse else "differs"
    # "best" only where a difference holds against it: a run tied with every other is tied, not best; one that no
    # run was paired with is not compared (or not tested), never best by its stored value alone
    rivals = [mark for index, mark in marks.items() if index != ordered[0]]
    if "worse" not in rivals:
        marks[ordered[0]] = next((m for m in ("tied", "differs", "not tested") if m in rivals), "not compared")
    other = [n for n in (entry.note or "").split("; ") if n and "not paired:" not in n]
    return BestMarks(marks, entry.unit or "", differences, unpaired, "; ".join(other) or None)
