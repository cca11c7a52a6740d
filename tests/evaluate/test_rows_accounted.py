"""Every selected row is accounted for: evaluated, or left out with its reason on the console and in the record;
a uuid on two rows (a dataset written by another tool) is refused, never counted twice."""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa
import pytest

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from helpers.toy_dataset import write_toy_dataset


def _rewritten(tmp_path: Path, change) -> Path:
    """The toy dataset, changed by ``change`` and written by pylance itself (no cladebench check on the way)."""
    toy = write_toy_dataset(tmp_path / "toy.lance")
    table = change(lance.dataset(str(toy)).to_table())
    path = tmp_path / "other.lance"
    lance.write_dataset(table, str(path), schema=table.schema)
    return path


def test_a_duplicate_uuid_is_refused_before_anything_is_counted(tmp_path: Path, capsys) -> None:
    path = _rewritten(tmp_path, lambda t: pa.concat_tables([t, t.slice(0, 1)]))
    code = main(["eval", "retrieval", str(path), "--column", "emb_toy", "--out", str(tmp_path / "run"), "-k", "2"])
    err = capsys.readouterr().err
    assert code == 4 and len(err.strip().splitlines()) == 1, err
    assert "1 uuid(s) appear on more than one selected row" in err and "'u00'" in err
    assert not (tmp_path / "run").exists()


def test_rows_without_a_group_are_counted_by_reason(tmp_path: Path, capsys) -> None:
    def without_group(table: pa.Table) -> pa.Table:
        groups = table.column("challenge_group").to_pylist()
        groups[:3] = [None] * 3
        return table.set_column(table.schema.get_field_index("challenge_group"), "challenge_group",
                                pa.array(groups, pa.string()))

    path = _rewritten(tmp_path, without_group)
    code = main(["eval", "retrieval", str(path), "--column", "emb_toy", "--out", str(tmp_path / "run"), "-k", "2",
                 "--group-key", "uuid"])
    out = capsys.readouterr().out
    assert code == 0
    rows = RunRecord.read(tmp_path / "run").provenance["rows"]
    assert rows == {"selected": 12, "evaluated": 9, "left_out": {"no challenge_group value": 3}}
    assert "9 of 12 selected rows evaluated; left out: 3 no challenge_group value" in out


@pytest.mark.parametrize("group_by", ["none", "auto"])
def test_a_run_of_every_row_says_nothing_left_out(tmp_path: Path, capsys, group_by: str) -> None:
    toy = write_toy_dataset(tmp_path / "toy.lance")
    assert main(["eval", "retrieval", str(toy), "--column", "emb_toy", "--out", str(tmp_path / "run"), "-k", "2",
                 "--group-key", "uuid", "--group-by", group_by]) == 0
    assert "left out" not in capsys.readouterr().out
    assert RunRecord.read(tmp_path / "run").provenance["rows"]["left_out"] == {}


@pytest.mark.parametrize("column", ["emb_toy", "image"])
def test_a_breakdown_by_vectors_or_bytes_is_refused_before_any_work(tmp_path: Path, capsys, column: str) -> None:
    toy = write_toy_dataset(tmp_path / "toy.lance")
    code = main(["eval", "retrieval", str(toy), "--column", "emb_toy", "--out", str(tmp_path / "run"), "-k", "2",
                 "--breakdown", column])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot name groups" in err, err
    assert not (tmp_path / "run").exists()


def test_a_breakdown_by_a_column_the_task_reads_anyway_is_one_read(tmp_path: Path, capsys) -> None:
    """``--breakdown uuid`` failed with a message about a filter and a duplicate column."""
    toy = write_toy_dataset(tmp_path / "toy.lance")
    code = main(["eval", "retrieval", str(toy), "--column", "emb_toy", "--out", str(tmp_path / "run"), "-k", "2",
                 "--breakdown", "uuid"])
    assert code == 0, capsys.readouterr().err
    record = RunRecord.read(tmp_path / "run" / "run.json")
    uuids = lance.dataset(str(toy)).to_table(columns=["uuid"]).column("uuid").to_pylist()
    assert all(any(f"uuid={u}/" in name for name in record.metrics) for u in uuids)  # each row its own value
