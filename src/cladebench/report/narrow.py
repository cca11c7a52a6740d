"""Tables that read on a phone: each body cell of an HTML report's table is labelled with its column's header, so
that on a narrow screen the stylesheet stacks each row into a block of ``header value`` lines (each run a row of
its own, never a column that scrolls out of view) with no script on the page.

The labels are added to the written page rather than in each section's template, so every table, present and
future, stacks the same way. The page's markup is matched with regular expressions, which is sound here because
every data string in it is escaped (a ``<`` in a taxon's or a run's name is written as an entity): each
``<table``, ``<tr``, ``<td`` or ``<th`` left in the text is the templates' own.
"""

from __future__ import annotations

import html
import re

from markupsafe import escape

_TABLE = re.compile(r"<table\b[^>]*>.*?</table>", re.S)
_HEAD = re.compile(r"<thead\b[^>]*>(.*?)</thead>", re.S)
_BODY = re.compile(r"<tbody\b[^>]*>.*?</tbody>", re.S)
_ROW = re.compile(r"<tr\b[^>]*>.*?</tr>", re.S)
_CELL_START = re.compile(r"<(td|th)\b([^>]*)>")
_HEADER_CELL = re.compile(r"<th\b[^>]*>(.*?)</th>", re.S)
_TAG = re.compile(r"<[^>]+>")

STACKS = "data-stacks"
"""Attribute of a table whose cells are labelled: the stylesheet stacks its rows on a narrow screen."""


def _header_texts(head: str) -> list[str]:
    rows = _ROW.findall(head)
    last = rows[-1] if rows else head
    return [" ".join(html.unescape(_TAG.sub("", cell)).split()) for cell in _HEADER_CELL.findall(last)]


def _label_row(row: str, headers: list[str]) -> str:
    position = iter(range(len(headers) + 10 ** 6))

    def label(match: re.Match[str]) -> str:
        i = next(position)
        if i >= len(headers) or not headers[i] or "data-label=" in match.group(2):
            return match.group(0)
        return f'<{match.group(1)}{match.group(2)} data-label="{escape(headers[i])}">'

    return _CELL_START.sub(label, row)


def _label_table(match: re.Match[str]) -> str:
    table = match.group(0)
    if table.count("<table") > 1 or "colspan" in table or "rowspan" in table:
        return table  # a nested or spanning table's cells do not line up with its headers: left as it is
    head = _HEAD.search(table)
    if head is None:
        return table  # a table of facts (a header per row) stacks as it is
    headers = _header_texts(head.group(1))
    if not any(headers):
        return table
    labelled = _BODY.sub(lambda body: _ROW.sub(lambda row: _label_row(row.group(0), headers), body.group(0)), table)
    start = labelled.index(">")
    return f"{labelled[:start]} {STACKS}{labelled[start:]}"  # last, so the table's own attributes lead


def label_table_cells(page: str) -> str:
    """``page`` with each body cell of each table with a header row labelled (``data-label``) by its column's
    header, and the table marked :data:`STACKS`."""
    return _TABLE.sub(_label_table, page)
