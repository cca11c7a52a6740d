"""``cladebench benchmarks`` with ``CLADEBENCH_MIRROR`` holding extra, misspelt or misplaced entries, or naming no
folder: the table still lists every benchmark, and stderr says what will not be read as a mirror (a misspelt
mirror would otherwise be passed over silently for the published source)."""

from __future__ import annotations

import json

from cladebench.benchmarks import BENCHMARKS
from cladebench.cli import main


def test_misspelt_and_misplaced_mirror_entries_are_named(tmp_path, capsys, monkeypatch):
    (tmp_path / "inat-coobserved").mkdir()
    (tmp_path / "Fine-Grained-Challenges").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "inquire-rerank").write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv("CLADEBENCH_MIRROR", str(tmp_path))
    assert main(["benchmarks", "--json"]) == 0
    captured = capsys.readouterr()
    rows = {row["name"]: row for row in json.loads(captured.out)}
    assert set(rows) == set(BENCHMARKS)
    assert rows["inat-coobserved"]["here"].startswith("mirrored")
    notes = captured.err.splitlines()
    assert any("Fine-Grained-Challenges names no benchmark (did you mean fine-grained-challenges?)" in n
               for n in notes)
    assert any("folder notes names no benchmark" in n for n in notes)
    assert any("inquire-rerank is a file, not a mirror folder" in n for n in notes)
    assert len(notes) == 3


def test_a_mirror_root_that_is_no_folder_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_MIRROR", str(tmp_path / "missing"))
    assert main(["benchmarks"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip().endswith("no such folder; every benchmark is read from its published source")
    assert all(name in captured.out for name in BENCHMARKS)
