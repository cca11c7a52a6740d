"""`cladebench demo` end to end: the sample suite, the demo model, and numbers that carry signal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord


@pytest.mark.slow
def test_demo_runs_every_step_and_its_zero_shot_is_far_above_chance(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--images", "192", "--pairs", "16"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["steps"]) >= {"fine-grained", "co-observed", "subset", "embed", "zeroshot", "fewshot",
                                     "rerank", "geo", "coobserved-export", "lineage", "report"}
    assert summary["steps"]["embed"]["column"] == "emb_demo"
    assert summary["steps"]["embed"]["datasets"]["fine-grained"] == {
        **summary["steps"]["embed"]["datasets"]["fine-grained"], "valid": 192, "failed": 0}
    zeroshot = summary["steps"]["zeroshot"]
    assert zeroshot["metrics"]["top1_species"] > 10 * zeroshot["chance_top1"]
    assert zeroshot["metrics"]["top1_kingdom"] > zeroshot["metrics"]["top1_species"]
    record = RunRecord.read(zeroshot["run"])
    assert record.metrics["top1_species"]["value"] == pytest.approx(zeroshot["metrics"]["top1_species"], abs=1e-4)
    assert record.provenance["model"]["image_embeddings"]["column"] == "emb_demo"
    fewshot = summary["steps"]["fewshot"]
    assert fewshot["classes"] >= 10 and fewshot["metrics"]["simpleshot_1shot"] > 10 * fewshot["chance"]
    assert "simpleshot_2shot" in printed
    rerank = summary["steps"]["rerank"]
    assert rerank["queries"] >= 4 and rerank["metrics"]["ap@100"] > 1.5 * 100 * rerank["positive_share"]
    assert "AP@100" in printed
    lineage = summary["steps"]["lineage"]["metrics"]
    assert lineage["hint_exact"] > lineage["nohint_exact"] and lineage["hint_depth"] > lineage["nohint_depth"]
    assert "with the hint" in printed
    geo = summary["steps"]["geo"]
    assert geo["fused_top1"] - geo["image_top1"] == pytest.approx(geo["gain"]["value"], abs=1e-3)
    assert "with the prior" in printed
    report = summary["steps"]["report"]
    assert report["runs"] == 5 and Path(report["html"]).stat().st_size > 10_000
    assert f"{report['html']}" in printed and "| " in Path(report["markdown"]).read_text()
    built = summary["steps"]["coobserved-export"]
    assert 0 < built["photos"] <= built["eligible"] and sum(built["kept_per_rank"].values()) == built["photos"]
    assert "trained on this synthetic world" in printed and "say nothing about real organisms" in printed


def test_overwrite_replaces_only_a_previous_demo(tmp_path: Path) -> None:
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    assert main(["demo", "--out", str(precious), "--overwrite"]) == 1
    assert (precious / "thesis.tex").read_text() == "years of work"
