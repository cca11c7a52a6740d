"""A VLM lineage run whose answers are mostly unusable (refused, undecodable, unreadable) reports no accuracy: each
metric of the condition is recorded without a value and with the reason, beside the share that was unusable."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cladebench.tasks.lineage.metrics import condition_metrics
from cladebench.taxonomy import RANK_COLUMNS


def _table(statuses: list[str]) -> pa.Table:
    n = len(statuses)
    ranks = {f"hint_correct_{rank}": pa.array([None] * n, pa.bool_()) for rank in RANK_COLUMNS}
    ranks["hint_correct_species"] = pa.array(np.zeros(n, dtype=bool))
    return pa.table({"uuid": [f"u{i}" for i in range(n)], "scored": np.ones(n, dtype=bool), **ranks,
                     "hint_exact": np.zeros(n, dtype=bool),
                     "hint_depth": np.zeros(n), "hint_lca_distance": np.ones(n),
                     "hint_named_other": np.zeros(n, dtype=bool), "hint_answer": [None] * n, "hint_status": statuses})


def test_mostly_unusable_answers_give_no_accuracy_and_say_why() -> None:
    metrics = condition_metrics(_table(["invalid_response"] * 7 + ["bad_image", "json", "json"]), "hint")
    assert metrics["hint_unusable"]["value"] == 0.8 and metrics["hint_unparseable"]["value"] == 0.0
    for name in ("hint_exact", "hint_accuracy_species", "hint_depth", "hint_lca_distance", "hint_named_other"):
        assert metrics[name]["value"] is None, name
        assert "8 of 10 answers are unusable (bad_image 1, invalid_response 7)" in metrics[name]["reason"]


def test_a_few_unusable_answers_still_give_values() -> None:
    metrics = condition_metrics(_table(["unparseable"] * 3 + ["json"] * 7), "hint")
    assert metrics["hint_exact"]["value"] == 0.0 and "reason" not in metrics["hint_exact"]
    assert metrics["hint_unusable"]["value"] == metrics["hint_unparseable"]["value"] == 0.3
