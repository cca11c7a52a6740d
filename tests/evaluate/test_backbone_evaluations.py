"""Image-only backbones through everything that works on image vectors: a suite mixing a CLIP model and a DINOv2
(zero-shot cells recorded as skipped because they need a text tower, few-shot and retrieval filled, the skips shown
by `results` and the report), `eval fewshot` with every method, `eval retrieval`, and CKA against a CLIP column."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")
pytest.importorskip("transformers")

from cladebench.cli import main
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.suite import read_results
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic.mirrors import write_mirrors

BENCHMARK = "test-fine-grained-challenges"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory, tiny_dinov2: Path) -> Iterator[dict]:
    """The FGC test mirror embedded (as a user embeds a copy) with a tiny CLIP and a tiny DINOv2, and the suite of
    both models over it, written by the CLI with its report."""
    root = tmp_path_factory.mktemp("backbone-suite")
    clip = "local-dir:" + str(write_tiny_model(root / "tiny-clip", seed=0))
    dino = f"local-dir:{tiny_dinov2}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLADEBENCH_CACHE_DIR", str(root / "cache"))
        patch.delenv("CLADEBENCH_MIRROR", raising=False)
        mirrors = write_mirrors(root / "mirrors")
        dataset = mirrors.folders[BENCHMARK] / "data/challenges.lance"
        for model in (clip, dino):
            embed_dataset(EmbedConfig(dataset=str(dataset), model=model, device="cpu", progress=False))
        out = root / "out"
        assert main(["suite", "--model", clip, "--model", dino, "--benchmarks", BENCHMARK, "--mirror",
                     str(mirrors.root), "--out", str(out), "--device", "cpu", "--setting", "methods=simpleshot",
                     "repetitions=1"]) == 0
        yield {"root": root, "clip": clip, "dino": dino, "dataset": dataset, "out": out}


def test_a_mixed_suite_skips_the_text_cells_of_the_image_only_model(mixed: dict, capsys) -> None:
    rows = read_results(mixed["out"]).to_pylist()
    dino = [r for r in rows if r["model"] == mixed["dino"]]
    clip = [r for r in rows if r["model"] == mixed["clip"]]
    skipped = {r["protocol"] for r in dino if r["status"] == "skipped" and "needs a text tower" in r["reason"]}
    assert skipped == {"zeroshot", "zeroshot · unseen_only"}
    assert all(r["metric"] is None for r in dino if r["protocol"].startswith("zeroshot"))
    finished = {r["protocol"].split(" ·")[0] for r in dino if r["status"] == "finished" and r["value"] is not None}
    assert finished == {"fewshot", "retrieval"}
    assert {r["protocol"].split(" ·")[0] for r in clip if r["status"] == "finished"} == {
        "zeroshot", "fewshot", "retrieval"}
    # Recorded as a skip, not a failure: the next suite reuses the reason and runs nothing.
    recorded = [json.loads(path.read_text()) for path in (mixed["out"] / "runs" / BENCHMARK).glob("*/skipped.json")]
    text_skips = [entry for entry in recorded if "needs a text tower" in entry["reason"]]
    assert len(text_skips) == 2 and all(e["exit_code"] == 2 and e["model"] == mixed["dino"] for e in text_skips)
    capsys.readouterr()
    assert main(["results", str(mixed["out"]), "--view", "rows"]) == 0
    shown = capsys.readouterr().out
    assert "needs a text tower" in shown and "skipped" in shown.lower()
    report = (mixed["out"] / "report.html").read_text(encoding="utf-8")
    assert "needs a text tower" in report


def test_fewshot_with_every_method_and_retrieval_run_on_backbone_vectors(mixed: dict, tmp_path: Path) -> None:
    methods = ["simpleshot", "simpleshot-biobench", "linear", "knn"]
    out = tmp_path / "fewshot"
    assert main(["eval", "fewshot", str(mixed["dataset"]), "--model", mixed["dino"], "--rank", "genus",
                 "--group-by", "none", "--shots", "1", "--repetitions", "2", "--methods", *methods,
                 "--out", str(out)]) == 0
    record = RunRecord.read(out)
    for method in methods:
        assert record.metrics[f"{method}_1shot"]["value"] is not None, method
    embeddings = record.provenance["model"]["image_embeddings"]
    assert embeddings["column"] == "emb_tinydinov2" and embeddings["preprocessing"]["mode"] == "transformers"
    out = tmp_path / "retrieval"
    assert main(["eval", "retrieval", str(mixed["dataset"]), "--model", mixed["dino"], "--rank", "genus",
                 "--group-by", "none", "--out", str(out)]) == 0
    assert 0 <= RunRecord.read(out).metrics["map_genus"]["value"] <= 1


def test_cka_compares_a_backbone_column_with_a_clip_column(mixed: dict, capsys) -> None:
    capsys.readouterr()
    assert main(["compare-columns", str(mixed["dataset"]), "--columns", "emb_tinyclip", "emb_tinydinov2", "--rank",
                 "genus", "--shots", "1", "--repetitions", "1", "--json"]) == 0
    compared = json.loads(capsys.readouterr().out)
    text = json.dumps(compared)
    assert "emb_tinyclip" in text and "emb_tinydinov2" in text and "cka" in text.lower()
