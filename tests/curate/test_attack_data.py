"""The data path under attack, second round: option values out of range for ``embed`` and ``demo``, outputs
placed inside the inputs they read (``subset``, ``load``), and hostile query and metadata CSVs (bytes that are
not UTF-8, a field over the csv module's 131,072-character limit). Each ends with one line and its documented
exit code, before anything is written."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pytest

from cladebench import store
from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS, failures_path_for
from cladebench.cli import main
from cladebench.embed import EmbedConfig
from cladebench.errors import UsageError
from helpers.crypticbio_rows import GOOD_ROW, write_csv

HUGE_FIELD = "x" * 200_000
"""Longer than ``csv.field_size_limit()`` (131,072 by default), which makes the csv module raise ``csv.Error``."""


def _one_line(capsys: pytest.CaptureFixture[str], code: int, returned: int, *needles: str) -> str:
    printed = capsys.readouterr()
    lines = [line for line in printed.err.splitlines() if line.strip() and " WARN " not in line]
    assert returned == code, printed.err
    assert len(lines) == 1, printed.err
    assert "internal error" not in lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "toy.lance"
    store.write_dataset(pa.table({"uuid": ["a", "b", "c"], "image": pa.array([b"1", b"2", b"3"], pa.large_binary()),
                                  "scientific_name": ["A a", "B b", "C c"]}), path)
    return path


# --- embed: settings out of range are usage errors -----------------------------------------------


@pytest.mark.parametrize(("change", "option"), [
    ({"batch_size": 0}, "--batch-size"),
    ({"batch_size": -4}, "--batch-size"),
    ({"checkpoint_rows": 0}, "--checkpoint-rows"),
    ({"checkpoint_rows": -1}, "--checkpoint-rows"),
    ({"workers": -3}, "--workers"),
    ({"ray_actors": 0}, "--ray-actors"),
    ({"ray_cpus_per_actor": 0}, "--ray-cpus-per-actor"),
])
def test_embed_settings_out_of_range_name_the_option(change: dict[str, int], option: str) -> None:
    with pytest.raises(UsageError, match=f"^{option} must be at least"):
        EmbedConfig(dataset="d.lance", model="m", **change)


def test_embed_batch_size_zero_is_exit_2_and_the_dataset_is_untouched(dataset: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    before = _tree(dataset)
    code = main(["embed", str(dataset), "--model", "local-dir:/nowhere", "--column", "emb_t", "--batch-size", "0"])
    _one_line(capsys, 2, code, "--batch-size must be at least 1, got 0")
    assert _tree(dataset) == before


def test_an_embedding_column_name_too_long_for_a_file_name_is_a_usage_error(dataset: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    before = _tree(dataset)
    code = main(["embed", str(dataset), "--model", "local-dir:/nowhere", "--column", "emb_" + "a" * 300])
    _one_line(capsys, 2, code, "--column", "at most 128 characters")
    assert _tree(dataset) == before


# --- outputs inside the inputs they read ---------------------------------------------------------


def test_subset_into_its_own_source_is_refused_and_writes_nothing(dataset: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    before = _tree(dataset)
    code = main(["subset", str(dataset), "--out", str(dataset / "copy.lance")])
    _one_line(capsys, 2, code, "is inside the input")
    assert _tree(dataset) == before


def test_subset_through_a_link_into_its_source_is_refused(dataset: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    link = tmp_path / "link"
    link.symlink_to(dataset / "data")
    before = _tree(dataset)
    code = main(["subset", str(dataset), "--out", str(link / "copy.lance")])
    _one_line(capsys, 2, code, "is inside the input")
    assert _tree(dataset) == before


def _inquire_snapshot(root: Path) -> Path:
    from helpers.inquire_rows import CONDOR, CONDOR_QUERY, candidate, flat_jpeg, write_shard

    data = root / "data"
    data.mkdir(parents=True)
    write_shard(data / "validation-00000-of-00001.parquet",
           [candidate(CONDOR_QUERY, 26, 9000 + i, flat_jpeg((40 * i, 90, 160)), CONDOR, i % 2) for i in range(1, 4)])
    return root


def test_load_inquire_rerank_into_its_own_snapshot_is_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = _inquire_snapshot(tmp_path / "INQUIRE-Rerank")
    before = _tree(snapshot)
    code = main(["load", "inquire-rerank", str(snapshot), "--out", str(snapshot / "data" / "rerank.lance")])
    _one_line(capsys, 2, code, "is inside the input")
    assert _tree(snapshot) == before


@pytest.mark.parametrize("where", ["same", "inside"])
def test_load_crypticbio_into_its_download_store_is_refused_before_any_download(
        tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]) -> None:
    # The URL is never fetched: nothing listens on port 9 of 127.0.0.1.
    csv_path = write_csv(tmp_path / "CrypticBio-Common.csv", [GOOD_ROW | {"url": "http://127.0.0.1:9/1.jpg"}])
    downloads = tmp_path / "downloads"
    out = downloads if where == "same" else downloads / "common.lance"
    code = main(["load", "crypticbio", str(csv_path), "--out", str(out), "--download-dir", str(downloads),
                 "--retries", "1"])
    _one_line(capsys, 2, code, "--out", "the input")
    assert not downloads.exists() and not failures_path_for(out).exists()


# --- hostile CSVs --------------------------------------------------------------------------------


def test_a_crypticbio_field_over_the_csv_limit_is_a_schema_error(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    csv_path = write_csv(tmp_path / "CrypticBio-Common.csv",
                         [GOOD_ROW, GOOD_ROW | {"vernacularName": HUGE_FIELD}], CSV_COLUMNS)
    out = tmp_path / "out.lance"
    code = main(["load", "crypticbio", str(csv_path), "--out", str(out), "--download-dir", str(tmp_path / "dl")])
    _one_line(capsys, 4, code, str(csv_path), "line 3", "cannot be read as CSV")
    assert not out.exists() and not (tmp_path / "dl").exists()


def _queries(path: Path, text: str) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query_id", "query_text", "supercategory", "category", "iconic_group"])
        writer.writerow([26, text, "Appearance", "Tracking and Identification", "Birds"])
    return path


def test_inquire_queries_with_a_field_over_the_csv_limit_are_a_schema_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = _inquire_snapshot(tmp_path / "INQUIRE-Rerank")
    queries = _queries(tmp_path / "queries.csv", HUGE_FIELD)
    out = tmp_path / "out.lance"
    code = main(["load", "inquire-rerank", str(snapshot), "--out", str(out), "--queries", str(queries)])
    _one_line(capsys, 4, code, str(queries), "line 2", "cannot be read as CSV")
    assert not out.exists()


def test_inquire_queries_that_are_not_utf8_are_a_schema_error(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = _inquire_snapshot(tmp_path / "INQUIRE-Rerank")
    queries = _queries(tmp_path / "queries.csv", "condor")
    queries.write_bytes(queries.read_bytes().replace(b"condor", b"cond\xff\xfer"))
    out = tmp_path / "out.lance"
    code = main(["load", "inquire-rerank", str(snapshot), "--out", str(out), "--queries", str(queries)])
    _one_line(capsys, 4, code, str(queries), "line 2", "not UTF-8", "0xff")
    assert not out.exists()


# --- demo ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("option", "value"), [("--images", "0"), ("--images", "-5"), ("--pairs", "0"),
                                               ("--pairs", "-1")])
def test_demo_sizes_out_of_range_are_exit_2_and_create_nothing(tmp_path: Path, option: str, value: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), option, value])
    _one_line(capsys, 2, code, f"{option} must be at least 1, got {value}")
    assert not out.exists()
