"""A VLM rerank through `cladebench eval` against a misbehaving endpoint on 127.0.0.1, without torch.

Bad answers (NaN logprobs) are unscored outcomes that are never cached, the console says how many
candidates went unscored, and when most did no metric is reported. Credentials in the endpoint URL
and the API key reach the server but neither ``run.json`` nor the HTML report made from it.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from helpers.http_local import send_json, serving
from helpers.rerank_data import write_rerank_dataset
from helpers.vlm_server import ChatHandler, ChatServer, completion, decode_request, default_top

QUERIES, CANDIDATES = 3, 6


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_rerank_dataset(tmp_path_factory.mktemp("rerank") / "rerank.lance", QUERIES, CANDIDATES, seed=4,
                                positives=2)  # two positives per query


@pytest.fixture
def endpoint() -> Iterator[ChatServer]:
    httpd = ChatServer()
    with serving(httpd):
        yield httpd


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def nan_when(condition: Any):
    """A server reply that answers NaN logprobs to the requests ``condition(prompt, number)`` picks."""
    def reply(handler: ChatHandler, number: int, body: dict[str, Any]) -> bool:
        seen = decode_request(body, None)
        top = (lambda yes, no: [("Yes", math.nan), ("No", no)]) if condition(seen.prompt, number) else default_top
        send_json(handler, 200, completion(seen, top))
        return True

    return reply


def rerank(dataset: Path, model: str, out: Path) -> int:
    return main(["eval", "rerank", str(dataset), "--model", model, "--group-by", "none", "--out", str(out)])


def test_most_answers_unusable_reports_no_metric_and_caches_nothing(dataset: Path, endpoint: ChatServer,
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    endpoint.state.reply = nan_when(lambda prompt, number: True)
    total = QUERIES * CANDIDATES
    assert rerank(dataset, endpoint.model_id(), tmp_path / "bad") == 0
    printed = capsys.readouterr()
    assert f"{total} of {total} candidates have no score (invalid_response {total})" in printed.err
    assert "too many to report a metric" in printed.err
    record = RunRecord.read(tmp_path / "bad")
    assert record.metrics and all(m["value"] is None and "not reported" in m["reason"]
                                  for m in record.metrics.values())
    assert record.provenance["task"]["outcomes"] == {"invalid_response": total}
    assert "n/a" in printed.out and "ap@" in printed.out
    reasons = pq.read_table(tmp_path / "bad" / "predictions.parquet").column("outcome_reason").to_pylist()
    assert all("NaN" in r for r in reasons)
    assert not list((tmp_path / "cache").rglob("*.json"))  # nothing poisoned the cache

    endpoint.state.reply = None  # fixed: the rerun asks every question again and reports metrics
    assert rerank(dataset, endpoint.model_id(), tmp_path / "good") == 0
    assert endpoint.state.requests == 2 * total
    good = RunRecord.read(tmp_path / "good")
    assert all(m["value"] is not None and m["value"] >= 0 for m in good.metrics.values())
    assert "no score" not in capsys.readouterr().err


def test_no_yes_or_no_anywhere_reports_no_metric(dataset: Path, endpoint: ChatServer, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    endpoint.state.top_for = lambda yes, no: [("The", -0.1), ("A", -2.5)]
    total = QUERIES * CANDIDATES
    assert rerank(dataset, endpoint.model_id(), tmp_path / "none") == 0
    printed = capsys.readouterr()
    assert f"{total} of {total} candidates have no score (no_yes_no {total})" in printed.err
    record = RunRecord.read(tmp_path / "none")
    assert all(m["value"] is None and m["low"] is None and "not reported" in m["reason"]
               for m in record.metrics.values())
    assert "n/a" in printed.out


def test_a_few_unusable_answers_are_counted_on_the_console_and_metrics_stay(dataset: Path, endpoint: ChatServer,
                                                                            tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    first_query = min(store.open_dataset(dataset).to_table(columns=["query"]).column("query").to_pylist())
    endpoint.state.reply = nan_when(lambda prompt, number: first_query in prompt)
    assert rerank(dataset, endpoint.model_id(), tmp_path / "some") == 0
    err = capsys.readouterr().err
    total = QUERIES * CANDIDATES
    assert f"{CANDIDATES} of {total} candidates have no score (invalid_response {CANDIDATES})" in err
    assert "too many" not in err
    record = RunRecord.read(tmp_path / "some")
    assert all(m["value"] is not None and "reason" not in m for m in record.metrics.values())
    assert record.provenance["task"]["unscored"] == CANDIDATES


def test_credentials_and_the_api_key_reach_the_server_but_no_record(dataset: Path, endpoint: ChatServer,
                                                                    tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-written-4417")
    port = endpoint.server_address[1]
    model = f"openai-compatible:m@http://alice:hunter2-secret@127.0.0.1:{port}/v1"
    monkeypatch.setattr(sys, "argv", ["cladebench", "eval", str(dataset), "--model", model])  # as typed
    assert rerank(dataset, model, tmp_path / "run") == 0
    assert endpoint.state.requests == QUERIES * CANDIDATES
    basic = "Basic " + base64.b64encode(b"alice:hunter2-secret").decode()
    assert {s.authorization for s in endpoint.state.seen} <= {basic, "Bearer sk-never-written-4417"}

    assert main(["report", str(tmp_path / "run"), "--out-file", str(tmp_path / "report.html")]) == 0
    written = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()}
    written["report.html"] = (tmp_path / "report.html").read_bytes()
    written.update({p.name: p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file()})
    for name, data in written.items():
        for secret in (b"hunter2-secret", b"alice", b"sk-never-written-4417"):
            assert secret not in data, f"{secret!r} in {name}"
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["provenance"]["model"]["id"] == f"openai-compatible:m@http://127.0.0.1:{port}/v1"
    assert f"openai-compatible:m@http://127.0.0.1:{port}/v1" in record["provenance"]["command"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_vlm_deadline_out_of_range_is_a_usage_error(dataset: Path, tmp_path: Path, value: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "rerank", str(dataset), "--model", "openai-compatible:m@http://127.0.0.1:9/v1",
                 "--out", str(tmp_path / "run"), "--vlm-deadline-s", value])
    err = capsys.readouterr().err
    assert code == 2 and "--vlm-deadline-s" in err and len(err.strip().splitlines()) == 1


def test_vlm_deadline_from_the_command_line_bounds_a_silent_endpoint(dataset: Path, tmp_path: Path,
                                                                    endpoint: ChatServer,
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import time

    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    endpoint.state.hold_s = 30.0
    started = time.monotonic()
    code = main(["eval", "rerank", str(dataset), "--model", endpoint.model_id(), "--group-by", "none",
                 "--out", str(tmp_path / "run"), "--vlm-deadline-s", "1", "--vlm-concurrency", "2"])
    err = capsys.readouterr().err
    assert code == 1 and "request deadline of 1.0 s" in err, err
    assert time.monotonic() - started < 25  # the default deadline (60 s) would not be reached
    assert not (tmp_path / "run" / "run.json").exists()


def test_answers_without_logprobs_are_counted_like_other_unusable_answers(dataset: Path, endpoint: ChatServer,
                                                                         tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """An endpoint leaving logprobs out of some answers aborted the run, and every rerun again."""
    first_query = min(store.open_dataset(dataset).to_table(columns=["query"]).column("query").to_pylist())

    def reply(handler: ChatHandler, number: int, body: dict[str, Any]) -> bool:
        seen = decode_request(body, None)
        answer = completion(seen, default_top)
        if first_query in seen.prompt:
            del answer["choices"][0]["logprobs"]
        send_json(handler, 200, answer)
        return True

    endpoint.state.reply = reply
    total = QUERIES * CANDIDATES
    for run in ("first", "again"):  # the rerun asks again only the answers that had none
        assert rerank(dataset, endpoint.model_id(), tmp_path / run) == 0
        assert f"{CANDIDATES} of {total} candidates have no score (no_logprobs {CANDIDATES})" in capsys.readouterr().err
        assert RunRecord.read(tmp_path / run).provenance["task"]["outcomes"] == {"no_logprobs": CANDIDATES,
                                                                                 "scored": total - CANDIDATES}
    assert endpoint.state.requests == total + CANDIDATES


@pytest.mark.slow
def test_an_endpoint_out_of_reach_exits_5(dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = main(["eval", "rerank", str(dataset), "--model", f"openai-compatible:m@http://127.0.0.1:{port}/v1",
                 "--group-by", "none", "--out", str(tmp_path / "run")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and not line.startswith("asking")]
    assert code == 5 and len(err) == 1 and "gave up" in err[0], err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("prompt", ["Is this a bird? Answer Yes or No.", "Does it show {query} in {place}?",
                                    "Does it show {query"])
def test_a_prompt_without_the_query_is_a_usage_error_before_the_dataset_is_read(
        tmp_path: Path, prompt: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", "rerank", str(tmp_path / "not-read.lance"), "--model",
                 "openai-compatible:m@http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"), "--vlm-prompt", prompt])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--vlm-prompt" in err[0], err  # not "no dataset" (3): it was not read
