"""Zero-shot and the geo task score images against the label set one way (``tasks.common.score_labels``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import cladebench.tasks.geo.task as geo_task
import cladebench.tasks.zeroshot as zeroshot
from cladebench.errors import CladebenchError
from cladebench.tasks.common import classify, label_set, score_labels
from cladebench.taxonomy import Lineage, Rank


class Texts:
    """An encoder whose text tower gives label i the i-th unit vector (templates ignored; other texts all ones)."""

    model_id = "stand-in"
    revision = None

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def encode_texts(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
        unit = np.eye(len(self.names))
        return np.stack([next((unit[i] for i, n in enumerate(self.names) if n in t), np.ones(len(self.names)))
                         for t in texts])


class Settings:
    name_style = "sci"
    templates = "{c}"
    logit_scale = "10"
    candidates: str | None = None


def test_both_tasks_use_the_shared_scoring() -> None:
    assert zeroshot.score_labels is score_labels and geo_task.score_labels is score_labels


def test_scores_and_the_candidates_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path))  # the label texts' embeddings are cached there
    lineages = [Lineage.from_row({"kingdom": "Animalia", "genus": "Parus", "species": f"Parus {e}"})
                for e in ("major", "minor", "ater")]
    labels = label_set(lineages, Rank.SPECIES)
    names = labels.texts("sci")
    images = np.eye(3, dtype=np.float32)[[2, 0]]
    rows = pa.table({"uuid": ["a", "b"], "group": [[names[2], names[1]], None]})
    scores = score_labels(Texts(names), images, rows, labels, Rank.SPECIES, Settings())
    assert scores.texts == names and scores.scale == 10.0 and scores.allowed is None
    np.testing.assert_allclose(scores.probs, classify(images, scores.label_vectors, 10.0))
    assert scores.probs.argmax(axis=1).tolist() == [2, 0]

    with_candidates = Settings()
    with_candidates.candidates = "group"
    restricted = score_labels(Texts(names), images, rows, labels, Rank.SPECIES, with_candidates)
    assert restricted.allowed is not None and restricted.allowed[0].tolist() == [False, True, True]
    assert restricted.candidate_counts is not None and restricted.candidate_counts["rows_without_candidates"] == 1
    assert restricted.probs[0, 0] == 0.0
    with pytest.raises(CladebenchError, match="--candidates lists species, so it needs --rank species"):
        score_labels(Texts(names), images, rows, label_set(lineages, Rank.GENUS), Rank.GENUS, with_candidates)
