"""A Hub model that is not cached, with the network down and ``HF_HUB_OFFLINE`` unset: one request, one line.

huggingface_hub retries a listing six times over about 23 s when the Hub cannot be reached; cladebench asks
once, with a deadline (:data:`cladebench.models.hub.PROBE_TIMEOUT_S`), and stops. The Hub here is a real server
on 127.0.0.1 that accepts connections and never answers, or a port that refuses them. No test measures time:
they count the connections and the requests, and read the timeout each request was given.
"""

from __future__ import annotations

import os
import socket
import socketserver
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cladebench.models import hub
from cladebench.models.registry import ModelUnavailableError
from helpers.http_local import serving
from helpers.toy_dataset import write_toy_dataset

huggingface_hub = pytest.importorskip("huggingface_hub")
httpx2 = pytest.importorskip("httpx2")  # huggingface_hub's HTTP client
from huggingface_hub import constants as hub_constants  # noqa: E402


class _SilentHub(socketserver.ThreadingTCPServer):
    """Accepts every connection, counts it, and never sends a byte (a proxy or server that hangs)."""

    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        self.connections = 0
        self.release = threading.Event()
        self.count_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Hold)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Hold(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: _SilentHub = self.server  # type: ignore[assignment]
        with server.count_lock:
            server.connections += 1
        server.release.wait(30)


def _refused_url() -> str:
    """A port on 127.0.0.1 that nothing listens on: connections to it are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def online_empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Online as far as the environment says (no HF_HUB_OFFLINE), with nothing in the Hugging Face cache."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)  # read at import
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return tmp_path / "hf-home" / "hub"


@pytest.fixture
def requests_sent(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every request about a model that huggingface_hub's HTTP client sends, as it is sent. (huggingface_hub also
    fetches a registry of its own once per process, ``/api/agent-harnesses``, best effort and never retried.)"""
    sent: list[object] = []
    send = httpx2.Client.send

    def counting_send(self, request, *args, **kwargs):
        if "/api/models/" in str(request.url):
            sent.append(request)
        return send(self, request, *args, **kwargs)

    monkeypatch.setattr(httpx2.Client, "send", counting_send)
    return sent


@pytest.mark.parametrize("fetch", ["snapshot", "file"])
def test_a_refused_hub_is_asked_once_with_the_short_timeout(online_empty_cache, requests_sent, monkeypatch, fetch):
    monkeypatch.setattr(hub_constants, "ENDPOINT", _refused_url())
    with pytest.raises(ModelUnavailableError) as info:
        if fetch == "snapshot":
            hub.fetch_snapshot("imageomics/bioclip-2", None)
        else:
            hub.fetch_file("timm/vit_base_patch16_clip_224.openai", hub.WEIGHT_NAMES, None)
    assert len(requests_sent) == 1, [str(r.url) for r in requests_sent]  # huggingface_hub's backoff: 6
    timeout = requests_sent[0].extensions["timeout"]
    assert set(timeout.values()) == {hub.PROBE_TIMEOUT_S}
    message = str(info.value)
    assert "could not be reached" in message and "ConnectError" in message
    assert str(online_empty_cache) in message and "\n" not in message
    assert info.value.exit_code == 5


def test_a_hub_that_never_answers_gets_one_connection_and_the_deadline(online_empty_cache, monkeypatch):
    monkeypatch.setattr(hub, "PROBE_TIMEOUT_S", 0.3)
    with serving(_SilentHub()) as silent:
        monkeypatch.setattr(hub_constants, "ENDPOINT", silent.url)
        try:
            with pytest.raises(ModelUnavailableError, match=r"did not answer within 0\.3 s") as info:
                hub.fetch_snapshot("imageomics/bioclip-2", "abc123")
        finally:
            silent.release.set()
        assert silent.connections == 1
    assert "hf-hub:imageomics/bioclip-2 at revision abc123" in str(info.value)


def test_the_hub_saying_no_such_repo_is_reported_as_that(online_empty_cache, monkeypatch, requests_sent):
    """An answer, even a 404, means the network is there: the message says what the Hub said, after one request."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from helpers.http_local import send_json

    class NoSuchRepo(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            send_json(self, 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})

        def log_message(self, *args: object) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), NoSuchRepo)) as server:
        monkeypatch.setattr(hub_constants, "ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        with pytest.raises(ModelUnavailableError, match="no such repository"):
            hub.fetch_snapshot("org/absent", None)
    assert len(requests_sent) == 1


def test_the_cli_fails_at_once_with_one_line(tmp_path):
    """The command as a user runs it, the Hub's address from HF_ENDPOINT: exit 5, one line, no retry lines."""
    dataset = write_toy_dataset(tmp_path / "toy.lance")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE")}
    env.update(HF_ENDPOINT=_refused_url(), HF_HOME=str(tmp_path / "hf-home"))
    done = subprocess.run([sys.executable, "-m", "cladebench", "embed", str(dataset), "--model", "hf-hub:org/model"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 5, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("cladebench embed: error: model hf-hub:org/model at revision main: the Hub")
    assert "could not be reached" in lines[0]
