"""`cladebench demo` end to end: the sample suite, the demo model, and numbers that carry signal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.demo.suite import GENUS_ONLY_ROWS
from cladebench.evaluate.record import RunRecord


@pytest.mark.slow
def test_demo_runs_every_step_and_its_zero_shot_is_far_above_chance(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--images", "192", "--pairs", "16"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["steps"]) == ["fine-grained", "co-observed", "subset", "embed", "zeroshot", "fewshot",
                                      "retrieval", "rerank", "geo", "coobserved-export", "lineage", "report"]
    rows = 192 + GENUS_ONLY_ROWS  # the photos asked for, then the rows labelled to genus only
    assert summary["steps"]["fine-grained"]["rows"] == rows
    assert summary["steps"]["fine-grained"]["genus_only"]["rows"] == GENUS_ONLY_ROWS
    embed = summary["steps"]["embed"]
    assert [m["label"] for m in embed["models"]] == ["demo", "demo · early"]
    assert [m["column"] for m in embed["models"]] == ["emb_demo", "emb_demo_early"]
    assert embed["datasets"]["fine-grained emb_demo"]["valid"] == rows
    assert embed["datasets"]["fine-grained emb_demo_early"] == {
        **embed["datasets"]["fine-grained emb_demo_early"], "valid": rows, "failed": 0}
    assert "--model demo" in printed  # the alias the demo recorded: the next command needs no path

    zeroshot = summary["steps"]["zeroshot"]
    demo, early = zeroshot["runs"]["demo"], zeroshot["runs"]["demo · early"]
    grouped, pooled = RunRecord.read(demo["grouped"]), RunRecord.read(demo["pooled"])
    # Per challenge group (each its own label set), and a pooled run beside it that says it is a summary.
    assert grouped.label == "demo" and pooled.label == "demo · pooled (summary)"
    assert grouped.provenance["groups"]["pooled"] is False and len(demo["by_group"]) >= 4
    assert all(f"{group}/top1_species" in grouped.metrics for group in demo["by_group"])
    assert pooled.provenance["groups"]["pooled"] is True and "top1_species" in pooled.metrics
    chance = 1.0 / pooled.provenance["label_set"]["size"]
    assert demo["pooled_value"] > 10 * chance and pooled.metrics["top1_kingdom"]["value"] > demo["pooled_value"]
    assert pooled.provenance["model"]["image_embeddings"]["column"] == "emb_demo"
    # The genus-only rows are predicted, never scored at species, and counted by reason in every zero-shot record.
    for record in (grouped, pooled):
        assert record.provenance["rows"] == {"selected": rows, "evaluated": rows, "left_out": {
            "predicted, not scored at species: no species in the label set (e.g. genus-only rows)": GENUS_ONLY_ROWS}}
    assert sum(grouped.metrics[f"{g}/top1_species"]["n"] for g in demo["by_group"]) == 192
    assert f"{rows} of {rows} selected rows evaluated; left out: {GENUS_ONLY_ROWS} predicted, not scored" in printed
    assert f"{GENUS_ONLY_ROWS} of them labelled to genus only" in printed
    # The early checkpoint is worse, and the paired tests find both differences and ties among the groups.
    assert early["pooled_value"] < demo["pooled_value"]
    assert set(zeroshot["paired"]) == set(demo["by_group"])
    assert "better" in zeroshot["paired"].values() and "tied" in zeroshot["paired"].values()
    assert "paired per group" in printed and "pooled (summary)" in printed
    # A group too small for some shot count runs the counts it allows; one that allows none is left out.
    left_out = summary["steps"]["fewshot"]["left_out_groups"]
    assert set(left_out) <= set(demo["by_group"])
    assert set(summary["steps"]["fewshot"]["runs"]["demo"]["by_group"]) == set(demo["by_group"]) - set(left_out)
    for task, headline in (("fewshot", "simpleshot_1shot"), ("retrieval", "map_species")):
        runs = summary["steps"][task]["runs"]
        assert set(runs) == {"demo", "demo · early"}
        assert runs["demo"]["pooled_value"] > runs["demo · early"]["pooled_value"] > 0
        record = RunRecord.read(runs["demo · early"]["grouped"])
        assert record.label == "demo · early" and record.provenance["model"]["image_embeddings"]["column"] == (
            "emb_demo_early")
        assert all(f"{group}/{headline}" in record.metrics for group in runs["demo"]["by_group"])

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
    assert report["runs"] == 3 * 4 + 3 and Path(report["html"]).stat().st_size > 10_000
    markdown = Path(report["markdown"]).read_text()
    assert f"{report['html']}" in printed and "| " in markdown
    assert "(tied, paired by" in markdown and "(worse, paired by" in markdown  # a tie and a difference, unit named
    built = summary["steps"]["coobserved-export"]
    assert 0 < built["photos"] <= built["eligible"] and sum(built["kept_per_rank"].values()) == built["photos"]
    assert "trained on this synthetic world" in printed and "say nothing about real organisms" in printed


def test_overwrite_replaces_only_a_previous_demo(tmp_path: Path) -> None:
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    assert main(["demo", "--out", str(precious), "--overwrite"]) == 1
    assert (precious / "thesis.tex").read_text() == "years of work"


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_demo_lines() -> list[str]:
    """The lines of the README's "What it prints" block, but its ``...`` elisions."""
    section = README.read_text(encoding="utf-8").split("What it prints", 1)[1]
    block = section.split("```", 2)[1]
    lines = [line.rstrip() for line in block.splitlines()[1:] if line.strip()]
    assert len(lines) >= 8, "the README's demo block was not found"
    return [line for line in lines if line.strip() != "..."]


@pytest.mark.slow
def test_the_readme_shows_what_the_demo_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's example output is the demo's, line for line (a line ending in ``...`` as its start): the
    numbers come from a deterministic training and seeded evaluation, so they are the same on every CPU."""
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    for line in readme_demo_lines():
        if line.endswith(" ..."):
            assert any(p.startswith(line[:-4]) for p in printed), f"no printed line starts as: {line}"
        else:
            assert line in printed, f"the README shows a line the demo does not print: {line}"
