"""Challenge groups are separate few-shot problems in `compare-columns` as in `eval`, never pooled unless asked
(`--group-by none`), and a grouped few-shot run's top-level split describes every group, not the first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_toy_dataset(tmp_path_factory.mktemp("groups") / "toy.lance")


def test_compare_columns_scores_each_group_apart(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare-columns", str(toy), "--shots", "1", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["group_column"] == "challenge_group" and result["groups"] == {"birds": 6, "mammals": 6}
    assert sorted(result["accuracy"]["emb_toy"]) == [
        f"{g}/simpleshot_1shot{b}" for g in ("birds", "mammals") for b in ("", "_balanced")]
    assert sorted(result["split"]["groups"]) == ["birds", "mammals"]
    assert main(["compare-columns", str(toy), "--shots", "1"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in text if line.startswith("challenge_group = ")] == [
        "challenge_group = birds", "challenge_group = mammals"]


def test_compare_columns_pools_only_when_asked(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare-columns", str(toy), "--shots", "1", "--group-by", "none", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["group_column"] is None and sorted(result["accuracy"]["emb_toy"]) == [
        "simpleshot_1shot", "simpleshot_1shot_balanced"]


def test_a_grouped_few_shot_run_s_split_describes_every_group(toy: Path, tmp_path: Path) -> None:
    assert main(["eval", "fewshot", str(toy), "--column", "emb_toy", "--out", str(tmp_path / "run"),
                 "--shots", "1"]) == 0
    provenance = RunRecord.read(tmp_path / "run" / "run.json").provenance
    split, by_group = provenance["split"], provenance["split_by_group"]
    assert split["groups"] == sorted(by_group) == ["birds", "mammals"]
    assert split["fingerprint"] not in {s["fingerprint"] for s in by_group.values()}
    assert "classes" not in split and split["seed"] == 0 and split["shots"] == [1]
