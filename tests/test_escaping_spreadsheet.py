"""A value from data exported as CSV is text in a spreadsheet: a taxon or label written as a formula is never
run (OWASP's CSV injection), and an ordinary name is left as it is."""

from __future__ import annotations

import pytest

from cladebench.escaping import spreadsheet_cell


@pytest.mark.parametrize(("value", "cell"), [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
    ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"), ("\r=1", "'\r=1"),
    ("Turdus merula", "Turdus merula"), ("", ""), (None, ""), ("a=b", "a=b"),
])
def test_a_cell_that_would_start_a_formula_is_text(value: object, cell: str) -> None:
    assert spreadsheet_cell(value) == cell
