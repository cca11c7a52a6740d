"""`cladebench results` given a run (its folder or its run.json), or a folder inside a suite, says what it was
given and where to go, in one line: a run's page is `report`'s, a suite's table is read from the suite folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cli import main
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results-run")
    dataset = write_toy_dataset(root / "toy.lance")
    out = root / "suite" / "runs" / "toy" / "emb-toy"
    assert main(["eval", "fewshot", str(dataset), "--column", "emb_toy", "--out", str(out), "--shots", "1"]) == 0
    return out


def _one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    return code, err[0]


@pytest.mark.parametrize("given", ["folder", "run.json"])
def test_a_run_is_said_to_be_a_run_and_report_is_named(run_folder: Path, given: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = run_folder if given == "folder" else run_folder / "run.json"
    code, line = _one_line(["results", str(path)], capsys)
    assert code == 1 and "is a run, not a suite folder" in line, line
    assert f"cladebench report {run_folder} --out-file" in line and "suite --out" not in line


def test_a_folder_inside_a_suite_names_the_suite(run_folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = run_folder.parents[2]
    (suite / "results.parquet").write_bytes(b"")  # only its presence marks the suite folder here
    try:
        code, line = _one_line(["results", str(suite / "runs")], capsys)
        assert code == 1 and f"is inside the suite folder {suite.resolve()}" in line, line
        code, line = _one_line(["results", str(run_folder)], capsys)
        assert code == 1 and "is a run" in line and f"the suite folder holding it is {suite.resolve()}" in line
    finally:
        (suite / "results.parquet").unlink()
