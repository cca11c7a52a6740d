"""Fine-Grained Challenges by name, from a mirror in the published layout: few-shot with no model, per group and
never pooled, genus-only rows never scored for species, exposure filters, and releases whose embeddings' revisions
are not the pinned ones refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.models.registry import resolve_model
from cladebench.synthetic import make_world
from cladebench.synthetic.mirrors import MIRROR_WORLD, write_finegrained_mirror

ARGS = ("--repetitions", "1", "--methods", "simpleshot")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mirror") / "fine-grained-challenges"
    write_finegrained_mirror(folder, make_world(MIRROR_WORLD))
    return folder


def _run(path: Path) -> dict:
    return json.loads((path / "run.json").read_text())


def test_fewshot_by_name_from_a_mirror_needs_no_model_and_never_pools_groups(mirror, tmp_path, monkeypatch,
                                                                              capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    assert main(["eval", "fewshot", "fine-grained-challenges", "--data", str(mirror), "--out", str(out),
                 *ARGS]) == 0
    record = _run(out)
    table = store.read(store.open_dataset(mirror / "data/challenges.lance"),
                       columns=["uuid", "challenge_group", "species"])
    groups = set(table.column("challenge_group").to_pylist())
    assert record["task"] == "fewshot" and len(groups) == 3
    assert record["provenance"]["groups"] == {**record["provenance"]["groups"], "column": "challenge_group",
                                              "pooled": False}
    assert {name.split("/")[0] for name in record["metrics"]} == groups  # every metric is a group's, none pooled
    assert record["provenance"]["dataset"]["benchmark"] == "fine-grained-challenges"
    source = record["provenance"]["dataset"]["benchmark_source"]
    assert source["kind"] == "mirror" and source["pinned_release"] == "v0.1.0"
    assert {c: e["revision"] for c, e in source["published_embeddings"].items()} == {
        c: resolve_model(m).revision for c, m in (("emb_bioclip", "bioclip"), ("emb_bioclip2", "bioclip-2"),
                                                  ("emb_bioclip2p5", "bioclip-2.5"))}
    model = record["provenance"]["model"]
    assert model["id"] == "hf-hub:imageomics/bioclip-2" and model["named_by"] == "the embedding column's metadata"
    assert model["image_embeddings"]["revision"] == resolve_model("bioclip-2").revision
    genus_only = {u for u, s in zip(table.column("uuid").to_pylist(), table.column("species").to_pylist(),
                                    strict=True) if s is None}
    predicted = set(pq.read_table(out / "predictions.parquet").column("uuid").to_pylist())
    assert genus_only and not genus_only & predicted  # genus-only rows are never scored for species


def test_the_mirror_root_and_the_exposure_filters(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CLADEBENCH_MIRROR", str(mirror.parent))
    out = tmp_path / "unseen"
    # A third of the mirror's rows is unseen: about three images per species, enough for one shot.
    assert main(["eval", "fewshot", "fine-grained-challenges", "--unseen-only", "--shots", "1", "--out", str(out),
                 *ARGS]) == 0
    table = store.read(store.open_dataset(mirror / "data/challenges.lance"), columns=["uuid", "seen_in_training"])
    unseen = {u for u, s in zip(table.column("uuid").to_pylist(), table.column("seen_in_training").to_pylist(),
                                strict=True) if s == []}
    predicted = set(pq.read_table(out / "predictions.parquet").column("uuid").to_pylist())
    assert predicted and predicted <= unseen
    out = tmp_path / "not-seen"
    assert main(["eval", "fewshot", "fine-grained-challenges", "--not-seen-by", "bioclip-2", "--shots", "1",
                 "--out", str(out), *ARGS]) == 0
    seen_by = {u for u, s in zip(table.column("uuid").to_pylist(), table.column("seen_in_training").to_pylist(),
                                 strict=True) if "bioclip-2" in s}
    assert not seen_by & set(pq.read_table(out / "predictions.parquet").column("uuid").to_pylist())


@pytest.mark.parametrize("where", ["both", "sidecar"])
def test_a_release_whose_revision_is_not_the_pin_is_refused(where, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "fgc"
    write_finegrained_mirror(folder, make_world(MIRROR_WORLD), rows=54,
                             revisions={"emb_bioclip2": "0123456789abcdef"} if where == "both" else None)
    if where == "sidecar":
        sidecar = folder / "data/challenges.embedding_models.json"
        entries = json.loads(sidecar.read_text())
        entries["emb_bioclip2"]["revision"] = "0123456789abcdef"
        sidecar.write_text(json.dumps(entries))
    out = tmp_path / "run"
    code = main(["eval", "fewshot", "fine-grained-challenges", "--data", str(folder), "--out", str(out), *ARGS])
    err = capsys.readouterr().err.strip()
    assert code == 4 and len(err.splitlines()) == 1 and "'emb_bioclip2'" in err and "0123456789abcdef" in err
    assert ("inconsistent" if where == "sidecar" else "pins bioclip-2 at") in err
    assert not out.exists()


def test_a_model_without_a_published_column_is_refused_before_it_loads(mirror, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    code = main(["eval", "fine-grained-challenges", "--data", str(mirror), "--model", "clip-vit-b-16", "--out",
                 str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "publishes image embeddings in emb_bioclip, emb_bioclip2, emb_bioclip2p5" in err
    assert "cladebench embed DIR --model clip-vit-b-16" in err


def test_a_suite_never_embeds_into_a_published_benchmark(mirror, tmp_path, monkeypatch, capsys):
    """The suite's runs get the same refusal from the plan as ``eval``: none tries to embed the mirror (which would
    write a column into a published dataset) and the reason is the one line."""
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    version = store.open_dataset(mirror / "data/challenges.lance").version
    code = main(["suite", "--model", "clip-vit-b-16", "--benchmarks", "fine-grained-challenges", "--mirror",
                 str(mirror.parent), "--out", str(tmp_path / "suite"), "--no-report", "--setting", "methods=simpleshot",
                 "repetitions=1"])
    captured = capsys.readouterr()
    assert code == 1 and "no run of the suite could run (7 skipped" in captured.err
    assert "embedding" not in captured.err
    assert "publishes image embeddings in emb_bioclip, emb_bioclip2, emb_bioclip2p5, none of them of clip-vit-b-16" \
        in captured.out
    assert store.open_dataset(mirror / "data/challenges.lance").version == version


def test_wrong_uses_of_a_named_benchmark_are_usage_errors(mirror, tmp_path, capsys):
    assert main(["eval", "rerank", "fine-grained-challenges", "--data", str(mirror), "--out",
                 str(tmp_path / "a")]) == 2
    assert "evaluated with zeroshot, fewshot, retrieval, not rerank" in capsys.readouterr().err
    dataset = mirror / "data/challenges.lance"
    assert main(["eval", "fewshot", str(dataset), "--data", str(mirror), "--out", str(tmp_path / "b"), *ARGS]) == 2
    assert "drop --data" in capsys.readouterr().err
    assert main(["eval", "fewshot", "fine-grained-challenges", "--data", str(tmp_path / "none"), "--out",
                 str(tmp_path / "c"), *ARGS]) == 3


def test_without_a_mirror_the_release_is_opened_remotely(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("CLADEBENCH_MIRROR", raising=False)
    assert main(["eval", "fewshot", "test-fine-grained-challenges", "--out", str(tmp_path / "r"), *ARGS]) == 5
    assert "hf://datasets/thompsonmj/test-fine-grained-challenges@v0.1.0/data/challenges.lance" in \
        capsys.readouterr().err
