"""``cladebench results DIR --format latex``: the suite's table as a booktabs ``table`` for a paper.

The pivot (models × benchmarks) is :func:`~cladebench.evaluate.suite.results.pivot`, the very cells, numbers and
marks of the Markdown pivot; ``--view rows`` is every row of the table. Values and intervals are printed as
``results`` prints them (:func:`~cladebench.evaluate.suite.results.shown`), the best of a column in bold and the
other marks as symbols the caption explains; a cell without a number gets a letter whose note under the table says
why, and skipped runs are listed there too. Every string from data (model names, benchmark and group names,
reasons) goes through :func:`~cladebench.escaping.latex_escape`. The preamble needs ``booktabs`` (and
``longtable`` for ``--view rows``, whose every row runs over pages).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from cladebench import __version__
from cladebench.escaping import latex_escape, latex_key
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.suite.results import PIVOT_RESAMPLES, pivot, shown
from cladebench.metrics import display_scale

Interval = Literal["bounds", "halfwidth"]

SYMBOLS: Mapping[str, str] = {"tied": r"$^{\dagger}$", "differs": r"$^{\ddagger}$", "not tested": r"$^{\circ}$",
                              "not compared": r"$^{\ast}$", "worse": ""}
"""Mark -> the symbol after the value (``best`` is bold; ``worse`` carries none: not the best, not tied)."""
MEANINGS: Mapping[str, str] = {
    "best": "bold: best of the column",
    "tied": (f"tied with the best (paired bootstrap, {PIVOT_RESAMPLES:,} resamples, not significant after Holm's "
             "correction, alpha 0.05, one family per column)"),
    "differs": "differs from the best with a sign the values do not show (Holm-adjusted p at most 0.05)",
    "not tested": "no paired test for the metric",
    "not compared": "not compared with the best (the notes say why)",
    "worse": "unmarked: worse than the best (Holm-adjusted p at most 0.05)",
}
"""What each mark means, as the caption says it (the marks of ``results``'s Markdown legend)."""
LABEL = "tab:cladebench-results"
"""The table's label unless --label names another."""
FORMS: Mapping[Interval, str] = {"bounds": "value [interval]", "halfwidth": r"value $\pm$ half the interval's width"}
"""How a cell gives its interval, as the caption says it."""


def number(metric: str, value: float | None, low: float | None, high: float | None, interval: Interval) -> str:
    """The value as ``results`` shows it and its interval: ``[lo, hi]`` or ``± half its width`` (escaped)."""
    text = shown(metric, value)
    if low is None or high is None:
        return latex_escape(text)
    scale, _ = display_scale(metric)
    if interval == "halfwidth":
        return latex_escape(text) + rf" $\pm$ {scale * (high - low) / 2:.2f}"
    return latex_escape(text) + f" [{scale * low:.2f}, {scale * high:.2f}]"


class _Notes:
    """Lettered notes under the table: each reason once, its letter on every cell it explains."""

    def __init__(self) -> None:
        self.notes: dict[str, str] = {}

    def mark(self, reason: str) -> str:
        letter = self.notes.setdefault(reason, _letter(len(self.notes)))
        return rf"\textsuperscript{{{letter}}}"

    def lines(self) -> list[str]:
        return [rf"\textsuperscript{{{letter}}}~{latex_escape(reason)}" for reason, letter in self.notes.items()]


def _letter(index: int) -> str:
    letters = string.ascii_lowercase
    return letters[index] if index < len(letters) else f"{letters[index // 26 - 1]}{letters[index % 26]}"


def _methods(rows: list[Mapping[str, Any]], root: Path) -> str:
    """The interval methods behind ``rows`` in words (``95% Wilson score interval; ...``), from their records."""
    records: dict[str, RunRecord] = {}
    methods: dict[str, None] = {}
    for row in rows:
        if row["status"] != "finished" or row["low"] is None or not row["run"]:
            continue
        if row["run"] not in records:
            records[row["run"]] = RunRecord.read(root / row["run"])
        estimate = records[row["run"]].metrics.get(row["metric"]) or {}
        method = str(estimate.get("interval") or "interval method not recorded").partition(":")[0]
        confidence = estimate.get("confidence")
        methods[(f"{confidence:.0%} " if isinstance(confidence, (int, float)) else "") + method] = None
    return "; ".join(methods) or "no interval"


def _comment(source: str, packages: str) -> str:
    return (f"% cladebench {__version__}: {source}; every number is its run record's, checked against its "
            f"predictions (needs \\usepackage{{{packages}}})")


def _notes(notes: list[str]) -> list[str]:
    if not notes:
        return []
    return [r"\par\smallskip", r"\begin{minipage}{\linewidth}\footnotesize", *(f"{note}\\par" for note in notes),
            r"\end{minipage}"]


def _table(columns: str, header: list[str], body: list[str], caption: str, label: str, notes: list[str],
           source: str) -> str:
    lines = [_comment(source, "booktabs"),
             r"\begin{table}[htbp]", r"\centering", rf"\caption{{{caption}}}", rf"\label{{{latex_key(label)}}}",
             rf"\begin{{tabular}}{{{columns}}}", r"\toprule", *header, r"\midrule", *body, r"\bottomrule",
             r"\end{tabular}", *_notes(notes), r"\end{table}"]
    return "\n".join(lines)


def _long_table(columns: str, header: str, body: list[str], caption: str, label: str, notes: list[str],
                source: str) -> str:
    """A ``longtable``: every row of a suite runs over pages, its header repeated on each."""
    width = len(columns)
    lines = [_comment(source, "booktabs,longtable"), rf"\begin{{longtable}}{{{columns}}}",
             rf"\caption{{{caption}}}\label{{{latex_key(label)}}} \\", r"\toprule", header, r"\midrule",
             r"\endfirsthead", r"\toprule", header, r"\midrule", r"\endhead",
             rf"\midrule \multicolumn{{{width}}}{{r}}{{continued}} \\", r"\endfoot", r"\bottomrule", r"\endlastfoot",
             *body, r"\end{longtable}"]
    return "\n".join([*lines, *_notes(notes)])


def format_latex(table: pa.Table, root: Path, *, interval: Interval = "bounds", label: str = LABEL) -> str:
    """Models × benchmarks as a booktabs table: the :func:`pivot` of ``results``, best in bold, ties marked."""
    board = pivot(table, root)
    notes = _Notes()
    if not board.columns:
        body = [r"\multicolumn{1}{l}{no finished run gives a benchmark's headline yet} \\"]
        return _table("l", [r"model \\"], body, "cladebench results: no headline yet", label,
                      [*(latex_escape(n) for n in board.notes), *_skipped(board.skipped, board.refused)],
                      latex_escape(str(root)))
    titles = " & ".join(latex_escape(c.title) for c in board.columns)
    metrics = " & ".join(latex_escape(c.metric.rpartition("/")[2]) for c in board.columns)
    header = [rf"model & {titles} \\", rf" & {metrics} \\"]
    used: dict[str, None] = {}
    body = []
    for model in board.models:
        cells = [latex_escape(model)]
        for index, _ in enumerate(board.columns):
            row = board.cells.get((model, index))
            if row is None:
                cells.append("")
            elif row["status"] != "finished":
                cells.append("unverified" + notes.mark(f"{model}: {row['reason']}"))
            elif row["value"] is None:
                cells.append("n/a" + (notes.mark(row["reason"]) if row["reason"] else ""))
            else:
                mark = board.marks.get((model, index), "")
                text = number(row["metric"], row["value"], row["low"], row["high"], interval)
                if mark:
                    used[mark] = None
                cells.append(rf"\textbf{{{text}}}" if mark == "best" else text + SYMBOLS.get(mark, ""))
        body.append(" & ".join(cells) + r" \\")
    shown_rows = list(board.cells.values())
    headlines = "; ".join(f"{c.title}: {c.metric.rpartition('/')[2]} ({c.protocol})" for c in board.columns)
    form = FORMS[interval]
    caption = (f"Headline metric of each benchmark, each model's latest run under the benchmark's protocol "
               f"({latex_escape(headlines)}), as {form}, on the display scale of cladebench results; intervals: "
               f"{latex_escape(_methods(shown_rows, root))}, unadjusted."
               + (f" Marks against the best of each column: {_legend(used)}." if used else ""))
    extra = [latex_escape(n) for n in board.notes]
    if board.off_protocol:
        extra.append(latex_escape(f"Off protocol: {'; '.join(board.off_protocol)}"))
    return _table("l" + "c" * len(board.columns), header, body, caption, label,
                  [*notes.lines(), *extra, *_skipped(board.skipped, board.refused)], latex_escape(str(root)))


def _legend(used: Mapping[str, None]) -> str:
    parts = []
    for mark in MEANINGS:
        if mark in used:
            symbol = SYMBOLS.get(mark, "")
            parts.append(f"{symbol} {latex_escape(MEANINGS[mark])}".strip() if symbol else latex_escape(MEANINGS[mark]))
    return "; ".join(parts)


def _skipped(rows: Sequence[Mapping[str, Any]], refused: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    return [*(latex_escape(f"Not shown: {r['benchmark']} ({r['protocol']}) with {r['model']}: {r['reason']}")
              for r in refused),
            *(latex_escape(f"Skipped: {r['benchmark']} ({r['protocol']}) with {r['model']}: {r['reason']}")
              for r in rows)]


def format_latex_rows(table: pa.Table, root: Path, *, interval: Interval = "bounds", label: str = LABEL) -> str:
    """Every finished row of the table (benchmark, protocol, model, metric, value, n), as ``--view rows`` shows
    them; rows without a number get a lettered note, unverified and skipped runs are listed under the table."""
    rows = table.to_pylist()
    notes = _Notes()
    body = []
    for r in (r for r in rows if r["status"] == "finished"):
        value = (number(r["metric"], r["value"], r["low"], r["high"], interval) if r["value"] is not None
                 else "n/a" + (notes.mark(r["reason"]) if r["reason"] else ""))
        cells = [latex_escape(r[c]) for c in ("benchmark", "protocol", "model", "metric")]
        body.append(" & ".join([*cells, value, latex_escape(r["n"] if r["n"] is not None else "")]) + r" \\")
    refused = [latex_escape(f"Not shown: {r['benchmark']} ({r['protocol']}) with {r['model']}, {r['metric']}: "
                            f"{r['reason']}") for r in rows if r["status"] == "unverified"]
    skipped = _skipped([r for r in rows if r["status"] not in ("finished", "unverified")])
    form = FORMS[interval]
    caption = (f"Every metric of every run in the suite, as {form} on the display scale of cladebench results; "
               f"intervals: {latex_escape(_methods(rows, root))}, unadjusted.")
    return _long_table("llllcr", r"benchmark & protocol & model & metric & value & $n$ \\", body, caption, label,
                       [*notes.lines(), *refused, *skipped], latex_escape(str(root)))
