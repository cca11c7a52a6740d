"""Peak memory of fetching one large file by URL (a camera-trap collection's metadata, ``build cameratrap``'s
``local_copy``): the downloader streams each body to a file of the download store as it arrives, so the peak
should grow by about one chunk, not by the file's size.

The body (random bytes, ``--mib`` MiB) is made first and served from 127.0.0.1 by a thread of this process; the
peak resident set size (``ru_maxrss``) is read before and after the fetch, so the growth is what the fetch cost
(the interpreter, httpx's import and the served body are in the "before").

    .venv/bin/python bench/fetch_memory.py [--mib 256]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cladebench.benchmarks.finegrained.cameratrap.fetching import local_copy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="size of the fetched file, MiB")
    args = parser.parse_args()
    body = os.urandom(args.mib * 2**20)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/metadata.json"
    import httpx  # noqa: F401  (imported before the "before": its import is not the fetch's cost)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with tempfile.TemporaryDirectory() as root:
        started = time.monotonic()
        path = local_copy(url, "metadata", Path(root), False)
        elapsed = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ok = path.read_bytes() == body  # after the reading of the peak: this check holds the file whole
    server.shutdown()
    print(f"fetch_memory: python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"file {args.mib} MiB: peak RSS {before:.0f} -> {after:.0f} MiB (+{after - before:.0f} MiB), "
          f"{elapsed:.1f} s, bytes intact: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
