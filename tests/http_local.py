"""One way for tests to run a real HTTP server on 127.0.0.1: in a thread, for the duration of a block.

Every test that talks HTTP (image hosts, VLM endpoints, failure injection) builds its own server class on a
free port; this runs it and always shuts it down, so a failing test leaves no thread serving.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer
from typing import TypeVar

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
