"""A model built on first use of its weights: an evaluation whose text embeddings are cached and whose image
vectors are stored never imports torch, and gives the numbers a built model gives."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench import store
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.record import RunRecord
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic import WorldConfig, make_world
from helpers.before_model import run_before_model


def test_a_cached_run_needs_no_weights_and_gives_the_same_numbers(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = "local-dir:" + str(write_tiny_model(tmp_path / "tiny", seed=1))
    toy = tmp_path / "world.lance"
    store.write_dataset(make_world(WorldConfig(seed=1)).to_table(24, seed=1), toy)
    embed_dataset(EmbedConfig(dataset=str(toy), model=model, device="cpu", progress=False))

    def run(out: str, unimportable: tuple[str, ...] = ()) -> tuple[int, bool]:
        outcomes, _ = run_before_model([["eval", "zeroshot", str(toy), "--model", model, "--device", "cpu",
                                         "--group-by", "none", "--out", str(tmp_path / out)]], unimportable)
        return outcomes[0]

    assert run("first") == (0, True)  # the labels' text embeddings are encoded: the weights are loaded
    assert run("second") == (0, False)  # every label cached, the learned scale remembered: no torch at all
    # As installed for research (no pandas: only the test references bring it), and with no torch to fall back on.
    assert run("third", ("pandas", "torch", "open_clip")) == (0, False)
    first, second = RunRecord.read(tmp_path / "first"), RunRecord.read(tmp_path / "second")
    assert second.metrics == first.metrics == RunRecord.read(tmp_path / "third").metrics
    assert second.provenance["model"]["logit_scale"] == first.provenance["model"]["logit_scale"]
    assert second.provenance["model"]["id"] == first.provenance["model"]["id"] == model


def test_few_shot_and_retrieval_on_stored_vectors_need_no_torch(tmp_path: Path, monkeypatch) -> None:
    """Neither task reads a text tower: on a dataset embedded beforehand, each runs with torch, open_clip and pandas
    unimportable (a research install without the clip extra has neither of the first two, and no pandas)."""
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = "local-dir:" + str(write_tiny_model(tmp_path / "tiny", seed=1))
    toy = tmp_path / "world.lance"
    store.write_dataset(make_world(WorldConfig(seed=1)).to_table(48, seed=1), toy)
    embed_dataset(EmbedConfig(dataset=str(toy), model=model, device="cpu", progress=False))
    common = ["--model", model, "--device", "cpu", "--group-by", "none"]
    outcomes, errors = run_before_model([
        ["eval", "fewshot", str(toy), *common, "--shots", "1", "--methods", "simpleshot", "--repetitions", "1",
         "--out", str(tmp_path / "fewshot")],
        ["eval", "retrieval", str(toy), *common, "--out", str(tmp_path / "retrieval")],
    ], ("torch", "open_clip", "pandas"))
    assert outcomes == [(0, False), (0, False)], errors
    assert RunRecord.read(tmp_path / "fewshot").metrics and RunRecord.read(tmp_path / "retrieval").metrics


def test_embedding_with_a_deferred_model_records_the_built_model(tmp_path: Path, monkeypatch) -> None:
    """A benchmark embedded on first use gets the deferred model of the run: the column's metadata must describe
    the weights that encoded it (preprocessing, dimension), not the facts a cached run knows."""
    from cladebench.models.deferred import DeferredEncoder
    from cladebench.models.registry import resolve_model
    from cladebench.tasks.common import column_metadata

    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = "local-dir:" + str(write_tiny_model(tmp_path / "tiny", seed=1))
    path = tmp_path / "world.lance"
    store.write_dataset(make_world(WorldConfig(seed=1)).to_table(8, seed=1), path)
    deferred = DeferredEncoder(resolve_model(model), "cpu")
    summary = embed_dataset(EmbedConfig(dataset=str(path), model=model, device="cpu", progress=False),
                            encoder=deferred)
    meta = column_metadata(store.open_dataset(path), summary.column)
    assert meta["model"] == model and meta.get("preprocessing") and "loaded" not in meta
