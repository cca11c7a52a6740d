"""`compare-columns --where` that selects nothing says so, in one line, rather than blaming the vectors; a filter
on a column the dataset lacks is a usage error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cli import main
from helpers.toy_dataset import write_toy_dataset


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    return code, err[0]


def test_a_filter_matching_no_row_is_said_to_match_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_toy_dataset(tmp_path / "toy.lance")
    code, line = _one_line(["compare-columns", str(path), "--where", "challenge_group = 'fish'"], capsys)
    assert code == 1 and "the filter \"challenge_group = 'fish'\" matches no row of" in line, line
    assert "vector" not in line


def test_a_filter_on_a_missing_column_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_toy_dataset(tmp_path / "toy.lance")
    code, line = _one_line(["compare-columns", str(path), "--where", "habitat = 'sea'"], capsys)
    assert code == 2 and "no column 'habitat'" in line, line
