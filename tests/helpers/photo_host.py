"""A photo host on 127.0.0.1 for the source and builder tests: serves fixed bytes per path (404 otherwise) and
counts the requests per path, so a test can assert what went over the wire.

Run it with :func:`helpers.http_local.serving`. A test that needs another behaviour (a trickling body)
subclasses :class:`PhotoHandler` and sets the server's ``RequestHandlerClass`` to it.
"""

from __future__ import annotations

import io
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image


class PhotoHost(ThreadingHTTPServer):
    """Serves ``photos`` (path -> bytes) with :class:`PhotoHandler`, counting requests per path."""

    daemon_threads = True

    def __init__(self, photos: dict[str, bytes]) -> None:
        super().__init__(("127.0.0.1", 0), PhotoHandler)
        self.photos = photos
        self.requests: Counter[str] = Counter()
        self.lock = threading.Lock()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class PhotoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: PhotoHost

    def do_GET(self) -> None:
        with self.server.lock:
            self.server.requests[self.path] += 1
        body = self.server.photos.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, format: str, *args: object) -> None:
        pass


def photo(fmt: str, seed: int) -> bytes:
    """A small plain photo in ``fmt`` (JPEG, PNG, GIF...), its colour set by ``seed``."""
    buffer = io.BytesIO()
    Image.new("RGB", (24, 16), (seed * 40 % 256, 90, 160)).save(buffer, fmt)
    return buffer.getvalue()
