"""``cladebench results DIR`` with hostile strings in the table (labels, model names, reasons): the Markdown table
keeps one cell per column on one line per row (a backslash before a pipe cannot end a cell, no carriage return
survives), shows markup as text, and CSV and JSON give every value back as stored."""

from __future__ import annotations

import csv
import io
import json

from cladebench.cli import main
from cladebench.evaluate.suite.results import SCHEMA, format_results, read_results, update_results

LABEL = 'ends in a backslash \\|=HYPERLINK("x")\r\nnext line'
MODEL = "m`|`<script>alert(1)</script>&amp;"


def _table(root):
    row = {name: None for name in SCHEMA.names}
    row.update(benchmark="b|x", task="t", protocol="p\nq", model=MODEL, key="k1", status="finished",
               metric="top1_species", value=0.5, low=0.4, high=0.6, n=10, label=LABEL, run="runs/a|b/run.json")
    skipped = dict(row, key="k2", status="skipped", reason="too | few\\", metric=None, value=None, low=None,
                   high=None, n=None, label=None, run=None)
    update_results(root, ["k1", "k2"], [row, skipped])


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells, as a GFM reader splits them (an unescaped pipe ends a cell)."""
    cells, current, escaped = [], "", False
    for char in line.strip()[1:-1]:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            current += char
            escaped = True
        elif char == "|":
            cells.append(current)
            current = ""
        else:
            current += char
    return [*cells, current]


def test_markdown_keeps_hostile_strings_inside_their_cells(tmp_path, capsys):
    _table(tmp_path)
    out = format_results(read_results(tmp_path), "md")  # the table as written (its runs have no records here)
    assert "\r" not in out and "<script>" not in out
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    header, finished, skipped_header, skipped = lines
    assert len(_cells(finished)) == len(_cells(header)) == 10
    assert len(_cells(skipped)) == len(_cells(skipped_header)) == 4
    label = _cells(finished)[7].strip()
    assert label == 'ends in a backslash \\\\\\|=HYPERLINK("x") next line'
    assert "&lt;script&gt;" in _cells(finished)[2] and "&amp;amp;" in _cells(finished)[2]


def test_csv_and_json_give_every_value_back_as_stored(tmp_path, capsys):
    _table(tmp_path)
    assert main(["results", str(tmp_path), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["key"]: (r["label"], r["model"]) for r in rows}["k1"] == (LABEL, MODEL)
    assert main(["results", str(tmp_path), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["key"]: r for r in rows}["k1"]["label"] == LABEL
    assert {r["key"]: r for r in rows}["k2"]["reason"] == "too | few\\"
