"""A comparison in words: the verdict first (who wins, by how much, on how many groups), then, with ``--all-metrics``,
every metric of every run.

Why a module of its own: ``compare`` prints it and the report's first screen says the same sentences
(:func:`verdict_sentences`), so the two never word one answer differently. Runs are numbered from 1 (``[1]``,
``[2]``), as the report and ``serve`` number them; the JSON keeps positions from 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cladebench.evaluate.compare import Comparison, Difference, MetricComparison, Verdict
from cladebench.evaluate.overlap import overlap_words
from cladebench.metrics import display_scale, signed

MOST_LINES = 40
"""Lines ``compare`` prints by default (the verdict and the headline table); ``--all-metrics`` prints every metric."""


@dataclass(frozen=True)
class VerdictSentence:
    """One metric's answer in words, for ``compare`` and the report's first screen."""

    metric: str
    """The metric (its own name, over every group)."""
    leader: int
    """Position of the run the sentence is about (the best where a difference holds, else the first tied)."""
    name: str
    """The leader as the text calls it: ``[1] bioclip-2``."""
    value: str
    """The leader's pooled value with its interval (``71.2% [66.5, 75.5]``), empty for a run with groups only."""
    against: tuple[str, ...]
    """Per other run: ``beats [2] clip by 4.4 points [1.2, 7.5] (p 0.003); better on 5 of 8 groups, tied on 3``."""
    holds: bool
    """Some difference of the leader against another run holds: only then is it called best."""

    @property
    def text(self) -> str:
        head = self.name + (f" {self.value}" if self.value else "")
        word = "best" if self.holds else "no winner (every difference tied)"
        return f"{self.metric}: {word}: {head}; " + "; ".join(self.against)


def _points(metric: str) -> tuple[float, str]:
    scale, unit = display_scale(metric)
    return scale, " points" if unit == "%" else ""


def _estimate_words(estimate: dict[str, Any] | None, metric: str) -> str:
    if not estimate or estimate.get("value") is None:
        return ""
    scale, unit = display_scale(metric)
    low, high = estimate.get("low"), estimate.get("high")
    interval = f" [{scale * low:.1f}, {scale * high:.1f}]" if low is not None and high is not None else ""
    return f"{scale * estimate['value']:.1f}{unit}{interval}"


def _against_words(comparison: Comparison, verdict: Verdict, run: int, tally: dict[str, Any],
                   numbers: Sequence[int]) -> str:
    scale, points = _points(verdict.metric)
    other = f"[{numbers[run]}] {comparison.runs[run].label}"
    said = ""
    pooled = tally.get("pooled")
    if pooled is not None:
        difference, word = pooled
        d = difference.paired
        # best - other: positive where the best is ahead; said as a size ("by 4.4 points") once it holds
        low, high = sorted((-scale * d.high, -scale * d.low))
        size, sign = (abs, lambda v: f"{v:.1f}") if word != "tied" else (lambda v: v, signed)
        if word == "worse":
            low, high = -high, -low
        by = (f"{sign(size(-scale * d.difference))}{points} [{sign(low)}, {sign(high)}] "
              f"(p {difference.p_adjusted:.2g}, {d.n:,} {verdict.unit or 'examples'})")
        said = {"better": f"beats {other} by {by}", "worse": f"loses to {other} by {by}"}.get(
            word, f"tied with {other}: {by}")
    groups = tally["groups"]
    if groups > 1 or (groups and pooled is None):
        sizes = sorted(abs(scale * size) for size in tally.get("sizes") or ())
        by = (f" (by {sizes[0]:.1f}{points})" if len(sizes) == 1 or (sizes and sizes[0] == sizes[-1])
              else f" (by {sizes[0]:.1f} to {sizes[-1]:.1f}{points})" if sizes else "")
        counts = [f"better on {tally['better']} of {groups} groups" if tally["better"] else "",
                  f"worse on {tally['worse']} of {groups}" if tally["worse"] else "",
                  f"tied on {tally['tied']}" + ("" if tally["better"] or tally["worse"] else f" of {groups} groups")
                  if tally["tied"] else ""]
        words = ", ".join(c for c in counts if c)
        if by:
            words = words.replace(" groups", f" groups{by}", 1)
        said = f"{said}; {words}" if said else f"vs {other}: {words}"
    return said or f"vs {other}: not paired"


def verdict_sentences(comparison: Comparison, numbers: Sequence[int] | None = None) -> list[VerdictSentence]:
    """One sentence per metric with a paired test: the best run (called best only where a difference holds), its
    value and interval, and its paired difference (Holm-adjusted p) to each other run, pooled and per group.
    ``numbers``: how the runs are called (a report's own numbers), from 1 in order by default."""
    numbers = list(numbers) if numbers is not None else list(range(1, len(comparison.runs) + 1))
    sentences = []
    estimates = {entry.metric: entry.estimates for entry in comparison.metrics}
    for verdict in comparison.verdicts:
        if not verdict.against:  # no run was paired with it: no best, no sentence
            continue
        holds = any((tally.get("pooled") is not None and tally["pooled"][1] == "better") or tally["better"]
                    for _, tally in verdict.against)
        value = _estimate_words((estimates.get(verdict.metric) or (None,) * len(comparison.runs))[verdict.best],
                                verdict.metric)
        sentences.append(VerdictSentence(
            verdict.metric, verdict.best, f"[{numbers[verdict.best]}] {comparison.runs[verdict.best].label}", value,
            tuple(_against_words(comparison, verdict, run, tally, numbers) for run, tally in verdict.against), holds))
    return sentences


def _estimate_cell(estimate: dict[str, Any] | None, metric: str) -> str:
    if estimate is None:
        return f"{'n/a':>8}  {'':16}"
    scale, unit = display_scale(metric)
    low, high = estimate.get("low"), estimate.get("high")
    value = estimate.get("value")  # null in run.json where the value was not a finite number
    # no interval beside an undefined value: over no image, Wilson's is [0, 100], which says nothing of it
    interval = (f"[{scale * low:6.2f}, {scale * high:6.2f}]" if low is not None and high is not None
                and value is not None else "")
    shown = f"{scale * value:7.2f}{unit or ' '}" if value is not None else f"{'undefined':>8}"
    return f"{shown}  {interval:<16}"


def _difference_cell(difference: Difference | None, is_reference: bool, stored_n: set[int], metric: str) -> str:
    if is_reference:
        return "reference"
    if difference is None:
        return "(not paired)"
    paired = difference.paired
    scale, _ = display_scale(metric)
    # Said when the paired units are not the ones behind the stored values (scored in one run only, intersected).
    fewer = f"  (on {paired.n:,} paired examples)" if stored_n and stored_n != {paired.n} else ""
    return (f"{scale * paired.difference:+7.2f}  [{scale * paired.low:+7.2f}, {scale * paired.high:+7.2f}]  "
            f"{difference.p_adjusted:8.4f}  {'holds' if difference.holds else 'tied'}{fewer}")


def _stored_units(entry: MetricComparison, index: int) -> int | None:
    """How many units run ``index``'s stored value was computed on; None for a mean over repetitions (its n counts
    repetitions, not the query images that are paired)."""
    estimate = entry.estimates[index]
    if estimate is None or "per_repetition" in estimate:
        return None
    return estimate.get("n")


def _head(comparison: Comparison) -> list[str]:
    shared = overlap_words(comparison.overlap, range(1, len(comparison.runs) + 1)) if comparison.overlap else []
    on = (f"on {comparison.examples:,} shared examples" if not shared
          else "not all on the same examples")
    lines = [f"{comparison.task}: {len(comparison.runs)} runs{',' if shared else ''} {on}"
             + (" (only the examples every run evaluated)" if comparison.intersected else "")]
    for index, run in enumerate(comparison.runs):
        lines.append(f"  [{index + 1}] {run.label}  {run.path}" + ("  (reference)" if index == 0 else ""))
    return lines + [f"  {said}" for said in shared]


def format_verdicts(comparison: Comparison) -> list[str]:
    """The verdict block: how it was decided, then one line per metric (:func:`verdict_sentences`)."""
    sentences = verdict_sentences(comparison)
    if not sentences:  # why, once: the notes of the metrics (most often one reason for all)
        notes = list(dict.fromkeys(entry.note for entry in comparison.metrics if entry.note))
        return ["verdict: no metric could be paired between the runs, so none is best",
                *(f"  {note}" for note in notes[:2]),
                *([f"  and {len(notes) - 2} other notes: --all-metrics"] if len(notes) > 2 else [])]
    units = sorted({v.unit or "examples" for v in comparison.verdicts})
    lines = [f"verdict (paired bootstrap over {', '.join(units)}, {comparison.n_resamples:,} resamples, seed "
             f"{comparison.seed}; {100 * comparison.confidence:g}% interval; p Holm-adjusted; a difference holds "
             f"when p <= {comparison.alpha:g}, else tied):"]
    return lines + [f"  {sentence.text}" for sentence in sentences]


def _table(comparison: Comparison, entries: list[MetricComparison]) -> list[str]:
    width = max([16, *(len(entry.metric) for entry in entries)])  # per-group names are long
    on_width = max([11, *(len(on) for entry in entries for on in entry.computed_on)])
    header = (f"{'metric':<{width}} {'run':>4}  {'value':>8}  {'stored interval':<16}  {'computed on':<{on_width}}  "
              f"{'delta':>7}  {'interval':<18}  {'p (Holm)':>8}")
    lines = [header]
    for entry in entries:
        by_run = {d.run: d for d in entry.differences}
        for index, estimate in enumerate(entry.estimates):
            name = entry.metric if index == 0 else ""
            tested = entry.columns is not None
            stored_n = {n for n in (_stored_units(entry, 0), _stored_units(entry, index)) if n is not None}
            cell = (_difference_cell(by_run.get(index), index == 0, stored_n, entry.metric) if tested
                    else "" if index else "no paired test")
            on = entry.computed_on[index] if entry.computed_on else ""
            line = (f"{name:<{width}} {f'[{index + 1}]':>4}  {_estimate_cell(estimate, entry.metric)}  "
                    f"{on:<{on_width}}  {cell}")
            lines.append(line.rstrip())
        if entry.note:
            lines.append(f"{'':<{width}} note: {entry.note}")
    return lines


def _legend(comparison: Comparison) -> str:
    return (f"delta: run - reference [1], paired bootstrap ({comparison.n_resamples:,} resamples of the units named "
            f"under 'computed on', seed {comparison.seed}), {100 * comparison.confidence:g}% percentile interval "
            f"(unadjusted); p adjusted by Holm, one family per metric and group (the runs tested on it); 'holds' "
            f"when adjusted p <= {comparison.alpha:g}, otherwise 'tied'")


def format_comparison(comparison: Comparison, *, verbose: bool = False) -> str:
    """The comparison as text: the runs, the verdict, then the metrics the verdict is about (each run's stored value
    and its paired difference to the reference), in at most :data:`MOST_LINES` lines for a few runs; ``verbose``:
    every metric of every group and breakdown."""
    lines = [*_head(comparison), *format_verdicts(comparison)]
    if verbose:
        entries = list(comparison.metrics)
    else:
        judged = {v.metric for v in comparison.verdicts}
        pooled = [entry for entry in comparison.metrics if entry.metric in judged]
        # a run with groups only has its metrics per group: those of the verdict's metrics, when they fit
        entries = pooled or [entry for entry in comparison.metrics
                             if entry.metric.rpartition("/")[2] in judged and "=" not in entry.metric]
    table = _table(comparison, entries)
    notes = (["values are as stored (each run's own examples); deltas use the shared examples"]
             if comparison.intersected else [])
    more = len(comparison.metrics) - len(entries)
    tail = [f"{more} more metric{'s' if more != 1 else ''} (each group's, untested ones): --all-metrics"][:more]
    if not entries:
        pass
    elif verbose or len(lines) + 2 + len(notes) + len(table) + len(tail) <= MOST_LINES:
        lines += ["", _legend(comparison), *notes, *table]
    else:
        tail = [f"{len(comparison.metrics)} metrics with each run's value, group by group: --all-metrics"]
    return "\n".join(lines + tail)
