"""One way for tests to run a real HTTP server on 127.0.0.1 (in a thread, for the duration of a block), and
the few pieces of an OpenAI-compatible chat endpoint that tests of VLM tasks plant answers through.

Every test that talks HTTP (image hosts, VLM endpoints, failure injection) runs its server on a free port
through :func:`serving`, which always shuts it down, so a failing test leaves no thread serving. A VLM endpoint
that only needs to choose each answer is a :class:`ChatEndpoint` with an answer function.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any, TypeVar

Server = TypeVar("Server", bound=BaseServer)


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """Serve ``server`` in a daemon thread until the block ends, then shut it down and close its socket."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


# --- an OpenAI-compatible chat endpoint, as far as tests of VLM tasks need one ----------------------------------


def send_json(handler: BaseHTTPRequestHandler, status: int, body: dict[str, Any] | str,
              headers: dict[str, str] | None = None) -> None:
    """Answer a request with ``body`` (a dict as JSON, or text as it is) and a Content-Length."""
    data = (body if isinstance(body, str) else json.dumps(body)).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


@dataclass(frozen=True)
class ChatRequest:
    """What a test endpoint needs of one chat-completions request: the payload, its text and its image."""

    body: dict[str, Any]
    text: str
    image_url: str
    image_sha256: str


def read_chat(handler: BaseHTTPRequestHandler) -> ChatRequest:
    """Read a chat-completions request with one text part and one data-URL image part."""
    body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
    content = body["messages"][0]["content"]
    url = next(c["image_url"]["url"] for c in content if c["type"] == "image_url")
    text = next(c["text"] for c in content if c["type"] == "text")
    digest = hashlib.sha256(base64.b64decode(url.split(",", 1)[1])).hexdigest()
    return ChatRequest(body=body, text=text, image_url=url, image_sha256=digest)


def yes_no_reply(p_yes: float) -> dict[str, Any]:
    """A one-token answer "Yes" whose top logprobs give Yes ``p_yes`` and No the rest."""
    top = [{"token": "Yes", "logprob": math.log(p_yes)}, {"token": "No", "logprob": math.log(1 - p_yes)}]
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes"},
                         "logprobs": {"content": [{"token": "Yes", "logprob": top[0]["logprob"],
                                                   "top_logprobs": top}]}, "finish_reason": "length"}]}


def text_reply(text: str) -> dict[str, Any]:
    """A chat answer of ``text``."""
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


class ChatEndpoint(ThreadingHTTPServer):
    """An OpenAI-compatible chat endpoint on 127.0.0.1 whose every answer is ``answer(request)`` (a reply body such
    as :func:`yes_no_reply` or :func:`text_reply` makes); it counts the requests it answered."""

    daemon_threads = True

    def __init__(self, answer: Callable[[ChatRequest], dict[str, Any]]) -> None:
        super().__init__(("127.0.0.1", 0), _ChatHandler)
        self.answer = answer
        self.requests = 0
        self.lock = threading.Lock()


class _ChatHandler(BaseHTTPRequestHandler):
    server: ChatEndpoint

    def do_POST(self) -> None:
        request = read_chat(self)
        with self.server.lock:
            self.server.requests += 1
        send_json(self, 200, self.server.answer(request))

    def log_message(self, format: str, *args: object) -> None:
        pass
