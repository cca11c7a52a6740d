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


def test_a_grouped_version_1_record_is_paired_group_by_group(tmp_path) -> None:
    """A version-1 few-shot record of two challenge groups (each its own label set, known by ``sha256``, and its
    own split): lifted when read, each group's facts are its own, as the record holds them."""
    import json

    import pyarrow as pa

    from cladebench.evaluate.comparability import comparability_of, label_set_size

    path = RunRecord(task="fewshot", metrics={}, provenance={}, config={}).write(tmp_path, pa.table({"uuid": ["a"]}))
    data = json.loads(path.read_text())
    data.update(record_version=1, config={"column": "emb_x", "shots": [5, 1]})
    data.pop("label")
    data["provenance"].update({
        "dataset": {"evaluated_fingerprint": "rows"},
        "groups": {"column": "challenge_group", "values": ["a", "b"]},
        "label_set": None,
        "label_sets": {"a": {"rank": "species", "size": 3, "sha256": "la"},
                       "b": {"rank": "species", "size": 4, "sha256": "lb"}},
        "split": None,
        "split_by_group": {"a": {"fingerprint": "sa"}, "b": {"fingerprint": "sb"}},
        "task": {"shots": [1, 5]},
    })
    path.write_text(json.dumps(data))
    record = RunRecord.read(path)
    assert record.label == "emb_x · 5,1 shots" and record.record_version == 2
    a, b, whole = (comparability_of(record, group) for group in ("a", "b", ""))
    assert (a["label_set"], a["split_sha256"], a["shots"], a["rank"]) == ("la", "sa", [1, 5], "species")
    assert (b["label_set"], b["split_sha256"], b["rows_sha256"]) == ("lb", "sb", "rows")
    assert whole["label_set"] is None and whole["taxa_sha256"] is None and whole["rank"] is None  # as version 1 read
    assert label_set_size(record, "b") == 4
