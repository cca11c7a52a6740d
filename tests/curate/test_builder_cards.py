"""The builders' dataset cards write their tables and value counts with one pair of helpers
(:mod:`cladebench.curate.builders.cards`), so every card formats its numbers alike."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from cladebench.curate.builders import BUILDERS
from cladebench.curate.builders.cards import counts, markdown_table


def test_markdown_table_separates_thousands_and_keeps_other_values_as_text() -> None:
    table = markdown_table(["reason", "rows", "share"], [("filter:class", 4601, "12.5%"), ("bad_date", 7, "–")])
    assert table.splitlines() == ["| reason | rows | share |", "|---|---|---|", "| filter:class | 4,601 | 12.5% |",
                                  "| bad_date | 7 | – |"]


def test_counts_put_the_most_frequent_first_and_break_ties_by_value() -> None:
    assert list(counts(["Plantae|Fungi", "Animalia|Plantae", "Plantae|Fungi", "Aves"]).items()) == [
        ("Plantae|Fungi", 2), ("Animalia|Plantae", 1), ("Aves", 1)]
    assert counts([2, 10, 10]) == {"10": 2, "2": 1}  # keys as text, as the cards and build.json show them


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_card_uses_the_shared_helpers(name: str) -> None:
    package = importlib.import_module(BUILDERS[name].module.rpartition(".")[0])  # the builder's package
    path = Path(package.__file__).parent / "card.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and ("table" in n.name or "count" in n.name)]
    assert not own, f"{name}'s card writes its own tables or counts: {own}"
    imported = {a.name for n in tree.body if isinstance(n, ast.ImportFrom)
                and n.module == "cladebench.curate.builders.cards" for a in n.names}
    assert "markdown_table" in imported
