"""Run labels: the default from the model as named and the settings that set a run apart, --run-name on every eval
form, labels stored in run.json and read back (old records too), and names never cut to the same string."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.errors import UsageError
from cladebench.evaluate.compare_columns import compare_columns, format_column_comparison
from cladebench.evaluate.labels import (
    check_run_name,
    default_label,
    distinct_labels,
    model_label,
    short_names,
)
from cladebench.evaluate.record import RunRecord
from helpers.toy_dataset import write_toy_dataset

# --- the default label ----------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "label"), [
    ("bioclip-2", "bioclip-2"),
    ("BioCLIP", "BioCLIP"),  # as the user named it
    ("local-dir:/data/checkpoints/run-7/demo-clip-w0-s0/", "demo-clip-w0-s0"),
    ("local-dir:relative/tiny-clip", "tiny-clip"),
    ("openai-compatible:Qwen2-VL-7B@http://user:secret@127.0.0.1:8000/v1", "Qwen2-VL-7B"),
    ("hf-hub:imageomics/bioclip-2@2957b32", "bioclip-2"),
    ("ViT-B-16//weights/dir/epoch_30.pt", "ViT-B-16/epoch_30.pt"),
    ("ViT-B-16/openai", "ViT-B-16/openai"),
])
def test_the_model_part_of_a_label_is_short(model: str, label: str) -> None:
    assert model_label(model) == label
    assert default_label("zeroshot", {"model": model}, {}) == label
    assert "/data" not in label and "secret" not in label


def test_a_stored_column_without_a_model_is_named_by_its_column() -> None:
    provenance = {"model": {"id": "hf-hub:imageomics/bioclip-2", "named_by": "the embedding column's metadata",
                            "image_embeddings": {"column": "emb_bioclip2"}}}
    assert default_label("fewshot", {"model": None, "column": "emb_bioclip2"}, provenance) == "emb_bioclip2"
    assert default_label("retrieval", {"column": "emb_x"}, {}) == "emb_x"
    # A model handed in through the Python API (no --model) is named by its id.
    handed = {"model": {"id": "local-dir:/m/tiny-clip", "named_by": "--model", "image_embeddings": {"column": "e"}}}
    assert default_label("zeroshot", {"model": None}, handed) == "tiny-clip"
    assert default_label("zeroshot", {}, {}) == "?"


def test_settings_that_differ_from_the_task_defaults_are_named() -> None:
    sci_photo = {"model": "bioclip", "name_style": "sci", "templates": "photo", "rank": "species",
                 "logit_scale": "learned", "within": None}
    assert default_label("zeroshot", sci_photo, {}) == "bioclip · sci · photo"
    # Defaults are not named; a setting given at its default value is not either.
    assert default_label("zeroshot", {"model": "bioclip", "name_style": "taxon", "templates": "bioclip"},
                         {}) == "bioclip"
    assert default_label("zeroshot", {"model": "bioclip", "rank": "genus", "logit_scale": "100",
                                      "within": "class=Aves", "labels": "/lists/birds.csv"}, {}) == (
        "bioclip · scale 100 · genus · labels birds.csv · within class=Aves")
    assert default_label("fewshot", {"model": "bioclip-2", "shots": [1, 10], "methods": ["linear"]},
                         {}) == "bioclip-2 · 1,10 shots · linear"
    assert default_label("fewshot", {"model": "bioclip-2", "shots": [1, 5],
                                     "methods": ["simpleshot", "linear", "knn"]}, {}) == "bioclip-2"
    revised = {"model": "bioclip", "revision": "0123456789abcdef"}
    assert default_label("zeroshot", revised, {}) == "bioclip · rev 0123456"
    long = default_label("zeroshot", {"model": "bioclip", "templates": "a photograph of the organism {c}, close up"},
                         {})
    assert long.startswith("bioclip · a photograph") and long.endswith("…") and len(long) < 40
    # A task this version does not know: the model alone.
    assert default_label("no-such-task", {"model": "bioclip", "rank": "genus"}, {}) == "bioclip"


@pytest.mark.parametrize("bad", ["", "   ", "two\nlines", "tab\there", "cr\r", "x" * 5_000])
def test_a_run_name_that_cannot_name_a_run_on_one_line_is_refused(bad: str) -> None:
    with pytest.raises(UsageError, match="--run-name"):
        check_run_name(bad)
    check_run_name("bioclip · sci")
    check_run_name("é" * 100)  # at the limit, in characters, not bytes
    check_run_name(None)


# --- the record -----------------------------------------------------------------------------------


def test_the_label_is_stored_and_read_back(tmp_path: Path) -> None:
    record = RunRecord(task="zeroshot", metrics={}, provenance={}, config={"model": "bioclip"}, label="mine")
    path = record.write(tmp_path / "run", pa.table({"uuid": ["a"]}))
    assert json.loads(path.read_text())["label"] == "mine"
    assert RunRecord.read(path).label == "mine"
    # No label given: the default is filled in and written.
    record = RunRecord(task="zeroshot", metrics={}, provenance={}, config={"model": "bioclip", "name_style": "sci"})
    path = record.write(tmp_path / "default", pa.table({"uuid": ["a"]}))
    assert json.loads(path.read_text())["label"] == "bioclip · sci" == RunRecord.read(path).label


def test_a_record_written_before_labels_existed_reads_with_the_default(tmp_path: Path) -> None:
    record = RunRecord(task="zeroshot", metrics={}, provenance={}, config={"model": "local-dir:/m/tiny-clip",
                                                                             "templates": "photo"})
    path = record.write(tmp_path / "old", pa.table({"uuid": ["a"]}))
    old = json.loads(path.read_text())
    del old["label"]
    path.write_text(json.dumps(old))
    assert RunRecord.read(path).label == "tiny-clip · photo"


# --- several runs ---------------------------------------------------------------------------------


def test_runs_sharing_a_label_are_told_apart() -> None:
    configs: list[dict[str, Any]] = [{"dataset": "/d/birds.lance", "out": "a"}, {"dataset": "/d/fish.lance",
                                                                                  "out": "b"}, {"out": "c"}]
    assert distinct_labels(["x", "x", "y"], configs, ["a", "b", "c"]) == [
        "x · dataset birds.lance", "x · dataset fish.lance", "y"]
    same = [{"model": "m", "out": "r1"}, {"model": "m", "out": "r2"}]
    assert distinct_labels(["m", "m"], same, ["r1", "r2"]) == ["m (r1)", "m (r2)"]
    assert distinct_labels(["m", "m"], same, ["run", "run"]) == ["m (run) #1", "m (run) #2"]
    built = [{"model": "m", "given": ["model"], "is_benchmark": False},
             {"model": "m", "given": [], "is_benchmark": None}]
    assert distinct_labels(["m", "m"], built, ["r1", "r2"]) == ["m (r1)", "m (r2)"]  # how a config was built tells none


def test_short_names_never_cut_two_names_to_one_string() -> None:
    cut = short_names(["emb_bioclip2", "emb_bioclip2p5"], 12)
    assert cut["emb_bioclip2"] != cut["emb_bioclip2p5"]
    assert all(len(name) <= 12 for name in cut.values())
    alike = short_names(["emb_bioclip2p5_a", "emb_bioclip2p5_b", "emb_x"], 12)
    assert len(set(alike.values())) == 3 and all(len(name) <= 12 for name in alike.values())
    assert alike["emb_x"] == "emb_x"
    assert short_names(["same", "same"], 3) == {"same": "sa…"}


def _two_bioclip_columns(path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 24
    species = [f"sp{i % 3}" for i in range(n)]
    table = pa.table({"uuid": [f"u{i:02d}" for i in range(n)], "image": pa.array([b"x"] * n, pa.large_binary()),
                      "genus": ["Genus"] * n, "species": species, "scientific_name": [f"Genus {s}" for s in species]})
    for key, dim, model in (("bioclip2", 6, "hf-hub:imageomics/bioclip-2"),
                            ("bioclip2p5", 8, "hf-hub:imageomics/bioclip-2.5-vith14")):
        vectors = rng.normal(size=(n, dim)).astype(np.float32)
        table = table.append_column(store.embedding_field(key, dim, {"model": model}),
                                    pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim))
    store.write_dataset(table, path)
    return path


def test_compare_columns_prints_emb_bioclip2_and_emb_bioclip2p5_apart(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _two_bioclip_columns(tmp_path / "two.lance")
    result = compare_columns(store.open_dataset(path), shots=(1,), repetitions=2)
    text = format_column_comparison(result)
    header = text.splitlines()[text.splitlines().index("linear CKA") + 1].split()
    assert len(header) == 2 and header[0] != header[1], header
    assert "emb_bioclip2p5" not in header  # cut to the cell, but apart
    assert "bioclip-2.5-vith14" in text and "hf-hub:" not in text  # models named by their labels
    assert main(["compare-columns", str(path), "--shots", "1", "--repetitions", "2"]) == 0
    assert capsys.readouterr().out.strip() == text


# --- --run-name on every form of eval ---------------------------------------------------------------


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    return write_toy_dataset(tmp_path / "toy.lance")


def _fewshot(toy: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "fewshot", str(toy), "--column", "emb_toy", "--out", str(out), "--group-by", "none",
            "--shots", "1", "--repetitions", "2", "--methods", "simpleshot", "--group-key", "uuid", *extra]


def test_run_name_is_stored_by_eval_and_the_default_names_the_column(toy: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_fewshot(toy, tmp_path / "given", "--run-name", " toy · one shot ")) == 0
    assert "run name: toy · one shot" in capsys.readouterr().out
    assert RunRecord.read(tmp_path / "given").label == "toy · one shot"
    assert main(_fewshot(toy, tmp_path / "default")) == 0
    # The column evaluated without a model, and the shots and methods that differ from the task's defaults.
    assert RunRecord.read(tmp_path / "default").label == "emb_toy · 1 shots · simpleshot · 2 reps"


@pytest.mark.parametrize("form", ["zeroshot", "fewshot", "retrieval", "rerank", "lineage", "geo", "inquire-rerank",
                                  "inat-coobserved"])
@pytest.mark.parametrize("bad", ["", "  ", "a\nb"])
def test_a_blank_or_multiline_run_name_is_refused_on_every_form(form: str, bad: str, toy: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    head = ["eval", form]
    if form not in ("inquire-rerank", "inat-coobserved"):
        head.append(str(toy))
    code = main([*head, "--model", "bioclip", "--out", str(tmp_path / "run"), "--run-name", bad])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "--run-name" in err, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("form", ["zeroshot", "fewshot"])
def test_the_old_label_option_is_a_usage_error(form: str, toy: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # One name per idea: --labels is zero-shot's label set, so the run's name is --run-name and --label is gone.
    with pytest.raises(SystemExit) as exited:
        main(["eval", form, str(toy), "--model", "bioclip", "--out", str(tmp_path / "run"), "--label", "x"])
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert len(err.strip().splitlines()) == 1 and "unrecognized arguments: --label x" in err, err
    assert not (tmp_path / "run").exists()
