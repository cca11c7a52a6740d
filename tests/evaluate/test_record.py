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


@pytest.mark.parametrize("version", [3, 99, "1", None, True, 0])
def test_a_record_of_another_format_is_not_read_as_this_one(tmp_path, version: Any) -> None:
    """A run.json written by a newer version (or whose version is not one at all) may mean other things by the same
    fields: it is refused, naming its version, never compared or reused as if it were of this format."""
    import json

    from cladebench.errors import SchemaError

    path = RunRecord(task="zeroshot", metrics={}, provenance={}, config={}).write(
        tmp_path, __import__("pyarrow").table({"uuid": ["a"]}))
    data = json.loads(path.read_text())
    data["record_version"] = version
    path.write_text(json.dumps(data))
    with pytest.raises(SchemaError, match=f"record version {version!r}"):
        RunRecord.read_given(path)
