"""A run record names its model the same way wherever it is shown (eval's summary line, compare's table)."""

from __future__ import annotations

from typing import Any

import pytest

from cladebench.evaluate.record import RunRecord


@pytest.mark.parametrize(("model", "named"), [
    ({"id": "hf-hub:org/model", "image_embeddings": {"column": "emb_x"}}, "hf-hub:org/model"),
    ({"id": None, "image_embeddings": {"column": "emb_x"}}, "column emb_x (no model named)"),
    ({"id": None, "image_embeddings": None}, "?"),
    ({}, "?"),
    (None, "?"),
])
def test_model_name(model: dict[str, Any] | None, named: str) -> None:
    record = RunRecord(task="fewshot", metrics={}, provenance={"model": model}, config={})
    assert record.model_name() == named
