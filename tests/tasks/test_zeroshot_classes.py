"""Zero-shot's classes are taxa: balanced accuracy counts label indices (two taxa that read alike stay two
classes), and top-5 over five labels or fewer is undefined, with the reason, rather than 100%."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import balanced_accuracy_score

from cladebench.metrics import top_k_undefined
from cladebench.tasks.common import Predictions
from cladebench.tasks.zeroshot import zero_shot_metrics


def predictions(truth: list[int], predicted: list[int], texts: list[str]) -> Predictions:
    truth_a, predicted_a = np.array(truth), np.array(predicted)
    table = pa.table({"uuid": [f"u{i}" for i in range(len(truth))],
                      "true_label": [texts[t] for t in truth], "pred_label": [texts[p] for p in predicted],
                      "true_index": truth_a, "pred_index": predicted_a, "scored": np.ones(len(truth), dtype=bool),
                      "correct_top1": truth_a == predicted_a, "correct_top5": np.ones(len(truth), dtype=bool)})
    return Predictions(table=table, labels=texts, info={"rank": "species", "scored_ranks": ["species"]})


def test_two_taxa_with_one_common_name_are_two_classes() -> None:
    texts = ["deer mouse", "deer mouse", "vole", "shrew", "mole", "rat", "bat"]  # two Peromyscus share a name
    truth = [0, 0, 0, 1, 1, 1, 2, 2, 3, 4]
    predicted = [0, 1, 0, 0, 1, 0, 2, 3, 3, 4]
    metrics = zero_shot_metrics(predictions(truth, predicted, texts))
    assert metrics["balanced_accuracy_species"]["value"] == pytest.approx(balanced_accuracy_score(truth, predicted))
    by_text = balanced_accuracy_score([texts[t] for t in truth], [texts[p] for p in predicted])
    assert metrics["balanced_accuracy_species"]["value"] != pytest.approx(by_text)  # strings would merge them


@pytest.mark.parametrize("labels", [3, 5])
def test_top5_over_five_labels_or_fewer_is_undefined(labels: int) -> None:
    texts = [f"species {i}" for i in range(labels)]
    metrics = zero_shot_metrics(predictions([0, 1, 2, 0], [0, 1, 0, 0], texts))
    top5 = metrics["top5_species"]
    assert top5["value"] is None and top5["low"] is None and top5["n"] == 4
    assert top5["reason"] == top_k_undefined(5, labels) and f"over {labels} labels" in top5["reason"]
    assert metrics["top1_species"]["value"] == 0.75


def test_top5_over_six_labels_is_defined() -> None:
    texts = [f"species {i}" for i in range(6)]
    metrics = zero_shot_metrics(predictions([0, 1, 2, 0], [0, 1, 0, 0], texts))
    assert metrics["top5_species"]["value"] == 1.0 and "reason" not in metrics["top5_species"]
