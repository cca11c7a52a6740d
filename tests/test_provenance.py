"""Credentials never reach a record: URLs in any string of a run record are stripped of userinfo and secrets."""

from __future__ import annotations

import doctest
import json

import pyarrow as pa
import pytest

import cladebench.provenance
from cladebench.evaluate.record import RunRecord
from cladebench.provenance import redact, redact_text, redact_url


@pytest.mark.parametrize(("url", "expected"), [
    ("http://user:pass@host/v1", "http://host/v1"),
    ("https://user@host:8443/v1/", "https://host:8443/v1/"),
    ("http://u:p%40ss@h/v1", "http://h/v1"),
    ("https://h/x.jpg?size=large&key=K1&Token=T2&access_token=A&sig=S&signature=G&password=P&secret=Z",
     "https://h/x.jpg?size=large"),
    ("https://b.s3.amazonaws.com/o.jpg?X-Amz-Algorithm=a&X-Amz-Credential=AK%2F1&X-Amz-Signature=f&v=2",
     "https://b.s3.amazonaws.com/o.jpg?v=2"),
    ("https://h/p?api_key=1#frag", "https://h/p#frag"),
    ("s3://bucket/data.lance", "s3://bucket/data.lance"),
    ("hf://datasets/org/name", "hf://datasets/org/name"),
    ("http://h/p?keyword=fox&tokens=3", "http://h/p?keyword=fox&tokens=3"),  # only exact names are secret
])
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_redact_finds_urls_inside_text_and_structures() -> None:
    command = "eval x.lance --model openai-compatible:m@http://al:pw@10.0.0.1:8000/v1 --out 'o'"
    assert redact_text(command) == "eval x.lance --model openai-compatible:m@http://10.0.0.1:8000/v1 --out 'o'"
    value = {"a": ["http://u:pw@h", ("https://h/?token=pw", 3)], "n": None, "x": 1.5}
    assert redact(value) == {"a": ["http://h", ("https://h/", 3)], "n": None, "x": 1.5}


def test_run_records_are_redacted_when_written_and_when_read(tmp_path) -> None:
    secret_model = "openai-compatible:m@http://alice:pw-123@127.0.0.1:9/v1"
    record = RunRecord(task="rerank", metrics={"ap": {"value": 1.0}},
                       provenance={"model": {"id": secret_model}, "command": f"cladebench eval --model {secret_model}",
                                   "dataset": {"uri": "https://h/d.lance?X-Amz-Signature=sig-456"}},
                       config={"model": secret_model})
    path = record.write(tmp_path / "run", pa.table({"uuid": ["a"]}))
    text = path.read_text()
    assert "pw-123" not in text and "alice" not in text and "sig-456" not in text
    assert json.loads(text)["config"]["model"] == "openai-compatible:m@http://127.0.0.1:9/v1"
    assert record.provenance["model"]["id"] == "openai-compatible:m@http://127.0.0.1:9/v1"  # what is printed next

    old = json.loads(text)  # a record written before redaction existed
    old["provenance"]["model"]["id"] = secret_model
    path.write_text(json.dumps(old))
    assert "pw-123" not in json.dumps(RunRecord.read(path).provenance)


def test_docstring_examples_run() -> None:
    result = doctest.testmod(cladebench.provenance)
    assert result.attempted > 0 and result.failed == 0


def test_url_secrets_are_the_values_a_server_could_echo() -> None:
    from cladebench.provenance import url_secrets

    assert sorted(url_secrets("http://alice:pa55word@h/v1?api_key=qu3ry%2Bk3y&api-version=2&sig=abc")) == [
        "alice", "pa55word", "qu3ry%2Bk3y", "qu3ry+k3y"]  # "abc" is too short to blank safely
    assert url_secrets("http://h/v1?api-version=2") == []
