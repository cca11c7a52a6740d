"""`cladebench reviews DATASET`: the expert reviews exported as CSV (stdout or a file) or Parquet, every review,
the agreed rows or the disputed ones; a missing dataset and a Parquet export without --out-file are one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench.cli import main
from cladebench.cli.reviews import as_text_cell
from cladebench.store.reviews import Review, append_review, reviews_path
from cladebench.taxonomy import Lineage, Rank
from helpers.toy_dataset import write_toy_dataset

SP0 = Lineage.from_names(None, None, None, None, None, "Genus", "Genus sp0")


def _reviewed(tmp_path: Path) -> Path:
    dataset = write_toy_dataset(tmp_path / "toy.lance")
    path = reviews_path(str(dataset))
    append_review(path, Review(uuid="u00", lineage=SP0, rank=Rank.SPECIES, reviewer="ana",
                               note='a "quoted", <b>note</b>', suggestions=("Genus sp0", "Genus sp1"),
                               dataset_version=1))
    append_review(path, Review(uuid="u00", lineage=SP0, rank=Rank.GENUS, reviewer="ben"))
    append_review(path, Review(uuid="u01", lineage=None, rank=None, reviewer="ana", confidence="high"))
    return dataset


def test_csv_to_stdout_holds_every_review(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _reviewed(tmp_path)
    assert main(["reviews", str(dataset)]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert [(r["uuid"], r["reviewer"], r["taxon"], r["rank"]) for r in rows] == [
        ("u00", "ana", "Genus sp0", "species"), ("u00", "ben", "Genus", "genus"), ("u01", "ana", "", "")]
    assert rows[0]["note"] == 'a "quoted", <b>note</b>'
    assert json.loads(rows[0]["suggestions"]) == ["Genus sp0", "Genus sp1"]
    assert rows[2]["not_identifiable"] == "true" and rows[2]["confidence"] == "high"
    assert "3 reviews of 2 rows by 2 reviewers; 1 rows agreed, 1 disputed" in captured.err


def test_views_and_parquet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _reviewed(tmp_path)
    out = tmp_path / "disputed.parquet"
    assert main(["reviews", str(dataset), "--format", "parquet", "--out-file", str(out),
                 "--view", "disagreements"]) == 0
    table = pq.read_table(out)
    assert [(r["uuid"], r["reviewer"], r["rank"]) for r in table.to_pylist()] == [
        ("u00", "ana", "species"), ("u00", "ben", "genus")]
    assert table.column("suggestions").to_pylist()[0] == ["Genus sp0", "Genus sp1"]
    assert "written to" in capsys.readouterr().out
    agreed = tmp_path / "agreed.csv"
    assert main(["reviews", str(dataset), "--out-file", str(agreed), "--view", "agreed"]) == 0
    assert [r["uuid"] for r in csv.DictReader(agreed.open())] == ["u01"]


def test_a_dataset_without_reviews_exports_a_header_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write_toy_dataset(tmp_path / "toy.lance")
    assert main(["reviews", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith('"review_id","uuid","taxon"') and len(out.splitlines()) == 1
    assert not reviews_path(str(dataset)).exists()  # reading never creates the table


def test_user_mistakes_are_one_line_with_their_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reviews", str(tmp_path / "missing.lance")]) == 3
    dataset = write_toy_dataset(tmp_path / "toy.lance")
    assert main(["reviews", str(dataset), "--format", "parquet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "needs --out-file" in err[1]
    with pytest.raises(SystemExit) as exited:  # argparse's choice check exits from the parser
        main(["reviews", str(dataset), "--view", "some"])
    assert exited.value.code == 2 and "known: agreed, all, disagreements" in capsys.readouterr().err



FORMULAS = ("=HYPERLINK(\"http://evil.example\",\"x\")", "+1+1", "-2+3", "@SUM(1)")
"""Notes a spreadsheet would run as formulas."""


def test_a_cell_a_spreadsheet_would_run_as_a_formula_is_exported_as_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write_toy_dataset(tmp_path / "toy.lance")
    path = reviews_path(str(dataset))
    for i, note in enumerate(FORMULAS):
        append_review(path, Review(uuid=f"u0{i}", lineage=None, rank=None, reviewer="=cmd|' /C calc'!A0", note=note))
    for note in ("fine - really", "- and why"):
        append_review(path, Review(uuid="u04", lineage=SP0, rank=Rank.SPECIES, reviewer="ana", note=note))
    # A tab or a carriage return first is on OWASP's list too; no review reaches the export with one (uuids refuse
    # control characters, notes and names are stripped), so the rule is checked on the cell writer itself.
    assert as_text_cell("\tu4") == "'\tu4" and as_text_cell("\ru5") == "'\ru5" and as_text_cell(None) is None
    assert main(["reviews", str(dataset)]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    # OWASP's CSV-injection rule: a cell starting with = + - @ tab or CR is written with a leading ', the rest kept
    assert [r["note"] for r in rows] == [*("'" + n for n in FORMULAS), "fine - really", "'- and why"]
    assert [r["reviewer"] for r in rows] == ["'=cmd|' /C calc'!A0"] * 4 + ["ana", "ana"]
    assert [r["uuid"] for r in rows] == ["u00", "u01", "u02", "u03", "u04", "u04"]
    assert rows[4]["taxon"] == "Genus sp0" and rows[0]["not_identifiable"] == "true"  # other cells as they were
    out = tmp_path / "reviews.csv"
    assert main(["reviews", str(dataset), "--out-file", str(out)]) == 0
    assert next(csv.DictReader(out.open(encoding="utf-8", newline="")))["note"] == "'" + FORMULAS[0]
    parquet = tmp_path / "reviews.parquet"  # Parquet holds data, not formulas: kept as written
    assert main(["reviews", str(dataset), "--format", "parquet", "--out-file", str(parquet)]) == 0
    assert pq.read_table(parquet).column("note")[0].as_py() == FORMULAS[0]
