"""A suite over a Fine-Grained Challenges mirror where one challenge group is too small for 5 shots: the 5-shot run
is recorded with that group's gap (no value, the task's reason) in the results table and the report, not skipped
whole; a run none of whose groups can be split is still a skip with the reason."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench import store
from cladebench.cli import main
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.suite import read_results
from cladebench.models.tiny import write_tiny_model
from cladebench.store.sql import sql_literal
from cladebench.synthetic import make_world
from cladebench.synthetic.mirrors import MIRROR_WORLD, write_finegrained_mirror


def test_a_small_group_is_a_gap_in_the_run_not_a_skip_of_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CLADEBENCH_MIRROR", raising=False)
    path = write_finegrained_mirror(tmp_path / "mirrors" / "fine-grained-challenges", make_world(MIRROR_WORLD),
                                    columns=("emb_bioclip2",))
    dataset = store.open_dataset(path)
    small = sorted(set(store.read(dataset, columns=["challenge_group"]).column(0).to_pylist()))[-1]
    # The small group keeps only its unseen rows: about three images per species, too few for 5 shots.
    dataset.delete(f"challenge_group = {sql_literal(small)} AND array_length(seen_in_training) > 0")
    model = "local-dir:" + str(write_tiny_model(tmp_path / "tiny", seed=0))
    embed_dataset(EmbedConfig(dataset=str(path), model=model, device="cpu", progress=False))
    out = tmp_path / "out"
    assert main(["suite", "--model", model, "--benchmarks", "fine-grained-challenges", "--mirror",
                 str(tmp_path / "mirrors"), "--out", str(out), "--device", "cpu", "--setting", "methods=simpleshot",
                 "repetitions=1"]) == 0
    rows = read_results(out).to_pylist()
    five = [r for r in rows if r["protocol"] == "fewshot · shots=5"]
    assert five and {r["status"] for r in five} == {"finished"}
    gaps = [r for r in five if r["metric"].startswith(f"{small}/")]
    measures = ("", "_balanced", "_mistake_severity", "_hdist1", "_hdist5",
                *(f"_{rank}" for rank in ("kingdom", "phylum", "class", "order", "family", "genus")))
    assert {r["metric"] for r in gaps} == {f"{small}/simpleshot_5shot{measure}" for measure in measures}
    assert all(r["value"] is None and r["n"] == 0 and "too few groups for 5 shots" in r["reason"] for r in gaps)
    assert all(r["value"] is not None and r["reason"] is None for r in five if r not in gaps)
    record = json.loads((out / gaps[0]["run"]).read_text())
    assert record["provenance"]["groups"]["left_out"][small] == gaps[0]["reason"]
    # No group has 5-shot splits among the unseen rows: that run alone is skipped, with the reason.
    unseen = [r for r in rows if r["protocol"] == "fewshot · shots=5 · unseen_only"]
    assert [r["status"] for r in unseen] == ["skipped"] and "no challenge_group group" in unseen[0]["reason"]
    assert "left out: few-shot needs at least 2 classes" in (out / "report.html").read_text()
