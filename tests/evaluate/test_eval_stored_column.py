"""`cladebench eval` of a stored ``emb_*`` column needs no model: few-shot and retrieval run on the vectors alone,
the record names the model the column's metadata names (or says that none was), and what needs a model says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pytest

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from helpers.planted_embeddings import DIM, write_planted_dataset


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Planted species with two columns no registry knows: emb_planted (metadata names 'planted-model') and
    emb_bare (a plain list<float16> without metadata, as vectors are published without a word about their model)."""
    root = tmp_path_factory.mktemp("stored-column")
    table = write_planted_dataset(root / "source.lance")
    vectors = np.asarray(table.column("emb_planted").combine_chunks().flatten()).reshape(table.num_rows, DIM)
    bare = pa.array([list(v) for v in (2.0 * vectors).astype(np.float16)], pa.list_(pa.float16()))
    lance.write_dataset(table.append_column("emb_bare", bare), root / "stored.lance")
    return root / "stored.lance"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_fewshot_on_a_column_runs_without_a_model(stored: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    def no_model(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a stored column needs no model")

    monkeypatch.setattr("cladebench.models.registry.resolve_model", no_model)
    monkeypatch.setattr("cladebench.models.load_encoder", no_model)
    code, out, err = run(["eval", "fewshot", str(stored), "--column", "emb_planted", "--out",
                          str(tmp_path / "fs"), "--shots", "1", "3", "--repetitions", "2"], capsys)
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"fewshot on {stored} with planted-model (6 labels; ")
    record = RunRecord.read(tmp_path / "fs" / "run.json")
    model = record.provenance["model"]
    assert model["id"] == "planted-model" and model["revision"] == "r1"
    assert model["named_by"] == "the embedding column's metadata"
    assert "without a model" in model["note"] and model["image_embeddings"]["column"] == "emb_planted"
    assert record.config["model"] is None
    # Which SimpleShot ran is in the record: the method settings and the metric definitions.
    assert record.provenance["task"]["method_settings"]["simpleshot"]["protocol"] == "bioclip"
    assert "BioCLIP" in record.provenance["metrics"]["simpleshot_3shot"]
    assert record.metrics["simpleshot_3shot"]["value"] > 0.9


def test_retrieval_on_a_column_without_metadata(stored: Path, tmp_path: Path, capsys) -> None:
    code, out, err = run(["eval", "retrieval", str(stored), "--column", "emb_bare", "--out",
                          str(tmp_path / "ret"), "-k", "3"], capsys)
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"retrieval on {stored} with column emb_bare (no model named) (")
    record = RunRecord.read(tmp_path / "ret" / "run.json")
    model = record.provenance["model"]
    assert model["id"] is None and model["named_by"] is None
    assert model["note"] == "the stored column 'emb_bare' was evaluated without a model; its metadata names none"
    json.loads((tmp_path / "ret" / "run.json").read_text())


def test_both_methods_of_simpleshot_in_one_run(stored: Path, tmp_path: Path, capsys) -> None:
    code, out, err = run(["eval", "fewshot", str(stored), "--column", "emb_bare", "--out",
                          str(tmp_path / "both"), "--shots", "1", "--repetitions", "2", "--methods", "simpleshot",
                          "simpleshot-biobench"], capsys)
    assert code == 0, err
    assert "simpleshot-biobench_1shot" in out
    record = RunRecord.read(tmp_path / "both" / "run.json")
    settings = record.provenance["task"]["method_settings"]
    assert settings["simpleshot"]["protocol"] == "bioclip" and settings["simpleshot-biobench"]["protocol"] == (
        "biobench")
    assert "BioBench" in record.provenance["metrics"]["simpleshot-biobench_1shot"]


def test_compare_columns_needs_no_model(stored: Path, capsys) -> None:
    code, out, err = run(["compare-columns", str(stored), "--shots", "1", "--repetitions", "2", "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["models"] == {"emb_planted": "planted-model", "emb_bare": None}
    assert "BioCLIP" in result["methods"]["simpleshot"]


@pytest.mark.parametrize(("args", "says"), [
    (["fewshot"], "needs --column"),
    (["retrieval"], "needs --column"),
    (["zeroshot", "--column", "emb_planted"], "needs --model"),
    (["fewshot", "--column", "emb_planted", "--model", "hf-hub:imageomics/bioclip"], "which is no spelling of --model"),
])
def test_what_needs_a_model_says_so(stored: Path, tmp_path: Path, capsys, args: list[str], says: str) -> None:
    task, *options = args
    code, _, err = run(["eval", task, str(stored), "--out", str(tmp_path / "run"), *options], capsys)
    assert code == 2
    assert says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_compare_names_runs_of_columns_without_a_model(stored: Path, tmp_path: Path, capsys) -> None:
    for column in ("emb_planted", "emb_bare"):
        assert run(["eval", "retrieval", str(stored), "--column", column, "--out",
                    str(tmp_path / column), "-k", "3"], capsys)[0] == 0
    code, out, err = run(["compare", str(tmp_path / "emb_planted"), str(tmp_path / "emb_bare"), "--json",
                          "--resamples", "50"], capsys)
    assert code == 0, err
    assert [r["model_id"] for r in json.loads(out)["runs"]] == ["planted-model", "column emb_bare (no model named)"]
