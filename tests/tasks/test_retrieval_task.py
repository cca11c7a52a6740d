"""Image-to-image retrieval: per-query metrics against a loop-and-sklearn reference, self and same-group
exclusion, chance level under shuffled labels, and the registered task end to end on a Lance dataset."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import average_precision_score

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UnknownNameError, UsageError
from cladebench.metrics import retrieval as retrieval_metrics
from cladebench.tasks import get_task
from cladebench.tasks.retrieval import (
    CLASS_MEAN,
    RetrievalTaskConfig,
    metric_names,
    retrieval_summary,
    score_gallery,
)

DIM = 16
RANKS = ("kingdom", "phylum", "class", "order", "family", "genus", "species")


def planted(n_classes: int = 6, groups_per_class: int = 5, max_group: int = 3, noise: float = 0.6,
            group_noise: float = 0.0, seed: int = 0) -> dict[str, Any]:
    """Class means on the unit sphere; each group (one observation) adds its own offset, each image its noise."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(n_classes, DIM))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    labels, groups, uuids, vectors = [], [], [], []
    for c in range(n_classes):
        for g in range(groups_per_class):
            offset = group_noise * rng.normal(size=DIM)
            for i in range(int(rng.integers(1, max_group + 1))):
                labels.append(f"class-{c}")
                groups.append(f"obs-{c}-{g}")
                uuids.append(f"u-{c}-{g}-{i}")
                vectors.append(means[c] + offset + noise * rng.normal(size=DIM) / math.sqrt(DIM))
    return {"labels": labels, "groups": groups, "uuids": uuids, "vectors": np.asarray(vectors, dtype=np.float32)}


# --- an independent reference: loops over pairs, sklearn for the full-ranking AP --------------------------


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def reference(data: dict[str, Any], k: int) -> list[dict[str, Any]]:
    out = []
    n = len(data["labels"])
    for q in range(n):
        gallery = [j for j in range(n) if data["groups"][j] != data["groups"][q]]
        scores = [cosine(data["vectors"][q], data["vectors"][j]) for j in gallery]
        relevant = [data["labels"][j] == data["labels"][q] for j in gallery]
        ranked = sorted(range(len(gallery)), key=lambda i: -scores[i])  # no ties among random cosines
        positives = sum(relevant)
        row: dict[str, Any] = {"uuid": data["uuids"][q], "relevant": positives, "gallery_size": len(gallery),
                               "neighbours": [data["uuids"][gallery[i]] for i in ranked[:k]]}
        if positives == 0:
            out.append(row | {"defined": False})
            continue
        cut = min(k, len(gallery))
        hits = 0
        precision_sum = 0.0
        for position, i in enumerate(ranked[:cut], start=1):
            if relevant[i]:
                hits += 1
                precision_sum += hits / position
        first = next(position for position, i in enumerate(ranked, start=1) if relevant[i])
        row |= {
            "defined": True,
            "hits_at_k": hits,
            "precision_at_k": hits / cut,
            "recall_at_k": hits / positives,
            "ap_at_k": precision_sum / min(positives, cut),  # INQUIRE: over min(positives, cutoff)
            "ap_full": average_precision_score(relevant, scores),
            "reciprocal_rank": 1.0 / first,
        }
        out.append(row)
    return out


def score(data: dict[str, Any], k: int, **kwargs: Any) -> pa.Table:
    return score_gallery(data["vectors"], data["labels"], data["groups"], data["uuids"], k=k, **kwargs)


@pytest.mark.parametrize("k", [1, 5, 200])
def test_per_query_metrics_equal_the_reference(k: int) -> None:
    data = planted(seed=k, noise=1.5)  # noisy enough that rankings mix classes (mAP about 0.5-0.6)
    got = score(data, k).to_pylist()
    want = reference(data, k)
    assert [r["uuid"] for r in got] == data["uuids"]
    for g, w in zip(got, want, strict=True):
        assert g["relevant"] == w["relevant"] and g["gallery_size"] == w["gallery_size"]
        assert g["defined"] == w["defined"]
        assert g["neighbours"] == w["neighbours"]
        if not w["defined"]:
            assert g["ap_full"] is None and g["precision_at_k"] is None
            continue
        assert g["hits_at_k"] == w["hits_at_k"]
        for name in ("precision_at_k", "recall_at_k", "ap_at_k", "ap_full", "reciprocal_rank"):
            assert g[name] == pytest.approx(w[name], abs=1e-12), name
    # The planted classes are found, though not perfectly: above chance (one class in six), below 1.
    mean_ap = np.mean([r["ap_full"] for r in got])
    assert 0.35 < mean_ap < 0.9


def test_ranking_does_not_depend_on_the_chunk_size() -> None:
    data = planted(seed=3)
    whole = score(data, 10)
    assert score(data, 10, chunk_size=1).equals(whole)
    assert score(data, 10, chunk_size=7).equals(whole)


def test_the_query_and_its_group_are_never_in_its_gallery() -> None:
    data = planted(seed=4, max_group=4)
    group_of = dict(zip(data["uuids"], data["groups"], strict=True))
    size_of = {g: data["groups"].count(g) for g in set(data["groups"])}
    table = score(data, 500)  # k above the gallery: every gallery image is listed
    for row in table.to_pylist():
        group = group_of[row["uuid"]]
        assert row["uuid"] not in row["neighbours"]
        assert all(group_of[u] != group for u in row["neighbours"])
        assert row["excluded_same_group"] == size_of[group] - 1
        assert row["gallery_size"] == len(row["neighbours"]) == len(data["uuids"]) - size_of[group]
        assert row["neighbour_similarities"] == sorted(row["neighbour_similarities"], reverse=True)

    # Each image its own group: only the query itself is left out.
    per_image = score(dict(data, groups=data["uuids"]), 500).to_pylist()
    assert all(r["excluded_same_group"] == 0 and r["gallery_size"] == len(data["uuids"]) - 1 for r in per_image)
    assert all(r["uuid"] not in r["neighbours"] for r in per_image)


def test_same_group_exclusion_removes_near_duplicate_credit() -> None:
    # Weak class signal, photos of one observation nearly identical: without the exclusion the nearest
    # neighbour is a sibling photo of the same organism, which says nothing about the species.
    data = planted(seed=5, n_classes=8, groups_per_class=6, max_group=3, noise=0.05, group_noise=3.0)
    grouped = score(data, 1)
    per_image = score(dict(data, groups=data["uuids"]), 1)

    def mean(table: pa.Table, name: str) -> float:
        return float(np.nanmean(table.column(name).to_numpy(zero_copy_only=False)))

    assert mean(per_image, "precision_at_k") > 0.6
    assert mean(grouped, "precision_at_k") < 0.35


def test_shuffled_labels_fall_to_chance() -> None:
    data = planted(seed=6, n_classes=6, groups_per_class=20, max_group=1, noise=0.3)
    assert np.nanmean(score(data, 10).column("precision_at_k").to_numpy(zero_copy_only=False)) > 0.9
    shuffled = dict(data, labels=list(np.random.default_rng(7).permutation(data["labels"])))
    table = score(shuffled, 10)
    chance = 19 / 119  # each query's gallery: 19 of its class among 119
    precision = np.nanmean(table.column("precision_at_k").to_numpy(zero_copy_only=False))
    mean_ap = np.nanmean(table.column("ap_full").to_numpy(zero_copy_only=False))
    assert abs(precision - chance) < 0.07
    assert abs(mean_ap - chance) < 0.1  # a random ranking's AP is near the share of relevant images


def test_queries_without_another_relevant_image_are_undefined_and_left_out() -> None:
    data = planted(seed=8)
    # One class seen in a single observation: its images only have each other, all excluded.
    data = dict(data, labels=[*data["labels"], "lonely", "lonely"], groups=[*data["groups"], "obs-x", "obs-x"],
                uuids=[*data["uuids"], "x-0", "x-1"],
                vectors=np.concatenate([data["vectors"], data["vectors"][:2] + 0.01]))
    table = score(data, 10)
    rows = {r["uuid"]: r for r in table.to_pylist()}
    assert not rows["x-0"]["defined"] and rows["x-0"]["relevant"] == 0 and rows["x-0"]["ap_full"] is None
    metrics = retrieval_summary(table, 10, "species", retrieval_metrics.RetrievalConfig(k=10, n_resamples=200))
    undefined = sum(not r["defined"] for r in rows.values())
    assert undefined >= 2
    assert metrics["map_species"]["n_excluded"] == undefined
    assert metrics["map_species"]["n"] == len(rows) - undefined
    defined_ap = [r["ap_full"] for r in rows.values() if r["defined"]]
    assert metrics["map_species"]["value"] == pytest.approx(np.mean(defined_ap))


def test_metric_names_carry_cutoff_and_rank_and_do_not_clash_with_inquire_names() -> None:
    names = metric_names(50, "species")
    assert names == {"ap_full": "map_species", "ap_at_k": "map@50_species", "reciprocal_rank": "mrr_species",
                     "precision_at_k": "precision@50_species", "recall_at_k": "recall@50_species"}
    retrieval_metrics.metric_names(50)  # INQUIRE's percent-scale names coexist
    assert metric_names(5, "genus")["ap_full"] == "map_genus"


def test_class_mean_weighs_each_class_equally() -> None:
    data = planted(seed=9, groups_per_class=4)
    # One large class of the same kind makes the plain and class means differ.
    big = planted(seed=10, n_classes=1, groups_per_class=40, noise=1.5)
    merged = {key: [*data[key], *[f"big-{v}" for v in big[key]]] for key in ("labels", "groups", "uuids")}
    merged["vectors"] = np.concatenate([data["vectors"], big["vectors"]])
    table = score(merged, 10)
    metrics = retrieval_summary(table, 10, "species", retrieval_metrics.RetrievalConfig(k=10, n_resamples=300))
    rows = [r for r in table.to_pylist() if r["defined"]]
    per_class: dict[str, list[float]] = {}
    for r in rows:
        per_class.setdefault(r["true_label"], []).append(r["ap_full"])
    class_mean = metrics["map_species" + CLASS_MEAN]
    assert class_mean["value"] == pytest.approx(np.mean([np.mean(v) for v in per_class.values()]))
    assert class_mean["classes"] == len(per_class)
    assert metrics["map_species"]["value"] == pytest.approx(np.mean([r["ap_full"] for r in rows]))
    assert class_mean["value"] != pytest.approx(metrics["map_species"]["value"])
    for estimate in metrics.values():
        assert estimate["low"] <= estimate["value"] <= estimate["high"]


# --- the task on a Lance dataset -------------------------------------------------------------------------


def taxon(c: int) -> tuple[str, ...]:
    return ("Animalia", "Chordata", "Aves", "Passeriformes", f"Fam{c // 4}", f"Genus{c // 2}", f"sp{c}")


def write_planted_dataset(path: Path) -> dict[str, Any]:
    """Six species in several observations, two genus-only rows and one all-zero vector."""
    data = planted(seed=11, groups_per_class=4, noise=0.5)
    rows = []
    for label, group, uuid in zip(data["labels"], data["groups"], data["uuids"], strict=True):
        rows.append({"uuid": uuid, "source_id": group,
                     **dict(zip(RANKS, taxon(int(label.split("-")[1])), strict=True))})
    vectors = [3.0 * v for v in data["vectors"]]  # raw, not normalised: the task normalises
    for i in range(2):
        rows.append({"uuid": f"genus-only-{i}", "source_id": f"cam-{i}",
                     **dict(zip(RANKS, (*taxon(0)[:-1], None), strict=True))})
        vectors.append(data["vectors"][0])
    rows.append({"uuid": "zero", "source_id": "obs-zero", **dict(zip(RANKS, taxon(1), strict=True))})
    vectors.append(np.zeros(DIM, dtype=np.float32))
    order = np.random.default_rng(0).permutation(len(rows))  # not in uuid order on disk
    rows = [rows[i] for i in order]
    vectors = [vectors[i] for i in order]
    table = pa.table({
        "uuid": [r["uuid"] for r in rows],
        "image": pa.array([b"not decoded here"] * len(rows), pa.large_binary()),
        **{rank: pa.array([r[rank] for r in rows], pa.string()) for rank in RANKS},
        "source_id": [r["source_id"] for r in rows],
    })
    field = store.embedding_field("planted", DIM, {"model": "planted-model", "revision": "r1"})
    values = pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(vectors, dtype=np.float32).ravel()), DIM)
    store.write_dataset(table.append_column(field, values), path)
    return data


@pytest.fixture(scope="module")
def planted_dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    path = tmp_path_factory.mktemp("retrieval") / "planted.lance"
    data = write_planted_dataset(path)
    return store.open_dataset(path), data


def test_task_end_to_end_on_a_lance_dataset(planted_dataset: tuple[Any, dict[str, Any]]) -> None:
    dataset, data = planted_dataset
    task = get_task("retrieval")
    assert not task.uses_encoder and task.config is RetrievalTaskConfig
    predictions = task.predict(dataset, None, RetrievalTaskConfig(column="emb_planted", k=5))
    table = predictions.table
    assert table.column_names == [
        "uuid", "true_label", "gallery_size", "relevant", "excluded_same_group", "defined", "hits_at_k",
        "precision_at_k", "recall_at_k", "ap_at_k", "ap_full", "reciprocal_rank", "neighbours",
        "neighbour_similarities"]
    # Queries are the labelled rows with a usable vector, in uuid order; genus-only and zero rows are not.
    assert table.column("uuid").to_pylist() == sorted(data["uuids"])
    labels = {r["uuid"]: r["true_label"] for r in table.to_pylist()}
    assert labels["u-3-0-0"] == "Animalia Chordata Aves Passeriformes Fam0 Genus1 sp3"

    # The same rows scored directly agree with the reference, row for row.
    order = np.argsort(data["uuids"])
    direct = {key: [data[key][i] for i in order] for key in ("labels", "groups", "uuids")}
    direct["vectors"] = data["vectors"][order]
    for got, want in zip(table.to_pylist(), reference(direct, 5), strict=True):
        assert got["neighbours"] == want["neighbours"]
        assert got["ap_full"] == pytest.approx(want.get("ap_full"), abs=1e-12)
        assert got["precision_at_k"] == pytest.approx(want.get("precision_at_k"), abs=1e-12)

    info = predictions.info
    assert info["column"] == "emb_planted" and info["embedding_metadata"]["model"] == "planted-model"
    assert info["rows"]["without_label"] == 2 and info["rows"]["without_usable_vector"] == 1
    assert info["rows"]["skipped_uuids"] == ["zero"] and info["rows"]["queries"] == len(data["uuids"])
    assert info["exclusions"]["sampling_unit"] == "source_id"
    assert info["exclusions"]["same_group_pairs"] == sum(table.column("excluded_same_group").to_pylist()) > 0
    assert info["label_set"]["size"] == 6 == len(predictions.labels)
    json.dumps(info)

    metrics = task.metrics(predictions)
    names = ["map_species", "map@5_species", "mrr_species", "precision@5_species", "recall@5_species"]
    assert list(metrics) == [*names, *(n + CLASS_MEAN for n in names)]
    ap = np.asarray([r["ap_full"] for r in table.to_pylist() if r["defined"]])
    assert metrics["map_species"]["value"] == pytest.approx(ap.mean()) and metrics["map_species"]["value"] > 0.5
    assert metrics["map_species"]["n"] == ap.size
    assert all(0.0 <= m["low"] <= m["value"] <= m["high"] <= 1.0 for m in metrics.values())
    json.dumps(metrics)


def test_task_at_genus_and_with_each_image_its_own_group(planted_dataset: tuple[Any, dict[str, Any]]) -> None:
    dataset, data = planted_dataset
    task = get_task("retrieval")
    genus = task.predict(dataset, None, RetrievalTaskConfig(column="emb_planted", rank="genus", k=5))
    assert genus.info["label_set"]["size"] == 3
    assert genus.info["rows"]["without_label"] == 0 and genus.table.num_rows == len(data["uuids"]) + 2
    assert "map_genus" in task.metrics(genus)

    per_image = task.predict(dataset, None, RetrievalTaskConfig(column="emb_planted", group_key="uuid"))
    assert per_image.info["exclusions"]["same_group_pairs"] == 0
    filtered = task.predict(dataset, None, RetrievalTaskConfig(column="emb_planted", where="genus = 'Genus0'"))
    assert filtered.info["label_set"]["size"] == 2
    assert set(filtered.table.column("true_label").to_pylist()) <= set(filtered.labels)


def test_task_errors(planted_dataset: tuple[Any, dict[str, Any]]) -> None:
    dataset, _ = planted_dataset
    task = get_task("retrieval")
    with pytest.raises(CladebenchError, match="--column"):
        task.predict(dataset, None, RetrievalTaskConfig())
    with pytest.raises(SchemaError, match="not an embedding column"):
        task.predict(dataset, None, RetrievalTaskConfig(column="source_id"))
    with pytest.raises(SchemaError, match="no_such"):
        task.predict(dataset, None, RetrievalTaskConfig(column="emb_planted", group_key="no_such"))
    with pytest.raises(CladebenchError, match="undefined"):  # one species, one observation: nothing to find
        task.predict(dataset, None, RetrievalTaskConfig(column="emb_planted", where="source_id = 'obs-0-0'"))
    with pytest.raises(UsageError, match="-k must be at least 1, got 0"):
        RetrievalTaskConfig(k=0)
    with pytest.raises(UnknownNameError):
        RetrievalTaskConfig(rank="subspecies")


def test_a_cutoff_beyond_any_gallery_is_refused(planted_dataset: tuple[Any, dict[str, Any]]) -> None:
    """-k 1000000 reported ``precision@1000000`` over galleries of a few dozen images (and kept a million
    neighbours per query): a cutoff no gallery of the dataset can reach is refused, naming the largest one."""
    dataset, _ = planted_dataset
    largest = dataset.count_rows() - 1
    task = get_task("retrieval")
    with pytest.raises(UsageError, match=rf"-k 1000000 .* at most {largest} images.*-k {largest} or less"):
        task.predict(dataset, None, RetrievalTaskConfig(column="emb_planted", k=1_000_000))
    whole = task.predict(dataset, None, RetrievalTaskConfig(column="emb_planted", k=largest))
    assert f"precision@{largest}_species" in task.metrics(whole)


def test_a_one_row_dataset_is_called_undefined_not_a_two_row_one(tmp_path: Path) -> None:
    """The cutoff check counted a one-row dataset (a first photo loaded) as two rows with a gallery of one."""
    path = tmp_path / "one.lance"
    table = pa.table({"uuid": ["u0"], "image": pa.array([b"x"], pa.large_binary()), "genus": ["Bufo"],
                      "species": ["Bufo bufo"], "source_id": ["s0"]})
    field = store.embedding_field("planted", DIM, {"model": "planted-model", "revision": "r1"})
    vector = pa.FixedSizeListArray.from_arrays(pa.array(np.ones(DIM, dtype=np.float32)), DIM)
    store.write_dataset(table.append_column(field, vector), path)
    with pytest.raises(CladebenchError, match="undefined on these 1 rows") as error:
        get_task("retrieval").predict(store.open_dataset(path), None, RetrievalTaskConfig(column="emb_planted"))
    assert "2 rows" not in str(error.value)
