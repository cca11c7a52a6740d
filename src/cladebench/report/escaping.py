"""Escaping of strings from data (taxon names, attributions, queries, model ids, paths) for each output format.

HTML is escaped by jinja2's autoescape. Markdown has no autoescape, so :func:`markdown_escape` is
installed as the Markdown environment's ``finalize``: every ``{{ value }}`` of a Markdown template is
escaped unless it is :class:`markupsafe.Markup` (numbers formatted by :mod:`.formatting`, fragments
already rendered). Angle brackets and ampersands become entities rather than backslash escapes because
every Markdown renderer (CommonMark, GitHub, pandoc, Python-Markdown) decodes entities, while some
pass ``\\<script>`` through as raw HTML. Pipes, backticks, emphasis and link brackets get backslashes,
and line breaks become spaces, so a value stays inside its table cell and cannot open a link or a code span.

Example:
    >>> print(markdown_escape("Peromyscus | <i>maniculatus</i> [link](x)"))
    Peromyscus \\| &lt;i&gt;maniculatus&lt;/i&gt; \\[link\\](x)
"""

from __future__ import annotations

import re

from markupsafe import Markup

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKSLASHED = re.compile(r"([\\`*_\[\]|~])")
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def markdown_escape(text: object) -> str:
    """``text`` as literal Markdown inline text, safe inside a table cell."""
    text = _LINE_BREAKS.sub(" ", str(text))
    text = "".join(_ENTITIES.get(char, char) for char in text)
    return _BACKSLASHED.sub(r"\\\1", text)


def markdown_finalize(value: object) -> object:
    """jinja2 ``finalize`` for Markdown templates: escape every value that is not already safe Markdown."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return markdown_escape(value)
