"""SQL text for Lance filters: a column name as an identifier, a value as a literal, and the one check every
user's ``--where`` passes, so that no caller quotes by hand.
"""

from __future__ import annotations

import re

from cladebench.errors import SchemaError, UsageError

_QUOTES = "'\"`"


def sql_identifier(column: str) -> str:
    """``column`` as Lance's SQL filters take it: as it is when it is a plain identifier, else in backticks. A
    name with a backtick cannot be written in a filter at all (columns ``embed`` makes never need quoting)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", column):
        return column
    if "`" in column:
        raise SchemaError(f"column {column!r}: a name with a backtick cannot be used in a filter; rename the column")
    return f"`{column}`"


def sql_literal(value: object) -> str:
    """``value`` as a SQL string literal: in single quotes, each ``'`` doubled (standard SQL, as Lance's filters
    and DuckDB take it), so that a name like ``d'Orbigny`` stays one value.

    Example:
        >>> sql_literal("d'Orbigny")
        "'d''Orbigny'"
    """
    return "'" + str(value).replace("'", "''") + "'"


def check_filter(where: object, *, option: str = "--where") -> str | None:
    """The SQL filter to hand to Lance, or None for none (``None`` or blank); anything else is a :class:`UsageError`.

    A filter is one SQL expression. Lance's parser stops at a ``;`` and silently ignores the rest, so
    ``"1=1; DROP TABLE x"`` would select every row: a ``;`` outside a quoted literal or identifier is
    refused rather than dropped. Comments (``--`` to the line's end, ``/* */``) are skipped as the parser skips
    them, so a quote inside one cannot hide a ``;`` after it. Every reader of a user's filter (:func:`read`,
    :func:`subset`, :func:`fingerprint`, search) goes through this one check.

    Example:
        >>> check_filter("name = 'a;b'")
        "name = 'a;b'"
        >>> check_filter("1=1; DROP TABLE x")
        Traceback (most recent call last):
        ...
        cladebench.errors.UsageError: --where '1=1; DROP TABLE x': a filter is one SQL expression; ';' ends it ...
    """
    if where is None:
        return None
    if not isinstance(where, str):
        raise UsageError(f"{option} must be a SQL filter string, got {type(where).__name__}")
    if not where.strip():
        return None
    quote: str | None = None
    i = 0
    while i < len(where):
        char = where[i]
        if quote is not None:
            if char == quote:  # a doubled quote ('it''s') closes and reopens: the state comes out right
                quote = None
        elif char in _QUOTES:
            quote = char
        elif where.startswith("--", i):  # a comment runs to the line's end: a quote inside it opens nothing
            end = where.find("\n", i)
            i = len(where) if end < 0 else end
            continue
        elif where.startswith("/*", i):
            end = where.find("*/", i + 2)
            i = len(where) if end < 0 else end + 2
            continue
        elif char == ";":
            raise UsageError(f"{option} {where!r}: a filter is one SQL expression; ';' ends it "
                             "(quote a ';' that belongs to a value: 'a;b')")
        i += 1
    return where
