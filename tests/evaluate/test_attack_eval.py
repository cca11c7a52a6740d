"""Hostile option values and inputs to `cladebench eval` found by attacking the evaluation path: each ends with
one line and its documented exit code, before any dataset is opened when the value alone is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.cli import main
from helpers.http_local import serving


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("option", "value"), [
    ("--prior-cell-km", "1e308"),  # cell_km**2 overflowed: exit 70
    ("--prior-cell-km", "50000"),  # larger than pole to pole: one cell, no prior
    ("--prior-neighbourhood-km", "1e200"),
])
def test_a_grid_cell_larger_than_the_sphere_is_a_usage_error(option: str, value: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["eval", "geo", str(tmp_path / "missing.lance"), "--model",
                     "openai-compatible:x@http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"), option, value],
                    capsys)
    assert code == 2, err
    assert f"{option} must be at most" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


# --- outputs that would overwrite an input -------------------------------------------------------------


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from helpers.planted_embeddings import write_planted_dataset

    path = tmp_path_factory.mktemp("attack-eval") / "planted.lance"
    write_planted_dataset(path)
    return path


@pytest.fixture
def a_run(planted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "run"
    code, err = run(["eval", "retrieval", str(planted), "--column", "emb_planted", "--out", str(out),
                     "-k", "3"], capsys)
    assert code == 0, err
    return out


@pytest.mark.parametrize("target", ["run.json", "predictions.parquet"])
@pytest.mark.parametrize("given", ["folder", "file"])
def test_report_never_overwrites_a_file_of_a_run_it_reads(a_run: Path, target: str, given: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    before = {p.name: p.read_bytes() for p in a_run.iterdir()}
    source = a_run if given == "folder" else a_run / "run.json"
    code, err = run(["report", str(source), "--out-file", str(a_run / target)], capsys)
    assert code == 2, err
    assert f"{target} of the run" in err and len(err.strip().splitlines()) == 1
    assert {p.name: p.read_bytes() for p in a_run.iterdir()} == before  # nothing changed, no temp file left


def test_report_beside_the_run_is_fine(a_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["report", str(a_run), "--out-file", str(a_run / "report.md"), "--format", "md"], capsys)
    assert code == 0, err
    assert (a_run / "report.md").read_text().startswith("#")


@pytest.mark.parametrize("inside", ["", "results", "data"])
def test_eval_out_in_the_dataset_folder_is_refused(planted: Path, inside: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.relative_to(planted) for p in planted.rglob("*"))
    out = planted / inside if inside else planted
    code, err = run(["eval", "retrieval", str(planted), "--column", "emb_planted", "--out", str(out)], capsys)
    assert code == 2, err
    assert "inside the dataset" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.relative_to(planted) for p in planted.rglob("*")) == before


# --- an endpoint URL with credentials in its userinfo and its query -------------------------------------------


def test_chat_url_puts_the_path_before_the_query() -> None:
    from cladebench.models.endpoint import parse_endpoint

    spec = parse_endpoint("openai-compatible:m@http://alice:pw@127.0.0.1:8000/v1?api_key=k3y&api-version=2")
    assert spec.chat_url == "http://alice:pw@127.0.0.1:8000/v1/chat/completions?api_key=k3y&api-version=2"
    assert parse_endpoint("openai-compatible:m@http://h:1/v1/?a=b").chat_url == "http://h:1/v1/chat/completions?a=b"
    assert parse_endpoint("openai-compatible:m@https://h/v1/").chat_url == "https://h/v1/chat/completions"


def test_credentials_in_userinfo_and_query_reach_the_server_and_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The server answers only at /v1/chat/completions with the query's key: a request that reaches it used both;
    run.json, the predictions, the cache, the report and the console hold neither the password nor the key."""
    import sys

    from helpers.http_local import send_json
    from helpers.rerank_data import write_rerank_dataset
    from helpers.vlm_server import ChatHandler, ChatServer

    class KeyedHandler(ChatHandler):
        def do_POST(self) -> None:
            path, _, query = self.path.partition("?")
            if query != "api_key=s3cr3t-k3y":
                self.rfile.read(int(self.headers["Content-Length"]))
                send_json(self, 401, {"error": f"bad query {query!r}"})
                return
            self.path = path
            super().do_POST()

    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    QUERIES, CANDIDATES = 3, 6
    data = write_rerank_dataset(tmp_path / "rerank.lance", QUERIES, CANDIDATES, seed=4, positives=2)
    assert data is not None
    httpd = ChatServer()
    httpd.RequestHandlerClass = KeyedHandler
    with serving(httpd):
        port = httpd.server_address[1]
        model = f"openai-compatible:m@http://alice:hunter2-pw@127.0.0.1:{port}/v1?api_key=s3cr3t-k3y"
        args = ["eval", "rerank", str(data), "--model", model, "--group-by", "none", "--out",
                str(tmp_path / "run")]
        monkeypatch.setattr(sys, "argv", ["cladebench", *args])
        code, err = run(args, capsys)
        assert code == 0, err
        assert httpd.state.requests == QUERIES * CANDIDATES
        code, report_err = run(["report", str(tmp_path / "run"), "--out-file", str(tmp_path / "report.html")], capsys)
        assert code == 0, report_err
        printed = err + report_err + capsys.readouterr().out
    written = {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".lance"
               and ".lance" not in str(p)}
    assert "run.json" in written and "report.html" in written
    for secret in ("hunter2-pw", "s3cr3t-k3y", "alice"):
        assert secret not in printed
        for name, data_bytes in written.items():
            assert secret.encode() not in data_bytes, f"{secret} in {name}"


# --- two runs writing one --out ---------------------------------------------------------------------------------


def _record(value: int):
    import pyarrow as pa

    from cladebench.evaluate.record import RunRecord

    table = pa.table({"uuid": [f"u{i}" for i in range(value)], "correct": [True] * value})
    return RunRecord(task="zeroshot", metrics={"m": {"value": float(value)}}, provenance={}, config={}), table


def test_a_record_is_written_under_the_folder_s_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While another writer holds the folder (two evals with one --out), a write waits, then refuses with one line
    and leaves the other's files as they are: never a run.json whose predictions are another run's."""
    import fcntl
    import hashlib
    import os

    from cladebench.errors import CladebenchError
    from cladebench.evaluate import record as results

    out = tmp_path / "run"
    record, table = _record(3)
    record.write(out, table)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(results, "WRITE_LOCK_WAIT_S", 0.0)
    holder = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other, other_table = _record(5)
        with pytest.raises(CladebenchError, match="another run is writing its record to") as caught:
            other.write(out, other_table)
        assert caught.value.exit_code == 1 and "\n" not in str(caught.value)
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    finally:
        os.close(holder)
    other.write(out, other_table)  # the folder is free again
    written = results.RunRecord.read(out)
    assert written.metrics["m"]["value"] == 5.0
    assert written.provenance["predictions"]["sha256"] == hashlib.sha256((out / "predictions.parquet").read_bytes()
                                                                         ).hexdigest()
    assert sorted(p.name for p in out.iterdir()) == ["predictions.parquet", "run.json"]


def test_leftovers_of_a_killed_write_are_cleaned(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / ".predictions.parquet.tmp").write_bytes(b"half")
    (out / ".run.json.tmp").write_text("{")
    record, table = _record(2)
    record.write(out, table)
    assert sorted(p.name for p in out.iterdir()) == ["predictions.parquet", "run.json"]


# --- a VLM that never answers ------------------------------------------------------------------------------------


def test_a_never_answering_endpoint_fails_within_the_deadline_whatever_the_batch(tmp_path: Path) -> None:
    """A retry queues for a free slot behind at most the items already prepared (twice the concurrency), never
    behind the whole batch: a dead server fails a batch of N items after about one deadline plus one read timeout,
    not N / concurrency read timeouts (an hour for INQUIRE-Rerank's thousands). Counted in requests, not seconds:
    were every item's first attempt sent before the first retry, the server would see all 30."""
    import threading

    from cladebench.errors import CladebenchError
    from cladebench.models.vlm import VLMConfig, YesNoItem, score_yes_no
    from helpers.vlm_server import JPEGS, ChatServer

    release = threading.Event()

    def never(handler: object, number: int, body: object) -> bool:
        release.wait(30)
        return True

    httpd = ChatServer()
    httpd.state.reply = never
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    items = [YesNoItem(key=f"k{i}", image=JPEGS[i % 3], query=f"query {i}") for i in range(30)]
    config = VLMConfig(concurrency=1, connect_timeout_s=1.0, read_timeout_s=0.1, request_deadline_s=0.35,
                       max_attempts=5, backoff_base_s=0.01, backoff_max_s=0.01, jitter=0.0, cache_dir=tmp_path / "c")
    try:
        with pytest.raises(CladebenchError, match="deadline"):
            score_yes_no(items, httpd.model_id(), config)
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()
    assert httpd.state.requests < len(items)
