"""A Hugging Face Hub dataset snapshot, as the Hub lays it out (``data/<split>-0000N-of-0000M.parquet``), is read
by every Parquet loader when its root folder is given, through ``cladebench load`` and through the named
benchmarks' fetch (with ``snapshot_download`` replaced by a copy that applies the Hub client's own pattern filter).
Hidden folders (the Hub client's ``.cache/``) are left out, and INQUIRE-Rerank's stale ``train-*`` shards are not
read as a split."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from cladebench import store
from cladebench.benchmarks.inquire.source import build_inquire_rerank, read_inquire_rerank, read_stats, shard_paths
from cladebench.cli import main
from cladebench.errors import CladebenchError
from helpers.coobserved_rows import ALIAS_SCHEMA, alias_rows, published_rows, write_published
from helpers.inquire_rows import CONDOR, CONDOR_QUERY, HERMIT, HERMIT_QUERY, candidate, flat_jpeg, write_shard


def _inquire_snapshot(root: Path) -> Path:
    """A snapshot of evendrow/INQUIRE-Rerank: one test and one validation shard in data/, a stale train shard
    beside them, the Hub client's .cache/ folder holding a file that is not Parquet at all, and a README."""
    data = root / "data"
    data.mkdir(parents=True)
    test = [candidate(HERMIT_QUERY, 27, 9101 + i, flat_jpeg((10 * i, 90, 160)), HERMIT, int(i == 0)) for i in range(3)]
    val = [candidate(CONDOR_QUERY, 26, 9001 + i, flat_jpeg((90, 10 * i, 160)), CONDOR, int(i == 1)) for i in range(2)]
    write_shard(data / "test-00000-of-00001.parquet", test)
    write_shard(data / "validation-00000-of-00001.parquet", val)
    write_shard(data / "train-00000-of-00001.parquet", test)  # the same rows under another split name
    hidden = root / ".cache" / "huggingface" / "download" / "data"
    hidden.mkdir(parents=True)
    (hidden / "test-00000-of-00001.parquet").write_bytes(b"not parquet: the client's partial download")
    (root / "README.md").write_text("---\nconfigs:\n- config_name: default\n---\n", encoding="utf-8")
    return root


def test_load_inquire_rerank_reads_a_snapshot_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _inquire_snapshot(tmp_path / "INQUIRE-Rerank")
    out = tmp_path / "rerank.lance"
    assert main(["load", "inquire-rerank", str(root), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{out}: 5 rows written" in printed
    assert "skipped 1 file(s)" in printed and "train-00000-of-00001.parquet" in printed
    dataset = store.open_dataset(out)
    splits = store.read(dataset, columns=["split"]).column("split").to_pylist()
    assert sorted(splits) == ["test"] * 3 + ["val"] * 2
    # The named benchmark's split filter selects the test shard's rows by the split its Hub file name gives.
    test_rows = store.read(dataset, columns=["query_id", "split"], where="split = 'test'")
    assert test_rows.num_rows == 3 and set(test_rows.column("query_id").to_pylist()) == {27}


def test_the_reader_says_what_it_read_and_what_it_skipped(tmp_path: Path) -> None:
    root = _inquire_snapshot(tmp_path / "snap")
    table = read_inquire_rerank(root)
    stats = read_stats(table)
    assert stats["files"] == ["test-00000-of-00001.parquet", "validation-00000-of-00001.parquet"]
    assert [Path(f).name for f in stats["skipped_files"]] == ["train-00000-of-00001.parquet"]
    assert stats["rows_by_split"] == {"test": 3, "val": 2}
    # A split named by the caller reads every file as that split; a train file given by name must say its split.
    read, skipped = shard_paths(root, split="test")
    assert [p.name for p in read] == ["test-00000-of-00001.parquet", "train-00000-of-00001.parquet",
                                      "validation-00000-of-00001.parquet"] and skipped == []
    with pytest.raises(CladebenchError, match="cannot tell the split"):
        read_inquire_rerank(root / "data" / "train-00000-of-00001.parquet")
    only_train = tmp_path / "only-train" / "data"
    only_train.mkdir(parents=True)
    shutil.copy(root / "data" / "train-00000-of-00001.parquet", only_train)
    with pytest.raises(CladebenchError, match="split INQUIRE-Rerank does not have"):
        read_inquire_rerank(only_train.parent)


def test_load_inquire_rerank_says_how_many_photos_are_in_no_image_format(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "snap" / "data"
    data.mkdir(parents=True)
    bodies = [b"<!DOCTYPE html><html>rate limited</html>", bytes(range(7, 250)), flat_jpeg((10, 90, 160))]
    write_shard(data / "test-00000-of-00001.parquet",
                [candidate(HERMIT_QUERY, 27, 9101 + i, body, HERMIT, int(i == 0)) for i, body in enumerate(bodies)])
    assert main(["load", "inquire-rerank", str(tmp_path / "snap"), "--out", str(tmp_path / "r.lance")]) == 0
    printed = capsys.readouterr().out
    assert "3 rows written" in printed and "2 of 3 rows hold image bytes in no known image format" in printed


def _coobserved_snapshot(root: Path) -> Path:
    data = root / "data"
    write_published(data / "train-00000-of-00001.parquet", published_rows())
    hidden = root / ".cache" / "huggingface" / "download" / "data"
    hidden.mkdir(parents=True)
    (hidden / "train-00000-of-00001.parquet").write_bytes(b"partial")
    return root


def test_load_inat_coobserved_reads_a_snapshot_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _coobserved_snapshot(tmp_path / "inat-coobserved")
    out = tmp_path / "pairs.lance"
    assert main(["load", "inat-coobserved", str(root), "--out", str(out)]) == 0
    assert f"{len(published_rows())} rows written" in capsys.readouterr().out
    assert store.open_dataset(out).count_rows() == len(published_rows())


def test_two_snapshots_under_one_folder_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _inquire_snapshot(tmp_path / "downloads" / "INQUIRE-Rerank")
    shutil.copytree(tmp_path / "downloads" / "INQUIRE-Rerank", tmp_path / "downloads" / "INQUIRE-Rerank (1)")
    assert main(["load", "inquire-rerank", str(tmp_path / "downloads"), "--out", str(tmp_path / "r.lance")]) == 1
    error = capsys.readouterr().err
    assert "are two copies of one INQUIRE-Rerank file" in error and "duplicate uuid" not in error
    assert f"{tmp_path / 'downloads' / 'INQUIRE-Rerank'} and {tmp_path / 'downloads' / 'INQUIRE-Rerank (1)'}" in error
    assert not (tmp_path / "r.lance").exists()


def test_a_split_asked_for_that_the_files_lack_is_named(tmp_path: Path) -> None:
    root = _inquire_snapshot(tmp_path / "mirror")
    (root / "data" / "test-00000-of-00001.parquet").unlink()
    with pytest.raises(CladebenchError, match=r"no test-\*\.parquet shard in .*: it holds only "
                                              r"\['validation-00000-of-00001\.parquet'\]"):
        build_inquire_rerank(root, tmp_path / "r.lance", splits=("test",))
    assert not (tmp_path / "r.lance").exists()
    assert build_inquire_rerank(root, tmp_path / "r.lance", splits=("val",)).rows == 2


def test_load_inat_coobserved_says_how_many_photos_are_in_no_image_format(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = published_rows()
    rows[0]["image"] = {"bytes": b"<html>gone</html>", "path": "x.jpg"}
    write_published(tmp_path / "snap" / "data" / "train-00000-of-00001.parquet", rows)
    assert main(["load", "inat-coobserved", str(tmp_path / "snap"), "--out", str(tmp_path / "p.lance")]) == 0
    assert f"1 of {len(rows)} rows hold image bytes in no known image format" in capsys.readouterr().out


def _fake_hub(repos: dict[str, Path], calls: list[dict[str, Any]]):
    """``snapshot_download`` as the Hub client does it, from local folders: the same pattern filter, the same
    relative paths, into a fresh snapshot folder."""
    from huggingface_hub.utils import filter_repo_objects

    def snapshot_download(repo_id: str, repo_type: str, allow_patterns: list[str] | None = None,
                          **_: Any) -> str:
        calls.append({"repo_id": repo_id, "repo_type": repo_type, "allow_patterns": allow_patterns})
        source = repos[repo_id]
        files = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file()
                       and ".cache" not in p.parts)
        snapshot = source.parent / f"snapshot-of-{source.name}"
        for relative in filter_repo_objects(files, allow_patterns=allow_patterns):
            (snapshot / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / relative, snapshot / relative)
        return str(snapshot)

    return snapshot_download


def test_named_benchmarks_fetch_and_build_from_the_hub_layout(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub
    import huggingface_hub.constants

    from cladebench.benchmarks import get_benchmark

    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # huggingface_hub reads the flag once, at its import: online for this test, whatever imported it first.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    repos = {"evendrow/INQUIRE-Rerank": _inquire_snapshot(tmp_path / "hub" / "INQUIRE-Rerank"),
             "dcher95/inat-coobserved": _coobserved_snapshot(tmp_path / "hub" / "inat-coobserved")}
    write_published(repos["dcher95/inat-coobserved"] / "data" / "train-00001-of-00001.parquet", alias_rows(),
                    ALIAS_SCHEMA)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _fake_hub(repos, calls))

    rerank = get_benchmark("inquire-rerank").locate(None)  # fetched from the Hub, built once into the cache
    assert rerank.provenance["fetched"] == {"repo": "evendrow/INQUIRE-Rerank", "revision": "snapshot-of-INQUIRE-Rerank"}
    table = store.read(store.open_dataset(rerank.uri), columns=["split"])
    assert sorted(table.column("split").to_pylist()) == ["test"] * 3 + ["val"] * 2
    snapshot = tmp_path / "hub" / "snapshot-of-INQUIRE-Rerank" / "data"
    assert sorted(p.name for p in snapshot.iterdir()) == ["test-00000-of-00001.parquet",
                                                          "validation-00000-of-00001.parquet"]  # train not fetched

    pairs = get_benchmark("inat-coobserved").locate(None)
    assert store.open_dataset(pairs.uri).count_rows() == len(published_rows()) + len(alias_rows())
    assert [c["repo_id"] for c in calls] == ["evendrow/INQUIRE-Rerank", "dcher95/inat-coobserved"]
