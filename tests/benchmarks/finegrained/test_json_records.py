"""The one streamed reader of a top-level array of records that the camera-trap and MegaDetector readers share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cladebench.benchmarks.finegrained.cameratrap.records import BadRecords, stream_records
from cladebench.errors import SchemaError


def _write(tmp_path: Path, body: object) -> Path:
    path = tmp_path / "file.json"
    path.write_text(json.dumps(body))
    return path


def test_objects_are_yielded_in_order_and_the_rest_counted(tmp_path: Path) -> None:
    path = _write(tmp_path, {"images": [{"id": 1}, 7, {"id": 2}, "x"]})
    bad = BadRecords()
    assert list(stream_records(path, "images", "image", bad, "where images are")) == [{"id": 1}, {"id": 2}]
    assert bad.counts == {"image_not_an_object": 2}


def test_an_empty_array_is_allowed_unless_asked_otherwise(tmp_path: Path) -> None:
    path = _write(tmp_path, {"images": [], "categories": []})
    assert list(stream_records(path, "images", "image", BadRecords(), "where images are")) == []
    with pytest.raises(SchemaError, match=r"no categories; they are listed here$"):
        list(stream_records(path, "categories", "category", BadRecords(), "they are listed here",
                            empty_allowed=False))


def test_a_missing_array_is_a_schema_error_only_when_required(tmp_path: Path) -> None:
    path = _write(tmp_path, {"other": [1]})
    with pytest.raises(SchemaError, match=r"no top-level 'images' array; where images are"):
        list(stream_records(path, "images", "image", BadRecords(), "where images are"))
    assert list(stream_records(path, "images", "image", BadRecords(), None)) == []
