"""The one left-out record: the four columns first whatever the builder adds, read back in one call, refused when
a file lacks them, and shown by ``info`` when a build wrote one beside the dataset."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench.errors import SchemaError
from cladebench.store.left_out import (
    CORE,
    LeftOut,
    find_left_out,
    left_out_counts,
    left_out_lines,
    left_out_table,
    read_left_out,
    write_left_out,
)


def test_a_builders_own_columns_follow_the_four_and_read_back_as_records(tmp_path: Path) -> None:
    own = pa.table({"url": ["u1", "u2", None], "row": [3, 4, 5], "why": ["no_license", "no_license", "bad_row"]})
    table = left_out_table(own, key=["meta.csv:3", "meta.csv:4", "meta.csv:5"], stage=["check", "check", "read"],
                           reason="why", detail=None)
    assert table.column_names == [*CORE, "url", "row", "why"]
    write_left_out(tmp_path, table)
    records = read_left_out(tmp_path)
    assert records[0] == LeftOut("meta.csv:3", "check", "no_license", None)
    assert left_out_counts(records) == {"read: bad_row": 1, "check: no_license": 2}  # stages in build order
    assert left_out_lines(left_out_counts(records), "x.parquet") == [
        "left out: 3 records (x.parquet)", "  read: bad_row: 1", "  check: no_license: 2"]
    assert left_out_lines({}) == []
    (tmp_path / "data" / "t.lance").mkdir(parents=True)
    assert find_left_out(tmp_path / "data" / "t.lance") == tmp_path / "left_out.parquet"
    assert find_left_out("s3://bucket/t.lance") is None


def test_a_stage_outside_the_list_and_a_file_without_the_four_columns_are_refused(tmp_path: Path) -> None:
    own = pa.table({"reason": ["x"], "detail": ["d"], "key": ["k"]})
    with pytest.raises(ValueError, match="stage"):
        left_out_table(own, key="key", stage="downloading")
    with pytest.raises(ValueError, match="starts with the columns"):
        write_left_out(tmp_path, own)
    pq.write_table(pa.table({"uuid": ["a"], "reason": ["x"]}), tmp_path / "left_out.parquet")
    with pytest.raises(SchemaError, match=r"needs the column\(s\) \['key', 'stage', 'detail'\]"):
        read_left_out(tmp_path / "left_out.parquet")


def test_a_left_out_file_that_does_not_read_never_refuses_the_datasets_info(tmp_path: Path) -> None:
    """A ``left_out.parquet`` above a dataset may be another tool's or broken: ``info`` says it was not read."""
    from cladebench.store.info import _left_out

    (tmp_path / "data" / "t.lance").mkdir(parents=True)
    (tmp_path / "left_out.parquet").write_bytes(b"not parquet")
    found = _left_out(str(tmp_path / "data" / "t.lance"))
    assert found is not None and found["counts"] == {} and found["path"] == str(tmp_path / "left_out.parquet")
    assert "\n" not in str(found["unread"]) and found["unread"]
    pq.write_table(pa.table({"photo": ["a"]}), tmp_path / "left_out.parquet")  # parquet, not a left-out record
    assert "needs the column(s)" in str(_left_out(str(tmp_path / "data" / "t.lance"))["unread"])
