"""A chat-completions server on 127.0.0.1 that answers like vLLM, for the tests of the VLM client and of the
tasks that use it.

It decodes every image it is sent and derives the Yes/No logprobs from a hash of the prompt and the image
bytes (:func:`logprobs_for`), so each test knows the exact score to expect. It counts requests and the most
in flight at once; ``state.reply`` lets a test answer a request itself (errors, delays, odd bodies). Run it
with :func:`helpers.http_local.serving`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image

from helpers.http_local import send_json

Top = list[tuple[str, float]]


def default_top(yes_logprob: float, no_logprob: float) -> Top:
    return [(" Yes", yes_logprob), ("No", no_logprob), ("The", -6.0), ("I", -7.5)]


@dataclass
class Seen:
    """One request as the server decoded it."""

    payload: dict[str, Any]
    prompt: str
    image: bytes | None
    mime_type: str | None
    image_size: tuple[int, int] | None
    authorization: str | None


@dataclass
class ChatState:
    top_for: Callable[[float, float], Top] = default_top
    """Top logprobs of the first token, from the Yes and No logprobs the hash gives."""
    reply: Callable[[ChatHandler, int, dict[str, Any]], bool] | None = None
    """Answers request number n itself when it returns True (errors, delays, odd bodies)."""
    hold_s: float = 0.0
    """Seconds every answer is held back (to see concurrency)."""
    seen: list[Seen] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def requests(self) -> int:
        return len(self.seen)


def logprobs_for(prompt: str, image: bytes | None) -> tuple[float, float]:
    """The server's Yes and No logprobs: a deterministic function of the prompt and the image bytes, shifted
    together so that P(Yes) + P(No) is 0.99 (with the other top tokens of :func:`default_top`, a distribution)."""
    digest = hashlib.sha256(prompt.encode() + (image or b"")).digest()
    yes, no = -0.05 - digest[0] / 40.0, -0.05 - digest[1] / 40.0
    shift = math.log(math.exp(yes) + math.exp(no)) + 0.01
    return yes - shift, no - shift


def expected_score(prompt: str, image: bytes) -> float:
    yes, no = logprobs_for(prompt, image)
    return math.exp(yes) / (math.exp(yes) + math.exp(no))


class ChatHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ChatServer

    def do_POST(self) -> None:
        state = self.server.state
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/chat/completions":
            send_json(self, 404, {"error": "not here"})
            return
        try:
            seen = decode_request(body, self.headers.get("Authorization"))
        except Exception as exc:  # what vLLM does with an image it cannot read
            send_json(self, 400, {"error": {"message": f"bad request: {exc}"}})
            return
        with state.lock:
            state.seen.append(seen)
            number = state.requests
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            time.sleep(state.hold_s)
            if state.reply is not None and state.reply(self, number, body):
                return
            send_json(self, 200, completion(seen, state.top_for))
        finally:
            with state.lock:
                state.in_flight -= 1

    def log_message(self, format: str, *args: object) -> None:
        pass


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.state = ChatState()

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the client hangs up on slow answers by design

    def model_id(self, name: str = "Qwen2-VL-7B") -> str:
        return f"openai-compatible:{name}@http://127.0.0.1:{self.server_address[1]}/v1"


def decode_request(body: dict[str, Any], authorization: str | None) -> Seen:
    (message,) = body["messages"]
    assert message["role"] == "user"
    image, mime_type, size = None, None, None
    texts = []
    for part in message["content"]:
        if part["type"] == "image_url":
            header, _, data = part["image_url"]["url"].partition(",")
            assert header.startswith("data:") and header.endswith(";base64")
            mime_type = header[len("data:"):-len(";base64")]
            image = base64.b64decode(data, validate=True)
            with Image.open(io.BytesIO(image)) as decoded:
                decoded.load()
                size = decoded.size
        else:
            texts.append(part["text"])
    return Seen(body, "".join(texts), image, mime_type, size, authorization)


def completion(seen: Seen, top_for: Callable[[float, float], Top]) -> dict[str, Any]:
    if seen.payload.get("logprobs"):
        top = top_for(*logprobs_for(seen.prompt, seen.image))
        token, logprob = max(top, key=lambda pair: pair[1])
        logprobs: dict[str, Any] | None = {"content": [{
            "token": token, "logprob": logprob, "bytes": list(token.encode()),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top],
        }]}
        content = token
    else:
        logprobs = None
        json_mode = seen.payload.get("response_format") == {"type": "json_object"}
        content = json.dumps({"genus": "Vulpes", "prompt": seen.prompt}) if json_mode else f"echo: {seen.prompt}"
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": seen.payload["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "logprobs": logprobs, "finish_reason": "length"}]}


def image_bytes(fmt: str = "JPEG", seed: int = 0, size: tuple[int, int] = (40, 30), mode: str = "RGB",
                **save: Any) -> bytes:
    image = Image.new(mode, size, (seed * 53 % 256, 90, 160) if mode == "RGB" else 0)
    if mode == "RGB":
        for x in range(0, size[0], 3):
            image.putpixel((x, (x * 5 + seed) % size[1]), (x * 7 % 256, seed % 256, 30))
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save)
    return buffer.getvalue()


JPEGS = [image_bytes("JPEG", seed) for seed in range(3)]
