"""Rerank scores each query's ranking once: the tie counts of the run and its metrics come from one scoring, and a
copy of the predictions with other rows (a breakdown's subset) is scored afresh, never from the full run's numbers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench.metrics import retrieval as retrieval_metrics
from cladebench.store import embedding_field, write_dataset
from cladebench.tasks.rerank import RankedPredictions, RerankConfig, per_query_table, rerank, rerank_metrics
from helpers.stand_in import StandIn

MODEL_ID = "stand-in-rerank"
QUERIES, CANDIDATES, DIM = 3, 6, 8



@pytest.fixture
def ranked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RankedPredictions, StandIn]:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(3)
    n = QUERIES * CANDIDATES
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    field = embedding_field("toy", DIM, {"model": MODEL_ID})
    table = pa.table({
        "uuid": [f"c{i:03d}" for i in range(n)], "image": pa.array([b""] * n, pa.large_binary()),
        "query_id": pa.array([i // CANDIDATES for i in range(n)], pa.int64()),
        "query": [f"q{i // CANDIDATES}" for i in range(n)],
        "relevant": [i % 3 == 0 for i in range(n)],
        "emb_toy": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
    }).cast(pa.schema([("uuid", pa.string()), ("image", pa.large_binary()), ("query_id", pa.int64()),
                       ("query", pa.string()), ("relevant", pa.bool_()), field]))
    dataset = write_dataset(table, tmp_path / "toy.lance")
    encoder = StandIn(rng.standard_normal((QUERIES, DIM)).astype(np.float32), MODEL_ID)
    predictions = rerank(dataset, encoder, RerankConfig(column="emb_toy"))
    assert isinstance(predictions, RankedPredictions)
    return predictions, encoder


def _count_scoring(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = retrieval_metrics.score_ragged

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(retrieval_metrics, "score_ragged", counting)
    return calls


def test_the_metrics_reuse_the_scoring_done_for_the_tie_counts(ranked, monkeypatch: pytest.MonkeyPatch) -> None:
    predictions, _ = ranked
    calls = _count_scoring(monkeypatch)
    metrics = rerank_metrics(predictions)
    assert calls == []  # scored once already, inside rerank()
    fresh = rerank_metrics(dataclasses.replace(predictions, scored=None))
    assert calls == [1] and fresh == metrics


def test_a_copy_with_other_rows_is_scored_afresh(ranked, monkeypatch: pytest.MonkeyPatch) -> None:
    predictions, _ = ranked
    calls = _count_scoring(monkeypatch)
    keep = pa.array([q != 0 for q in predictions.table.column("query_id").to_pylist()])
    subset = dataclasses.replace(predictions, table=predictions.table.filter(keep))
    scored = per_query_table(subset)
    assert calls == [1] and scored["query_ids"] == [1, 2]
    assert per_query_table(predictions)["query_ids"] == [0, 1, 2] and calls == [1]
