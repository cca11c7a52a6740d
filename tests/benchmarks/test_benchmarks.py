"""Named benchmarks: the dataset built in the cache folder, the benchmark's task and settings by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench import store

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.benchmarks import BENCHMARKS, get_benchmark
from cladebench.cli import main
from cladebench.evaluate.configs import eval_config
from cladebench.evaluate.run import run_eval
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic import WorldConfig, make_world


def test_registry_names_the_published_benchmarks() -> None:
    assert {name: b.tasks for name, b in BENCHMARKS.items()} == {
        "fine-grained-challenges": ("zeroshot", "fewshot", "retrieval"),
        "test-fine-grained-challenges": ("zeroshot", "fewshot", "retrieval"),
        **{f"crypticbio-{subset}": ("zeroshot",) for subset in ("common", "commonunseen", "endangered", "invasive")},
        "inquire-rerank": ("rerank",), "inat-coobserved": ("lineage",)}
    assert {b.release for b in BENCHMARKS.values() if "fine-grained" in b.name} == {"v0.1.0"}


def test_inat_coobserved_runs_the_lineage_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = "local-dir:" + str(write_tiny_model(tmp_path / "tiny", seed=2))
    world = make_world(WorldConfig(seed=5, names="generated", branching=(2, 2, 2, 1, 2, 1, 2)))
    store.write_dataset(world.pair_table(12, seed=5, image_format="jpeg"), get_benchmark("inat-coobserved")
                        .dataset_path())
    record, _ = run_eval(eval_config(dataset="inat-coobserved", model=model, out=tmp_path / "run", device="cpu"))
    assert record.task == "lineage" and record.provenance["dataset"]["benchmark"] == "inat-coobserved"
    assert record.metrics["hint_exact"]["n"] + record.provenance["task"].get("targets_unscored", 0) >= 1
    assert any(name.startswith("divergence=") for name in record.metrics)


def test_an_unbuilt_benchmark_offline_says_how_to_build_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "empty"))
    assert main(["eval", "inat-coobserved", "--model", "openai-compatible:x@http://127.0.0.1:9/v1", "--out",
                 str(tmp_path / "o")]) == 1
    assert "cladebench load inat-coobserved" in capsys.readouterr().err
