"""The one Markdown escaper, for every string that lands in Markdown: report pages, dataset cards, the
``results`` table. HTML has one escaper too, markupsafe's (jinja2's autoescape, and ``markupsafe.escape`` where
a fragment is built by hand in :mod:`cladebench.report`).

One rule, at two depths. Every string loses its line breaks (spaces instead, so a value stays on its row) and its
``<``, ``>`` and ``&`` (entities, because every Markdown renderer, CommonMark, GitHub, pandoc, Python-Markdown,
decodes entities, while some pass ``\\<script>`` through as raw HTML), and gets a backslash before each backslash
and pipe (so it cannot end its table cell). That is :func:`markdown_cell`: Markdown text (a card's cell may hold
a code span on purpose) kept inside its cell. :func:`markdown_escape` is for a value from data shown as literal
text: it also backslashes backticks, emphasis, strike-through and link brackets, so it cannot open a link or a
code span. It sits in the foundation so that the builders' cards and the suite's table, below the report, escape
by the same rule. LaTeX (the tables of ``cladebench results --format latex``) is escaped by :func:`latex_escape`,
character by character, for the same reason: no value from data may become a command.

Example:
    >>> print(markdown_escape("Peromyscus | <i>maniculatus</i> [link](x)"))
    Peromyscus \\| &lt;i&gt;maniculatus&lt;/i&gt; \\[link\\](x)
    >>> print(markdown_cell("`rows.csv` | <b>\\n2"))
    `rows.csv` \\| &lt;b&gt; 2
"""

from __future__ import annotations

import re

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_LINE_BREAKS = re.compile(r"\s*(?:\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029])+\s*")
"""Every line break ``str.splitlines`` knows, with the spaces around it."""
_IN_A_CELL = re.compile(r"([\\|])")
_INLINE = re.compile(r"([\\`*_\[\]|~])")


def _escaped(text: object, backslashed: re.Pattern[str]) -> str:
    text = _LINE_BREAKS.sub(" ", "" if text is None else str(text))
    text = "".join(_ENTITIES.get(char, char) for char in text)
    return backslashed.sub(r"\\\1", text)


def markdown_cell(text: object) -> str:
    """Markdown text as one table cell, its own code spans and emphasis kept (``None`` is an empty cell)."""
    return _escaped(text, _IN_A_CELL)


def markdown_escape(text: object) -> str:
    """A value as literal Markdown inline text, safe inside a table cell (``None`` is an empty cell)."""
    return _escaped(text, _INLINE)


_LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#",
          "$": r"\$", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
          ">": r"\textgreater{}", "|": r"\textbar{}"}
_LATEX_SPECIAL = re.compile(r"[\\{}_%&#$~^<>|]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def latex_escape(text: object) -> str:
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


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP's list for CSV injection)."""


def spreadsheet_cell(text: object) -> str:
    """A value from data as a CSV cell a spreadsheet shows as text: one that would start a formula (a taxon named
    ``=HYPERLINK(...)``) gets a leading apostrophe, as OWASP advises; numbers are written by their callers, unquoted.

    Example:
        >>> spreadsheet_cell("=1+1"), spreadsheet_cell("Turdus merula")
        ("'=1+1", 'Turdus merula')
    """
    text = "" if text is None else str(text)
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


__all__ = ["latex_escape", "latex_key", "markdown_cell", "markdown_escape", "spreadsheet_cell"]
