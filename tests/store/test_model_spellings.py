"""A column recorded under another spelling of its model's id (a Hub URL, another case, ``hf_hub:``, a revision
after ``@``) is that model's column: evaluated under one name, never refused in a message that names the model
twice as if they were two; a column of another model is refused naming both, the second as a spelling of none."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from cladebench.models.registry import resolve_model
from cladebench.store.embeddings import model_spelling, names_model

SPEC = resolve_model("bioclip-2")


@pytest.mark.parametrize("recorded", ["https://huggingface.co/Imageomics/BioCLIP-2", "hf_hub:imageomics/bioclip-2",
                                      "imageomics/bioclip-2@main", " Imageomics/bioclip-2/ ", "BioCLIP-2"])
def test_spellings_of_one_id_name_the_model(recorded: str) -> None:
    assert names_model(recorded, SPEC)
    assert not names_model("imageomics/bioclip", SPEC)
    assert model_spelling("local-dir:/Models/Tiny") != model_spelling("local-dir:/models/tiny")


def _write(path: Path, column: str, model: str) -> Path:
    n = 12
    vectors = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    table = pa.table({"uuid": [f"u{i:02d}" for i in range(n)],
                      "image": pa.array([bytes([i]) for i in range(n)], pa.large_binary()),
                      "genus": ["Genus"] * n, "species": [f"sp{i % 3}" for i in range(n)]})
    field = store.embedding_field(column.removeprefix("emb_"), 4, {"model": model, "revision": SPEC.revision})
    store.write_dataset(table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4)),
                        path)
    return path


@pytest.mark.parametrize("column", ["emb_bioclip2", "emb_copy"])
def test_a_column_under_another_spelling_is_evaluated_as_the_model(column: str, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "d.lance", column, "https://huggingface.co/Imageomics/BioCLIP-2")
    code = main(["eval", "fewshot", str(path), "--column", column, "--model", "bioclip-2", "--out",
                 str(tmp_path / "run"), "--shots", "1"])
    assert code == 0, capsys.readouterr().err
    assert RunRecord.read(tmp_path / "run" / "run.json").provenance["model"]["id"] == SPEC.id


def test_a_column_of_another_model_is_refused_naming_each_once(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "d.lance", "emb_copy", "imageomics/bioclip")
    code = main(["eval", "fewshot", str(path), "--column", "emb_copy", "--model", "bioclip-2", "--out",
                 str(tmp_path / "run"), "--shots", "1"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1, err
    assert "holds embeddings of 'imageomics/bioclip', which is no spelling of --model hf-hub:imageomics/bioclip-2" \
        in err[0]
