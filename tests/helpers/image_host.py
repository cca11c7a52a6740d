"""An image host on 127.0.0.1 for the downloader tests, scripted per path: each path has a route (answer, fail
the first N times, stall, ...), and the host counts the requests per path, their times, and the most requests
in flight at once, so a test asserts what went over the wire, not what the client believes it did.

Shared by the local and Ray downloader tests. :func:`image_host` runs one for the duration of a block.
"""

from __future__ import annotations

import io
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image

from helpers import http_local

Route = Callable[[BaseHTTPRequestHandler, int], None]
"""A route answers one request; the int is which request to this path it is (1 for the first)."""


class HostState:
    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: Counter[str] = Counter()
        self.request_times: dict[str, list[float]] = defaultdict(list)
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()


class ImageHostHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real image hosts do
    server: ImageHost

    def do_GET(self) -> None:
        state = self.server.state
        with state.lock:
            state.requests[self.path] += 1
            state.request_times[self.path].append(time.monotonic())
            number = state.requests[self.path]
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            route = state.routes.get(self.path)
            if route is None:
                send(self, 404, b"not here")
            else:
                route(self, number)
        finally:
            with state.lock:
                state.in_flight -= 1

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        pass


class ImageHost(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ImageHostHandler)
        self.state = HostState()

    def handle_error(self, request: object, client_address: object) -> None:
        # The client hangs up on slow routes by design; a broken pipe on the server side is expected.
        pass

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes = b"", *, content_type: str = "image/jpeg",
         headers: dict[str, str] | None = None, declared: int | None = None, length: bool = True) -> None:
    """Answer with ``body``; ``declared`` lies about the length, ``length=False`` sends none (close-delimited)."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    if length:
        handler.send_header("Content-Length", str(len(body) if declared is None else declared))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    if not length or (declared is not None and declared != len(body)):
        handler.send_header("Connection", "close")
        handler.close_connection = True
    handler.end_headers()
    handler.wfile.write(body)


def ok(body: bytes, content_type: str = "image/jpeg") -> Route:
    return lambda handler, number: send(handler, 200, body, content_type=content_type)


def fail_first(times: int, status: int, then: Route, headers: dict[str, str] | None = None) -> Route:
    def route(handler: BaseHTTPRequestHandler, number: int) -> None:
        if number <= times:
            send(handler, status, b"try later", content_type="text/plain", headers=headers)
        else:
            then(handler, number)

    return route


def slow_first(times: int, delay_s: float, then: Route) -> Route:
    def route(handler: BaseHTTPRequestHandler, number: int) -> None:
        if number <= times:
            time.sleep(delay_s)
        then(handler, number)

    return route


def hold(delay_s: float, then: Route) -> Route:
    def route(handler: BaseHTTPRequestHandler, number: int) -> None:
        time.sleep(delay_s)
        then(handler, number)

    return route


def image_bytes(fmt: str, seed: int = 0, size: tuple[int, int] = (48, 32)) -> bytes:
    image = Image.new("RGB", size, (seed * 37 % 256, 120, 200))
    for x in range(0, size[0], 3):
        image.putpixel((x, (x * 7 + seed) % size[1]), (x * 5 % 256, seed % 256, 0))
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


JPEG = image_bytes("JPEG", 1, (160, 120))
PNG = image_bytes("PNG", 2)


@contextmanager
def image_host() -> Iterator[ImageHost]:
    """The counting test server on a free port of 127.0.0.1, in a thread, for the duration of the block."""
    with http_local.serving(ImageHost()) as httpd:
        yield httpd
