"""`cladebench eval` around the tasks: separate challenge groups, training-exposure filters, breakdowns,
label-set files, genus-only rows, and embeddings published without cladebench metadata."""

from __future__ import annotations

import json
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from cladebench import store
from cladebench.errors import CladebenchError

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.compare import compare_runs
from cladebench.evaluate.configs import ZeroShotEvalConfig
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import run_eval
from cladebench.models.tiny import write_tiny_model
from cladebench.store.embeddings import PUBLISHED_EMBEDDING_COLUMNS, register_published_column
from cladebench.synthetic import WorldConfig, make_world
from helpers.embedded import write_embedded

N = 72


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A world with three challenge groups (classes), seen_in_training lists, genus-only rows and a breakdown column."""
    root = tmp_path_factory.mktemp("evaluate")
    model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=4))
    world = make_world(WorldConfig(seed=2, names="generated", branching=(1, 1, 3, 1, 2, 2, 2)))
    table = world.to_table(N, seed=7, image_format="jpeg")
    seen = [["model-a", "model-b"] if i % 3 == 0 else (["model-b"] if i % 3 == 1 else []) for i in range(N)]
    if "seen_in_training" in table.column_names:
        table = table.drop_columns(["seen_in_training"])
    table = table.append_column("seen_in_training", pa.array(seen, pa.list_(pa.string())))
    table = table.append_column("site", pa.array([f"site-{i % 2}" for i in range(N)]))
    table = table.append_column("plot", pa.array([i % 3 for i in range(N)], pa.int32()))
    # Every 8th row is identified to genus only (as camera-trap Peromyscus is).
    genus_only = np.arange(N) % 8 == 0
    species = table.column("species").to_pylist()
    scientific = table.column("scientific_name").to_pylist()
    genera = table.column("genus").to_pylist()
    table = table.set_column(table.column_names.index("species"), "species",
                             pa.array([None if g else s for s, g in zip(species, genus_only, strict=True)]))
    table = table.set_column(table.column_names.index("scientific_name"), "scientific_name",
                             pa.array([ge if g else s for s, ge, g in zip(scientific, genera, genus_only,
                                                                          strict=True)]))
    # Each identified row's look-alikes: itself and the next species in name order (as a cryptic group).
    names = sorted({s for s, g in zip(scientific, genus_only, strict=True) if not g})
    lookalikes = [None if g else [s, names[(names.index(s) + 1) % len(names)]]
                  for s, g in zip(scientific, genus_only, strict=True)]
    table = table.append_column("lookalikes", pa.array(lookalikes, pa.list_(pa.string())))
    path = root / "world.lance"
    write_embedded(table, path, model)
    return path, model


def _eval(path: Path, model: str, out: Path, **options) -> RunRecord:
    record, _ = run_eval(ZeroShotEvalConfig(dataset=str(path), model=model, out=out, device="cpu", **options))
    return record


def test_challenge_groups_are_evaluated_separately_and_never_pooled(embedded, tmp_path):
    path, model = embedded
    record = _eval(path, model, tmp_path / "grouped")
    groups = record.provenance["groups"]
    assert groups["column"] == "challenge_group" and not groups["pooled"] and len(groups["values"]) == 3
    assert not any("/" not in name for name in record.metrics)  # no pooled number at all
    assert record.provenance["label_set"] is None
    for group in groups["values"]:
        alone = _eval(path, model, tmp_path / group, group_by="none",
                      where=f"challenge_group = '{group}'")
        for name, estimate in alone.metrics.items():
            assert record.metrics[f"{group}/{name}"] == estimate, (group, name)
        label_set = record.provenance["label_sets"][group]
        assert label_set["labels"] == alone.provenance["label_set"]["labels"]
        assert label_set["size"] < sum(s["size"] for s in record.provenance["label_sets"].values())
    predictions = record.predictions(tmp_path / "grouped" / "run.json")
    assert set(predictions.column("group").to_pylist()) == set(groups["values"])


def test_exposure_filters_select_the_right_rows(embedded, tmp_path):
    path, model = embedded
    unseen = _eval(path, model, tmp_path / "unseen", group_by="none", unseen_only=True)
    not_a = _eval(path, model, tmp_path / "not-a", group_by="none", not_seen_by="model-a")
    assert unseen.provenance["dataset"]["evaluated_rows"] == N // 3
    assert not_a.provenance["dataset"]["evaluated_rows"] == N - N // 3
    assert unseen.provenance["exposure"] == {"unseen_only": True, "not_seen_by": None}
    assert "array_has(seen_in_training, 'model-a')" in not_a.provenance["dataset"]["where"]
    table = store.read(store.open_dataset(path), columns=["uuid", "seen_in_training"])
    expected = {u for u, s in zip(table.column("uuid").to_pylist(), table.column("seen_in_training").to_pylist(),
                                  strict=True) if "model-a" not in s}
    got = set(not_a.predictions(tmp_path / "not-a" / "run.json").column("uuid").to_pylist())
    assert got == expected


def test_breakdown_scores_the_same_predictions_per_value(embedded, tmp_path):
    path, model = embedded
    record = _eval(path, model, tmp_path / "b", group_by="none", breakdown=("site",))
    predictions = record.predictions(tmp_path / "b" / "run.json")
    sites = store.read(store.open_dataset(path), columns=["uuid", "site"])
    site_of = dict(zip(sites.column("uuid").to_pylist(), sites.column("site").to_pylist(), strict=True))
    for site in ("site-0", "site-1"):
        rows = [r for r in predictions.to_pylist() if site_of[r["uuid"]] == site and r["scored"]]
        estimate = record.metrics[f"site={site}/top1_species"]
        assert estimate["n"] == len(rows) and estimate["successes"] == sum(r["correct_top1"] for r in rows)
    assert record.metrics["site=site-0/top1_species"]["n"] + record.metrics["site=site-1/top1_species"]["n"] == \
        record.metrics["top1_species"]["n"]
    assert "Wilson" in record.provenance["metrics"]["top1_species"]  # definitions are keyed by the metric itself


def test_groups_of_an_integer_column_and_rows_without_a_breakdown_value(embedded, tmp_path):
    path, model = embedded
    record = _eval(path, model, tmp_path / "plots", group_by="plot", breakdown=("lookalikes",))
    assert record.provenance["groups"]["values"] == ["0", "1", "2"]
    for plot in range(3):
        alone = _eval(path, model, tmp_path / f"plot-{plot}", group_by="none", where=f"plot = {plot}")
        assert record.metrics[f"{plot}/top1_species"] == alone.metrics["top1_species"]
    # Genus-only rows have no look-alikes: in no breakdown, and counted as such.
    assert record.provenance["breakdown_rows_without_value"] == {"lookalikes": N // 8}


def test_genus_only_rows_are_not_scored_but_inspected(embedded, tmp_path):
    path, model = embedded
    record = _eval(path, model, tmp_path / "g", group_by="none")
    genus_only = N // 8
    assert record.metrics["top1_species"]["n"] == N - genus_only
    inspection = record.inspection["all"]
    assert inspection["genus_only_rows"] == genus_only
    assert sum(inspection["predicted_species"].values()) == genus_only
    least = inspection["least_certain"]
    assert len(least) == min(20, genus_only)
    assert [r["probability"] for r in least] == sorted(r["probability"] for r in least)
    share = inspection["predicted_genus_is_labelled_genus"]
    assert share["n"] == genus_only and 0 <= share["successes"] <= genus_only


def test_label_set_files_csv_and_names(embedded, tmp_path):
    path, model = embedded
    full = _eval(path, model, tmp_path / "full", group_by="none")
    labels = full.provenance["label_set"]["labels"]
    table = store.read(store.open_dataset(path), columns=["scientific_name", "species"])
    names = sorted({s for s, e in zip(table.column("scientific_name").to_pylist(), table.column("species").to_pylist(),
                                      strict=True) if e})
    listed = tmp_path / "labels.txt"
    listed.write_text("# three species\n" + "\n".join(names[:3]) + "\n")
    narrow = _eval(path, model, tmp_path / "narrow", group_by="none", labels=str(listed))
    assert narrow.provenance["label_set"]["size"] == 3 and len(labels) > 3
    assert narrow.provenance["label_set"]["source"] == str(listed)
    assert narrow.metrics["top1_species"]["n"] + narrow.provenance["label_set"]["unscored_rows"] == \
        narrow.provenance["dataset"]["evaluated_rows"]
    csv = tmp_path / "labels.csv"
    csv.write_text("scientific_name\n" + "\n".join(names) + "\nZzz outsider\n")
    wide = _eval(path, model, tmp_path / "wide", group_by="none", labels=str(csv))
    assert wide.provenance["label_set"]["size"] == len(names) + 1
    bad = tmp_path / "bad.txt"
    bad.write_text(names[0] + "\nNotA species\n")
    with pytest.raises(CladebenchError, match=r"line 2: 'NotA species'"):
        _eval(path, model, tmp_path / "bad", group_by="none", labels=str(bad))


def test_published_columns_without_metadata_are_used_for_their_model(embedded, tmp_path):
    path, model = embedded
    reference = _eval(path, model, tmp_path / "ref", group_by="none", column="emb_tiny")
    # As a publisher writes it: plain lists, no cladebench metadata on the field, no emb_tiny beside it.
    table = store.read(store.open_dataset(path)).drop_columns(["emb_tiny"])
    vectors = store.read(store.open_dataset(path), columns=["emb_tiny"]).column(0).combine_chunks()
    table = table.append_column("emb_published", pc.cast(vectors, pa.list_(pa.float32())))
    published = tmp_path / "published.lance"
    lance.write_dataset(table, published)
    with pytest.raises(CladebenchError, match="no embedding column"):
        _eval(published, model, tmp_path / "unknown", group_by="none")
    register_published_column("emb_published", model)
    try:
        record = _eval(published, model, tmp_path / "pub", group_by="none")
    finally:
        PUBLISHED_EMBEDDING_COLUMNS.pop("emb_published")
    assert record.metrics == reference.metrics
    assert record.provenance["model"]["image_embeddings"]["source"] == "published with the dataset"


def test_published_bioclip_columns_are_registered():
    assert PUBLISHED_EMBEDDING_COLUMNS == {"emb_bioclip": "bioclip", "emb_bioclip2": "bioclip-2",
                                           "emb_bioclip2p5": "bioclip-2.5"}


def test_compare_pairs_grouped_runs_within_each_group(embedded, tmp_path):
    path, model = embedded
    first, _ = run_eval(ZeroShotEvalConfig(dataset=str(path), model=model, out=tmp_path / "r1", device="cpu"))
    run_eval(ZeroShotEvalConfig(dataset=str(path), model=model, out=tmp_path / "r2", device="cpu"))
    group = first.provenance["groups"]["values"][0]
    comparison = compare_runs([tmp_path / "r1" / "run.json", tmp_path / "r2" / "run.json"],
                              metric=f"{group}/top1_species", n_resamples=500)
    (metric,) = comparison.metrics
    (difference,) = metric.differences
    assert difference.paired.difference == 0 and not difference.holds
    assert difference.paired.n == first.metrics[f"{group}/top1_species"]["n"]


def test_eval_verb_prints_groups(embedded, tmp_path, capsys):
    path, model = embedded
    code = main(["eval", "zeroshot", str(path), "--model", model, "--out", str(tmp_path / "cli"), "--device", "cpu",
                 "--not-seen-by", "model-b"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "challenge_group groups evaluated separately" in printed and "/top1_species" in printed
    record = json.loads((tmp_path / "cli" / "run.json").read_text())
    assert record["provenance"]["exposure"]["not_seen_by"] == "model-b"


def test_fewshot_through_the_eval_verb_needs_no_text_tower(embedded, tmp_path, capsys, monkeypatch):
    path, model = embedded

    def no_encoder(*args, **kwargs):
        raise AssertionError("few-shot must not load the model")

    monkeypatch.setattr("cladebench.models.load_encoder", no_encoder)
    code = main(["eval", "fewshot", str(path), "--model", model, "--out", str(tmp_path / "fs"),
                 "--group-by", "none", "--shots", "1", "2", "--repetitions", "3", "--methods", "simpleshot", "knn",
                 "--group-key", "uuid"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "simpleshot_1shot" in printed and "knn_2shot" in printed
    record = RunRecord.read(tmp_path / "fs" / "run.json")
    assert record.task == "fewshot"
    split = record.provenance["split"]
    assert split["repetitions"] == 3 and list(split["shots"]) == [1, 2] and split["fingerprint"]
    assert record.provenance["model"]["image_embeddings"]["column"] == "emb_tiny"
    assert record.provenance["prompts"] is None
    estimate = record.metrics["simpleshot_2shot"]
    assert estimate["n"] == 3 and len(estimate["per_repetition"]) == 3
    assert estimate["value"] == pytest.approx(np.mean(estimate["per_repetition"]))
    predictions = record.predictions(tmp_path / "fs" / "run.json")
    rows = predictions.filter(pc.and_(pc.equal(predictions.column("method"), "simpleshot"),
                                      pc.equal(predictions.column("shots"), 2))).to_pylist()
    for repetition in range(3):
        hits = [r["correct"] for r in rows if r["repetition"] == repetition]
        assert estimate["per_repetition"][repetition] == pytest.approx(sum(hits) / len(hits))
    # Same seed, same splits: a second run draws identical support sets.
    assert main(["eval", "fewshot", str(path), "--model", model, "--out", str(tmp_path / "fs2"),
                 "--group-by", "none", "--shots", "1", "2", "--repetitions", "3", "--methods", "simpleshot",
                 "--group-key", "uuid"]) == 0
    assert RunRecord.read(tmp_path / "fs2" / "run.json").provenance["split"]["fingerprint"] == split["fingerprint"]


def test_candidates_restrict_each_image_to_its_lookalikes(embedded, tmp_path):
    path, model = embedded
    full = _eval(path, model, tmp_path / "full", group_by="none", name_style="sci")
    restricted = _eval(path, model, tmp_path / "cand", group_by="none", candidates="lookalikes", name_style="sci")
    info = restricted.provenance["task"]["candidates"]
    assert info["column"] == "lookalikes" and info["rows_without_candidates"] == N // 8  # the genus-only rows
    full_rows = {r["uuid"]: r for r in full.predictions(tmp_path / "full" / "run.json").to_pylist()}
    lookalikes = dict(zip(*(store.read(store.open_dataset(path), columns=["uuid", "lookalikes"]).column(c).to_pylist()
                            for c in ("uuid", "lookalikes")), strict=True))
    checked = 0
    for row in restricted.predictions(tmp_path / "cand" / "run.json").to_pylist():
        names = lookalikes[row["uuid"]]
        if not names:
            continue
        # Independent: the better of the two look-alikes under the unrestricted softmax.
        unrestricted = full_rows[row["uuid"]]
        assert row["pred_label"] in names
        assert sum(row["top5_probs"][:2]) == pytest.approx(1.0) and set(row["top5_labels"][:2]) == set(names)
        if unrestricted["correct_top1"]:
            assert row["correct_top1"]  # the true species won against everything, so it wins against one
        checked += 1
    assert checked == N - N // 8
    # Severity among look-alikes: each mistake's height recounted from the dataset's lineages of the two names.
    ranks = ("kingdom", "phylum", "class", "order", "family", "genus", "species")
    named = {tuple(r[c] for c in ranks)[-1]: tuple(r[c] for c in ranks)
             for r in store.read(store.open_dataset(path), columns=list(ranks)).to_pylist() if r["species"]}
    wrong = []
    for row in restricted.predictions(tmp_path / "cand" / "run.json").to_pylist():
        if row["scored"] and not row["correct_top1"]:
            truth, predicted = named[row["true_label"]], named[row["pred_label"]]
            wrong.append(7 - next((i for i in range(7) if truth[i] != predicted[i]), 7))
            assert row["lca_height"] == wrong[-1]
    severity = restricted.metrics["mistake_severity_species"]
    assert severity["value"] == (pytest.approx(np.mean(wrong)) if wrong else None)
    by_group = _eval(path, model, tmp_path / "per-group", group_by="none", candidates="lookalikes",
                     name_style="sci", breakdown=("lookalikes",))
    group_metrics = {k: v for k, v in by_group.metrics.items() if k.startswith("lookalikes=")
                     and k.endswith("/top1_species")}
    assert sum(v["n"] for v in group_metrics.values()) == N - N // 8  # genus-only rows have no group
    assert all(" | " in k for k in group_metrics)
    assert restricted.metrics["top1_species"]["value"] >= full.metrics["top1_species"]["value"]


def test_compare_columns_verb_on_identical_splits(embedded, tmp_path, capsys):
    """A rotated, scaled copy of a column is the same embedding space: equal few-shot numbers, CKA 1."""
    path, _ = embedded
    table = store.read(store.open_dataset(path))
    vectors = np.asarray(table.column("emb_tiny").combine_chunks().flatten()).reshape(table.num_rows, -1)
    rotation, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(vectors.shape[1],) * 2))
    rotated = (3.0 * vectors @ rotation).astype(np.float32)
    field = store.embedding_field("rotated", rotated.shape[1], {"model": "rotated-copy"})
    table = table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(rotated.ravel()),
                                                                          rotated.shape[1]))
    copy = tmp_path / "two-columns.lance"
    store.write_dataset(table, copy)
    assert main(["compare-columns", str(copy), "--shots", "1", "2", "--repetitions", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["columns"] == ["emb_tiny", "emb_rotated"]
    assert result["accuracy"]["emb_tiny"] == result["accuracy"]["emb_rotated"]
    assert result["cka"]["emb_tiny"]["emb_rotated"] == pytest.approx(1.0, abs=1e-5)
    assert main(["compare-columns", str(copy), "--shots", "1", "--repetitions", "2"]) == 0
    printed = capsys.readouterr().out
    assert "linear CKA" in printed and "rotated-copy" in printed and "simpleshot_1shot" in printed


def test_a_table_in_the_fine_grained_challenges_layout(embedded, tmp_path):
    """FGC's own columns: species as a binomial (null for genus-only rows), scientific_name with authorities,
    seen_in_training model names, a plain list<float16> embedding column without metadata."""
    path, model = embedded
    table = store.read(store.open_dataset(path))
    genera = table.column("genus").to_pylist()
    binomials = table.column("species").to_pylist()  # the store holds the binomial, as FGC does
    authorities = [f"{g} Gloger, 1841" if b is None else f"{b} (Wagner, 1845)"
                   for g, b in zip(genera, binomials, strict=True)]
    vectors = table.column("emb_tiny").combine_chunks()
    fgc = pa.table({
        "uuid": table.column("uuid"), "challenge_group": table.column("challenge_group"),
        "seen_in_training": table.column("seen_in_training"), "species": pa.array(binomials),
        **{c: table.column(c) for c in ("kingdom", "phylum", "class", "order", "family", "genus")},
        "scientific_name": pa.array(authorities), "image": table.column("image"),
        "emb_fgc": pc.cast(vectors, pa.list_(pa.float16())),
    })
    copy = tmp_path / "challenges.lance"
    lance.write_dataset(fgc, copy)
    register_published_column("emb_fgc", model)
    try:
        record = _eval(copy, model, tmp_path / "fgc", not_seen_by="model-a")
        reference = _eval(path, model, tmp_path / "ref", not_seen_by="model-a", column="emb_tiny")
    finally:
        PUBLISHED_EMBEDDING_COLUMNS.pop("emb_fgc")
    assert set(record.metrics) == set(reference.metrics)
    for name, estimate in record.metrics.items():  # float16 storage moves a few probabilities, not the counts much
        if estimate["value"] is None:  # undefined in both (top-5 over a group of five labels or fewer)
            assert reference.metrics[name]["value"] is None and estimate["reason"], name
            continue
        assert abs(estimate["value"] - reference.metrics[name]["value"]) <= 0.1, name
        assert estimate["n"] == reference.metrics[name]["n"], name
    genus_only = sum(g["genus_only_rows"] for g in record.inspection.values())
    assert genus_only == sum(g["genus_only_rows"] for g in reference.inspection.values()) > 0


def test_rows_with_unknown_exposure_are_never_counted_as_unseen(embedded, tmp_path):
    path, model = embedded
    table = store.read(store.open_dataset(path))
    seen = table.column("seen_in_training").to_pylist()
    seen = [None if i < 6 else s for i, s in enumerate(seen)]  # exposure unknown for the first six rows
    table = table.set_column(table.column_names.index("seen_in_training"), "seen_in_training",
                             pa.array(seen, pa.list_(pa.string())))
    copy = tmp_path / "unknown.lance"
    store.write_dataset(table, copy)
    unseen = _eval(copy, model, tmp_path / "u", group_by="none", unseen_only=True)
    not_a = _eval(copy, model, tmp_path / "a", group_by="none", not_seen_by="model-a")
    assert unseen.provenance["dataset"]["evaluated_rows"] == sum(s == [] for s in seen)
    assert not_a.provenance["dataset"]["evaluated_rows"] == sum(s is not None and "model-a" not in s for s in seen)
