"""The loaded runs' predictions, read by row: what a run said about one image, and which rows a sort puts first.

Runs are run records (``run.json`` with ``predictions.parquet``) read by :func:`cladebench.report.runs.load_runs`.
A classification run (zero-shot, few-shot) has ``uuid``, ``true_label``, ``pred_label`` and, for zero-shot,
``top5_labels``/``top5_probs``; a run without some of these columns shows what it has. A run's confidence in a
row is its top-1 probability.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cladebench.errors import UsageError
from cladebench.metrics.hierarchy import HEIGHT_COLUMN
from cladebench.report.taxon_names import COMMON_NAME, run_name_style, taxon_name
from cladebench.serve.state import ServeState

if TYPE_CHECKING:
    from cladebench.report.runs import ReportRun

NEEDED = ("uuid", "pred_label")
"""Columns a run's predictions need to be overlaid at all."""


@dataclass(frozen=True)
class Said:
    """What one run said about one row."""

    run: int
    """The run's position (from 1), as the pages number runs."""
    label: str
    """The run's label."""
    predicted: str | None
    truth: str | None
    top5: list[tuple[str, float | None]]
    """(label, probability) best first; the probability is None when the run recorded none."""
    top5_names: list[str | None]
    """The labels of :attr:`top5` as a reader looks them up (see :attr:`predicted_name`)."""
    predicted_name: str | None
    """:attr:`predicted` as a reader looks it up (the binomial of a lineage label; the label itself otherwise)."""
    truth_name: str | None
    right: bool | None
    """Top-1 right; None when the row is not scored (no true label)."""
    confidence: float | None
    group: str | None

    @property
    def top5_named(self) -> list[tuple[str, str | None, float | None]]:
        """(label, short name, probability) of :attr:`top5`."""
        return [(label, name, p) for (label, p), name in zip(self.top5, self.top5_names, strict=True)]


def names_taxon(label: str | None, name: str | None, wanted: str) -> bool:
    """Whether a label (or its name as a reader looks it up) is of taxon ``wanted`` at any rank: the label itself,
    or a run of its words that starts at a capitalised one (a genus or above: ``Turdus`` names ``Turdus
    migratorius``, ``Aves`` a lineage label through birds; an epithet alone names nothing). Case is ignored."""
    wanted_words = wanted.casefold().split()
    if not wanted_words or not label:
        return False
    if wanted.casefold().strip() in {label.casefold(), str(name or "").casefold()}:
        return True
    words = label.partition(COMMON_NAME)[0].split()
    folded = [w.casefold() for w in words]
    n = len(wanted_words)
    return any(words[i][:1].isupper() and folded[i:i + n] == wanted_words for i in range(len(words) - n + 1))


def usable(run: ReportRun) -> bool:
    """Whether ``run`` has predictions the app can overlay."""
    return run.predictions is not None and set(NEEDED) <= set(run.predictions.column_names)


def by_uuid(state: ServeState, index: int) -> dict[str, dict[str, Any]]:
    """Run ``index`` (from 1): uuid -> its predictions row (read once per server)."""
    def read() -> dict[str, dict[str, object]]:
        run = state.runs[index - 1]
        if not usable(run):
            return {}
        assert run.predictions is not None  # usable: it has predictions
        keep = [c for c in ("uuid", "true_label", "pred_label", "top5_labels", "top5_probs", "correct_top1",
                            "scored", "group", HEIGHT_COLUMN) if c in run.predictions.column_names]
        return {row["uuid"]: row for row in run.predictions.select(keep).to_pylist()}

    return state.remembered(("predictions", index), read)


def said(state: ServeState, index: int, row: dict[str, Any]) -> Said:
    """A predictions row of run ``index`` in the form the pages show."""
    run = state.runs[index - 1]
    labels = row.get("top5_labels") or ([row["pred_label"]] if row.get("pred_label") is not None else [])
    probs = row.get("top5_probs") or [None] * len(labels)
    right = row.get("correct_top1")
    if right is None and row.get("true_label") is not None:
        right = row.get("pred_label") == row.get("true_label")
    if row.get("scored") is False:
        right = None

    def name(label: str | None) -> str | None:
        return short_name(state, index, label)

    return Said(run=index, label=run.label, predicted=row.get("pred_label"), truth=row.get("true_label"),
                top5=list(zip(labels, probs, strict=False))[:5], top5_names=[name(label) for label in labels[:5]],
                right=right,
                predicted_name=name(row.get("pred_label")), truth_name=name(row.get("true_label")),
                confidence=probs[0] if probs and probs[0] is not None else None, group=row.get("group"))


def short_name(state: ServeState, index: int, label: str | None) -> str | None:
    """A label of run ``index`` as a reader looks it up (see :attr:`Said.predicted_name`)."""
    return None if label is None else taxon_name(label, run_name_style(state.runs[index - 1].record.provenance)).name


def said_about(state: ServeState, uuid: str) -> list[Said]:
    """What every loaded run said about row ``uuid`` (runs that did not evaluate it are left out)."""
    found = []
    for index in range(1, len(state.runs) + 1):
        row = by_uuid(state, index).get(uuid)
        if row is not None:
            found.append(said(state, index, row))
    return found


def run_pair(state: ServeState, query: dict[str, str]) -> tuple[int, int | None]:
    """The run a view shows (``run``) and the one it is set against (``other``: by default the second run, or
    the first when the second is shown), None when only one run is loaded."""
    index = run_index(state, query.get("run"))
    other = run_index(state, query.get("other"), option="other") if query.get("other") else None
    if other is None and len(state.runs) > 1:
        other = 2 if index == 1 else 1
    return index, other


def run_index(state: ServeState, value: str | None, *, option: str = "run") -> int:
    """A run's position from a query parameter (1 when there is one run and none is named)."""
    if not state.runs:
        raise UsageError("no runs are loaded: start serve with run.json files after the dataset")
    if value in (None, ""):
        return 1
    try:
        index = int(value)
    except ValueError:
        raise UsageError(f"{option} must be a run's number (1 to {len(state.runs)}), got {value!r}") from None
    if not 1 <= index <= len(state.runs):
        raise UsageError(f"{option} must be a run's number (1 to {len(state.runs)}), got {index}")
    return index


CORRECTNESS = ("right", "wrong", "unscored")
"""Values of the grid's ``correct`` filter: top-1 right, wrong, or not scored (no true label)."""


def _percent(query: Mapping[str, str], name: str) -> float | None:
    text = (query.get(name) or "").strip().rstrip("%")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{name} must be a percentage from 0 to 100, got {text!r}") from None
    if not 0.0 <= value <= 100.0:
        raise UsageError(f"{name} must be a percentage from 0 to 100, got {text!r}")
    return value / 100.0


@dataclass(frozen=True)
class PredictionFilter:
    """A run overlaid on the grid (``run=``): each cell shows its verdict and confidence; the rows can be narrowed
    to those the run got right or wrong, within a confidence range, or predicted as one taxon."""

    run: int
    """The run's position (from 1)."""
    correct: str | None = None
    """One of :data:`CORRECTNESS`; None: any."""
    low: float | None = None
    """Least top-1 probability kept (a fraction), from ``conf_min`` (a percentage)."""
    high: float | None = None
    """Greatest top-1 probability kept (a fraction), from ``conf_max``."""
    predicted: str | None = None
    """A predicted taxon at any rank (see :func:`names_taxon`): a genus keeps the rows predicted as its species."""
    true: str | None = None
    """A true taxon at any rank, as :attr:`predicted`."""

    @classmethod
    def from_query(cls, query: Mapping[str, str], state: ServeState) -> PredictionFilter | None:
        """The overlay named in ``query`` (None without ``run=``); a bad value is a :class:`UsageError`."""
        if not query.get("run"):
            return None
        index = run_index(state, query.get("run"))
        if not usable(state.runs[index - 1]):
            raise UsageError(f"run [{index}] has no predictions to show")
        correct = query.get("correct") or None
        if correct is not None and correct not in CORRECTNESS:
            raise UsageError(f"correct must be one of {', '.join(CORRECTNESS)}, got {correct!r}")
        low, high = _percent(query, "conf_min"), _percent(query, "conf_max")
        if low is not None and high is not None and low > high:
            raise UsageError(f"conf_min {100 * low:g} is above conf_max {100 * high:g}")
        return cls(run=index, correct=correct, low=low, high=high,
                   predicted=(query.get("predicted") or "").strip() or None,
                   true=(query.get("true") or "").strip() or None)

    @property
    def narrows(self) -> bool:
        """Whether it keeps only some of the run's rows (else it only overlays the verdicts)."""
        return any(v is not None for v in (self.correct, self.low, self.high, self.predicted, self.true))

    def keeps(self, s: Said) -> bool:
        """Whether a row the run said ``s`` about passes."""
        if self.correct is not None:
            verdict = "unscored" if s.right is None else "right" if s.right else "wrong"
            if verdict != self.correct:
                return False
        if (self.low is not None or self.high is not None) and s.confidence is None:
            return False
        if self.low is not None and s.confidence < self.low:  # type: ignore[operator]
            return False
        if self.high is not None and s.confidence > self.high:  # type: ignore[operator]
            return False
        if self.predicted is not None and not names_taxon(s.predicted, s.predicted_name, self.predicted):
            return False
        return self.true is None or names_taxon(s.truth, s.truth_name, self.true)

    def select(self, state: ServeState, uuids: list[str]) -> list[str]:
        """``uuids`` (in their order) that the run predicted and that pass."""
        predicted = by_uuid(state, self.run)
        return [u for u in uuids if u in predicted and self.keeps(said(state, self.run, predicted[u]))]


def differing_name(predicted: str | None, truth: str | None) -> str:
    """``predicted`` with the leading words it shares with ``truth`` cut to their initial (``T. merula`` for
    ``Turdus merula`` beside ``Turdus migratorius``), so a narrow tile that cuts its caption at the end keeps the
    part that tells the two apart; a name equal to the truth, or sharing nothing, stays whole."""
    words, theirs = str(predicted or "").split(), str(truth or "").split()
    shared = 0
    while shared < min(len(words), len(theirs)) - 1 and words[shared].casefold() == theirs[shared].casefold():
        shared += 1
    if not shared or words == theirs:
        return str(predicted or "")
    return " ".join([*(f"{w[0]}." for w in words[:shared]), *words[shared:]])


def verdict_and_tag(state: ServeState, index: int, uuid: str) -> tuple[bool | None, str] | None:
    """A cell's overlay for run ``index``: (right or wrong or None, "73% → name", the confidence first so that a
    narrow cell cuts the name, not the number); None when it did not predict the row."""
    row = by_uuid(state, index).get(uuid)
    if row is None:
        return None
    s = said(state, index, row)
    name = s.predicted_name if s.right is not False else differing_name(s.predicted_name, s.truth_name)
    shown = (f"{100 * s.confidence:.0f}% " if s.confidence is not None else "") + f"→ {name}"
    return s.right, shown
