"""`cladebench results` on a table that holds an older run of a benchmark, model and protocol (data since changed,
another revision): every row says whether it is current, a superseded row says by which run and why, and CSV and
JSON leave superseded rows out unless asked (`--superseded`)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from cladebench.cli import main
from cladebench.evaluate.suite.results import SCHEMA, update_results


def _row(key: str, when: str, revision: str, value: float, metric: str = "top1") -> dict:
    row = {name: None for name in SCHEMA.names}
    row.update(benchmark="crypticbio-common", task="zeroshot", protocol="zeroshot · sci", settings="{}",
               model="bioclip", model_id="hf-hub:imageomics/bioclip", revision=revision, metric=metric, value=value,
               n=100, label="bioclip", run=f"runs/c/{key}/run.json", key=key, status="finished", recorded_at=when)
    return row


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    update_results(tmp_path, ["old"], [_row("old", "2026-01-01T00:00:00", "r1", 0.30),
                                       _row("old", "2026-01-01T00:00:00", "r1", 0.50, "top5")])
    update_results(tmp_path, ["new"], [_row("new", "2026-02-01T00:00:00", "r1", 0.40)])
    update_results(tmp_path, ["rev"], [_row("rev", "2026-03-01T00:00:00", "r2", 0.45)])
    return tmp_path


def test_csv_and_json_give_only_current_rows_unless_asked(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", str(folder), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["key"], r["current"], r["superseded"]) for r in rows] == [("rev", True, None)]
    assert main(["results", str(folder), "--format", "csv", "--superseded"]) == 0
    parsed = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    state = {(r["key"], r["metric"]): (r["current"], r["superseded"]) for r in parsed}
    assert state[("rev", "top1")] == ("True", "")
    assert state[("new", "top1")][0] == "False" and "by the run runs/c/rev/run.json" in state[("new", "top1")][1]
    assert "the model changed (hf-hub:imageomics/bioclip@r1 -> hf-hub:imageomics/bioclip@r2)" in state[
        ("new", "top1")][1]
    # an older run's metric the newer run lacks is superseded too: the run, not the metric, is replaced
    assert state[("old", "top5")][0] == "False"


def test_the_stored_table_marks_each_row(folder: Path) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(folder / "results.parquet")
    assert sorted(zip(table.column("key").to_pylist(), table.column("current").to_pylist(), strict=True)) == [
        ("new", False), ("old", False), ("old", False), ("rev", True)]
    reasons = [r for r, k in zip(table.column("superseded").to_pylist(), table.column("key").to_pylist(),
                                 strict=True) if k == "old"]
    assert len(reasons) == 2 and all("by the run runs/c/rev/run.json" in r for r in reasons), reasons


def test_a_run_on_the_same_model_and_settings_is_replaced_by_a_change_of_data_or_files(tmp_path: Path,
                                                                                     capsys) -> None:
    update_results(tmp_path, ["a"], [_row("a", "2026-01-01T00:00:00", "r1", 0.30)])
    update_results(tmp_path, ["b"], [_row("b", "2026-02-01T00:00:00", "r1", 0.40)])
    assert main(["results", str(tmp_path), "--view", "rows"]) == 0
    text = capsys.readouterr().out
    assert "| yes |" not in text  # no record is there: both rows are unverified, shown apart
    assert main(["results", str(tmp_path), "--format", "json", "--superseded"]) == 0
    old = next(r for r in json.loads(capsys.readouterr().out) if r["key"] == "a")
    assert old["current"] is False and old["superseded"].endswith(
        "the data, the model's files or the metric definitions changed")
