"""Which metrics of a task head the leaderboard, as the task declares them (:attr:`cladebench.tasks.Task.headline`).

A run record holds dozens of numbers (every rank, every breakdown); a leaderboard that showed them all
would hide the ones a benchmark is read by. Each task names its headline metrics, best first;
the first is the *primary* one, the only one shown per challenge group when a run has several groups
(the per-group section shows the rest). A task that names none (or a task this version does not know) shows its
first pooled metrics.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.report.formatting import split_metric
from cladebench.report.runs import ReportRun
from cladebench.tasks import known_task

DEFAULT_HEADLINES = 4
"""Pooled metrics shown for a task that names no headline metrics."""


def picked(patterns: Sequence[str], names: Sequence[str], rank: str) -> list[str]:
    """The names that match each pattern (``{rank}`` made ``rank``) whole, pattern by pattern, in ``names``' order
    within one pattern, each once."""
    found: list[str] = []
    for pattern in patterns:
        compiled = re.compile(pattern.replace("{rank}", re.escape(rank)))
        found.extend(name for name in names if compiled.fullmatch(name) and name not in found)
    return found


def base_names(run: ReportRun) -> list[str]:
    """The run's metric names without group or breakdown prefix, in record order, each once."""
    return list(dict.fromkeys(split_metric(name)[1] for name in run.record.metrics))


def headline_bases(run: ReportRun) -> list[str]:
    """The run's headline metrics (without group prefix), best first."""
    names = base_names(run)
    task = known_task(run.task)
    chosen = picked(task.headline, names, run.label_rank or "species") if task is not None else []
    return chosen or names[:DEFAULT_HEADLINES]


def headline_metrics(run: ReportRun) -> list[str]:
    """Full metric names for the leaderboard: every headline metric of a pooled run; the primary one per group
    of a grouped run (a grouped run has no pooled number: its groups are separate benchmarks)."""
    bases = headline_bases(run)
    run_groups = run.groups
    if not run_groups:
        return [b for b in bases if b in run.record.metrics]
    primary = bases[:1]
    names = [f"{g}{GROUP_SEPARATOR}{b}" for g in run_groups for b in primary]
    return [name for name in names if name in run.record.metrics]
