"""A subset's ``embedding_models.json`` describes exactly the columns and rows the subset holds: a projection
without the embedding columns keeps no entry for them, a filter gives the kept rows' counts and checksum, and a
source column changed outside cladebench is not copied as if it were sound."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.store.sidecar import write_sidecar
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = write_toy_dataset(tmp_path / "toy.lance")
    write_sidecar(str(path), {"emb_toy": {"column": "emb_toy", "model": "toy-model", "valid_rows": 12,
                                          "failed_rows": 1}}, written=["emb_toy"])
    return path


def _sidecar(path: Path) -> dict:
    return json.loads((path / store.EMBEDDING_SIDECAR).read_text())


def test_a_projection_without_the_embedding_column_keeps_no_entry_for_it(source: Path, tmp_path: Path) -> None:
    assert main(["subset", str(source), "--columns", "species", "--out", str(tmp_path / "names.lance")]) == 0
    assert not (tmp_path / "names.lance" / store.EMBEDDING_SIDECAR).exists()


def test_a_filtered_subset_records_its_own_rows_and_its_column_reads(source: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "birds.lance"
    assert main(["subset", str(source), "--where", "challenge_group = 'birds'", "--out", str(out)]) == 0
    entry = _sidecar(out)["emb_toy"]
    assert entry["valid_rows"] == entry["vectors_rows"] == 6 and "failed_rows" not in entry
    assert entry["vectors_sha256"] != _sidecar(source)["emb_toy"]["vectors_sha256"]
    code = main(["eval", "fewshot", str(out), "--column", "emb_toy", "--out", str(tmp_path / "run"), "--shots", "1",
                 "--group-by", "none"])
    assert code == 0, capsys.readouterr().err


def test_a_source_column_changed_outside_cladebench_is_refused(source: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    dataset = lance.dataset(str(source))
    dataset.delete("uuid = 'u00'")  # another tool drops a row: the column's recorded checksum no longer holds
    code = main(["subset", str(source), "--out", str(tmp_path / "copy.lance")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 4 and len(err) == 1 and "checksum differs" in err[0] and "11 rows with a vector, 12" in err[0]
    assert not (tmp_path / "copy.lance").exists()
