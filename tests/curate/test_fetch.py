"""The downloader against a real HTTP server on 127.0.0.1: retries, failures, checks, resume, concurrency.

The server counts requests per path and the most requests in flight at once, so the tests assert
what actually went over the wire, not what the client believes it did.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench.curate.fetch import (
    DownloadConfig,
    DownloadItem,
    DownloadStore,
    download,
    download_async,
)
from cladebench.errors import CladebenchError, UnknownNameError
from helpers.huge_png import huge_png
from helpers.image_host import (
    JPEG,
    PNG,
    ImageHost,
    Route,
    fail_first,
    hold,
    image_bytes,
    image_host,
    ok,
    send,
    slow_first,
)

FAST = DownloadConfig(concurrency=4, connect_timeout_s=1.0, read_timeout_s=0.4, attempt_timeout_s=5.0,
                      max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.05)


@pytest.fixture
def server() -> Iterator[ImageHost]:
    with image_host() as httpd:
        yield httpd


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


# --- successes -----------------------------------------------------------------------------------


def test_good_images_are_fetched_hashed_and_stored(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes.update({"/a.jpg": ok(JPEG), "/b.png": ok(PNG, "image/png")})
    report = download([("a", server.url("/a.jpg")), ("b", server.url("/b.png"))], tmp_path, FAST)
    assert (report.ok, report.cached, report.failed) == (2, 0, 0)
    a, b = report.downloaded["a"], report.downloaded["b"]
    assert (a.sha256, a.size, a.image_format, a.content_type, a.attempts) == (sha(JPEG), len(JPEG), "jpeg",
                                                                            "image/jpeg", 1)
    assert (b.sha256, b.image_format) == (sha(PNG), "png")
    assert report.read_bytes("a") == JPEG and report.read_bytes("b") == PNG
    store = DownloadStore(tmp_path)
    assert store.object_path(sha(JPEG)).read_bytes() == JPEG
    assert set(store.load_manifest()) == {"a", "b"}
    assert server.state.requests == Counter({"/a.jpg": 1, "/b.png": 1})


def test_expected_sha256_is_checked(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes.update({"/good": ok(JPEG), "/changed": ok(JPEG)})
    items = [DownloadItem("good", server.url("/good"), sha(JPEG).upper()),
             DownloadItem("changed", server.url("/changed"), "0" * 64)]
    report = download(items, tmp_path, FAST)
    assert report.downloaded["good"].sha256 == sha(JPEG)
    (failure,) = report.failures
    assert (failure.key, failure.reason, failure.attempts) == ("changed", "sha256_mismatch", 1)
    assert sha(JPEG) in failure.detail
    assert server.state.requests["/changed"] == 1  # the same bytes would come back: not retried


# --- retries -------------------------------------------------------------------------------------


def test_slow_response_times_out_then_is_retried(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/slow"] = slow_first(1, 1.0, ok(JPEG))
    report = download([("s", server.url("/slow"))], tmp_path, FAST)
    assert report.ok == 1 and report.downloaded["s"].attempts == 2
    assert report.read_bytes("s") == JPEG
    assert server.state.requests["/slow"] == 2


def test_server_errors_are_retried(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/flaky"] = fail_first(1, 500, ok(JPEG))
    server.state.routes["/down"] = fail_first(99, 503, ok(JPEG))
    report = download([("f", server.url("/flaky")), ("d", server.url("/down"))], tmp_path, FAST)
    assert report.downloaded["f"].attempts == 2 and server.state.requests["/flaky"] == 2
    (failure,) = report.failures
    assert (failure.key, failure.reason, failure.status, failure.attempts) == ("d", "http_503", 503, 3)
    assert server.state.requests["/down"] == FAST.max_attempts


def test_429_waits_for_retry_after(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/busy"] = fail_first(1, 429, ok(PNG, "image/png"), headers={"Retry-After": "1"})
    report = download([("r", server.url("/busy"))], tmp_path, FAST)
    assert report.ok == 1 and report.downloaded["r"].attempts == 2
    first, second = server.state.request_times["/busy"]
    assert second - first >= 0.9  # the backoff alone would be 0.01 s


def test_client_errors_are_not_retried(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/forbidden"] = lambda handler, number: send(handler, 403, b"no", content_type="text/plain")
    items = [("missing", server.url("/missing")), ("forbidden", server.url("/forbidden"))]
    report = download(items, tmp_path, FAST)
    assert report.failed_by_reason == {"http_404": 1, "http_403": 1}
    by_key = {f.key: f for f in report.failures}
    assert (by_key["missing"].status, by_key["missing"].attempts, by_key["missing"].url) == (404, 1, items[0][1])
    assert server.state.requests == Counter({"/missing": 1, "/forbidden": 1})


def test_truncated_body_is_retried_then_recorded(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/cut"] = lambda handler, number: send(handler, 200, JPEG[:500], declared=len(JPEG))
    report = download([("cut", server.url("/cut"))], tmp_path, FAST)
    (failure,) = report.failures
    assert (failure.reason, failure.status, failure.attempts) == ("truncated", 200, FAST.max_attempts)
    assert f"500 of {len(JPEG)} bytes" in failure.detail and failure.exception
    assert server.state.requests["/cut"] == FAST.max_attempts
    assert report.downloaded == {} and DownloadStore(tmp_path).load_manifest() == {}


def test_truncated_jpeg_with_matching_length_is_caught_by_decoding(server: ImageHost, tmp_path: Path) -> None:
    cut = JPEG[: len(JPEG) // 2]
    server.state.routes["/short.jpg"] = ok(cut)
    report = download([("j", server.url("/short.jpg"))], tmp_path / "decode", FAST)
    (failure,) = report.failures
    assert failure.reason == "invalid_image" and "truncated" in failure.detail
    assert failure.attempts == FAST.max_attempts  # a cache may have served a cut copy; asked again
    unchecked = download([("j", server.url("/short.jpg"))], tmp_path / "none", replace(FAST, image_check="none"))
    assert unchecked.ok == 1 and unchecked.read_bytes("j") == cut


def test_size_cap_with_and_without_content_length(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/big"] = ok(JPEG)
    server.state.routes["/big-stream"] = lambda handler, number: send(handler, 200, JPEG, length=False)
    server.state.routes["/small-stream"] = lambda handler, number: send(handler, 200, PNG, length=False)
    config = replace(FAST, max_bytes=len(PNG) + 10)
    items = [("big", server.url("/big")), ("stream", server.url("/big-stream")),
             ("small", server.url("/small-stream"))]
    report = download(items, tmp_path, config)
    assert report.failed_by_reason == {"too_large": 2}
    assert all(f.attempts == 1 for f in report.failures)
    assert report.read_bytes("small") == PNG  # a close-delimited body without Content-Length is fine


def test_unreachable_host_and_bad_url(tmp_path: Path) -> None:
    with ImageHost() as closed:
        port = closed.server_address[1]  # bound, then closed: nothing listens there
    config = replace(FAST, max_attempts=2)
    items = [("refused", f"http://127.0.0.1:{port}/x.jpg"), ("ftp", "ftp://127.0.0.1/x.jpg")]
    report = download(items, tmp_path, config)
    by_key = {f.key: f for f in report.failures}
    assert (by_key["refused"].reason, by_key["refused"].attempts) == ("connection", 2)
    assert by_key["refused"].exception == "ConnectError"
    assert (by_key["ftp"].reason, by_key["ftp"].attempts) == ("bad_url", 1)


def test_a_redirect_loop_and_a_body_that_fails_to_decode_are_one_failure_row_each(
        server: ImageHost, tmp_path: Path, capfd) -> None:
    """httpx raises TooManyRedirects and DecodingError, which are not transport errors: each is its URL's failure,
    never the end of the run, and no asyncio traceback reaches the terminal."""
    server.state.routes["/loop"] = lambda handler, number: send(handler, 302, b"", headers={"Location": "/loop"})
    server.state.routes["/gzip.jpg"] = lambda handler, number: send(handler, 200, JPEG,
                                                                    headers={"Content-Encoding": "gzip"})
    server.state.routes["/a.jpg"] = ok(JPEG)
    items = [*((f"loop{i}", server.url("/loop")) for i in range(8)),
             *((f"gzip{i}", server.url("/gzip.jpg")) for i in range(8)), ("good", server.url("/a.jpg"))]
    report = download(items, tmp_path, FAST)
    assert report.failed_by_reason == {"redirects": 8, "decoding": 8} and report.ok == 1
    by_key = {f.key: f for f in report.failures}
    assert (by_key["loop0"].exception, by_key["loop0"].attempts) == ("TooManyRedirects", 1)
    assert (by_key["gzip0"].exception, by_key["gzip0"].status, by_key["gzip0"].attempts) == ("DecodingError", 200, 1)
    assert pq.read_table(DownloadStore(tmp_path).failures_path).num_rows == 16
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err and "Traceback" not in captured.out


def test_an_image_over_the_pixel_limit_is_one_recorded_failure(server: ImageHost, tmp_path: Path) -> None:
    bomb = huge_png(20_000, 20_000)  # 400 MP in a few dozen KB
    server.state.routes.update({"/bomb.png": ok(bomb, "image/png"), "/a.jpg": ok(JPEG)})
    items = [("bomb", server.url("/bomb.png")), ("a", server.url("/a.jpg"))]
    for check in ("decode", "verify"):
        report = download(items, tmp_path / check, replace(FAST, image_check=check))
        assert report.ok == 1 and report.read_bytes("a") == JPEG
        (failure,) = report.failures
        assert (failure.key, failure.reason, failure.status, failure.attempts) == ("bomb", "too_many_pixels", 200, 1)
        assert "400,000,000 pixels, over the limit of 178,956,970" in failure.detail
        assert pq.read_table(report.store.failures_path).column("reason").to_pylist() == ["too_many_pixels"]
    assert server.state.requests["/bomb.png"] == 2  # once per check: the same image is not asked for again


def trickle(interval_s: float, size: int = 1000) -> Route:
    """Promise ``size`` bytes, then send one every ``interval_s``: each read finishes well inside the read
    timeout, so only a wall-clock limit stops it."""
    def route(handler: BaseHTTPRequestHandler, number: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "image/jpeg")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        for byte in JPEG[:size]:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(interval_s)

    return route


def test_a_trickling_host_is_stopped_by_the_item_deadline(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/trickle"] = trickle(0.05)
    config = replace(FAST, read_timeout_s=2.0, attempt_timeout_s=None, item_deadline_s=1.0)
    started = time.monotonic()
    report = download([("t", server.url("/trickle"))], tmp_path, config)
    (failure,) = report.failures
    assert (failure.reason, failure.attempts) == ("deadline", 1)
    assert "item deadline of 1.0 s" in failure.detail
    assert time.monotonic() - started < 10  # 1000 bytes at 20 a second would take 50 s


def test_each_attempt_is_cut_by_the_wall_clock(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/trickle"] = trickle(0.05)
    config = replace(FAST, read_timeout_s=2.0, attempt_timeout_s=0.5, item_deadline_s=None, max_attempts=2)
    report = download([("t", server.url("/trickle"))], tmp_path, config)
    (failure,) = report.failures
    assert (failure.reason, failure.attempts) == ("timeout", 2)
    assert server.state.requests["/trickle"] == 2


def test_a_host_that_never_answers_costs_the_deadline_not_every_attempt(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/silent"] = hold(30.0, ok(JPEG))
    config = replace(FAST, read_timeout_s=0.4, attempt_timeout_s=None, item_deadline_s=1.0, max_attempts=50,
                     backoff_base_s=0.2, backoff_max_s=0.2, jitter=0.0)
    started = time.monotonic()
    report = download([("s", server.url("/silent"))], tmp_path, config)
    (failure,) = report.failures
    assert failure.reason == "deadline" and "item deadline of 1.0 s" in failure.detail
    assert 1 < failure.attempts < 50
    assert time.monotonic() - started < 10


def test_a_huge_retry_after_is_capped(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/busy"] = fail_first(99, 429, ok(JPEG), headers={"Retry-After": "100000"})
    capped = replace(FAST, max_retry_after_s=0.2, item_deadline_s=None, max_attempts=3)
    started = time.monotonic()
    report = download([("r", server.url("/busy"))], tmp_path / "capped", capped)
    (failure,) = report.failures
    assert (failure.reason, failure.status, failure.attempts) == ("http_429", 429, 3)
    first, second, third = server.state.request_times["/busy"]
    assert second - first >= 0.15 and third - second >= 0.15  # the capped Retry-After was honoured
    assert time.monotonic() - started < 10

    # A wait that would pass the item deadline is not started: the item fails at once, saying why.
    deadline = replace(FAST, max_retry_after_s=30.0, item_deadline_s=1.0)
    started = time.monotonic()
    report = download([("r", server.url("/busy"))], tmp_path / "deadline", deadline)
    (failure,) = report.failures
    assert (failure.reason, failure.status, failure.attempts) == ("deadline", 429, 1)
    assert "waiting 30.0 s for another would pass the item deadline of 1.0 s" in failure.detail
    assert "http_429" in failure.detail
    assert time.monotonic() - started < 10


def test_limits_are_validated() -> None:
    for name in ("attempt_timeout_s", "item_deadline_s", "read_timeout_s"):
        with pytest.raises(CladebenchError, match=name):
            DownloadConfig(**{name: 0})
    defaults = DownloadConfig()
    assert defaults.item_deadline_s is not None and defaults.item_deadline_s <= 60
    assert defaults.max_retry_after_s <= 60 and defaults.attempt_timeout_s is not None


# --- bookkeeping ---------------------------------------------------------------------------------


def test_failures_table_is_written_with_every_field(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/a.jpg"] = ok(JPEG)
    report = download([("a", server.url("/a.jpg")), ("gone", server.url("/gone"))], tmp_path, FAST)
    table = pq.read_table(report.store.failures_path)
    assert table.column_names == ["key", "url", "reason", "detail", "status", "exception", "attempts"]
    assert table.to_pylist() == [{"key": "gone", "url": server.url("/gone"), "reason": "http_404",
                                  "detail": "HTTP 404 Not Found", "status": 404, "exception": None, "attempts": 1}]
    assert report.summary().startswith("1 fetched, 0 cached, 1 failed (http_404 1)")


def test_resume_fetches_nothing_already_finished(server: ImageHost, tmp_path: Path) -> None:
    for i in range(5):
        server.state.routes[f"/p{i}.jpg"] = ok(image_bytes("JPEG", i))
    items = [(f"k{i}", server.url(f"/p{i}.jpg")) for i in range(5)] + [("gone", server.url("/gone"))]
    first = download(items, tmp_path, FAST)
    assert (first.ok, first.cached, first.failed) == (5, 0, 1)
    before = Counter(server.state.requests)

    second = download(items, tmp_path, FAST)
    assert (second.ok, second.cached, second.failed) == (0, 5, 1)
    new = server.state.requests - before
    assert new == Counter({"/gone": 1})  # only the failure is asked for again
    assert {k: d.sha256 for k, d in second.downloaded.items()} == {k: d.sha256 for k, d in first.downloaded.items()}


def test_resume_after_a_kill_repairs_the_manifest_and_refetches_only_what_is_missing(
        server: ImageHost, tmp_path: Path) -> None:
    bodies = {i: image_bytes("PNG", i) for i in range(3)}
    for i, body in bodies.items():
        server.state.routes[f"/p{i}.png"] = ok(body, "image/png")
    items = [(f"k{i}", server.url(f"/p{i}.png")) for i in range(3)]
    download(items, tmp_path, FAST)
    store = DownloadStore(tmp_path)
    # A kill mid-append leaves a torn line; a kill between rename and append leaves a missing body.
    with open(store.manifest_path, "ab") as handle:
        handle.write(b'{"key": "k9", "url": "http://exa')
    store.object_path(sha(bodies[1])).unlink()
    before = Counter(server.state.requests)

    report = download(items, tmp_path, FAST)
    assert (report.ok, report.cached, report.failed) == (1, 2, 0)
    assert server.state.requests - before == Counter({"/p1.png": 1})
    assert report.read_bytes("k1") == bodies[1]
    assert store.manifest_path.read_bytes().endswith(b"\n")
    assert set(DownloadStore(tmp_path).load_manifest()) == {"k0", "k1", "k2"}


def test_a_changed_url_is_fetched_again(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes.update({"/old.jpg": ok(JPEG), "/new.png": ok(PNG, "image/png")})
    download([("k", server.url("/old.jpg"))], tmp_path, FAST)
    report = download([("k", server.url("/new.png"))], tmp_path, FAST)
    assert report.ok == 1 and report.read_bytes("k") == PNG


def test_concurrency_limit_is_respected(server: ImageHost, tmp_path: Path) -> None:
    for i in range(9):
        server.state.routes[f"/h{i}"] = hold(0.15, ok(image_bytes("PNG", i), "image/png"))
    items = [(f"h{i}", server.url(f"/h{i}")) for i in range(9)]
    report = download(items, tmp_path, replace(FAST, concurrency=3, read_timeout_s=2.0))
    assert report.ok == 9
    assert server.state.max_in_flight == 3  # never more, and the limit was actually used


def test_async_entry_point_and_sync_wrapper_inside_a_loop(server: ImageHost, tmp_path: Path) -> None:
    server.state.routes["/a.jpg"] = ok(JPEG)

    async def run() -> None:
        report = await download_async([("a", server.url("/a.jpg"))], tmp_path, FAST)
        assert report.ok == 1
        with pytest.raises(CladebenchError, match="await download_async"):
            download([("b", server.url("/a.jpg"))], tmp_path, FAST)

    asyncio.run(run())


def test_bad_input_is_refused() -> None:
    with pytest.raises(CladebenchError, match="duplicate download key 'k'"):
        download([("k", "http://127.0.0.1/a"), ("k", "http://127.0.0.1/b")], "/nonexistent-never-created")
    with pytest.raises(UnknownNameError, match="Did you mean 'decode'"):
        DownloadConfig(image_check="decoded")
    with pytest.raises(CladebenchError, match="concurrency"):
        DownloadConfig(concurrency=0)
