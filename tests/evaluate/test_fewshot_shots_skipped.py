"""Few-shot on a small dataset: each shot count the data allows runs; one it does not is skipped, said on the
console and kept in the record (its metrics without a value, with the reason); only a run where no shot count fits
fails, and its one line says which ``--shots`` would run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.verify import read_checked
from helpers.planted_embeddings import write_planted_dataset

ARGS = ("--column", "emb_planted", "--repetitions", "2", "--methods", "simpleshot")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six species of 7 observations with 1-3 photos each: 20 shots fit none of them, 1 shot all."""
    path = tmp_path_factory.mktemp("small") / "small.lance"
    write_planted_dataset(path)
    return path


def test_a_shot_count_the_data_does_not_allow_is_skipped_and_the_others_run(small, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", "fewshot", str(small), "--out", str(out), "--shots", "1", "20", *ARGS]) == 0
    err = capsys.readouterr().err
    assert "[eval] 20-shot skipped: 0 of 7 classes have enough images for 20 shots (2 needed)" in err
    record = json.loads((out / "run.json").read_text())
    assert record["metrics"]["simpleshot_1shot"]["value"] > 0.5
    for name in ("simpleshot_20shot", "simpleshot_20shot_balanced"):
        gap = record["metrics"][name]
        assert gap["value"] is None and gap["n"] == 0 and gap["reason"].startswith("20-shot skipped: 0 of 7")
    assert record["provenance"]["task"]["shots_skipped"] == [
        {"shots": 20, "reason": "0 of 7 classes have enough images for 20 shots (2 needed)"}]
    assert record["provenance"]["split"]["shots"] == [1]
    # The record is what its predictions give, so report and compare read it.
    table, problem = read_checked(out / "run.json", RunRecord.read_given(out / "run.json"))
    assert problem is None and table is not None
    report = tmp_path / "report.md"
    assert main(["report", str(out), "--out-file", str(report), "--format", "md", "--max-gallery", "0"]) == 0
    assert "20-shot skipped" in report.read_text()


def test_a_run_no_shot_count_fits_fails_saying_which_shots_would_run(small, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["eval", "fewshot", str(small), "--out", str(out), "--shots", "20", "30", *ARGS]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "few-shot needs at least 2 classes" in err[0]
    most = int(err[0].rsplit("--shots 1 ", 1)[1].split()[0])
    assert err[0].endswith(f"--shots 1 {most} would run") and 1 < most < 20
    assert not (out / "run.json").exists()
    # and it does run
    assert main(["eval", "fewshot", str(small), "--out", str(out), "--shots", "1", str(most), *ARGS]) == 0
    assert "skipped" not in capsys.readouterr().err
    assert main(["eval", "fewshot", str(small), "--out", str(tmp_path / "more"), "--shots", str(most + 1),
                 *ARGS]) == 1
