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


def test_values_from_data_are_literal_text_and_the_cards_own_markdown_is_kept() -> None:
    table = markdown_table(["label", "file"], [("[x](javascript:alert(1)) **b** `c`", "`rows.csv`")], literal=(0,))
    assert table.splitlines()[2] == r"| \[x\](javascript:alert(1)) \*\*b\*\* \`c\` | `rows.csv` |"


def test_a_label_from_a_folder_name_cannot_put_a_link_in_the_card(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main
    from helpers.images import picture
    from helpers.own_images import write_small_backbone

    label = "[x](javascript:alert(1)) **b** `c`"
    (tmp_path / "photos" / label).mkdir(parents=True)
    (tmp_path / "photos" / label / "0.jpg").write_bytes(picture(0))
    backbone = write_small_backbone(tmp_path / "backbone.parquet")
    out = tmp_path / "out"
    assert main(["load", "images", str(tmp_path / "photos"), "--taxonomy", str(backbone), "--out", str(out),
                 "--quiet"]) == 0, capsys.readouterr().err
    card = (out / "README.md").read_text(encoding="utf-8")
    assert r"\[x\](javascript:alert(1)) \*\*b\*\* \`c\`" in card and "[x](javascript" not in card
