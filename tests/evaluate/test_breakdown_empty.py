"""A ``--breakdown`` column that gives no value on any selected row (all null, or only empty lists) is refused in
one line before any model loads: a run without the breakdown it was asked for would say nothing of it."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_toy_dataset(tmp_path_factory.mktemp("breakdown") / "toy.lance")
    table = lance.dataset(str(path)).to_table()
    n = table.num_rows
    table = (table.append_column("habitat", pa.array([None] * n, pa.string()))
             .append_column("lookalikes", pa.array([[] for _ in range(n)], pa.list_(pa.string())))
             .append_column("region", pa.array(["north" if i < 6 else None for i in range(n)], pa.string())))
    lance.write_dataset(table, str(path), mode="overwrite")
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, [line for line in captured.err.splitlines() if line.strip()], captured.out


@pytest.mark.parametrize("column", ["habitat", "lookalikes"])
def test_a_breakdown_without_any_value_is_refused_before_the_run(dataset: Path, column: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, err, _ = _run(["eval", "fewshot", str(dataset), "--column", "emb_toy", "--out", str(tmp_path / "run"),
                         "--shots", "1", "--breakdown", column], capsys)
    assert code == 2 and len(err) == 1, err
    assert f"--breakdown {column!r}: no row of the 12 selected has a value" in err[0]
    assert not (tmp_path / "run").exists()


def test_a_breakdown_with_values_only_outside_the_filter_is_refused(dataset: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, err, _ = _run(["eval", "fewshot", str(dataset), "--column", "emb_toy", "--out", str(tmp_path / "run"),
                         "--shots", "1", "--breakdown", "region", "--where", "uuid >= 'u06'"], capsys)
    assert code == 2 and len(err) == 1 and "no row of the 6 selected" in err[0], err


def test_a_breakdown_with_some_values_runs(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err, _ = _run(["eval", "fewshot", str(dataset), "--column", "emb_toy", "--out", str(tmp_path / "run"),
                         "--shots", "1", "--breakdown", "region", "--group-by", "none"], capsys)
    assert code == 0, err
    record = RunRecord.read(tmp_path / "run" / "run.json")
    assert any(name.startswith("region=north/") for name in record.metrics), sorted(record.metrics)
