"""A query set in which no query has a relevant candidate: every metric is recorded without a value and with the
reason, instead of a run with no metrics and no word."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cladebench.tasks.common import Predictions
from cladebench.tasks.rerank import rerank_metrics


def _predictions(relevant: np.ndarray) -> Predictions:
    n = relevant.size
    table = pa.table({"query_id": np.repeat([1, 2, 3], n // 3), "query": np.repeat(["a", "b", "c"], n // 3),
                      "relevant": relevant, "score": np.random.default_rng(0).random(n)})
    return Predictions(table=table, labels=["a", "b", "c"], info={"rerank_k": 100})


def test_no_relevant_candidate_gives_every_metric_its_reason() -> None:
    metrics = rerank_metrics(_predictions(np.zeros(30, dtype=bool)))
    assert metrics, "the metrics are recorded, not left out"
    for estimate in metrics.values():
        assert estimate["value"] is None and estimate["n"] == 0 and estimate["queries_excluded"] == 3
        assert estimate["reason"] == "undefined: none of the 3 queries has a relevant candidate"


def test_one_relevant_candidate_gives_values() -> None:
    relevant = np.zeros(30, dtype=bool)
    relevant[4] = True
    metrics = rerank_metrics(_predictions(relevant))
    assert all(e["value"] is not None and "reason" not in e for e in metrics.values())
    assert {e["queries_excluded"] for e in metrics.values()} == {2}
