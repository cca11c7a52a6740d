"""A run record named by a user is read one way (``RunRecord.read_given``) by ``compare`` and ``report``: no file is
a CladebenchError, a file that is not a run record a SchemaError, each one line naming the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.errors import CladebenchError, SchemaError
from cladebench.evaluate.compare import compare_runs
from cladebench.evaluate.record import RunRecord
from cladebench.report.runs import load_run


def _not_a_record(tmp_path: Path) -> Path:
    path = tmp_path / "notes" / "run.json"
    path.parent.mkdir()
    path.write_text('{"task": "zeroshot", "something": "else"}')
    return path


def test_read_given_names_the_path_and_the_kind_of_failure(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "run.json"
    with pytest.raises(CladebenchError, match=r"^no run record at .*nowhere/run.json$") as info:
        RunRecord.read_given(missing)
    assert not isinstance(info.value, SchemaError)
    with pytest.raises(SchemaError, match=r"notes/run.json is not a run record: ") as info:
        RunRecord.read_given(_not_a_record(tmp_path))
    assert "\n" not in str(info.value)


def test_compare_and_report_refuse_alike(tmp_path: Path) -> None:
    bad = _not_a_record(tmp_path)
    missing = tmp_path / "nowhere"
    for read in (lambda p: compare_runs([p, p]), lambda p: load_run(1, p)):
        with pytest.raises(CladebenchError, match=r"^no run record at .*nowhere"):
            read(missing)
        with pytest.raises(SchemaError, match="is not a run record"):
            read(bad)
        with pytest.raises(SchemaError, match="is not a run record"):
            read(bad.parent)  # the folder holding it
