"""Which metrics of a task head the leaderboard, as a registry keyed by task name.

A run record holds dozens of numbers (every rank, every breakdown); a leaderboard that showed them all
would hide the ones a benchmark is read by. Each task names its headline metrics here, best first;
the first is the *primary* one, the only one shown per challenge group when a run has several groups
(the per-group section shows the rest). A task without an entry shows its first pooled metrics.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from cladebench.evaluate.run import GROUP_SEPARATOR
from cladebench.registry import Registry
from cladebench.report.formatting import split_metric
from cladebench.report.runs import ReportRun

HeadlinePicker = Callable[[ReportRun, Sequence[str]], list[str]]
"""(run, the run's metric names without group prefix, in record order) -> headline metric names, best first."""

HEADLINES: Registry[HeadlinePicker] = Registry("headline picker")
"""Registry: task name -> its headline picker."""

DEFAULT_HEADLINES = 4
"""Pooled metrics shown for a task that registered no headline picker."""


def _present(names: Sequence[str], wanted: Sequence[str]) -> list[str]:
    return [name for name in wanted if name in names]


def _matching(names: Sequence[str], pattern: str) -> list[str]:
    compiled = re.compile(pattern)
    return [name for name in names if compiled.fullmatch(name)]


@HEADLINES.register("zeroshot")
def _zeroshot(run: ReportRun, names: Sequence[str]) -> list[str]:
    rank = run.label_rank or "species"
    # mistake severity beside accuracy: the same accuracy with gentler mistakes is the better model
    return _present(names, [f"top1_{rank}", f"top5_{rank}", f"balanced_accuracy_{rank}", f"mistake_severity_{rank}"])


@HEADLINES.register("geo")
def _geo(run: ReportRun, names: Sequence[str]) -> list[str]:
    rank = run.label_rank or "species"
    return _present(names, [f"fused_top1_{rank}", f"image_top1_{rank}", f"fused_minus_image_{rank}"])


@HEADLINES.register("fewshot")
def _fewshot(run: ReportRun, names: Sequence[str]) -> list[str]:
    return _matching(names, r"[a-z]+(?:-[a-z]+)*_\d+shot")


@HEADLINES.register("retrieval")
def _retrieval(run: ReportRun, names: Sequence[str]) -> list[str]:
    rank = run.label_rank or "species"
    return _present(names, [f"map_{rank}", f"mrr_{rank}"])


@HEADLINES.register("rerank")
def _rerank(run: ReportRun, names: Sequence[str]) -> list[str]:
    return [*_matching(names, r"ap@\d+"), *_matching(names, r"ndcg@\d+"), *_matching(names, r"mrr@\d+")]


@HEADLINES.register("lineage")
def _lineage(run: ReportRun, names: Sequence[str]) -> list[str]:
    return _present(names, ["hint_exact", "nohint_exact", "hint_lca_distance", "nohint_hint_agreement"])


def base_names(run: ReportRun) -> list[str]:
    """The run's metric names without group or breakdown prefix, in record order, each once."""
    return list(dict.fromkeys(split_metric(name)[1] for name in run.record.metrics))


def headline_bases(run: ReportRun) -> list[str]:
    """The run's headline metrics (without group prefix), best first."""
    names = base_names(run)
    picker = HEADLINES.get(run.task)
    picked = picker(run, names) if picker else []
    return picked or names[:DEFAULT_HEADLINES]


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
