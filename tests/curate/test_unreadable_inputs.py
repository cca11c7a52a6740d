"""Inputs that cannot be read (a Parquet shard with a corrupt data page, a loop of symbolic links given as the
input) end every loader and builder with one line naming the file and exit 1, never as a bug (exit 70)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench.cli import main
from cladebench.errors import CladebenchError, reading
from helpers.coobserved_rows import published_rows, write_published
from helpers.inquire_rows import HERMIT, HERMIT_QUERY, candidate, flat_jpeg, write_shard


def _corrupt_data_pages(path: Path) -> None:
    """Rewrite ``path`` snappy-compressed, then flip bytes inside every column's first data page: the footer
    still reads (the schema checks pass), the pages do not."""
    pq.write_table(pq.read_table(path), path, compression="snappy")
    data = bytearray(path.read_bytes())
    row_group = pq.ParquetFile(path).metadata.row_group(0)
    for column in range(row_group.num_columns):
        start = row_group.column(column).data_page_offset
        for i in range(start + 20, start + 40):
            data[i] ^= 0x5A
    path.write_bytes(bytes(data))


def _inquire_shard(folder: Path) -> Path:
    path = folder / "data" / "test-00000-of-00001.parquet"
    path.parent.mkdir(parents=True)
    write_shard(path, [candidate(HERMIT_QUERY, 27, 9101 + i, flat_jpeg((10 * i, 90, 160)), HERMIT, int(i == 0))
                       for i in range(3)])
    return path


def _coobserved_file(folder: Path) -> Path:
    path = folder / "data" / "train-00000-of-00001.parquet"
    write_published(path, published_rows())
    return path


@pytest.mark.parametrize(("source", "write"), [("inquire-rerank", _inquire_shard),
                                               ("inat-coobserved", _coobserved_file)])
def test_a_shard_with_a_corrupt_data_page_is_named_exit_1(tmp_path: Path, capsys, source, write) -> None:
    shard = write(tmp_path / "snapshot")
    _corrupt_data_pages(shard)
    out = tmp_path / "out.lance"
    assert main(["load", source, str(tmp_path / "snapshot"), "--out", str(out)]) == 1
    error = capsys.readouterr().err
    assert f"cannot read {shard}" in error and "internal error" not in error and error.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize("source", ["inquire-rerank", "inat-coobserved", "crypticbio"])
def test_a_loop_of_symbolic_links_as_the_input_is_named_exit_1(tmp_path: Path, capsys, source) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert main(["load", source, str(loop), "--out", str(tmp_path / "out.lance")]) == 1
    error = capsys.readouterr().err
    assert f"{loop}: a loop of symbolic links" in error and "internal error" not in error


def test_a_builder_given_a_loop_names_it_exit_1(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "export"
    loop.symlink_to(loop)
    assert main(["build", "coobserved", "--export-dir", str(loop), "--out", str(tmp_path / "out")]) == 1
    assert f"{loop}: a loop of symbolic links" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


def test_reading_names_the_file_and_passes_other_errors(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(CladebenchError, match="too many levels of symbolic links") as refused, reading(loop):
        loop.read_bytes()
    assert str(loop) in str(refused.value) and refused.value.exit_code == 1
    with pytest.raises(ValueError, match="a bug"), reading(loop):
        raise ValueError("a bug, not the file")


@pytest.mark.parametrize(("source", "name"), [("crypticbio", "CrypticBio-Common.csv"),
                                              ("inquire-rerank", "test-00000-of-00001.parquet")])
def test_a_pipe_given_as_the_input_is_refused_not_waited_on(tmp_path: Path, capsys, source, name) -> None:
    pipe = tmp_path / name
    os.mkfifo(pipe)
    assert main(["load", source, str(pipe), "--out", str(tmp_path / "out.lance")]) == 1
    error = capsys.readouterr().err
    assert str(pipe) in error and ("not a regular file" in error or "not regular files" in error)
