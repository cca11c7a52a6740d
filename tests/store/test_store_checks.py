"""The store refuses what it cannot copy or identify faithfully: filters with a second statement, subsets of rows
the writer would refuse, and uuids that give no unambiguous fingerprint; a failed subset leaves nothing behind."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import lance
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.store import search


def _images(n: int) -> pa.Array:
    return pa.array([bytes([i % 256]) for i in range(n)], pa.large_binary())


@pytest.fixture
def good(tmp_path: Path) -> Path:
    path = tmp_path / "good.lance"
    store.write_dataset(pa.table({"uuid": ["a", "b", "c"], "image": _images(3),
                                  "scientific_name": ["A a", "B b;x", "C c"]}), path)
    return path


def _raw(tmp_path: Path, name: str, table: pa.Table) -> Path:
    """A dataset written by Lance directly (as other tools do), bypassing the store's checks."""
    path = tmp_path / f"{name}.lance"
    lance.write_dataset(table, str(path))
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# --- one filter check ----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["1=1; DROP TABLE x", "scientific_name = 'A a';", "\"scientific_name\" = 'A a'; 1",
                                   "1=1 -- it's\n; DROP TABLE x", "1=1 /* ' */ ; DROP TABLE x"])
def test_a_semicolon_outside_quotes_is_refused(where: str) -> None:
    with pytest.raises(UsageError, match="one SQL expression"):
        store.check_filter(where)


@pytest.mark.parametrize("where", ["scientific_name = 'B b;x'", "scientific_name = 'it''s; fine'",
                                   "\"odd;name\" IS NULL", "scientific_name = ';'", "scientific_name = '--;'",
                                   "1=1 -- a comment; still one expression"])
def test_a_semicolon_inside_a_literal_or_identifier_is_kept(where: str) -> None:
    assert store.check_filter(where) == where


def test_blank_and_non_string_filters() -> None:
    assert store.check_filter(None) is None and store.check_filter("  ") is None
    with pytest.raises(UsageError, match="must be a SQL filter string"):
        store.check_filter(1)  # type: ignore[arg-type]


def test_every_reader_of_a_filter_refuses_a_second_statement(good: Path, tmp_path: Path) -> None:
    dataset = store.open_dataset(good)
    where = "1=1; DROP TABLE x"
    with pytest.raises(UsageError):
        store.read(dataset, where=where)
    with pytest.raises(UsageError):
        store.fingerprint(dataset, where=where)
    with pytest.raises(UsageError):
        store.subset(good, tmp_path / "out.lance", where=where)
    with pytest.raises(UsageError):
        search._check_where(where)
    assert not (tmp_path / "out.lance").exists()
    # A semicolon inside a literal is part of the value, and selects exactly that row.
    assert store.read(dataset, columns=["uuid"], where="scientific_name = 'B b;x'").column(0).to_pylist() == ["b"]


# --- subset validates as the writer does ---------------------------------------------------------------


@pytest.mark.parametrize(("name", "table", "message"), [
    ("string_image", pa.table({"uuid": ["a", "b"], "image": ["x", "y"]}), "column 'image': expected type"),
    ("string_latitude", pa.table({"uuid": ["a", "b"], "image": _images(2), "latitude": ["1", "2"]}),
     "column 'latitude': expected type double"),
    ("duplicate_uuid", pa.table({"uuid": ["a", "a"], "image": _images(2)}), r"duplicate uuid\(s\) \['a'\]"),
    ("newline_uuid", pa.table({"uuid": ["a\nb", "c"], "image": _images(2)}), "uuid contains a newline"),
    ("null_uuid", pa.table({"uuid": [None, "c"], "image": _images(2)}), "null uuid"),
    ("integer_uuid", pa.table({"uuid": [1, 2], "image": _images(2)}), "'uuid': expected type string, found int64"),
    ("no_uuid", pa.table({"id": ["a", "b"], "image": _images(2)}), "has no 'uuid' column"),
    ("latitude_out_of_range", pa.table({"uuid": ["a", "b"], "image": _images(2), "latitude": [1.0, 91.0]}),
     "row 1, column 'latitude'"),
])
def test_subset_refuses_rows_the_writer_refuses_and_leaves_nothing(tmp_path: Path, name: str, table: pa.Table,
                                                                    message: str) -> None:
    source = _raw(tmp_path, name, table)
    out = tmp_path / "copies" / f"{name}-copy.lance"
    with pytest.raises(SchemaError, match=message):
        store.subset(source, out)
    assert not out.exists()
    assert not (tmp_path / "copies").exists()  # the parent this call would have made is gone too


def test_subset_finds_a_duplicate_uuid_across_batches(tmp_path: Path) -> None:
    n = 2500  # subset streams 1024 rows at a time: the repeat sits two batches after the original
    uuids = [f"u{i}" for i in range(n)]
    uuids[-1] = "u3"
    source = _raw(tmp_path, "dups", pa.table({"uuid": uuids, "image": _images(n)}))
    out = tmp_path / "copy.lance"
    with pytest.raises(SchemaError, match=r"duplicate uuid\(s\) \['u3'\]"):
        store.subset(source, out)
    assert not out.exists() and _leftovers(tmp_path) == []


def test_subset_casts_like_the_writer_and_keeps_the_column_order(tmp_path: Path) -> None:
    table = pa.table({"uuid": pa.array(["a", "b"], pa.large_string()), "emb_x": pa.array([[1.0], [2.0]]),
                      "latitude": pa.array([1, 2], pa.int32())})
    source = _raw(tmp_path, "castable", table)
    result = store.subset(source, tmp_path / "copy.lance")
    assert result.schema.names == ["uuid", "emb_x", "latitude"]
    assert result.schema.field("uuid").type == pa.string()
    assert result.schema.field("latitude").type == pa.float64()
    assert result.schema.field("emb_x").type == pa.list_(pa.float64())  # published list columns keep their type
    assert result.to_table().column("latitude").to_pylist() == [1.0, 2.0]


def test_subset_refuses_an_output_that_is_a_file_and_leaves_it(good: Path, tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    with pytest.raises(CladebenchError, match="is a file"):
        store.subset(good, target)
    with pytest.raises(CladebenchError, match="is a file, not a folder"):
        store.subset(good, target / "inside.lance")
    assert target.read_text() == "mine"


def test_subset_keeps_a_column_named_twice_once(good: Path, tmp_path: Path) -> None:
    copy = store.subset(good, tmp_path / "copy.lance", columns=["scientific_name", "scientific_name", "uuid"])
    assert copy.schema.names == ["uuid", "scientific_name"] and copy.count_rows() == 3


def test_subset_into_an_existing_empty_folder(good: Path, tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    result = store.subset(good, out, where="scientific_name = 'A a'")
    assert result.count_rows() == 1 and store.open_dataset(out).count_rows() == 1
    assert _leftovers(tmp_path) == []


def test_subset_removes_staging_left_by_a_killed_run_only(good: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy.lance"
    dead = tmp_path / ".copy.lance.subset-99999999"  # no such process
    alive = tmp_path / f".copy.lance.subset-{os.getppid()}"  # a running process: maybe a subset right now
    other = tmp_path / ".copy.lance.subset-notes"  # not a name this function makes
    for folder in (dead, alive, other):
        folder.mkdir()
        (folder / "part").write_text("x")
    store.subset(good, out)
    assert not dead.exists() and alive.exists() and other.exists()
    assert store.open_dataset(out).count_rows() == 3


# --- uuids the fingerprint cannot encode -----------------------------------------------------------------


@pytest.mark.parametrize(("table", "message"), [
    (pa.table({"uuid": [1, 2]}), "expected type string, found int64"),
    (pa.table({"uuid": ["a", None]}), "row 1, column 'uuid': null uuid"),
    (pa.table({"uuid": ["a", "b\nc"]}), "row 1, column 'uuid': uuid contains a newline"),
])
def test_fingerprint_refuses_uuids_it_cannot_encode(tmp_path: Path, table: pa.Table, message: str) -> None:
    dataset = store.open_dataset(_raw(tmp_path, "raw", table))
    with pytest.raises(SchemaError, match=message):
        store.fingerprint(dataset)


@pytest.mark.parametrize(("bad", "message"), [
    ("", "is empty"),
    ("a\rb", "U+000D"),
    ("a\x00b", "U+0000"),
    ("a\u2028b", "U+2028"),
    ("a\x85b", "U+0085"),
    ("a\tb", "U+0009"),
])
def test_writes_refuse_empty_uuids_and_every_line_break(tmp_path: Path, bad: str, message: str) -> None:
    """The fingerprint writes one uuid per line; a line break of any kind, or nothing, would make two rows' uuids
    run together or one uuid read as two."""
    table = pa.table({"uuid": ["a", bad], "image": _images(2)})
    with pytest.raises(SchemaError, match=f"row 1, column 'uuid': uuid .*{re.escape(message)}"):
        store.write_dataset(table, tmp_path / "out.lance")
    assert not (tmp_path / "out.lance").exists()
    dataset = store.open_dataset(_raw(tmp_path, "raw", table))
    with pytest.raises(SchemaError, match=re.escape(message)):
        store.fingerprint(dataset)


def test_writes_refuse_integer_and_null_uuids(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="'uuid': expected type string, found int64"):
        store.write_dataset(pa.table({"uuid": [1, 2], "image": _images(2)}), tmp_path / "a.lance")
    good_batch = pa.table({"uuid": ["a", "b"], "image": _images(2)})
    with pytest.raises(SchemaError, match="row 2, column 'uuid': null uuid"):
        store.write_dataset(iter([good_batch, pa.table({"uuid": [None, "c"], "image": _images(2)})]),
                            tmp_path / "b.lance")
    assert not (tmp_path / "a.lance").exists() and not (tmp_path / "b.lance").exists()


@pytest.mark.parametrize(("table", "problem"), [
    (pa.table({"uuid": [1, 2]}), "expected type string, found int64"),
    (pa.table({"uuid": ["a", None]}), "null uuid"),
    (pa.table({"id": ["a", "b"]}), "no uuid column"),
])
def test_info_describes_a_dataset_that_has_no_fingerprint(tmp_path: Path, table: pa.Table, problem: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``info`` is where a user looks at a dataset other tools wrote: it says why there is no fingerprint."""
    from cladebench.cli import main

    path = _raw(tmp_path, "raw", table)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rows         2" in out and "fingerprint  none: " in out and problem in out
    assert main(["info", str(path), "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["fingerprint"] is None and problem in described["fingerprint_problem"]
