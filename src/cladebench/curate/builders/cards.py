"""What the builders' dataset cards (``README.md``) share: their Markdown tables and their counts of values.

Why a module: every builder writes a card a person reads to decide whether to trust the benchmark; the cards'
tables (integers with thousands separators), their "how often each value occurs" lists and their "Left out"
section look the same in every card because they are written by the same functions.

Example:
    >>> print(markdown_table(["license", "rows"], [("cc-by", 12345), ("cc0", 7)]))
    | license | rows |
    |---|---|
    | cc-by | 12,345 |
    | cc0 | 7 |
    >>> counts(["b", "a", "b", 3])
    {'b': 2, '3': 1, 'a': 1}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cladebench.escaping import markdown_cell
from cladebench.store.left_out import LEFT_OUT_FILE, left_out_counts, left_out_lines, read_left_out


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table: integers with thousands separators, anything else one cell of its text (a folder's
    name with a pipe or a line break in it stays in its cell and row)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else markdown_cell(v) for v in row) + " |"
              for row in rows]
    return "\n".join(lines)


def counts(values: Iterable[Any]) -> dict[str, int]:
    """How often each value occurs, most frequent first (ties by value), keys as text."""
    return {str(k): v for k, v in sorted(Counter(values).items(), key=lambda kv: (-kv[1], str(kv[0])))}


__all__ = ["counts", "markdown_table"]


def left_out_section(folder: str | Path) -> list[str]:
    """The card's lines on the build's ``left_out.parquet``, its counts shown as ``cladebench info`` shows them
    (:func:`cladebench.store.left_out.left_out_lines`), so a card and ``info`` never word one record two ways."""
    lines = left_out_lines(left_out_counts(read_left_out(folder)), LEFT_OUT_FILE)
    return [f"Each record left out is a row of `{LEFT_OUT_FILE}` (`key`, `stage`, `reason`, `detail` first, as "
            "every builder writes it); by stage and reason:", "", "```", *(lines or ["left out: nothing"]), "```", ""]
