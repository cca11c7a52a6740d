"""Few-shot classification: planted answers, independent re-implementations of each method, group-safe splits,
and the task end to end on a Lance dataset with a planted embedding column."""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

from cladebench import store
from cladebench.errors import CladebenchError, UnknownNameError
from cladebench.tasks import get_task
from cladebench.tasks.fewshot import (
    METHODS,
    FewShotConfig,
    choose_c,
    few_shot_splits,
    few_shot_summary,
    knn,
    linear_probe,
    plan_splits,
    predict_splits,
    simpleshot,
    simpleshot_biobench,
)
from cladebench.tasks.labelled_rows import read_labelled_rows
from helpers.planted_embeddings import DIM, RANKS, spread_norm_problem, write_planted_dataset

# --- planted data ------------------------------------------------------------------------------------


def planted(n_classes: int = 8, groups_per_class: int = 8, max_group: int = 3, noise: float = 0.08,
            seed: int = 0) -> dict[str, Any]:
    """Class means on the unit sphere plus Gaussian noise; each group (one 'observation') has 1..max_group images."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(n_classes, DIM))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    labels, groups, uuids, vectors = [], [], [], []
    for c in range(n_classes):
        for g in range(groups_per_class):
            for i in range(int(rng.integers(1, max_group + 1))):
                labels.append(f"class-{c:02d}")
                groups.append(f"obs-{c}-{g}")
                uuids.append(f"u-{c}-{g}-{i}")
                vectors.append(means[c] + noise * rng.normal(size=DIM))
    return {"labels": labels, "groups": groups, "uuids": uuids, "vectors": np.asarray(vectors, dtype=np.float32)}


def splits_of(data: dict[str, Any], **kwargs: Any):
    options = {"shots": (1, 3), "repetitions": 4, "seed": 0} | kwargs
    return few_shot_splits(data["labels"], data["groups"], data["uuids"], **options)


def mean_accuracy(data: dict[str, Any], methods: tuple[str, ...], shots: int, **kwargs: Any) -> dict[str, float]:
    config = FewShotConfig(shots=(shots,), repetitions=3, methods=methods, linear_cs=(0.1, 10.0, 1000.0), **kwargs)
    plan = splits_of(data, shots=config.shots, repetitions=config.repetitions)
    table, _ = predict_splits(data["vectors"], plan, data["uuids"], config)
    summary = few_shot_summary(table, methods)
    return {m: summary[f"{m}_{shots}shot"]["value"] for m in methods}


def test_planted_classes_are_found_and_shuffled_labels_fall_to_chance() -> None:
    data = planted(seed=1)
    accuracy = mean_accuracy(data, ("simpleshot", "linear", "knn"), 5)
    assert accuracy["simpleshot"] > 0.97
    assert accuracy["linear"] > 0.9 and accuracy["knn"] > 0.9
    shuffled = dict(data, labels=list(np.random.default_rng(2).permutation(data["labels"])))
    chance = mean_accuracy(shuffled, ("simpleshot",), 5)["simpleshot"]
    assert chance < 0.35  # 8 classes: chance is 0.125


# --- methods against independent implementations ---------------------------------------------------------


def loop_simpleshot(support: np.ndarray, targets: np.ndarray, query: np.ndarray, *,
                    normalise_first: bool, ranked: bool = False) -> list[Any]:
    """SimpleShot written out with loops: (each vector L2-normalised first: BioCLIP's protocol) centre on the
    support mean, normalise, nearest class mean."""

    def unit(v: list[float]) -> list[float]:
        length = math.sqrt(sum(x * x for x in v))
        return [x / length for x in v]

    if normalise_first:
        support = np.asarray([unit([float(x) for x in v]) for v in support])
        query = np.asarray([unit([float(x) for x in v]) for v in query])
    n, dim = support.shape
    mean = [sum(float(support[i, j]) for i in range(n)) / n for j in range(dim)]

    def centred_unit(v: np.ndarray) -> list[float]:
        return unit([float(v[j]) - mean[j] for j in range(dim)])

    sums: dict[int, list[float]] = {}
    counts: dict[int, int] = {}
    for i in range(n):
        label = int(targets[i])
        unit_vector = centred_unit(support[i])
        sums[label] = [a + b for a, b in zip(sums.get(label, [0.0] * dim), unit_vector, strict=True)]
        counts[label] = counts.get(label, 0) + 1
    centroids = {label: [x / counts[label] for x in total] for label, total in sums.items()}
    predicted = []
    for q in query:
        unit_vector = centred_unit(q)
        distances = {label: math.sqrt(sum((a - b) ** 2 for a, b in zip(unit_vector, c, strict=True)))
                     for label, c in centroids.items()}
        if ranked:  # the five nearest centroids, nearest first
            predicted.append(sorted(distances, key=lambda label: (distances[label], label))[:5])
        else:
            predicted.append(min(sorted(distances), key=lambda label: distances[label]))
    return predicted


def numpy_simpleshot(support: np.ndarray, targets: np.ndarray, query: np.ndarray, protocol: str) -> np.ndarray:
    """The two protocols in plain numpy, another way round: a full query x class distance matrix, centroids by
    masks; 'bioclip' divides by the norms first (BioCLIP stores F.normalize'd features), 'biobench' does not."""
    support = np.array(support, dtype=np.float64)
    query = np.array(query, dtype=np.float64)
    if protocol == "bioclip":
        support = support / np.sqrt((support ** 2).sum(axis=1))[:, None]
        query = query / np.sqrt((query ** 2).sum(axis=1))[:, None]
    centre = support.sum(axis=0) / len(support)
    s = support - centre
    q = query - centre
    s = s / np.sqrt((s ** 2).sum(axis=1))[:, None]
    q = q / np.sqrt((q ** 2).sum(axis=1))[:, None]
    classes = np.unique(targets)
    centroids = np.stack([s[targets == c].mean(axis=0) for c in classes])
    distances = np.sqrt(((q[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2))
    return classes[distances.argmin(axis=1)]


def hard_problem(seed: int, shots: int, n_classes: int = 6, n_query: int = 120) -> tuple[np.ndarray, ...]:
    """Overlapping classes far from the origin, some tight and some spread out: mistakes happen, centring changes
    some answers, and so would re-normalising the centroids (tight classes have longer centroids)."""
    rng = np.random.default_rng(seed)
    offset = 4.0 * rng.normal(size=DIM)
    means = offset + 0.6 * rng.normal(size=(n_classes, DIM))
    spread = np.linspace(0.2, 0.9, n_classes)
    targets = np.repeat(np.arange(n_classes), shots)
    support = means[targets] + spread[targets, None] * rng.normal(size=(len(targets), DIM))
    query_targets = rng.integers(0, n_classes, size=n_query)
    query = means[query_targets] + spread[query_targets, None] * rng.normal(size=(n_query, DIM))
    return support, targets, query, query_targets


@pytest.mark.parametrize(("method", "normalise_first"), [(simpleshot, True), (simpleshot_biobench, False)])
def test_simpleshot_matches_an_independent_loop_implementation(method, normalise_first: bool) -> None:
    for seed, shots in ((0, 1), (1, 5)):
        support, targets, query, query_targets = hard_problem(seed, shots)
        ours = method(support, targets, query, FewShotConfig()).predicted
        assert ours.tolist() == loop_simpleshot(support, targets, query, normalise_first=normalise_first)
        assert 0.2 < np.mean(ours == query_targets) < 1.0  # informative: neither trivial nor hopeless
    # The data is sensitive to each step, so a variant without centring, or one that re-normalises the
    # centroids (nearest centroid by cosine), would have failed above.
    def unit(v: np.ndarray) -> np.ndarray:
        return v / np.linalg.norm(v, axis=-1, keepdims=True)

    centroids = np.stack([unit(support[targets == c]).mean(0) for c in range(6)])
    no_centre = np.linalg.norm(centroids[None] - unit(query)[:, None], axis=2).argmin(axis=1)
    assert no_centre.tolist() != ours.tolist()
    start = unit(support) if normalise_first else support
    mean = start.mean(axis=0)
    centred_centroids = np.stack([unit(start[targets == c] - mean).mean(0) for c in range(6)])
    cosine = (unit((unit(query) if normalise_first else query) - mean) @ unit(centred_centroids).T).argmax(axis=1)
    assert cosine.tolist() != ours.tolist()


def test_every_method_ranks_five_classes_its_prediction_first() -> None:
    support, targets, query, _ = hard_problem(seed=2, shots=5)
    for method in METHODS.values():
        output = method.fit_predict(support, targets, query, FewShotConfig(knn_k=5))
        assert output.ranked is not None and output.ranked.shape == (len(query), 5), method.name
        assert output.ranked[:, 0].tolist() == output.predicted.tolist(), method.name
        assert all(len(set(row)) == 5 for row in output.ranked.tolist()), method.name
    for method, normalise_first in ((simpleshot, True), (simpleshot_biobench, False)):
        ranked = method(support, targets, query, FewShotConfig()).ranked
        assert ranked.tolist() == loop_simpleshot(support, targets, query, normalise_first=normalise_first,
                                                  ranked=True)


def test_the_two_simpleshot_protocols_on_vectors_with_spread_norms() -> None:
    """At a log-norm sd of 0.4 BioCLIP's protocol (normalise first) and BioBench's (raw vectors) disagree on many
    queries; each equals its independent implementation, split by split, and only BioCLIP's ignores the norms."""
    data, clean = spread_norm_problem(seed=3, log_norm_sd=0.4)
    norms = np.linalg.norm(data["vectors"], axis=1)
    assert 0.3 < np.std(np.log(norms)) < 0.5
    config = FewShotConfig(shots=(1, 5), repetitions=3, methods=("simpleshot", "simpleshot-biobench"))
    plan = splits_of(data, shots=config.shots, repetitions=config.repetitions)
    table, _ = predict_splits(data["vectors"], plan, data["uuids"], config)
    rows = table.to_pylist()
    disagree = total = 0
    for split in plan.splits:
        support, targets, query = (data["vectors"][split.support], plan.targets[split.support],
                                   data["vectors"][split.query])
        expected = {}
        for method, protocol in (("simpleshot", "bioclip"), ("simpleshot-biobench", "biobench")):
            expected[method] = numpy_simpleshot(support, targets, query, protocol)
            got = {r["uuid"]: r["pred_label"] for r in rows if r["method"] == method and r["shots"] == split.shots
                   and r["repetition"] == split.repetition}
            assert [got[data["uuids"][i]] for i in split.query] == [plan.classes[c] for c in expected[method]]
        assert np.array_equal(expected["simpleshot"],
                              numpy_simpleshot(clean[split.support], targets, clean[split.query], "bioclip"))
        if split.shots == 5:
            disagree += int(np.sum(expected["simpleshot"] != expected["simpleshot-biobench"]))
            total += len(split.query)
    assert disagree / total > 0.15  # the protocols demonstrably differ on these vectors
    summary = few_shot_summary(table, config.methods)
    bioclip, biobench = summary["simpleshot_5shot"]["value"], summary["simpleshot-biobench_5shot"]["value"]
    assert bioclip > biobench + 0.1
    # Sanity of the planted data: on the unscaled vectors BioBench's protocol does about as well as BioCLIP's.
    clean_table, _ = predict_splits(clean, plan, data["uuids"], config)
    clean_summary = few_shot_summary(clean_table, config.methods)
    assert abs(clean_summary["simpleshot-biobench_5shot"]["value"] - bioclip) < 0.05


def brute_knn(support: np.ndarray, targets: np.ndarray, query: np.ndarray, k: int, weights: str) -> list[int]:
    predicted = []
    for q in query:
        distances = [1.0 - float(q @ s) / (np.linalg.norm(q) * np.linalg.norm(s)) for s in support]
        nearest = sorted(range(len(support)), key=lambda i: distances[i])[:k]
        votes: dict[int, float] = {}
        for i in nearest:
            votes[int(targets[i])] = votes.get(int(targets[i]), 0.0) + (1.0 / distances[i] if weights == "distance"
                                                                         else 1.0)
        best = max(votes.values())
        predicted.append(min(label for label, v in votes.items() if v == best))
    return predicted


@pytest.mark.parametrize("weights", ["distance", "uniform"])
@pytest.mark.parametrize("shots,k", [(1, 5), (3, 4), (5, 1)])
def test_knn_matches_brute_force(weights: str, shots: int, k: int) -> None:
    support, targets, query, _ = hard_problem(seed=shots * 10 + k, shots=shots)
    ours = knn(support, targets, query, FewShotConfig(knn_k=k, knn_weights=weights))
    assert ours.predicted.tolist() == brute_knn(support, targets, query, min(k, len(support)), weights)


def test_linear_probe_chooses_c_by_cross_validation_on_the_support_only() -> None:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    support, targets, query, _ = hard_problem(seed=3, shots=4)
    config = FewShotConfig(linear_cs=(0.01, 1.0, 100.0), linear_folds=5)
    result = linear_probe(support, targets, query, config)
    unit = support / np.linalg.norm(support, axis=1, keepdims=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(LogisticRegression(max_iter=1000), {"C": [0.01, 1.0, 100.0]},
                              cv=StratifiedKFold(n_splits=4)).fit(unit, targets)
    assert result.details["C"] == search.best_params_["C"]
    assert result.details["cv_folds"] == 4  # capped by the 4 shots
    assert result.details["cv_accuracy"]["1.0"] == pytest.approx(search.cv_results_["mean_test_score"][1])
    # The query never enters the choice: other query features, same C and the same CV scores.
    other = linear_probe(support, targets, np.random.default_rng(9).normal(size=(50, DIM)), config)
    assert other.details["C"] == result.details["C"]
    assert other.details["cv_accuracy"] == result.details["cv_accuracy"]
    assert choose_c(unit, targets, config.linear_cs, 4)[0] == result.details["C"]
    one_shot = linear_probe(*hard_problem(seed=3, shots=1)[:3], config)
    assert one_shot.details["C"] == config.linear_fallback_c and one_shot.details["cv_folds"] == 0


def test_methods_are_a_registry_and_unknown_ones_are_refused() -> None:
    assert set(METHODS) >= {"simpleshot", "simpleshot-biobench", "linear", "knn"}
    with pytest.raises(UnknownNameError, match="simpleshot"):
        FewShotConfig(methods=("simpelshot",))
    with pytest.raises(CladebenchError):
        FewShotConfig(shots=(0, 5))


# --- splits --------------------------------------------------------------------------------------------


def test_no_group_straddles_support_and_query_and_supports_are_exact() -> None:
    data = planted(groups_per_class=6, max_group=4, seed=4)
    plan = splits_of(data, shots=(1, 3, 5))
    group_of = dict(zip(data["uuids"], data["groups"], strict=True))
    rows_by_class: dict[str, list[int]] = {}
    for i, label in enumerate(data["labels"]):
        rows_by_class.setdefault(label, []).append(i)
    by_key = {(s.shots, s.repetition): s for s in plan.splits}
    assert len(plan.splits) == 3 * 4
    for split in plan.splits:
        support_groups = {data["groups"][i] for i in split.support}
        query_groups = {data["groups"][i] for i in split.query}
        assert not support_groups & query_groups
        for index, label in enumerate(plan.classes):
            in_support = [i for i in split.support if plan.targets[i] == index]
            assert len(in_support) == split.shots
            touched = {group_of[data["uuids"][i]] for i in in_support}
            expected_query = [i for i in rows_by_class[label] if data["groups"][i] not in touched]
            assert sorted(i for i in split.query if plan.targets[i] == index) == expected_query
            assert expected_query
        # Supports are nested across shot counts within one repetition.
        if split.shots > 1:
            smaller = by_key[(1, split.repetition)]
            assert set(smaller.support.tolist()) <= set(split.support.tolist())


def test_same_seed_same_splits_other_seed_other_splits_and_row_order_does_not_matter() -> None:
    data = planted(seed=5)
    first, again, other = splits_of(data), splits_of(data), splits_of(data, seed=1)
    assert first.fingerprint == again.fingerprint
    for a, b in zip(first.splits, again.splits, strict=True):
        assert a.support.tolist() == b.support.tolist() and a.query.tolist() == b.query.tolist()
    assert other.fingerprint != first.fingerprint
    assert any(a.support.tolist() != b.support.tolist() for a, b in zip(first.splits, other.splits, strict=True))
    # Repetitions differ from each other.
    assert first.splits[0].support.tolist() != first.splits[1].support.tolist()

    order = np.random.default_rng(0).permutation(len(data["uuids"]))
    shuffled = {key: [data[key][i] for i in order] for key in ("labels", "groups", "uuids")}
    reordered = splits_of(shuffled)
    assert reordered.fingerprint == first.fingerprint
    for a, b in zip(first.splits, reordered.splits, strict=True):
        assert sorted(data["uuids"][i] for i in a.support) == sorted(shuffled["uuids"][i] for i in b.support)

    # Another class joining leaves every existing class's draws as they were.
    extra = {key: list(data[key]) for key in ("labels", "groups", "uuids")}
    for i in range(6):
        extra["labels"].append("class-new")
        extra["groups"].append(f"new-{i}")
        extra["uuids"].append(f"new-{i}")
    widened = splits_of(extra)
    for a, b in zip(first.splits, widened.splits, strict=True):
        assert sorted(data["uuids"][i] for i in a.support) == sorted(
            extra["uuids"][i] for i in b.support if extra["labels"][i] != "class-new")


def test_classes_with_too_few_groups_are_skipped_and_counted() -> None:
    data = planted(n_classes=4, groups_per_class=6, max_group=1, seed=6)
    labels, groups, uuids = list(data["labels"]), list(data["groups"]), list(data["uuids"])
    # One observation with six photos: a single group can never give both sides.
    labels += ["solo"] * 6
    groups += ["solo-obs"] * 6
    uuids += [f"solo-{i}" for i in range(6)]
    # Exactly 3 single-image groups: 3 shots would leave no query; 4 groups would be enough.
    labels += ["three"] * 3 + ["four"] * 4
    groups += [f"three-{i}" for i in range(3)] + [f"four-{i}" for i in range(4)]
    uuids += [f"three-{i}" for i in range(3)] + [f"four-{i}" for i in range(4)]
    labels.append(None)
    groups.append("unlabelled")
    uuids.append("unlabelled")
    plan = few_shot_splits(labels, groups, uuids, shots=(1, 3), repetitions=2, seed=0)
    assert {s["label"] for s in plan.skipped} == {"solo", "three"}
    solo = next(s for s in plan.skipped if s["label"] == "solo")
    assert (solo["images"], solo["groups"], solo["largest_group"]) == (6, 1, 6)
    assert "fewer than 1 query" in solo["reason"]
    assert "four" in plan.classes and len(plan.classes) == 5
    assert plan.provenance()["skipped_count"] == 2
    never = {i for i, label in enumerate(labels) if label in ("solo", "three", None)}
    for split in plan.splits:
        assert not never & (set(split.support.tolist()) | set(split.query.tolist()))
    # The same classes at 1 shot too: every shot count classifies among the same taxa.
    assert all(len(s.support) == s.shots * 5 for s in plan.splits)
    # A bigger query minimum excludes more.
    strict = few_shot_splits(labels, groups, uuids, shots=(1, 3), repetitions=2, seed=0, min_test_per_class=3)
    assert "four" in {s["label"] for s in strict.skipped}


# --- the task on a Lance dataset ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted_dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, pa.Table]:
    path = tmp_path_factory.mktemp("fewshot") / "planted.lance"
    table = write_planted_dataset(path)
    return store.open_dataset(path), table


def test_task_end_to_end_on_a_lance_dataset(planted_dataset: tuple[Any, pa.Table]) -> None:
    dataset, source = planted_dataset
    task = get_task("fewshot")
    config = FewShotConfig(column="emb_planted", shots=(1, 3), repetitions=3, seed=7)
    predictions = task.predict(dataset, None, config)
    table = predictions.table
    assert table.column_names == ["uuid", "method", "shots", "repetition", "true_label", "pred_label", "true_index",
                                  "pred_index", "correct", "lca_height", "true_depth", "top5_lca_heights"]

    rows = source.to_pylist()
    by_uuid = {r["uuid"]: r for r in rows}
    label_of = {r["uuid"]: " ".join([*(r[k] for k in RANKS[:-1]), r["species"]]) for r in rows}
    result = table.to_pylist()
    for row in result:
        assert row["true_label"] == label_of[row["uuid"]]
        assert row["correct"] == (row["true_label"] == row["pred_label"])
        # The LCA height from the two labels' seven names (one word each here): 7 less the ranks they share.
        shared = 0
        for a, b in zip(row["true_label"].split(), row["pred_label"].split(), strict=True):
            if a != b:
                break
            shared += 1
        assert row["lca_height"] == 7 - shared and row["true_depth"] == 7
        assert row["top5_lca_heights"][0] == row["lca_height"] and len(row["top5_lca_heights"]) == 5

    # The query of each split, checked against the dataset's own observation ids.
    labelled = read_labelled_rows(dataset, ["emb_planted"], rank="species", group_key="auto")
    plan = plan_splits(labelled, config)
    for split in plan.splits:
        support_obs = {by_uuid[labelled.uuids[i]]["source_id"] for i in split.support}
        for method in config.methods:
            got = [r["uuid"] for r in result if r["method"] == method and r["shots"] == split.shots
                   and r["repetition"] == split.repetition]
            assert sorted(got) == sorted(labelled.uuids[i] for i in split.query)
            assert not {by_uuid[u]["source_id"] for u in got} & support_obs

    info = predictions.info
    assert info["column"] == "emb_planted" and info["embedding_metadata"]["model"] == "planted-model"
    assert info["split"]["sampling_unit"] == "source_id" and info["split"]["seed"] == 7
    assert info["split"]["skipped_count"] == 1 and info["split"]["skipped_classes"][0]["label"].endswith("sp6")
    assert info["label_set"]["size"] == 6 == len(predictions.labels)
    assert info["label_set"]["sha256"] == hashlib.sha256(json.dumps(predictions.labels).encode()).hexdigest()
    chosen = info["method_settings"]["linear"]["chosen"]
    assert [(c["shots"], c["repetition"]) for c in chosen] == [(k, r) for k in (1, 3) for r in range(3)]
    assert all(c["C"] in config.linear_cs or c["C"] == config.linear_fallback_c for c in chosen)
    json.dumps(info)

    metrics = task.metrics(predictions)
    above = ("kingdom", "phylum", "class", "order", "family", "genus")
    assert set(metrics) == {f"{m}_{k}shot{b}" for m in config.methods for k in (1, 3)
                            for b in ("", "_balanced", "_mistake_severity", "_hdist1", "_hdist5",
                                      *(f"_{r}" for r in above))}
    # Severity, hdist@1 and genus accuracy per repetition from the label strings alone (one word per rank).
    for rep in range(3):
        rows_of = [r for r in result if r["method"] == "knn" and r["shots"] == 1 and r["repetition"] == rep]
        words = [(r["true_label"].split(), r["pred_label"].split()) for r in rows_of]
        height = [7 - next((i for i, (a, b) in enumerate(zip(t, p, strict=True)) if a != b), 7) for t, p in words]
        wrong = [h for h in height if h > 0]
        if wrong:
            assert metrics["knn_1shot_mistake_severity"]["per_repetition"][rep] == pytest.approx(np.mean(wrong))
        assert metrics["knn_1shot_hdist1"]["per_repetition"][rep] == pytest.approx(np.mean(height))
        assert metrics["knn_1shot_hdist5"]["per_repetition"][rep] == pytest.approx(
            np.mean([np.mean(r["top5_lca_heights"]) for r in rows_of]))
        assert metrics["knn_1shot_genus"]["per_repetition"][rep] == pytest.approx(
            np.mean([t[:6] == p[:6] for t, p in words]))
    estimate = metrics["simpleshot_3shot"]
    per_rep = [np.mean([r["correct"] for r in result if r["method"] == "simpleshot" and r["shots"] == 3
                        and r["repetition"] == rep]) for rep in range(3)]
    assert estimate["per_repetition"] == pytest.approx(per_rep)
    assert estimate["value"] == pytest.approx(np.mean(per_rep)) and estimate["value"] > 0.9
    assert estimate["n"] == 3 and estimate["query_examples"] == sum(
        1 for r in result if r["method"] == "simpleshot" and r["shots"] == 3)
    if np.std(per_rep) > 0:
        half = stats.t.ppf(0.975, 2) * np.std(per_rep, ddof=1) / np.sqrt(3)
        assert estimate["std"] == pytest.approx(np.std(per_rep, ddof=1))
        assert estimate["low"] == pytest.approx(max(0.0, np.mean(per_rep) - half))
    balanced = metrics["knn_1shot_balanced"]["per_repetition"]
    for rep, value in enumerate(balanced):
        per_class: dict[str, list[bool]] = {}
        for r in result:
            if r["method"] == "knn" and r["shots"] == 1 and r["repetition"] == rep:
                per_class.setdefault(r["true_label"], []).append(r["correct"])
        assert value == pytest.approx(np.mean([np.mean(v) for v in per_class.values()]))
    json.dumps(metrics)


def test_task_needs_a_column_or_a_model_and_checks_the_group_key(planted_dataset: tuple[Any, pa.Table]) -> None:
    dataset, _ = planted_dataset
    with pytest.raises(CladebenchError, match="--column"):
        get_task("fewshot").predict(dataset, None, FewShotConfig())
    with pytest.raises(CladebenchError, match="no_such"):
        get_task("fewshot").predict(dataset, None, FewShotConfig(column="emb_planted", group_key="no_such"))
    per_image = get_task("fewshot").predict(dataset, None, FewShotConfig(
        column="emb_planted", group_key="uuid", shots=(1,), repetitions=1, methods=("simpleshot",)))
    assert per_image.info["split"]["sampling_unit"] == "uuid"
    assert per_image.info["split"]["skipped_count"] == 0  # four photos of one observation are four units now
    one = get_task("fewshot").metrics(per_image)["simpleshot_1shot"]
    assert one["n"] == 1 and one["low"] is None and one["std"] is None


def test_vectors_without_a_direction_are_left_out_and_counted(tmp_path: Path) -> None:
    """An all-zero vector has no L2-normalised form: such rows are counted and left out, and a column of nothing
    but zeros is refused, rather than every prediction landing in the first class."""
    import lance

    table = write_planted_dataset(tmp_path / "planted.lance")
    values = np.asarray(table.column("emb_planted").to_pylist(), dtype=np.float32)
    zeroed = values.copy()
    zeroed[:5] = 0.0
    column = table.schema.get_field_index("emb_planted")
    for name, vectors in (("some", zeroed), ("all", np.zeros_like(values))):
        array = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM)
        lance.write_dataset(table.set_column(column, table.schema.field(column), array), str(tmp_path / name))
    config = FewShotConfig(column="emb_planted", shots=(1,), repetitions=2, seed=0)
    predictions = get_task("fewshot").predict(store.open_dataset(tmp_path / "some"), None, config)
    assert predictions.info["rows"]["without_direction"] == 5
    assert predictions.info["rows"]["read"] == table.num_rows - 5
    assert not set(predictions.table.column("uuid").to_pylist()) & set(table.column("uuid").to_pylist()[:5])
    with pytest.raises(CladebenchError, match="all zeros"):
        get_task("fewshot").predict(store.open_dataset(tmp_path / "all"), None, config)


def test_repetitions_have_a_ceiling() -> None:
    from cladebench.errors import UsageError

    with pytest.raises(UsageError, match="--repetitions must be at most 10,000"):
        FewShotConfig(repetitions=99999999999999999999)
