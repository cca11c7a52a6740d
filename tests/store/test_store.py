"""The Lance store: canonical schema, validated writes, bad input, fingerprint, versions, indices, reads, opening."""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.errors import (
    CladebenchError,
    DatasetNotFoundError,
    RemoteUnavailableError,
    SchemaError,
    UsageError,
)
from cladebench.store import (
    CANONICAL_SCHEMA,
    REQUIRED_COLUMNS,
    append,
    conform,
    create_scalar_index,
    create_vector_index,
    embedding_columns,
    embedding_field,
    embedding_metadata,
    embedding_type,
    fingerprint,
    fingerprint_uuids,
    group_columns,
    indices,
    open_dataset,
    read,
    subset,
    tag,
    tags,
    versions,
    write_dataset,
)

MODEL = "hf-hub:imageomics/bioclip"
DIM = 4


def make_table(uuids: list[str], *, dim: int = DIM, model: str | None = MODEL, seed: int = 0,
               embedding: bool = True, **extra: Any) -> pa.Table:
    """A small valid table: uuid, image, a few ranks, taxon_id, a group and one embedding column."""
    n = len(uuids)
    rng = np.random.default_rng(seed)
    columns: dict[str, Any] = {
        "uuid": pa.array(uuids, pa.string()),
        "image": pa.array([f"img-{u}".encode() for u in uuids], pa.large_binary()),
        "genus": pa.array(["Felis" if i % 2 else "Panthera" for i in range(n)], pa.string()),
        "taxon_id": pa.array(range(100, 100 + n), pa.int64()),
        "challenge_group": pa.array([f"g{i % 3}" for i in range(n)], pa.string()),
    }
    columns.update(extra)
    table = pa.table(columns)
    if embedding:
        metadata = {"model": model, "revision": "abc123", "norm_mean": [1.5, 0.25]} if model else {}
        field = (embedding_field("bioclip", dim, metadata) if model
                 else pa.field("emb_bioclip", embedding_type(dim)))
        values = pa.FixedSizeListArray.from_arrays(pa.array(rng.normal(size=n * dim).astype(np.float32)), dim)
        table = table.append_column(field, values)
    return table


def sha256_of_uuids(uuids: Iterable[str]) -> str:
    """The documented fingerprint, computed independently: UTF-8 of each uuid then b"\\n", in row order."""
    return hashlib.sha256(b"".join(u.encode("utf-8") + b"\n" for u in uuids)).hexdigest()


def uuids_of(dataset: Any) -> list[str]:
    return dataset.to_table(columns=["uuid"]).column("uuid").to_pylist()


@pytest.fixture
def dataset_path(tmp_path: Path) -> Path:
    path = tmp_path / "base.lance"
    write_dataset(make_table(["a", "b", "c"]), path)
    return path


def state(path: Path) -> tuple[int, int, str, list[str]]:
    dataset = open_dataset(path)
    return dataset.version, dataset.count_rows(), fingerprint(dataset), uuids_of(dataset)


# --- schema --------------------------------------------------------------------------------------


def test_canonical_schema() -> None:
    assert CANONICAL_SCHEMA.names == [
        "uuid", "image", "image_format",
        "kingdom", "phylum", "class", "order", "family", "genus", "species",
        "scientific_name", "common_name", "taxon_id", "latitude", "longitude", "observed_on",
        "source_dataset", "source_id", "source_url", "license_name", "license_link", "attribution",
        "seen_in_training",
    ]
    assert REQUIRED_COLUMNS == ("uuid", "image")
    field = CANONICAL_SCHEMA.field
    assert field("uuid").type == pa.string() and not field("uuid").nullable
    assert field("image").type == pa.large_binary() and not field("image").nullable
    assert all(field(c).type == pa.string() and field(c).nullable for c in ("kingdom", "class", "species"))
    assert field("taxon_id").type == pa.int64()
    assert field("latitude").type == field("longitude").type == pa.float64()
    assert field("observed_on").type == pa.date32()
    assert field("seen_in_training").type == pa.list_(pa.string())
    assert CANONICAL_SCHEMA.metadata[b"cladebench.schema_version"] == b"2"


def test_embedding_field_and_metadata() -> None:
    assert embedding_type(512) == pa.list_(pa.float32(), 512)
    field = embedding_field("bioclip2", 768, {"model": "hf-hub:imageomics/bioclip-2", "norm_mean": [1.0, 2.5],
                                              "revision": "r1"})
    assert field.name == "emb_bioclip2"
    assert field.type == pa.list_(pa.float32(), 768)
    meta = embedding_metadata(field)
    assert meta["model"] == "hf-hub:imageomics/bioclip-2"
    assert meta["norm_mean"] == [1.0, 2.5]
    assert meta["revision"] == "r1"
    assert str(meta["dim"]) == "768"
    assert embedding_field("emb_x", 3, {"model": "m"}).name == "emb_x"
    with pytest.raises(SchemaError, match=r"'emb_nomodel'.*model"):
        embedding_field("nomodel", 3, {"revision": "r"})
    schema = pa.schema([field, pa.field("challenge_group", pa.string()), pa.field("cryptic_group", pa.string()),
                        pa.field("uuid", pa.string())])
    assert embedding_columns(schema) == ["emb_bioclip2"]
    assert group_columns(schema) == ["challenge_group", "cryptic_group"]


def test_conform_adds_missing_canonical_columns_as_nulls_in_canonical_order() -> None:
    table = make_table(["a", "b"])
    out = conform(table)
    assert out.schema.names == [*CANONICAL_SCHEMA.names, "challenge_group", "emb_bioclip"]
    for name in CANONICAL_SCHEMA.names:
        assert out.schema.field(name).type == CANONICAL_SCHEMA.field(name).type
    assert out.column("latitude").null_count == 2
    assert out.column("seen_in_training").null_count == 2
    assert out.column("genus").to_pylist() == ["Panthera", "Felis"]
    assert out.schema.metadata[b"cladebench.schema_version"] == b"2"
    assert embedding_metadata(out.schema.field("emb_bioclip"))["model"] == MODEL
    assert conform(table, add_missing=False).schema.names == [
        "uuid", "image", "genus", "taxon_id", "challenge_group", "emb_bioclip"
    ]


def test_write_and_read_round_trip(tmp_path: Path) -> None:
    table = make_table(
        ["x1", "x2"],
        latitude=pa.array([45.5, -33.9]),
        longitude=pa.array([-122.6, 151.2]),
        observed_on=pa.array([datetime.date(2021, 5, 1), None], pa.date32()),
        seen_in_training=pa.array([["bioclip"], []], pa.list_(pa.string())),
        common_name=["lion", None],
    )
    dataset = write_dataset(table, tmp_path / "rt.lance")
    assert dataset.version == 1
    back = open_dataset(tmp_path / "rt.lance").to_table()
    assert back.num_rows == 2
    for name in table.column_names:
        assert back.column(name).to_pylist() == table.column(name).to_pylist(), name
    assert back.schema.field("uuid").type == pa.string()
    assert back.schema.field("observed_on").type == pa.date32()
    assert back.column("kingdom").null_count == 2
    meta = embedding_metadata(back.schema.field("emb_bioclip"))
    assert meta["model"] == MODEL
    assert meta["norm_mean"] == [1.5, 0.25]
    assert str(meta["dim"]) == str(DIM)


def test_streamed_write_of_batches(tmp_path: Path) -> None:
    batches = [make_table([f"s{i}", f"t{i}"], seed=i).to_batches()[0] for i in range(3)]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
    dataset = write_dataset(reader, tmp_path / "stream.lance")
    assert uuids_of(dataset) == ["s0", "t0", "s1", "t1", "s2", "t2"]
    # A later batch may leave canonical columns out; they come back as nulls.
    path = tmp_path / "stream2.lance"
    write_dataset(iter([make_table(["a"]), make_table(["b"]).drop_columns(["genus", "challenge_group"])]), path)
    assert read(open_dataset(path), columns=["genus"]).column("genus").to_pylist() == ["Panthera", None]


@pytest.mark.parametrize(
    ("column", "array", "stored"),
    [
        ("taxon_id", pa.array([7, 8], pa.int32()), pa.int64()),
        ("taxon_id", pa.array([7, 8], pa.uint16()), pa.int64()),
        ("genus", pa.array(["Felis", "Lynx"], pa.large_string()), pa.string()),
        ("uuid", pa.array(["a", "b"], pa.large_string()), pa.string()),
        ("image", pa.array([b"x", b"y"], pa.binary()), pa.large_binary()),
        ("latitude", pa.array([1.5, 2.5], pa.float32()), pa.float64()),
        ("observed_on", pa.array([datetime.date(2020, 1, 2)] * 2, pa.date64()), pa.date32()),
        ("seen_in_training", pa.array([["m"], None], pa.list_(pa.large_string())), pa.list_(pa.string())),
        ("kingdom", pa.nulls(2), pa.string()),
    ],
)
def test_lossless_casts_are_accepted(tmp_path: Path, column: str, array: pa.Array, stored: pa.DataType) -> None:
    table = make_table(["a", "b"])
    table = (table.set_column(table.column_names.index(column), column, array) if column in table.column_names
             else table.append_column(column, array))
    dataset = write_dataset(table, tmp_path / "cast.lance")
    assert dataset.schema.field(column).type == stored
    assert dataset.to_table(columns=[column]).column(0).to_pylist() == array.cast(stored).to_pylist()


@pytest.mark.parametrize(
    ("column", "array", "expected", "found"),
    [
        ("taxon_id", pa.array([1.5, 2.0]), "int64", "double"),
        ("taxon_id", pa.array(["1", "2"]), "int64", "string"),
        ("taxon_id", pa.array([1, 2], pa.uint64()), "int64", "uint64"),
        ("latitude", pa.array(["45.1", "3"]), "double", "string"),
        ("latitude", pa.array([45, 3], pa.int64()), "double", "int64"),
        ("genus", pa.array([1, 2]), "string", "int64"),
        ("image", pa.array(["x", "y"]), "large_binary", "string"),
        ("observed_on", pa.array(["2020-01-01", "2020-01-02"]), "date32", "string"),
        ("seen_in_training", pa.array(["m", "n"]), "list<item: string>", "string"),
    ],
)
def test_lossy_casts_name_column_expected_and_found(tmp_path: Path, column: str, array: pa.Array, expected: str,
                                                    found: str) -> None:
    table = make_table(["a", "b"])
    table = (table.set_column(table.column_names.index(column), column, array) if column in table.column_names
             else table.append_column(column, array))
    path = tmp_path / "lossy.lance"
    with pytest.raises(SchemaError) as info:
        write_dataset(table, path)
    message = str(info.value)
    assert f"'{column}'" in message
    assert f"expected type {expected}" in message
    assert f"found {found}" in message
    assert not path.exists()


# --- bad input leaves the dataset as it was ---------------------------------------------------------


def _with_column(table: pa.Table, name: str, array: pa.Array) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, array)


def _emb_other_model(uuid: str = "d") -> pa.Table:
    table = make_table([uuid])
    field = table.schema.field("emb_bioclip").with_metadata({"model": "hf-hub:imageomics/bioclip-2"})
    return table.set_column(table.column_names.index("emb_bioclip"), field, table.column("emb_bioclip"))


BAD_APPENDS: dict[str, tuple[Callable[[], Any], list[str]]] = {
    "wrong embedding dimension": (lambda: make_table(["d"], dim=DIM + 1),
                                  ["'emb_bioclip'", f"[{DIM}]", f"[{DIM + 1}]", "dimension"]),
    "embedding of another model": (_emb_other_model, ["'emb_bioclip'", MODEL, "bioclip-2"]),
    "embedding not float32": (
        lambda: _with_column(make_table(["d"]), "emb_bioclip",
                             pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(DIM)), DIM)),
        ["'emb_bioclip'", "float32", "double"]),
    "missing image": (lambda: make_table(["d"]).drop_columns(["image"]), ["missing required column 'image'"]),
    "missing uuid": (lambda: make_table(["d"]).drop_columns(["uuid"]), ["missing required column 'uuid'"]),
    "non-string uuid": (lambda: _with_column(make_table(["d"]), "uuid", pa.array([17])),
                        ["'uuid'", "expected type string", "found int64"]),
    "null uuid": (lambda: _with_column(make_table(["d", "e"]), "uuid", pa.array(["d", None])),
                  ["row 1", "'uuid'", "null"]),
    "uuid with newline": (lambda: make_table(["d", "e\nf"]), ["row 1", "'uuid'", "newline"]),
    "duplicate uuids within the write": (lambda: make_table(["d", "e", "d"]), ["duplicate", "'d'"]),
    "uuid already in the dataset": (lambda: make_table(["d", "b"]), ["duplicate", "'b'", "already in the dataset"]),
    "duplicate across streamed batches": (
        lambda: iter([make_table(["d"]), make_table(["e"]), make_table(["f", "d"])]), ["duplicate", "'d'"]),
    "dataset duplicate in a later batch": (
        lambda: iter([make_table(["d"]), make_table(["e", "c"])]), ["'c'", "already in the dataset"]),
    "latitude out of range": (lambda: make_table(["d", "e"], latitude=pa.array([10.0, 91.5])),
                              ["row 1", "'latitude'", "91.5", "[-90.0, 90.0]"]),
    "longitude out of range in a later batch": (
        lambda: iter([make_table(["d", "e"]), make_table(["f", "g"], longitude=pa.array([None, -180.5]))]),
        ["row 3", "'longitude'", "-180.5"]),
    "wrong dimension in a later batch": (lambda: iter([make_table(["d"]), make_table(["e"], dim=2)]),
                                         ["'emb_bioclip'", "[2]"]),
    "embedding of another model in a later batch": (lambda: iter([make_table(["d"]), _emb_other_model("e")]),
                                                    ["'emb_bioclip'", "bioclip-2"]),
    "column not in the dataset": (lambda: make_table(["d"], new_column=["x"]), ["'new_column'", "add_columns"]),
    "lossy type": (lambda: _with_column(make_table(["d"]), "taxon_id", pa.array([1.5])),
                   ["'taxon_id'", "int64", "double"]),
}


@pytest.mark.parametrize("case", list(BAD_APPENDS))
def test_bad_append_is_rejected_and_leaves_the_dataset_as_it_was(dataset_path: Path, case: str) -> None:
    make, fragments = BAD_APPENDS[case]
    before = state(dataset_path)
    with pytest.raises(SchemaError) as info:
        append(make(), dataset_path, max_rows_per_file=1)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    assert state(dataset_path) == before
    assert before[:2] == (1, 3)
    # The dataset still takes good rows afterwards.
    assert append(make_table(["ok"]), dataset_path).count_rows() == 4


# Bad whatever the dataset holds, so a create fails too (the others are only bad against a dataset).
BAD_CREATES = [
    "embedding not float32", "missing image", "missing uuid", "non-string uuid", "null uuid", "uuid with newline",
    "duplicate uuids within the write", "duplicate across streamed batches", "latitude out of range",
    "longitude out of range in a later batch", "wrong dimension in a later batch",
    "embedding of another model in a later batch", "lossy type",
]


@pytest.mark.parametrize("case", BAD_CREATES)
def test_failed_create_leaves_no_directory(tmp_path: Path, case: str) -> None:
    make, fragments = BAD_APPENDS[case]
    path = tmp_path / "new.lance"
    with pytest.raises(SchemaError) as info:
        write_dataset(make(), path, max_rows_per_file=1)
    assert fragments[0] in str(info.value)
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_keeps_the_previous_version(dataset_path: Path) -> None:
    before = state(dataset_path)
    with pytest.raises(SchemaError, match="duplicate"):
        write_dataset(iter([make_table(["x"]), make_table(["y", "x"])]), dataset_path, mode="overwrite",
                      max_rows_per_file=1)
    with pytest.raises(SchemaError, match="'latitude'"):
        write_dataset(make_table(["x"], latitude=pa.array([-95.0])), dataset_path, mode="overwrite")
    assert state(dataset_path) == before


def test_embedding_metadata_must_name_the_model_on_create(tmp_path: Path) -> None:
    path = tmp_path / "nometa.lance"
    with pytest.raises(SchemaError, match=r"'emb_bioclip'.*'model'"):
        write_dataset(make_table(["a"], model=None), path)
    assert not path.exists()


def test_embedding_metadata_dim_must_match_the_values(tmp_path: Path) -> None:
    table = make_table(["a"])
    field = table.schema.field("emb_bioclip").with_metadata({"model": MODEL, "dim": "512"})
    table = table.set_column(table.column_names.index("emb_bioclip"), field, table.column("emb_bioclip"))
    with pytest.raises(SchemaError, match=r"'emb_bioclip'.*dim 512.*dimension 4"):
        write_dataset(table, tmp_path / "dim.lance")


def test_append_good_rows_bumps_the_version(dataset_path: Path) -> None:
    dataset = append(make_table(["d", "e"], seed=5), dataset_path)
    assert dataset.version == 2
    assert uuids_of(dataset) == ["a", "b", "c", "d", "e"]
    assert fingerprint(dataset) == sha256_of_uuids(["a", "b", "c", "d", "e"])
    # Columns the new rows lack are nulls; the append takes the dataset's column order.
    dataset = append(make_table(["f"], embedding=False).select(["image", "uuid"]), dataset_path)
    assert dataset.version == 3
    last = read(dataset, where="uuid = 'f'")
    assert last.column("emb_bioclip").to_pylist() == [None]
    assert last.column("taxon_id").to_pylist() == [None]
    # Rows without embedding field metadata take the dataset's.
    dataset = append(make_table(["g"], model=None), dataset_path)
    assert embedding_metadata(dataset.schema.field("emb_bioclip"))["model"] == MODEL


def test_create_refuses_existing_and_non_dataset_targets(dataset_path: Path, tmp_path: Path) -> None:
    before = state(dataset_path)
    with pytest.raises(CladebenchError, match="already exists"):
        write_dataset(make_table(["z"]), dataset_path)
    assert state(dataset_path) == before

    a_file = tmp_path / "notes.txt"
    a_file.write_text("hello")
    for mode in ("create", "append", "overwrite"):
        with pytest.raises(DatasetNotFoundError, match=r"notes\.txt"):
            write_dataset(make_table(["z"]), a_file, mode=mode)  # type: ignore[arg-type]
    assert a_file.read_text() == "hello"

    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "keep.txt").write_text("mine")
    with pytest.raises(DatasetNotFoundError, match="not a Lance dataset"):
        write_dataset(make_table(["z"]), plain, mode="overwrite")
    with pytest.raises(DatasetNotFoundError, match="not a Lance dataset"):
        append(make_table(["z"]), plain)
    assert sorted(p.name for p in plain.iterdir()) == ["keep.txt"]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert write_dataset(make_table(["z"]), empty).count_rows() == 1


def test_overwrite_replaces_rows_and_keeps_history(dataset_path: Path) -> None:
    dataset = write_dataset(make_table(["x", "y"]), dataset_path, mode="overwrite")
    assert dataset.version == 2
    assert uuids_of(dataset) == ["x", "y"]
    assert uuids_of(open_dataset(dataset_path, version=1)) == ["a", "b", "c"]


def test_no_rows_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="no rows"):
        write_dataset(iter([]), tmp_path / "none.lance")
    assert not (tmp_path / "none.lance").exists()


# --- fingerprint ---------------------------------------------------------------------------------


def test_fingerprint_matches_the_documented_definition(tmp_path: Path) -> None:
    uuids = ["b7e2", "a", "ünïcödé-é", "日本-3", "-", "zz"]
    assert fingerprint_uuids(uuids) == sha256_of_uuids(uuids)
    assert fingerprint_uuids([]) == hashlib.sha256(b"").hexdigest()
    # The last uuid is followed by a newline too; no other separator.
    assert fingerprint_uuids(["a", "b"]) == hashlib.sha256(b"a\nb\n").hexdigest()
    assert fingerprint_uuids(["ab"]) != fingerprint_uuids(["a", "b"])

    path = tmp_path / "fp.lance"
    write_dataset(make_table(uuids), path)
    dataset = open_dataset(path)
    assert fingerprint(dataset) == sha256_of_uuids(uuids)
    assert fingerprint(dataset, where="challenge_group = 'g0'") == sha256_of_uuids(uuids[0::3])


def test_fingerprint_spans_fragments_and_changes_with_order(tmp_path: Path) -> None:
    path = tmp_path / "frag.lance"
    uuids = [f"id-{i:03d}" for i in range(50)]
    write_dataset(make_table(uuids[:20]), path, max_rows_per_file=7)
    append(make_table(uuids[20:35], seed=1), path, max_rows_per_file=4)
    dataset = append(make_table(uuids[35:], seed=2), path)
    assert len(dataset.get_fragments()) > 3
    assert fingerprint(dataset) == sha256_of_uuids(uuids)

    reversed_path = tmp_path / "reversed.lance"
    reversed_ds = write_dataset(make_table(uuids[::-1]), reversed_path)
    assert fingerprint(reversed_ds) == sha256_of_uuids(uuids[::-1])
    assert fingerprint(reversed_ds) != fingerprint(dataset)


# --- versions and tags ---------------------------------------------------------------------------


def test_tags_and_versions(dataset_path: Path) -> None:
    dataset = open_dataset(dataset_path)
    fingerprint_v1 = fingerprint(dataset)
    tag(dataset, "first")
    dataset = append(make_table(["d"]), dataset_path)
    tag(dataset, "second")
    tag(dataset, "again-first", version=1)

    assert [v["version"] for v in versions(dataset)] == [1, 2]
    assert all(v["timestamp"] for v in versions(dataset))
    assert tags(open_dataset(dataset_path)) == {"first": 1, "second": 2, "again-first": 1}

    for ref in (1, "first", "again-first"):
        old = open_dataset(dataset_path, version=ref)
        assert old.version == 1
        assert old.count_rows() == 3
        assert fingerprint(old) == fingerprint_v1
    assert open_dataset(dataset_path, version="second").count_rows() == 4
    assert open_dataset(dataset_path).version == 2

    with pytest.raises(DatasetNotFoundError, match="no version or tag 'nope'"):
        open_dataset(dataset_path, version="nope")
    with pytest.raises(DatasetNotFoundError, match="no version or tag 99"):
        open_dataset(dataset_path, version=99)


# --- indices -------------------------------------------------------------------------------------


@pytest.fixture
def indexed_path(tmp_path: Path) -> Path:
    path = tmp_path / "idx.lance"
    write_dataset(make_table([f"u{i:02d}" for i in range(64)], dim=8), path)
    return path


@pytest.mark.parametrize(("version", "message"), [
    (-1, "a version number is a whole number from 1, got -1"),
    (0, "from 1, got 0"),
    (2 ** 70, "from 1, got 1180591620717411303424"),
    (1.5, "a version is a whole number or a tag name, got 1.5"),
    ("", "got an empty string"),
])
def test_a_version_that_cannot_be_one_is_a_usage_error(dataset_path: Path, version: object, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        open_dataset(dataset_path, version=version)


def test_digits_are_a_version_from_python_as_from_the_command_line(dataset_path: Path, capsys) -> None:
    from cladebench.cli import main

    dataset = append(make_table(["d"]), dataset_path)
    tag(dataset, "v1", version=1)
    assert open_dataset(dataset_path, version="1").version == 1 == open_dataset(dataset_path, version=" 1").version
    assert open_dataset(dataset_path, version="2").count_rows() == 4
    with pytest.raises(UsageError, match="digits alone, which reads as a version number"):
        tag(dataset, "2", version=1)
    assert main(["info", str(dataset_path), "--version", "1", "--json", "--no-fingerprint"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 1


@pytest.mark.parametrize(("name", "version", "error", "message"), [
    ("", None, UsageError, "a tag name is letters, digits"),
    ("a/b", None, UsageError, "a tag name is letters, digits"),
    ("x", -1, UsageError, "from 1, got -1"),
    ("x", 99, DatasetNotFoundError, "has no version 99 to tag"),
    ("taken", None, CladebenchError, "tag 'taken' already names version 1"),
])
def test_a_tag_lance_would_refuse_is_one_line(dataset_path: Path, name: str, version: int | None,
                                             error: type[Exception], message: str) -> None:
    dataset = open_dataset(dataset_path)
    tag(dataset, "taken")
    with pytest.raises(error, match=re.escape(message)):
        tag(dataset, name, version=version)
    assert tags(open_dataset(dataset_path)) == {"taken": 1}


def test_vector_and_scalar_indices(indexed_path: Path) -> None:
    dataset = open_dataset(indexed_path)
    dataset = create_vector_index(dataset, "emb_bioclip")
    create_scalar_index(dataset, "uuid", "BTREE")
    create_scalar_index(dataset, "taxon_id")
    create_scalar_index(dataset, "challenge_group", "BITMAP")

    found = {tuple(i["columns"]): i["type"].upper() for i in indices(open_dataset(indexed_path))}
    assert found == {("emb_bioclip",): "IVF_FLAT", ("uuid",): "BTREE", ("taxon_id",): "BTREE",
                     ("challenge_group",): "BITMAP"}

    dataset = open_dataset(indexed_path)
    index_name = next(i["name"] for i in indices(dataset) if i["columns"] == ["emb_bioclip"])
    stats = dataset.stats.index_stats(index_name)
    assert stats["index_type"] == "IVF_FLAT"
    assert stats["indices"][0]["metric_type"] == "cosine"
    partitions = stats["indices"][0]["num_partitions"]
    assert partitions == 8  # sqrt(64)

    # Cosine: a scaled copy of a row's vector finds that row, with distance ~0.
    vectors = dataset.to_table(columns=["uuid", "emb_bioclip"])
    target = np.asarray(vectors.column("emb_bioclip")[17].as_py(), dtype=np.float32)
    hits = dataset.to_table(
        nearest={"column": "emb_bioclip", "q": 25.0 * target, "k": 1, "nprobes": partitions},
        columns=["uuid"], with_row_id=False,
    )
    assert hits.column("uuid").to_pylist() == [vectors.column("uuid")[17].as_py()]
    assert hits.column("_distance")[0].as_py() == pytest.approx(0.0, abs=1e-5)

    # The filtered search uses the scalar index and still answers correctly.
    target_uuid = vectors.column("uuid")[17].as_py()
    filtered = dataset.to_table(
        nearest={"column": "emb_bioclip", "q": target, "k": 3, "nprobes": partitions},
        filter=f"challenge_group = 'g{17 % 3}'", columns=["uuid", "challenge_group"],
    )
    assert set(filtered.column("challenge_group").to_pylist()) == {f"g{17 % 3}"}
    assert filtered.column("uuid")[0].as_py() == target_uuid


def test_index_errors_name_the_column(indexed_path: Path) -> None:
    dataset = open_dataset(indexed_path)
    with pytest.raises(SchemaError, match=r"'genus'.*fixed_size_list"):
        create_vector_index(dataset, "genus")
    with pytest.raises(SchemaError, match="'emb_missing' is not in the dataset"):
        create_vector_index(dataset, "emb_missing")
    with pytest.raises(SchemaError, match="'nope' is not in the dataset"):
        create_scalar_index(dataset, "nope")
    with pytest.raises(SchemaError, match="HASH"):
        create_scalar_index(dataset, "uuid", "HASH")  # type: ignore[arg-type]
    assert indices(open_dataset(indexed_path)) == []


# --- reading -------------------------------------------------------------------------------------


def test_read_returns_only_requested_columns_and_matching_rows(indexed_path: Path) -> None:
    dataset = open_dataset(indexed_path)
    table = read(dataset, columns=["uuid", "taxon_id"], where="challenge_group = 'g1' AND taxon_id < 120")
    assert table.column_names == ["uuid", "taxon_id"]
    expected = [f"u{i:02d}" for i in range(64) if i % 3 == 1 and 100 + i < 120]
    assert table.column("uuid").to_pylist() == expected
    assert read(dataset, columns=["uuid"], limit=5).num_rows == 5
    assert read(dataset).num_rows == 64


def test_read_pushes_filter_and_projection_down_to_lance(indexed_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = open_dataset(indexed_path)
    calls: list[dict[str, Any]] = []
    original = dataset.to_table

    def spy(**kwargs: Any) -> pa.Table:
        calls.append(kwargs)
        return original(**kwargs)

    monkeypatch.setattr(dataset, "to_table", spy)
    table = read(dataset, columns=["uuid"], where="taxon_id = 105")
    assert table.column("uuid").to_pylist() == ["u05"]
    assert calls == [{"columns": ["uuid"], "filter": "taxon_id = 105", "limit": None}]


def test_read_errors(indexed_path: Path) -> None:
    dataset = open_dataset(indexed_path)
    with pytest.raises(SchemaError, match="'nope' is not in the dataset"):
        read(dataset, columns=["uuid", "nope"])
    with pytest.raises(CladebenchError, match="cannot read with filter 'nonexistent = 1'"):
        read(dataset, where="nonexistent = 1")


def test_subset_keeps_embedding_metadata_and_uuid(indexed_path: Path, tmp_path: Path) -> None:
    sidecar = {"emb_bioclip": {"model": MODEL}}
    (indexed_path / store.EMBEDDING_SIDECAR).write_text(json.dumps(sidecar))
    out = tmp_path / "sub.lance"
    result = subset(indexed_path, out, where="challenge_group = 'g2'", columns=["emb_bioclip", "genus"])
    assert result.schema.names == ["uuid", "emb_bioclip", "genus"]
    source = open_dataset(indexed_path)
    expected = read(source, columns=["uuid"], where="challenge_group = 'g2'").column("uuid").to_pylist()
    reopened = open_dataset(out)
    assert uuids_of(reopened) == expected
    assert fingerprint(reopened) == sha256_of_uuids(expected)
    meta = embedding_metadata(reopened.schema.field("emb_bioclip"))
    assert meta["model"] == MODEL
    assert meta["revision"] == "abc123"
    assert meta["norm_mean"] == [1.5, 0.25]
    written = json.loads((out / store.EMBEDDING_SIDECAR).read_text())  # of the subset's rows, not the source's
    assert written.keys() == {"emb_bioclip"} and written["emb_bioclip"]["model"] == MODEL
    assert written["emb_bioclip"]["vectors_rows"] == written["emb_bioclip"]["valid_rows"] == len(expected)
    vectors = reopened.to_table(columns=["emb_bioclip"]).column(0).to_pylist()
    assert vectors == read(source, columns=["emb_bioclip"], where="challenge_group = 'g2'").column(0).to_pylist()

    with pytest.raises(CladebenchError, match="already exists"):
        subset(indexed_path, out, where="challenge_group = 'g1'")
    assert uuids_of(open_dataset(out)) == expected
    with pytest.raises(SchemaError, match="'nope'"):
        subset(indexed_path, tmp_path / "sub2.lance", columns=["nope"])
    assert not (tmp_path / "sub2.lance").exists()


# --- opening -------------------------------------------------------------------------------------


def test_open_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match="does not exist") as info:
        open_dataset(tmp_path / "absent.lance")
    assert "absent.lance" in str(info.value)


def test_open_plain_directory_and_file(tmp_path: Path) -> None:
    (tmp_path / "some.txt").write_text("x")
    with pytest.raises(DatasetNotFoundError, match="not a Lance dataset"):
        open_dataset(tmp_path)
    with pytest.raises(DatasetNotFoundError, match=r"some\.txt"):
        open_dataset(tmp_path / "some.txt")


def test_open_hf_offline_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(RemoteUnavailableError) as info:
        open_dataset("hf://datasets/imageomics/fine-grained-challenges")
    assert time.monotonic() - start < 5
    assert "offline" in str(info.value).lower()
    assert "hf://datasets/imageomics/fine-grained-challenges" in str(info.value)


def test_open_s3_unreachable_endpoint_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    start = time.monotonic()
    with pytest.raises(RemoteUnavailableError) as info:
        open_dataset("s3://some-bucket/bench.lance")
    assert time.monotonic() - start < 10
    assert "s3://some-bucket/bench.lance" in str(info.value)
    assert "127.0.0.1:9" in str(info.value)


def test_write_to_unreachable_s3_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    for mode in ("create", "append", "overwrite"):
        start = time.monotonic()
        with pytest.raises(RemoteUnavailableError):
            write_dataset(make_table(["a"]), "s3://some-bucket/new.lance", mode=mode,  # type: ignore[arg-type]
                          storage_options={"allow_http": "true"})
        assert time.monotonic() - start < 10


def test_nan_coordinate_is_rejected_with_row_and_field() -> None:
    table = pa.table({
        "uuid": ["a", "b", "c"],
        "image": pa.array([b"", b"", b""], pa.large_binary()),
        "longitude": [1.0, None, float("nan")],
    })
    with pytest.raises(SchemaError, match=r"row 2, column 'longitude': nan"):
        conform(table)


def test_timestamp_is_not_silently_truncated_to_a_date() -> None:
    table = pa.table({
        "uuid": ["a"],
        "image": pa.array([b""], pa.large_binary()),
        "observed_on": pa.array([datetime.datetime(2020, 1, 1, 23, 59)], pa.timestamp("s")),
    })
    with pytest.raises(SchemaError, match=r"column 'observed_on': expected type date32\[day\], found timestamp"):
        conform(table)
