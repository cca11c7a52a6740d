"""Escaping in the report's templates: HTML by jinja2's autoescape (markupsafe), Markdown by
:func:`cladebench.escaping.markdown_escape`, installed as the Markdown environment's ``finalize``: every
``{{ value }}`` of a Markdown template is escaped unless it is :class:`markupsafe.Markup` (numbers formatted by
:mod:`.formatting`, fragments already rendered).

Example:
    >>> print(markdown_finalize("a | b"), markdown_finalize(None) == "")
    a \\| b True
"""

from __future__ import annotations

from markupsafe import Markup

from cladebench.escaping import markdown_escape


def markdown_finalize(value: object) -> object:
    """jinja2 ``finalize`` for Markdown templates: escape every value that is not already safe Markdown."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return markdown_escape(value)
