"""`eval zeroshot ... --labels-from-reviews`: reviewed genus-only rows scored against the experts' agreed labels,
disputed, not-identifiable and unknown rows counted and left out, the dataset itself untouched, the record saying
where its labels came from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.errors import CladebenchError, UsageError
from cladebench.store.reviews import Review, append_review, reviews_path
from cladebench.taxonomy import Lineage, Rank

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.configs import RerankEvalConfig, ZeroShotEvalConfig
from cladebench.evaluate.run import run_eval
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic import WorldConfig, make_world
from helpers.embedded import write_embedded

N = 48


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A small world, every 6th row identified to genus only, embedded with a tiny model."""
    root = tmp_path_factory.mktemp("reviewed")
    model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=4))
    world = make_world(WorldConfig(seed=2, names="generated", branching=(1, 1, 1, 1, 2, 2, 3)))
    table = world.to_table(N, seed=7, image_format="jpeg")
    genus_only = np.arange(N) % 6 == 0
    for column, blank in (("species", lambda row: None), ("scientific_name", lambda row: row["genus"])):
        values = [blank(row) if g else row[column] for row, g in zip(table.to_pylist(), genus_only, strict=True)]
        table = table.set_column(table.column_names.index(column), column, pa.array(values, pa.string()))
    path = root / "world.lance"
    write_embedded(table, path, model)
    return path, model


def _lineage_of(path: Path, binomial: str) -> Lineage:
    rows = store.read(store.open_dataset(path), where=f"species = '{binomial}'").to_pylist()
    return Lineage.from_row(rows[0]).truncate(Rank.SPECIES)


def test_reviewed_rows_are_scored_against_the_agreed_labels(embedded, tmp_path, capsys):
    path, model = embedded
    plain, _ = run_eval(ZeroShotEvalConfig(dataset=str(path), model=model, out=tmp_path / "plain", device="cpu",
                                           group_by="none", name_style="sci"))
    predictions = pq.read_table(tmp_path / "plain" / "predictions.parquet").to_pylist()
    genus_only = [p for p in predictions if not p["scored"]]
    assert len(genus_only) == N // 6
    right, wrong, disputed, blank = genus_only[:4]
    reviews = reviews_path(str(path))
    for reviewer in ("ana", "ben"):
        # right: the reviewers name the model's top species; wrong: its second guess, so top-1 misses, top-5 hits
        append_review(reviews, Review(uuid=right["uuid"], lineage=_lineage_of(path, right["pred_label"]),
                                      rank=Rank.SPECIES, reviewer=reviewer, dataset_version=1))
        append_review(reviews, Review(uuid=wrong["uuid"], lineage=_lineage_of(path, wrong["top5_labels"][1]),
                                      rank=Rank.SPECIES, reviewer=reviewer))
        append_review(reviews, Review(uuid=blank["uuid"], lineage=None, rank=None, reviewer=reviewer))
    append_review(reviews, Review(uuid=disputed["uuid"], lineage=_lineage_of(path, disputed["top5_labels"][0]),
                                  rank=Rank.SPECIES, reviewer="ana"))
    append_review(reviews, Review(uuid=disputed["uuid"], lineage=_lineage_of(path, disputed["top5_labels"][1]),
                                  rank=Rank.SPECIES, reviewer="ben"))
    append_review(reviews, Review(uuid="not-a-row", lineage=_lineage_of(path, right["pred_label"]),
                                  rank=Rank.SPECIES, reviewer="ana"))
    version = store.open_dataset(path).version
    out = tmp_path / "reviewed"
    assert main(["eval", "zeroshot", str(path), "--model", model, "--out", str(out), "--device", "cpu",
                 "--group-by", "none", "--name-style", "sci", "--labels-from-reviews"]) == 0
    said = capsys.readouterr().out
    record = json.loads((out / "run.json").read_text())
    # the rows not scored are said to have had no agreed review, not "no usable vector or no label at the rank"
    reason = "no agreed review (--labels-from-reviews scores only rows reviewers agree on)"
    assert record["provenance"]["rows"]["left_out"] == {reason: N - 2}
    assert f"{N - 2} {reason}" in said and "no usable vector" not in said
    scored = pq.read_table(out / "predictions.parquet").to_pylist()
    assert sorted(p["uuid"] for p in scored) == sorted([right["uuid"], wrong["uuid"]])
    by_uuid = {p["uuid"]: p for p in scored}
    assert by_uuid[right["uuid"]]["correct_top1"] and not by_uuid[wrong["uuid"]]["correct_top1"]
    assert by_uuid[wrong["uuid"]]["correct_top5"] and by_uuid[wrong["uuid"]]["true_label"] == wrong["top5_labels"][1]
    assert record["metrics"]["top1_species"]["n"] == 2 and record["metrics"]["top1_species"]["value"] == 0.5
    assert record["metrics"]["top1_genus"]["n"] == 2
    labels = record["provenance"]["labels_from_reviews"]
    assert labels["scored"] == 2 and labels["disagreements_excluded"] == 1
    assert labels["not_identifiable_excluded"] == 1 and labels["not_in_dataset_excluded"] == 1
    assert labels["reviewers"] == ["ana", "ben"] and labels["dataset"]["version"] == version
    assert labels["reviews_table"] == str(reviews) and labels["dataset_versions_reviewed"] == [1]
    # the same label set as without reviews: the benchmark's taxa
    assert record["provenance"]["label_set"]["labels"] == plain.provenance["label_set"]["labels"]
    # the dataset itself is untouched: same version, the rows still genus-only
    dataset = store.open_dataset(path)
    assert dataset.version == version
    assert store.read(dataset, where=f"uuid = '{right['uuid']}'").column("species").to_pylist() == [None]
    # a second run into the same --out replaces its own clone
    assert main(["eval", "zeroshot", str(path), "--model", model, "--out", str(out), "--device", "cpu",
                 "--group-by", "none", "--name-style", "sci", "--labels-from-reviews"]) == 0


def test_no_scorable_review_and_tasks_without_a_row_taxon_are_refused(embedded, tmp_path):
    path, model = embedded
    fresh = tmp_path / "fresh.lance"
    store.subset(str(path), fresh, columns=("species", "genus", "emb_tiny"))
    with pytest.raises(CladebenchError, match=r"no reviewed row .* can be scored"):
        run_eval(ZeroShotEvalConfig(dataset=str(fresh), model=model, out=tmp_path / "none", device="cpu",
                                    labels_from_reviews=True))
    assert not (tmp_path / "none" / "reviewed-labels.lance").exists()
    with pytest.raises(UsageError, match="--labels-from-reviews scores tasks"):
        RerankEvalConfig(dataset=str(path), model=model, out=tmp_path / "rerank", labels_from_reviews=True)
