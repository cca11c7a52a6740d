"""INQUIRE fullrank ranks exactly, whatever index the column has, and its numbers are INQUIRE's own.

The gallery is isotropic 64-d vectors under an IVF index of many small partitions, where Lance's default
probes miss true neighbours (checked below, so the test keeps its teeth). The evaluation's top 50 must be
the exact numpy ranking, and the run record's means must equal INQUIRE's ``compute_retrieval_metrics``
recomputed here, independently, with sklearn exactly as ``src/metrics.py`` calls it, on the run's own output.
No model is needed: a stand-in encoder returns fixed query vectors.
"""

from __future__ import annotations

import csv
import types
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sklearn.metrics import average_precision_score, ndcg_score

from cladebench import store
from cladebench.errors import CladebenchError, UsageError
from cladebench.evaluate.fullrank import write_fullrank_record
from cladebench.evaluate.record import RunRecord
from cladebench.store import embedding_field, write_dataset
from cladebench.store.search import nearest, vector_index_partitions
from cladebench.tasks.text_search import EXACT_RANKING, FULLRANK_K, fullrank
from helpers.stand_in import StandIn

ROWS, DIM, PARTITIONS, QUERIES = 4000, 64, 256, 6
FOLDER = "train/00042_Animalia_Chordata_Aves_Passeriformes_Corvidae_Corvus_corax"
MODEL_ID = "stand-in:isotropic"



@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("fullrank-exact")
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    queries = rng.standard_normal((QUERIES, DIM)).astype(np.float32)
    uuids = [f"row-{i:05d}" for i in range(ROWS)]
    field = embedding_field("iso", DIM, {"model": MODEL_ID})
    table = pa.table({
        "uuid": uuids, "image": pa.array([b""] * ROWS, pa.large_binary()),
        "half": ["a" if i % 2 else "b" for i in range(ROWS)],
        "inat24_file_name": [f"{FOLDER}/{u}.jpg" for u in uuids],
        "emb_iso": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
    }).cast(pa.schema([("uuid", pa.string()), ("image", pa.large_binary()), ("half", pa.string()),
                       ("inat24_file_name", pa.string()), field]))
    path = root / "iso.lance"
    dataset = store.create_vector_index(write_dataset(table, path), "emb_iso", num_partitions=PARTITIONS)
    assert vector_index_partitions(dataset, "emb_iso") == PARTITIONS

    unit = vectors.astype(np.float64) / np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
    unit_queries = queries.astype(np.float64) / np.linalg.norm(queries.astype(np.float64), axis=1, keepdims=True)
    similarity = unit_queries @ unit.T
    exact = np.argsort(-similarity, axis=1, kind="stable")

    # Positives per query: some inside the exact top 50 (some where the index misses), some beyond it.
    positives = {}
    for q in range(QUERIES):
        ranked = exact[q]
        chosen = set(ranked[[0, 3, 10, 24, 37, 49, 50, 75, 400]].tolist()) if q % 3 else set(ranked[[60, 90]].tolist())
        chosen |= set(rng.choice(ROWS, size=5 + q, replace=False).tolist())
        positives[q] = sorted(chosen)
    query_csv = root / "inquire_queries_test.csv"
    with query_csv.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["", "query_id", "query_text", "supercategory", "category", "iconic_group"])
        for q in range(QUERIES):
            writer.writerow([q, 100 + q, f"q{q}", "Appearance" if q % 2 else "Behavior", "Species", "Birds"])
    annotation_csv = root / "inquire_annotations.csv"
    with annotation_csv.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query_id", "image_id", "image_path"])
        for q, rows in positives.items():
            for row in rows:
                writer.writerow([100 + q, row, f"{FOLDER}/{uuids[row]}"])  # INQUIRE's paths lack ".jpg"
    return {"path": path, "vectors": vectors, "queries": queries, "uuids": uuids, "exact": exact,
            "similarity": similarity, "positives": positives, "query_csv": query_csv,
            "annotation_csv": annotation_csv}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))


def _inquire_metrics(y_true: np.ndarray, y_pred: np.ndarray, count_pos: int) -> tuple[float, ...]:
    """INQUIRE's compute_retrieval_metrics (src/metrics.py), written afresh: k is the list's length."""
    k = len(y_true)
    precision = y_true.sum() / k
    ap = (average_precision_score(y_true[:k], y_pred[:k]) if y_true[:k].sum() > 0 else 0) * y_true[:k].sum() / min(
        count_pos, k)
    unknown = count_pos - int(y_true.sum())
    ndcg = ndcg_score([y_true.tolist() + [1] * unknown], [y_pred.tolist() + [-100] * unknown], k=k)
    order = np.flip(np.argsort(y_pred))
    mrr = next((1 / (i + 1) for i in range(k) if y_true[order][i] == 1), 0.0)
    return 100 * precision, 100 * ap, 100 * ndcg, mrr


def test_default_probes_miss_on_this_gallery(gallery: dict[str, object]) -> None:
    """The premise: through the index with Lance's default probes, the top 50 is not the exact top 50."""
    dataset = store.open_dataset(gallery["path"])
    hits = nearest(dataset, "emb_iso", gallery["queries"], k=FULLRANK_K)
    recall = []
    for q in range(QUERIES):
        found = set(hits.filter(pc.equal(hits["query_index"], q)).column("uuid").to_pylist())
        truth = {gallery["uuids"][i] for i in gallery["exact"][q][:FULLRANK_K]}
        recall.append(len(found & truth) / FULLRANK_K)
    assert min(recall) < 0.95, recall


def test_fullrank_top_k_is_the_exact_ranking_at_k_50_by_default(gallery: dict[str, object]) -> None:
    dataset = store.open_dataset(gallery["path"])
    queries = pa.table({"query_id": list(range(QUERIES)), "query_text": [f"q{q}" for q in range(QUERIES)]})
    annotations = pa.table({"query_id": [0], "inat24_file_name": ["none"]})
    table, info = fullrank(dataset, StandIn(gallery["queries"], MODEL_ID), queries, annotations,
                           match_column="inat24_file_name")
    assert info["ranking"] == EXACT_RANKING and info["per_query"].k == FULLRANK_K == 50
    for q in range(QUERIES):
        mine = table.filter(pc.equal(table["query_id"], q))
        assert mine.column("rank").to_pylist() == list(range(1, 51))
        assert mine.column("uuid").to_pylist() == [gallery["uuids"][i] for i in gallery["exact"][q][:50]]
        np.testing.assert_allclose(mine.column("score").to_numpy(), gallery["similarity"][q][gallery["exact"][q][:50]],
                                   atol=1e-6)
    # The evaluation built nothing and left the index as it was.
    assert vector_index_partitions(store.open_dataset(gallery["path"]), "emb_iso") == PARTITIONS


def _command(gallery: dict[str, object], out: Path, **changes: object) -> types.SimpleNamespace:
    settings = {"dataset": str(gallery["path"]), "text": None, "model": MODEL_ID, "k": None, "where": None,
                "column": None, "templates": "raw", "queries": gallery["query_csv"],
                "annotations": gallery["annotation_csv"], "match_column": "inat24_file_name", "out": out,
                "revision": None, "device": "cpu"}
    settings.update(changes)
    return types.SimpleNamespace(**settings)


def _check_against_inquire(record: RunRecord, predictions: pa.Table, gallery: dict[str, object], k: int) -> None:
    per_query = []
    for q in range(QUERIES):
        rows = predictions.filter(pc.equal(predictions["query_id"], 100 + q)).sort_by("rank")
        assert rows.num_rows <= k
        y_true = np.asarray(rows.column("relevant").to_pylist(), dtype=np.int64)
        y_pred = np.asarray(rows.column("score").to_pylist(), dtype=np.float64)
        assert len(np.unique(y_pred)) == len(y_pred)  # no ties: INQUIRE's MRR is defined
        per_query.append(_inquire_metrics(y_true, y_pred, count_pos=len(gallery["positives"][q])))
    precision, ap, ndcg, mrr = np.mean(per_query, axis=0)
    assert record.metrics[f"precision@{k}"]["value"] == pytest.approx(precision, abs=1e-9)
    assert record.metrics[f"ap@{k}"]["value"] == pytest.approx(ap, abs=1e-9)
    assert record.metrics[f"ndcg@{k}"]["value"] == pytest.approx(ndcg, abs=1e-9)
    assert record.metrics[f"mrr@{k}"]["value"] == pytest.approx(mrr, abs=1e-12)
    assert ap > 0 and record.metrics[f"ap@{k}"]["n"] == QUERIES


def test_run_record_holds_inquire_s_own_numbers(gallery: dict[str, object], tmp_path: Path) -> None:
    record, path = write_fullrank_record(store.open_dataset(gallery["path"]), StandIn(gallery["queries"], MODEL_ID),
                                         _command(gallery, tmp_path / "run"))
    task = record.provenance["task"]
    assert task["k"] == 50 and record.config["k"] == 50 and "ap@50" in record.metrics
    assert task["ranking"] == EXACT_RANKING and "exact" in task["ranking"]
    assert task["annotated_positives"] == [len(gallery["positives"][q]) for q in range(QUERIES)]
    assert task["ties_at_cut"] == 0 and task["mixed_ties"] == 0 and task["short_lists"] == 0
    assert "argsort" in record.provenance["metrics"]["mrr@50"]
    predictions = record.predictions(path)
    assert predictions.num_rows == QUERIES * 50
    relevant = {(r["query_id"], r["uuid"]) for r in predictions.to_pylist() if r["relevant"]}
    expected = {(100 + q, gallery["uuids"][i]) for q in range(QUERIES) for i in gallery["exact"][q][:50]
                if i in gallery["positives"][q]}
    assert relevant == expected
    _check_against_inquire(record, predictions, gallery, 50)


def test_a_filter_leaving_fewer_than_k_rows_is_scored_as_inquire_scores_a_short_list(
        gallery: dict[str, object], tmp_path: Path) -> None:
    """k = 3000 over the 2000 rows of one half: each query's list has 2000 rows, INQUIRE's k = len(list)."""
    record, path = write_fullrank_record(store.open_dataset(gallery["path"]), StandIn(gallery["queries"], MODEL_ID),
                                         _command(gallery, tmp_path / "run", k=3000, where="half = 'a'"))
    predictions = record.predictions(path)
    assert predictions.num_rows == QUERIES * ROWS // 2
    assert record.provenance["task"]["short_lists"] == QUERIES
    assert "length of the list" in record.provenance["task"]["short_list_rule"]
    _check_against_inquire(record, predictions, gallery, 3000)


def test_nothing_to_rank_and_a_bad_k_are_clear_errors(gallery: dict[str, object], tmp_path: Path) -> None:
    dataset = store.open_dataset(gallery["path"])
    with pytest.raises(CladebenchError, match="nothing to rank"):
        write_fullrank_record(dataset, StandIn(gallery["queries"], MODEL_ID),
                              _command(gallery, tmp_path / "none", where="half = 'c'"))
    with pytest.raises(UsageError, match="--k must be a positive integer"):
        write_fullrank_record(dataset, StandIn(gallery["queries"], MODEL_ID), _command(gallery, tmp_path / "zero", k=0))
    assert not (tmp_path / "none").exists() and not (tmp_path / "zero").exists()


def test_a_tie_at_the_cut_is_seen_and_counted(tmp_path: Path) -> None:
    """Rows 1 and 2 have the same vector; with k = 2 the cut falls inside their tie."""
    vectors = np.array([[1, 0], [1, 1], [1, 1], [0, 1], [-1, 0]], dtype=np.float32)
    field = embedding_field("toy", 2, {"model": MODEL_ID})
    uuids = [f"u{i}" for i in range(5)]
    table = pa.table({
        "uuid": uuids, "image": pa.array([b""] * 5, pa.large_binary()),
        "inat24_file_name": [f"{FOLDER}/{u}.jpg" for u in uuids],
        "emb_toy": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 2),
    }).cast(pa.schema([("uuid", pa.string()), ("image", pa.large_binary()), ("inat24_file_name", pa.string()),
                       field]))
    dataset = write_dataset(table, tmp_path / "toy.lance")
    queries = pa.table({"query_id": [1, 2], "query_text": ["q0", "q1"]})
    annotations = pa.table({"query_id": [1, 2], "inat24_file_name": [f"{FOLDER}/u2.jpg", f"{FOLDER}/u4.jpg"]})
    encoder = StandIn(np.array([[1.0, 0.6], [1.0, 0.0]], dtype=np.float32), MODEL_ID)
    out, info = fullrank(dataset, encoder, queries, annotations, match_column="inat24_file_name", k=2)
    scores = info["per_query"]
    # Query 1 ranks u1 = u2 first (tied), then u0: no tie at the cut of 2. Query 2 ranks u0, then u1 = u2 tied
    # across the cut. The extra row looked at is not in the output.
    assert scores.ties_at_cut.tolist() == [False, True]
    assert scores.mixed_ties.tolist() == [True, False]
    assert scores.tie_counts()["ties_at_cut"] == 1 and scores.tie_counts()["mixed_ties"] == 1
    assert out.num_rows == 4 and max(out.column("rank").to_pylist()) == 2
