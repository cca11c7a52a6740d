"""Escaping of strings from data (taxon names, attributions, queries, model ids, paths) for each output format.

HTML is escaped by jinja2's autoescape. Markdown has no autoescape, so :func:`markdown_escape` is
installed as the Markdown environment's ``finalize``: every ``{{ value }}`` of a Markdown template is
escaped unless it is :class:`markupsafe.Markup` (numbers formatted by :mod:`.formatting`, fragments
already rendered). Angle brackets and ampersands become entities rather than backslash escapes because
every Markdown renderer (CommonMark, GitHub, pandoc, Python-Markdown) decodes entities, while some
pass ``\\<script>`` through as raw HTML. Pipes, backticks, emphasis and link brackets get backslashes,
and line breaks become spaces, so a value stays inside its table cell and cannot open a link or a code span.
LaTeX (the tables of ``cladebench results --format latex``) is escaped by :func:`latex_escape`, character by
character, for the same reason: no value from data may become a command.

Example:
    >>> print(markdown_escape("Peromyscus | <i>maniculatus</i> [link](x)"))
    Peromyscus \\| &lt;i&gt;maniculatus&lt;/i&gt; \\[link\\](x)
"""

from __future__ import annotations

import re
from typing import Any

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKSLASHED = re.compile(r"([\\`*_\[\]|~])")
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def markdown_escape(text: Any) -> str:
    """``text`` as literal Markdown inline text, safe inside a table cell."""
    text = _LINE_BREAKS.sub(" ", str(text))
    text = "".join(_ENTITIES.get(char, char) for char in text)
    return _BACKSLASHED.sub(r"\\\1", text)


def markdown_finalize(value: Any) -> Any:
    """jinja2 ``finalize`` for Markdown templates: escape every value that is not already safe Markdown."""
    from markupsafe import Markup  # jinja2's, the report extra's: LaTeX and Markdown escaping need neither

    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return markdown_escape(value)


_LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#",
          "$": r"\$", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
          ">": r"\textgreater{}", "|": r"\textbar{}"}
_LATEX_SPECIAL = re.compile(r"[\\{}_%&#$~^<>|]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def latex_escape(text: Any) -> str:
    r"""``text`` as literal LaTeX text, safe inside a ``tabular`` cell or a caption: the ten characters TeX gives a
    meaning to (and ``< > |``, which the default font encoding prints as other glyphs) become their text commands,
    line breaks become spaces (a blank line would end the paragraph mid-cell) and other control characters are
    dropped (pdflatex refuses them).

    Example:
        >>> print(latex_escape("50% of A&B_c {x} ~ ^ \\ $1 #2\nnext"))
        50\% of A\&B\_c \{x\} \textasciitilde{} \textasciicircum{} \textbackslash{} \$1 \#2 next
    """
    text = _CONTROL.sub("", _LINE_BREAKS.sub(" ", str(text)))
    return _LATEX_SPECIAL.sub(lambda match: _LATEX[match.group()], text)


_LATEX_KEY = re.compile(r"[A-Za-z0-9:._/+-]+")


def latex_key(text: str) -> str:
    """``text`` as a ``\\label`` or ``\\ref`` key, which TeX reads as a name, not as text (an escaped character
    there is an error): letters, digits and ``: . _ / + -`` only, else a :class:`~cladebench.errors.UsageError`.

    Example:
        >>> latex_key("tab:results_2")
        'tab:results_2'
    """
    if not _LATEX_KEY.fullmatch(text):
        from cladebench.errors import UsageError

        raise UsageError(f"--label {text!r}: a LaTeX label may hold letters, digits and : . _ / + - only")
    return text
