"""A fetched body is streamed to a file of the download store as it arrives (hashed on the way), never held whole:
a collection's metadata file fetched by URL (``build cameratrap``'s ``local_copy``) lands intact, and a body that
fails (cut short, too large, not an image) leaves no temporary file behind."""

from __future__ import annotations

import hashlib
import random
import tracemalloc
from pathlib import Path

from cladebench.benchmarks.finegrained.cameratrap.fetching import local_copy
from cladebench.curate.fetch import DownloadConfig, DownloadStore, download
from helpers.http_local import serving
from helpers.photo_host import PhotoHandler, PhotoHost, photo

BODY = random.Random(17).randbytes(6 * 2**20 + 12345)  # several chunks, not a multiple of any chunk size
FAST = DownloadConfig(concurrency=2, max_attempts=2, backoff_base_s=0.0, jitter=0.0, image_check="none")


def _leftovers(root: Path) -> list[Path]:
    return [p for p in (root / "objects").rglob("*") if p.is_file() and p.name.startswith(".")]


def test_a_metadata_file_fetched_by_url_lands_intact_under_its_digest(tmp_path: Path) -> None:
    with serving(PhotoHost({"/lila/metadata.json": BODY})) as host:
        path = local_copy(host.url("/lila/metadata.json"), "a.metadata", tmp_path / "downloads", False)
        again = local_copy(host.url("/lila/metadata.json"), "a.metadata", tmp_path / "downloads", False)
        requests = host.requests["/lila/metadata.json"]
    digest = hashlib.sha256(BODY).hexdigest()
    assert path == again and path.name == digest and path.read_bytes() == BODY
    assert requests == 1  # the second call found it in the store
    assert not _leftovers(tmp_path / "downloads")


def test_the_body_goes_to_disk_as_it_arrives_not_whole_into_memory(tmp_path: Path) -> None:
    """Held whole, a body costs at least twice its size in Python memory (the chunks, then them joined); streamed,
    about one chunk. Measured as the peak of memory allocated while the fetch runs (not a time)."""
    body = random.Random(3).randbytes(24 * 2**20)
    with serving(PhotoHost({"/big.json": body})) as host:
        url = host.url("/big.json")
        tracemalloc.start()
        try:
            path = local_copy(url, "big", tmp_path / "downloads", False)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert path.read_bytes() == body
    assert peak < len(body) // 3, f"peak {peak:,} bytes for a body of {len(body):,}"


class _CutShort(PhotoHandler):
    """Promises the whole body, sends half of it and closes the connection."""

    def do_GET(self) -> None:
        body = self.server.photos[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self.close_connection = True


def test_a_failed_body_leaves_no_temporary_file_and_nothing_stored(tmp_path: Path) -> None:
    store = DownloadStore(tmp_path / "downloads")
    with serving(PhotoHost({"/cut": BODY, "/big": BODY, "/notimage": BODY, "/ok": photo("PNG", 1)})) as host:
        host.RequestHandlerClass = _CutShort
        cut = download([("cut", host.url("/cut"))], store, FAST)
        host.RequestHandlerClass = PhotoHandler
        big = download([("big", host.url("/big"))], store, DownloadConfig(max_bytes=2**20, image_check="none"))
        checked = download([("notimage", host.url("/notimage")), ("ok", host.url("/ok"))], store,
                           DownloadConfig(max_attempts=1, image_check="decode"))
    assert [f.reason for f in cut.failures] == ["truncated"]
    assert [f.reason for f in big.failures] == ["too_large"]
    assert [f.reason for f in checked.failures] == ["invalid_image"]
    ok = checked.downloaded["ok"]
    assert ok.image_format == "png" and ok.size == len(photo("PNG", 1)) and store.read_verified(ok) == photo("PNG", 1)
    stored = [p for p in (tmp_path / "downloads" / "objects").rglob("*") if p.is_file()]
    assert stored == [store.object_path(ok.sha256)]  # the one good body, no spool file of the failed ones
