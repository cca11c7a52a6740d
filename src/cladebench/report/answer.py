"""The answer a report opens with: for each task, who wins its headline metric and by how much, in the words
``cladebench compare`` prints (:func:`~cladebench.evaluate.compare_text.verdict_sentences`), so the first screen of
a report and the first lines of ``compare`` never disagree.

Why a module of its own: the page template puts it above the runs and the sections, and it is computed from the
same comparable cohorts as the leaderboard (:func:`~cladebench.report.sections.leaderboard.cohorts`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cladebench.errors import CladebenchError
from cladebench.report.headline import headline_bases
from cladebench.report.runs import ReportRun, by_task, is_pooled_summary


@dataclass(frozen=True)
class Answer:
    """One task's answer among one cohort of comparable runs."""

    task: str
    """The task."""
    caption: str
    """Which runs it is about (``per group``, ``pooled summary``), empty when the task has one cohort."""
    lines: tuple[str, ...]
    """The verdict sentences, or why the runs could not be compared."""


def answers(runs: Sequence[ReportRun]) -> list[Answer]:
    """Per task and cohort of two or more comparable runs, the verdict on its primary headline metric."""
    from cladebench.evaluate.compare import compare_runs
    from cladebench.evaluate.compare_text import verdict_sentences
    from cladebench.report.sections.leaderboard import ALPHA, N_RESAMPLES, SEED, cohorts

    out = []
    for task, same_task in by_task(runs).items():
        groups = [cohort for cohort in cohorts(same_task) if len(cohort) > 1
                  and all(run.predictions is not None for run in cohort)]
        for cohort in groups:
            bases = headline_bases(cohort[0])[:1]
            if not bases:
                continue
            pooled = is_pooled_summary(cohort[0], same_task)
            caption = ("pooled summary" if pooled else "per group" if cohort[0].groups else "") if len(groups) > 1 \
                else ("pooled summary" if pooled else "")
            try:
                comparison = compare_runs([run.path for run in cohort], metric=bases[0], n_resamples=N_RESAMPLES,
                                          seed=SEED, alpha=ALPHA, read=[(run.record, run.predictions)
                                                                        for run in cohort])
            except CladebenchError as error:
                out.append(Answer(task, caption, (f"not compared: {error}",)))
                continue
            sentences = verdict_sentences(comparison, [run.index for run in cohort])
            lines = tuple(sentence.text for sentence in sentences) or (
                f"{bases[0]}: no run could be paired with another, so none is best",)
            out.append(Answer(task, caption, lines))
    return out
