"""``paths.atomic_write_parquet``: the one way a stage writes an Arrow table to a Parquet file it may replace."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench.paths import atomic_write_parquet


def test_a_table_is_written_whole_and_a_failing_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "failures.parquet"
    old = pa.table({"uuid": ["a", "b"], "reason": ["http_404", "timeout"]})
    assert atomic_write_parquet(path, old, durable=True) == path
    assert pq.read_table(path).equals(old)

    class Unwritable:  # not a table: pq.write_table fails after the temporary file is opened
        schema = None

    with pytest.raises(Exception):  # noqa: B017  (whatever pyarrow raises for it)
        atomic_write_parquet(path, Unwritable())  # type: ignore[arg-type]
    assert pq.read_table(path).equals(old)
    assert [p.name for p in tmp_path.iterdir()] == ["failures.parquet"]  # no temporary file left behind
