"""compare's text as a person reads it: columns that stay aligned under long per-group metric names, and a label
read from a record that was edited by hand printed on one line with no terminal escape sequences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    toy = write_toy_dataset(tmp_path / "toy.lance")
    for k in ("1", "3"):
        assert main(["eval", "fewshot", str(toy), "--column", "emb_toy", "--out", str(tmp_path / k), "--group-by",
                     "challenge_group", "--shots", "1", "--methods", "knn", "--repetitions", "2", "--group-key",
                     "uuid", "--knn-k", k]) == 0
    return tmp_path / "1", tmp_path / "3"


def test_columns_stay_aligned_under_long_group_metric_names(two_runs: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compare", *map(str, two_runs), "--resamples", "50"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("metric "))
    column = header.index("run")
    table = lines[lines.index(header) + 1:]
    table = table[:table.index("")] if "" in table else table  # the verdict follows the table
    rows = [line for line in table if "[0]" in line or "[1]" in line]
    assert any(len(line.split()[0]) > 16 for line in rows)  # e.g. mammals/knn_1shot_balanced
    assert rows and all(line[column - 1:column + 3].strip() in ("[0]", "[1]") for line in rows)


def test_a_hand_edited_label_prints_on_one_line_without_escapes(two_runs: tuple[Path, Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    first, second = two_runs
    record = json.loads((second / "run.json").read_text())
    record["label"] = "evil\x1b[2J\nsecond line\t| x"
    (second / "run.json").write_text(json.dumps(record))
    assert RunRecord.read(second).label == "evil [2J second line | x"
    capsys.readouterr()
    assert main(["compare", str(first), str(second), "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "  [1] evil [2J second line | x  " in out
