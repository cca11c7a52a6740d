"""Fetching: the attempts of one item (retries, checks, deadline) and the steps every run shares.

Why: a local run (:mod:`cladebench.curate.fetch.local`) and a Ray shard (:mod:`cladebench.curate.fetch.ray`)
fetch the same way, with the same accounting; only who fetches differs. Both use :func:`split_cached` to set
aside what an earlier run finished, :func:`fetch_pending` to fetch the rest over one pooled client, and
:func:`finish_report` to check that every item landed in exactly one bin. What is retried and what is not is
described in :mod:`cladebench.curate.fetch`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.curate.fetch.checks import IMAGE_CHECKS
from cladebench.curate.fetch.config import DownloadConfig
from cladebench.curate.fetch.download_store import (
    Downloaded,
    DownloadFailure,
    DownloadItem,
    DownloadReport,
    DownloadStore,
)
from cladebench.retry import gather_or_cancel, parse_retry_after, retryable_status

if TYPE_CHECKING:
    import httpx

    from cladebench.progress import Bar


class _AttemptError(Exception):
    """Why one attempt failed, and whether another may succeed."""

    def __init__(self, reason: str, detail: str, *, retryable: bool, status: int | None = None,
                 exception: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.reason, self.detail, self.retryable = reason, detail, retryable
        self.status, self.exception, self.retry_after = status, exception, retry_after


def _transport_reasons() -> tuple[tuple[type[Exception], str, bool], ...]:
    """Exception class -> (reason, retryable), most specific first; httpx is imported only when fetching."""
    import httpx

    return (
        (httpx.TimeoutException, "timeout", True),
        (httpx.NetworkError, "connection", True),
        (httpx.RemoteProtocolError, "connection", True),
        (httpx.UnsupportedProtocol, "bad_url", False),
        (httpx.InvalidURL, "bad_url", False),
        (httpx.TransportError, "protocol", False),
        # Not transport errors, and the same answer comes back on every attempt.
        (httpx.TooManyRedirects, "redirects", False),
        (httpx.DecodingError, "decoding", False),
        (httpx.RequestError, "protocol", False),
    )


def _classify(exc: Exception, reasons: tuple[tuple[type[Exception], str, bool], ...]) -> _AttemptError:
    for kind, reason, retryable in reasons:
        if isinstance(exc, kind):
            return _AttemptError(reason, str(exc) or type(exc).__name__, retryable=retryable,
                                 exception=type(exc).__name__)
    raise exc



def _status_error(response: httpx.Response) -> _AttemptError:
    status = response.status_code
    retryable = retryable_status(status)
    return _AttemptError(
        f"http_{status}", f"HTTP {status} {response.reason_phrase}".strip(), retryable=retryable, status=status,
        retry_after=parse_retry_after(response.headers.get("retry-after")) if retryable else None,
    )


def _content_length(response: httpx.Response) -> int | None:
    value = response.headers.get("content-length")
    return int(value) if value is not None and value.strip().isdigit() else None



@dataclass(frozen=True)
class _Body:
    """A response body, received whole into a spool file of the store (:meth:`DownloadStore.spool_path`)."""

    path: Path
    """The spool file; renamed under the digest when the body passes its checks, removed otherwise."""
    sha256: str
    """SHA-256 of the body, computed as it arrived."""
    size: int
    """Bytes in the body."""
    content_type: str | None
    """The response's ``Content-Type``."""


class _Fetcher:
    """Runs the attempts of every item over one client, persisting each success as it happens (its body, and
    its manifest line unless the store is a bodies-only view)."""

    def __init__(self, client: httpx.AsyncClient, store: DownloadStore, config: DownloadConfig,
                 on_done: Callable[[], None]) -> None:
        self.client, self.store, self.config, self.on_done = client, store, config, on_done
        self.semaphore = asyncio.Semaphore(config.concurrency)
        self.reasons = _transport_reasons()
        self.check = IMAGE_CHECKS[config.image_check]
        self.policy = config.retry_policy

    async def fetch(self, item: DownloadItem) -> Downloaded | DownloadFailure:
        config, policy = self.config, self.policy
        attempt, spent = 0, 0.0  # spent: seconds in attempts and waits, not queued for the semaphore
        while True:
            attempt += 1
            try:
                async with self.semaphore:
                    started = time.monotonic()
                    try:
                        body = await self._attempt(item, spent)
                    finally:
                        spent += time.monotonic() - started
                    # In a thread: decoding a multi-megabyte photo would stall every transfer on the loop.
                    # Under the semaphore: bodies waiting to be checked then stay bounded in number when the
                    # network outpaces decoding.
                    return await asyncio.to_thread(self._finish, item, body, attempt)
            except _AttemptError as error:
                failure = error
                if error.retryable and attempt < policy.max_attempts:
                    delay = policy.backoff_delay(attempt, error.retry_after)
                    if not policy.would_pass_deadline(spent, delay):
                        # Sleep outside the semaphore: a waiting item must not hold a slot another could use.
                        await asyncio.sleep(delay)
                        spent += delay
                        continue
                    failure = _AttemptError(
                        "deadline", f"gave up after {attempt} attempts in {spent:.1f} s: waiting {delay:.1f} s for "
                        f"another would pass the item deadline of {config.item_deadline_s} s; last attempt: "
                        f"{error.reason}: {error.detail}", retryable=False, status=error.status,
                        exception=error.exception)
                self.on_done()
                return DownloadFailure(item.key, item.url, failure.reason, failure.detail, failure.status,
                                       failure.exception, attempt)

    async def _attempt(self, item: DownloadItem, spent: float) -> _Body:
        """One GET, cut by the wall clock at ``attempt_timeout_s`` or at what is left of the item deadline."""
        config = self.config
        left = self.policy.time_left(spent)
        limits = [t for t in (config.attempt_timeout_s, left) if t is not None]
        timeout = min(limits) if limits else None
        try:
            return await asyncio.wait_for(self._get(item), timeout)
        except TimeoutError:
            if left is not None and timeout == left and left != config.attempt_timeout_s:
                raise _AttemptError("deadline", f"the item deadline of {config.item_deadline_s} s passed during an "
                                    f"attempt (after {spent:.1f} s on earlier attempts and waits)",
                                    retryable=False, exception="TimeoutError") from None
            raise _AttemptError("timeout", f"attempt took longer than {timeout} s", retryable=True,
                                exception="TimeoutError") from None

    async def _get(self, item: DownloadItem) -> _Body:
        import httpx

        try:
            async with self.client.stream("GET", item.url) as response:
                if response.status_code != 200:
                    raise _status_error(response)
                return await self._read_body(response)
        except (httpx.RequestError, httpx.InvalidURL) as exc:
            raise _classify(exc, self.reasons) from None

    async def _read_body(self, response: httpx.Response) -> _Body:
        """The body streamed into a spool file of the store and hashed as it arrives, so a body of any size
        (up to ``max_bytes``) costs one chunk of memory; the spool file is removed on any failure (a timeout's
        cancellation included)."""
        import httpx

        limit = self.config.max_bytes
        declared = _content_length(response)
        if declared is not None and declared > limit:
            raise _AttemptError("too_large", f"Content-Length {declared} exceeds the cap of {limit} bytes",
                                retryable=False, status=response.status_code)
        spool = self.store.spool_path()
        digest = hashlib.sha256()
        size = 0
        try:
            with open(spool, "xb") as handle:
                try:
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise _AttemptError("too_large", f"body exceeds the cap of {limit} bytes",
                                                retryable=False, status=response.status_code)
                        digest.update(chunk)
                        handle.write(chunk)
                except httpx.RequestError as exc:
                    received = response.num_bytes_downloaded
                    if isinstance(exc, httpx.TransportError) and declared is not None and received < declared:
                        raise _AttemptError("truncated", f"connection ended after {received} of {declared} bytes "
                                            f"({type(exc).__name__})", retryable=True, status=response.status_code,
                                            exception=type(exc).__name__) from None
                    failure = _classify(exc, self.reasons)
                    failure.status = response.status_code
                    raise failure from None
            # Compare on the wire (before any content decoding): that is what Content-Length counts.
            received = response.num_bytes_downloaded
            if declared is not None and received != declared:
                raise _AttemptError("truncated", f"received {received} bytes, Content-Length said {declared}",
                                    retryable=True, status=response.status_code)
        except BaseException:
            spool.unlink(missing_ok=True)
            raise
        return _Body(spool, digest.hexdigest(), size, response.headers.get("content-type"))

    def _finish(self, item: DownloadItem, body: _Body, attempt: int) -> Downloaded:
        """Check a received body and store it under its digest; its spool file is gone afterwards either way."""
        try:
            return self._store(item, body, attempt)
        finally:
            body.path.unlink(missing_ok=True)

    def _store(self, item: DownloadItem, body: _Body, attempt: int) -> Downloaded:
        from cladebench.images import ImageDecodeError, ImageTooLargeError, sniff_format

        digest = body.sha256
        if item.sha256 is not None and digest != item.sha256.lower():
            raise _AttemptError("sha256_mismatch", f"body SHA-256 {digest} differs from the expected {item.sha256}",
                                retryable=False, status=200)
        with open(body.path, "rb") as handle:
            head = handle.read(16)  # enough for every signature sniff_format knows
        try:
            if self.config.image_check != "none":  # the others decode the image: they need it whole in memory
                self.check(body.path.read_bytes())
        except ImageTooLargeError as exc:
            # The same image comes back on every attempt: not retried.
            raise _AttemptError("too_many_pixels", exc.reason, retryable=False, status=200,
                                exception=type(exc).__name__) from None
        except ImageDecodeError as exc:
            # Often a body cut short by a cache or proxy that then reported the short length; worth another try.
            raise _AttemptError("invalid_image", exc.reason, retryable=True, status=200,
                                exception=type(exc).__name__) from None
        self.store.put_file(body.path, digest)
        entry = Downloaded(item.key, item.url, digest, body.size, body.content_type, sniff_format(head), attempt,
                           time.time())
        if self.store.writes_manifest:
            self.store.record(entry)
        self.on_done()
        return entry



def _is_finished(entry: Downloaded | None, item: DownloadItem, store: DownloadStore) -> bool:
    if entry is None or entry.url != item.url:
        return False
    if item.sha256 is not None and entry.sha256 != item.sha256.lower():
        return False
    return store.has(entry)


def split_cached(wanted: list[DownloadItem], store: DownloadStore) -> tuple[dict[str, Downloaded],
                                                                          list[DownloadItem]]:
    """Items an earlier run finished (by key; same url, expected digest and a complete body on disk) and the
    items still to fetch, in the order asked for. A body in ``objects/`` without a manifest line counts as
    not finished: fetching it again is how a run killed between the two resumes."""
    finished = store.load_manifest()
    cached = {i.key: finished[i.key] for i in wanted if _is_finished(finished.get(i.key), i, store)}
    return cached, [i for i in wanted if i.key not in cached]


def _client(config: DownloadConfig) -> httpx.AsyncClient:
    import httpx

    timeout = httpx.Timeout(connect=config.connect_timeout_s, read=config.read_timeout_s,
                            write=config.connect_timeout_s, pool=None)
    limits = httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency)
    return httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=True,
                             headers={"User-Agent": config.user_agent})


async def fetch_pending(pending: list[DownloadItem], store: DownloadStore, config: DownloadConfig, *,
                        client: httpx.AsyncClient | None = None,
                        on_done: Callable[[], None] = lambda: None) -> list[Downloaded | DownloadFailure]:
    """Fetch ``pending`` into ``store`` over one client; one result per item, in the order of ``pending``.

    Bodies go into ``objects/`` as they finish; manifest lines too unless ``store`` writes bodies only
    (a Ray shard). ``client`` replaces the client built from ``config`` (the caller then owns it)."""
    if not pending:
        return []
    own = client is None
    http = _client(config) if client is None else client
    try:
        fetcher = _Fetcher(http, store, config, on_done)
        return await gather_or_cancel([fetcher.fetch(i) for i in pending])
    finally:
        if own:
            await http.aclose()


def finish_report(wanted: list[DownloadItem], cached: Mapping[str, Downloaded],
                  results: Iterable[Downloaded | DownloadFailure], store: DownloadStore,
                  started: float) -> DownloadReport:
    """The report of a run (bins in the order asked for), with its failures written to ``failures.parquet``;
    refuses a run where an item did not land in exactly one bin. ``started`` is a ``time.monotonic()``."""
    results = list(results)
    fetched = {r.key: r for r in results if isinstance(r, Downloaded)}
    failed = {r.key: r for r in results if isinstance(r, DownloadFailure)}
    downloaded = {i.key: cached.get(i.key) or fetched[i.key] for i in wanted if i.key not in failed}
    failures = tuple(failed[i.key] for i in wanted if i.key in failed)
    store.write_failures(failures)
    report = DownloadReport(store, downloaded, failures, ok=len(fetched), cached=len(cached),
                            elapsed_s=time.monotonic() - started)
    if report.ok + report.cached + report.failed != len(wanted) or len(results) != len(wanted) - len(cached):
        raise AssertionError(f"download accounting: {report.summary()} for {len(wanted)} items")
    return report


def progress_bar(total: int, done: int, config: DownloadConfig) -> Bar:
    """The bar of a run (:mod:`cladebench.progress`; off unless ``config.progress``), starting at the items already
    done."""
    from cladebench import progress

    return progress.progress_bar(total=total, initial=done, desc="downloading", unit="file",
                                 enabled=config.progress, leave=False)


__all__ = ["fetch_pending", "finish_report", "progress_bar", "split_cached"]
