"""What the builders' dataset cards (``README.md``) share: their Markdown tables and their counts of values.

Why a module: every builder writes a card a person reads to decide whether to trust the benchmark; the cards'
tables (integers with thousands separators) and their "how often each value occurs" lists look the same in
every card because they are written by the same two functions.

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
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from cladebench.escaping import markdown_cell, markdown_escape


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], *, literal: Collection[int] = ()) -> str:
    """A Markdown table: integers with thousands separators, anything else one cell of its text (a folder's
    name with a pipe or a line break in it stays in its cell and row). The columns ``literal`` numbers hold
    values from data (a label, a species, a license as the source wrote it), shown as literal text
    (:func:`~cladebench.escaping.markdown_escape`: no link, emphasis or code span of theirs); the others may
    hold the card's own Markdown (a file name in a code span)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(f"{v:,}" if isinstance(v, int) else (markdown_escape if i in literal else
                                                                     markdown_cell)(v)
                                for i, v in enumerate(row)) + " |"
              for row in rows]
    return "\n".join(lines)


def counts(values: Iterable[object]) -> dict[str, int]:
    """How often each value occurs, most frequent first (ties by value), keys as text."""
    return {str(k): v for k, v in sorted(Counter(values).items(), key=lambda kv: (-kv[1], str(kv[0])))}


__all__ = ["counts", "markdown_table"]

