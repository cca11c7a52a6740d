"""Image downloads that resume, retry only what is transient, and account for every URL.

Benchmark builders fetch tens of thousands of photos from iNaturalist's open-data bucket and similar
hosts. At that scale some requests time out, some hosts answer 429 or 503 for a while, some
connections are cut mid-body, and some photos are simply gone. This module fetches a list of
``(key, url)`` items over one pooled HTTP client and sorts every item into exactly one of three bins:

- **ok**: fetched in this run, checked, and persisted the moment it finished;
- **cached**: finished by an earlier run (a killed run resumes without refetching);
- **failed**: recorded with its url, key, reason, HTTP status or exception class and attempt count.

What is retried, with exponential backoff and jitter: timeouts, connection errors, bodies shorter
than their ``Content-Length``, images that do not decode (a truncated JPEG served with a matching
``Content-Length``), and the statuses 408, 429 and 5xx, honouring ``Retry-After``. What is not: 403,
404 and the other 4xx (asking again gets the same answer), bodies over the size cap, images over the
pixel limit (:data:`cladebench.images.MAX_PIXELS`), and a body whose SHA-256 differs from the expected one
(the content changed; retrying fetches the same bytes).

Every item has a time budget by the wall clock: each attempt is cut at ``attempt_timeout_s`` (a host
that trickles a byte every few seconds never trips the read timeout), ``Retry-After`` is honoured up to
``max_retry_after_s``, and an item that has spent ``item_deadline_s`` on attempts and waits fails as
``deadline`` instead of retrying on.

On disk (a :class:`DownloadStore` directory)::

    objects/ab/ab12...ef     every body, named by its SHA-256 (identical photos stored once)
    manifest.jsonl           one JSON line per finished item, appended as each finishes
    failures.parquet         the failures of the latest run

A body is written to a temporary file and renamed into ``objects/`` before its manifest line is
appended, so a manifest line always points at a complete file; a line torn by a kill is cut off when
the store is next opened. Failed items are not remembered as done: the next run tries them again.
One run at a time per store: two processes appending to one manifest is safe, but the repair of a
torn line on opening is not.

With ``DownloadConfig(ray=...)`` the same fetcher runs in Ray tasks, a shard of items each, and the
driver alone appends the manifest (see :mod:`cladebench.curate.fetch.ray`).

Example:
    >>> import tempfile
    >>> report = download([], tempfile.mkdtemp())
    >>> report.ok, report.cached, report.failed
    (0, 0, 0)
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import os
import random
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench.errors import CladebenchError, unknown_name

if TYPE_CHECKING:
    import httpx
    import pyarrow as pa

DEFAULT_USER_AGENT = "cladebench/0.1 (+https://github.com/cladebench/cladebench)"

# 408 Request Timeout, 429 Too Many Requests and every 5xx say "not now", not "never".
RETRYABLE_STATUSES = frozenset({408, 429})

ImageCheck = Callable[[bytes], None]
IMAGE_CHECKS: dict[str, ImageCheck] = {}
"""Registry of body checks run before an item counts as done: name -> function raising on a bad image."""


def image_check(name: str) -> Callable[[ImageCheck], ImageCheck]:
    """Register a body check under ``name`` (it raises :class:`cladebench.images.ImageDecodeError`)."""

    def register(fn: ImageCheck) -> ImageCheck:
        IMAGE_CHECKS[name] = fn
        return fn

    return register


@image_check("none")
def _check_nothing(body: bytes) -> None:
    """Accept any body (for non-image downloads)."""


@image_check("verify")
def _check_verify(body: bytes) -> None:
    """Pillow's ``verify()``: cheap, catches broken PNG/GIF structure, but not a JPEG cut short. Images over
    :data:`cladebench.images.MAX_PIXELS` are refused, as every decoder refuses them."""
    from cladebench.images import ImageDecodeError, open_image

    try:
        with open_image(body) as image:
            image.verify()
    except ImageDecodeError:
        raise
    except Exception as exc:  # Pillow raises many types for corrupt input
        raise ImageDecodeError(f"image does not verify: {exc or type(exc).__name__}") from None


@image_check("decode")
def _check_decode(body: bytes) -> None:
    """A full decode, as every consumer does it: the only check that catches a truncated JPEG (and, as every
    decoder does, refuses images over :data:`cladebench.images.MAX_PIXELS`)."""
    from cladebench.images import decode_image

    decode_image(body)


@dataclass(frozen=True)
class RetryPolicy:
    """When to retry a failed request and how long to wait first; shared by downloads and the VLM client.

    Built from a config's retry fields (:attr:`DownloadConfig.retry_policy`,
    :attr:`cladebench.models.vlm.VLMConfig.retry_policy`), so the two cannot drift apart.

    >>> policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=5.0, jitter=0.0, deadline_s=10.0)
    >>> [policy.backoff_delay(attempt) for attempt in (1, 2, 3, 4)]
    [1.0, 2.0, 4.0, 5.0]
    >>> policy.backoff_delay(1, retry_after=3600.0)
    30.0
    >>> policy.time_left(7.5), policy.would_pass_deadline(spent=7.5, delay=2.5)
    (2.5, True)
    """

    max_attempts: int = 5
    """Attempts per request, the first included; transient failures are retried until this many."""
    backoff_base_s: float = 1.0
    """Delay before the second attempt; doubled for each further attempt."""
    backoff_max_s: float = 60.0
    """Ceiling on the exponential delay."""
    jitter: float = 0.5
    """Fraction of each delay drawn at random (0 to 1), so many clients do not retry in lockstep."""
    max_retry_after_s: float = 30.0
    """Longest ``Retry-After`` honoured; a longer one is shortened to this (a server asking for a day must not
    stall a run for a day; the deadline still applies)."""
    deadline_s: float | None = None
    """Seconds one request may take in all, its attempts and the waits between them; ``None``: no limit. A
    host that never answers, or trickles, then costs about this, not ``max_attempts`` x the read timeout."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise CladebenchError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if not 0.0 <= self.jitter <= 1.0:
            raise CladebenchError(f"jitter is a fraction in [0, 1], got {self.jitter}")
        if not self.max_retry_after_s >= 0:
            raise CladebenchError(f"max_retry_after_s must be at least 0, got {self.max_retry_after_s}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise CladebenchError(f"deadline_s must be positive (seconds), got {self.deadline_s}")

    def backoff_delay(self, attempt: int, retry_after: float | None = None,
                      rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based): exponential, jittered, at least the
        server's ``Retry-After`` (capped at ``max_retry_after_s``)."""
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        delay *= 1.0 - self.jitter * (rng or random).random()
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after_s))
        return delay

    def time_left(self, spent: float) -> float | None:
        """Seconds of the deadline left after ``spent`` (never below 0); ``None`` without a deadline."""
        return None if self.deadline_s is None else max(0.0, self.deadline_s - spent)

    def would_pass_deadline(self, spent: float, delay: float) -> bool:
        """Whether waiting ``delay`` more seconds after ``spent`` reaches the deadline, so retrying is pointless."""
        return self.deadline_s is not None and spent + delay >= self.deadline_s


@dataclass(frozen=True)
class DownloadConfig:
    """How to fetch: concurrency, timeouts, retry policy, limits and checks."""

    concurrency: int = 16
    """Requests in flight at once (a semaphore, and the client's connection-pool size)."""
    connect_timeout_s: float = 10.0
    """Seconds to establish a connection before the attempt counts as timed out."""
    read_timeout_s: float = 30.0
    """Seconds to wait for the next bytes of a response (headers or body)."""
    attempt_timeout_s: float | None = 30.0
    """Seconds for one whole attempt, by the wall clock; stops a server that trickles bytes just under the read
    timeout (the read timeout restarts with every byte). A few-MB photo takes a second or two; ``None``: no
    limit."""
    item_deadline_s: float | None = 60.0
    """Seconds one item may take in all: its attempts and the waits between them (not the time it queues for a
    free connection behind other items). When it is spent, or the next wait would spend it, the item fails as
    ``deadline``, so a host that never answers or trickles costs about a minute per item, not ``max_attempts``
    x ``attempt_timeout_s``. ``None``: no limit."""
    max_attempts: int = 5
    """Attempts per item, the first included; transient failures are retried until this many."""
    backoff_base_s: float = 1.0
    """Delay before the second attempt; doubled for each further attempt."""
    backoff_max_s: float = 60.0
    """Ceiling on the exponential delay."""
    jitter: float = 0.5
    """Fraction of each delay drawn at random (0 to 1), so many clients do not retry in lockstep."""
    max_retry_after_s: float = 30.0
    """Longest ``Retry-After`` honoured; a longer one is shortened to this (a server asking for a day must not
    stall a run for a day; the item deadline still applies)."""
    max_bytes: int = 64 * 2**20
    """Largest body accepted; bigger ones fail as ``too_large`` (iNat originals are a few MB). Images over
    :data:`cladebench.images.MAX_PIXELS` pixels fail as ``too_many_pixels`` whatever their size in bytes."""
    image_check: str = "decode"
    """Body check before an item counts as done: a name in :data:`IMAGE_CHECKS` (``decode``, ``verify``,
    ``none``)."""
    progress: bool = False
    """Show a tqdm progress bar on stderr."""
    user_agent: str = DEFAULT_USER_AGENT
    """``User-Agent`` header; image hosts ask clients to identify themselves."""
    ray: str | None = None
    """None fetches in this process; otherwise the Ray cluster to fetch on, as
    :func:`cladebench.raycluster.ray_session` takes it (``default``, ``auto``, ``local``, ``ray://host:10001``).
    The store must then be on a filesystem every node sees (see :mod:`cladebench.curate.fetch.ray`)."""
    ray_shard_size: int = 1000
    """Items per Ray task; each task runs the usual async fetcher with ``concurrency`` requests in flight, so a
    cluster has up to tasks x concurrency."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise CladebenchError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.max_attempts < 1:
            raise CladebenchError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if not 0.0 <= self.jitter <= 1.0:
            raise CladebenchError(f"jitter is a fraction in [0, 1], got {self.jitter}")
        if self.max_bytes < 1:
            raise CladebenchError(f"max_bytes must be positive, got {self.max_bytes}")
        for name in ("connect_timeout_s", "read_timeout_s", "attempt_timeout_s", "item_deadline_s"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise CladebenchError(f"{name} must be positive (seconds), got {value}")
        if not self.max_retry_after_s >= 0:
            raise CladebenchError(f"max_retry_after_s must be at least 0, got {self.max_retry_after_s}")
        if self.image_check not in IMAGE_CHECKS:
            raise unknown_name("image check", self.image_check, IMAGE_CHECKS)
        if self.ray_shard_size < 1:
            raise CladebenchError(f"ray_shard_size must be at least 1, got {self.ray_shard_size}")

    @property
    def retry_policy(self) -> RetryPolicy:
        """The retry fields (``max_attempts``, the backoff, ``max_retry_after_s``, ``item_deadline_s``) as the
        :class:`RetryPolicy` the fetcher follows."""
        return RetryPolicy(max_attempts=self.max_attempts, backoff_base_s=self.backoff_base_s,
                           backoff_max_s=self.backoff_max_s, jitter=self.jitter,
                           max_retry_after_s=self.max_retry_after_s, deadline_s=self.item_deadline_s)


@dataclass(frozen=True)
class DownloadItem:
    """One thing to fetch."""

    key: str
    """Caller's id for the item (a row uuid); unique within one call, and the resume key."""
    url: str
    """Where to fetch it."""
    sha256: str | None = None
    """Expected SHA-256 (hex) of the body, when known; a mismatch fails the item."""


@dataclass(frozen=True)
class Downloaded:
    """A finished item: where its body is and what it was."""

    key: str
    url: str
    sha256: str
    """SHA-256 (hex) of the body; also its file name under ``objects/``."""
    size: int
    """Body length in bytes."""
    content_type: str | None
    """``Content-Type`` the server sent."""
    image_format: str | None
    """Format sniffed from the bytes (``jpeg``, ``png``, ...), ``None`` when not an image signature."""
    attempts: int
    """Attempts it took in the run that fetched it."""
    fetched_at: float
    """Unix time it finished."""


@dataclass(frozen=True)
class DownloadFailure:
    """An item that did not finish, and why."""

    key: str
    url: str
    reason: str
    """Short category to count by: ``http_404``, ``timeout``, ``connection``, ``truncated``, ``too_large``,
    ``too_many_pixels`` (over :data:`cladebench.images.MAX_PIXELS`), ``sha256_mismatch``, ``invalid_image``,
    ``bad_url``, ``protocol``, ``deadline`` (``item_deadline_s`` spent; the detail names the last attempt's
    failure); on Ray also ``ray_task`` (the shard's task raised, or its worker died on every retry)."""
    detail: str
    """What happened, for a person."""
    status: int | None
    """HTTP status of the last attempt, when a response came."""
    exception: str | None
    """Exception class of the last attempt, when one was raised."""
    attempts: int
    """Attempts made."""


FAILURE_FIELDS: tuple[str, ...] = ("key", "url", "reason", "detail", "status", "exception", "attempts")


def failures_table(failures: Iterable[DownloadFailure]) -> pa.Table:
    """Failures as an Arrow table with a fixed schema (empty tables keep their column types)."""
    import pyarrow as pa

    rows = [asdict(f) for f in failures]
    schema = pa.schema([
        ("key", pa.string()), ("url", pa.string()), ("reason", pa.string()), ("detail", pa.string()),
        ("status", pa.int32()), ("exception", pa.string()), ("attempts", pa.int32()),
    ])
    return pa.Table.from_pylist(rows, schema=schema)


# --- the store on disk ---------------------------------------------------------------------------


class DownloadStore:
    """A directory of fetched bodies, named by SHA-256, and the manifest that makes runs resumable.

    ``writes_manifest=False`` opens a view that writes bodies only: it neither repairs nor appends to the
    manifest. Ray shards open the shared store this way, so that the driver stays the manifest's one writer
    (a worker killed mid-write then cannot tear a line, and a rerun shard's results are recorded once).
    """

    def __init__(self, root: str | Path, *, writes_manifest: bool = True) -> None:
        self.root = Path(root)
        self.writes_manifest = writes_manifest
        self.objects_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        if writes_manifest:
            self._repair_manifest()

    @property
    def objects_dir(self) -> Path:
        return self.root / "objects"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.jsonl"

    @property
    def failures_path(self) -> Path:
        return self.root / "failures.parquet"

    def object_path(self, sha256: str) -> Path:
        """Where the body with this digest lives (two-character fan-out keeps directories small)."""
        return self.objects_dir / sha256[:2] / sha256

    def _repair_manifest(self) -> None:
        """Cut a last line torn by a kill, so the next append starts on a line of its own."""
        path = self.manifest_path
        if not path.exists() or path.stat().st_size == 0:
            return
        with open(path, "rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return
            data = path.read_bytes()
            handle.truncate(data.rfind(b"\n") + 1)

    def load_manifest(self) -> dict[str, Downloaded]:
        """Finished items by key; a later line for a key replaces an earlier one."""
        done: dict[str, Downloaded] = {}
        if not self.manifest_path.exists():
            return done
        with open(self.manifest_path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    entry = Downloaded(**json.loads(line))
                except (ValueError, TypeError):
                    # A damaged line only costs a refetch of its item; nothing is lost by skipping it.
                    continue
                done[entry.key] = entry
        return done

    def has(self, entry: Downloaded) -> bool:
        """Whether the entry's body is on disk, complete (its size matches)."""
        path = self.object_path(entry.sha256)
        return path.is_file() and path.stat().st_size == entry.size

    def put(self, body: bytes, sha256: str) -> Path:
        """Store a body under its digest: a temporary file renamed into place, so never half there."""
        path = self.object_path(sha256)
        if path.is_file() and path.stat().st_size == len(body):
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(body)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def record(self, entry: Downloaded) -> None:
        """Append one manifest line in a single write (after :meth:`put`, so the line's body exists)."""
        if not self.writes_manifest:
            raise CladebenchError(f"{self.root}: this view of the store writes bodies only, not the manifest")
        line = (json.dumps(asdict(entry), ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock, open(self.manifest_path, "ab") as handle:
            handle.write(line)

    def read_bytes(self, entry: Downloaded) -> bytes:
        """The stored body of a finished item."""
        return self.object_path(entry.sha256).read_bytes()

    def write_failures(self, failures: Iterable[DownloadFailure], path: Path | None = None) -> Path:
        """Write failures as Parquet, atomically (a temporary file renamed into place)."""
        import pyarrow.parquet as pq

        path = path or self.failures_path
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(failures_table(failures), tmp)
        os.replace(tmp, path)
        return path


# --- the report ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DownloadReport:
    """Where every item ended up. ``ok + cached + failed`` is the number of items asked for."""

    store: DownloadStore
    """The store the bodies are in."""
    downloaded: Mapping[str, Downloaded]
    """Finished items by key, fetched now or earlier, in the order asked for."""
    failures: tuple[DownloadFailure, ...]
    """Items that did not finish, in the order asked for."""
    ok: int
    """Items fetched in this run."""
    cached: int
    """Items finished by an earlier run and not fetched again."""
    elapsed_s: float = 0.0
    """Wall time of the run."""

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def failed_by_reason(self) -> dict[str, int]:
        """Failure counts by reason, most frequent first."""
        return dict(Counter(f.reason for f in self.failures).most_common())

    def failures_table(self) -> pa.Table:
        return failures_table(self.failures)

    def read_bytes(self, key: str) -> bytes:
        """The body fetched for ``key``."""
        return self.store.read_bytes(self.downloaded[key])

    def summary(self) -> str:
        reasons = ", ".join(f"{reason} {count}" for reason, count in self.failed_by_reason.items())
        return (f"{self.ok} fetched, {self.cached} cached, {self.failed} failed"
                + (f" ({reasons})" if reasons else "") + f" in {self.elapsed_s:.1f} s")


# --- one item ------------------------------------------------------------------------------------


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
    )


def _classify(exc: Exception, reasons: tuple[tuple[type[Exception], str, bool], ...]) -> _AttemptError:
    for kind, reason, retryable in reasons:
        if isinstance(exc, kind):
            return _AttemptError(reason, str(exc) or type(exc).__name__, retryable=retryable,
                                 exception=type(exc).__name__)
    raise exc


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date; ``None`` if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _status_error(response: httpx.Response) -> _AttemptError:
    status = response.status_code
    retryable = status in RETRYABLE_STATUSES or status >= 500
    return _AttemptError(
        f"http_{status}", f"HTTP {status} {response.reason_phrase}".strip(), retryable=retryable, status=status,
        retry_after=parse_retry_after(response.headers.get("retry-after")) if retryable else None,
    )


def _content_length(response: httpx.Response) -> int | None:
    value = response.headers.get("content-length")
    return int(value) if value is not None and value.strip().isdigit() else None


def backoff_delay(attempt: int, config: DownloadConfig | RetryPolicy, retry_after: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): exponential, jittered, at least Retry-After.

    The download config's :attr:`DownloadConfig.retry_policy` does the sums; see :meth:`RetryPolicy.backoff_delay`.
    """
    policy = config if isinstance(config, RetryPolicy) else config.retry_policy
    return policy.backoff_delay(attempt, retry_after, rng)


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
                        body, content_type = await self._attempt(item, spent)
                    finally:
                        spent += time.monotonic() - started
                    # In a thread: hashing and decoding a multi-megabyte photo would stall every transfer on
                    # the loop. Under the semaphore: bodies waiting to be checked then stay bounded in
                    # number when the network outpaces decoding.
                    return await asyncio.to_thread(self._finish, item, body, content_type, attempt)
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

    async def _attempt(self, item: DownloadItem, spent: float) -> tuple[bytes, str | None]:
        """One GET, cut by the wall clock at ``attempt_timeout_s`` or at what is left of the item deadline."""
        config = self.config
        left = self.policy.time_left(spent)
        limits = [t for t in (config.attempt_timeout_s, left) if t is not None]
        timeout = min(limits) if limits else None
        try:
            return await asyncio.wait_for(self._get(item), timeout)
        except asyncio.TimeoutError:
            if left is not None and timeout == left and left != config.attempt_timeout_s:
                raise _AttemptError("deadline", f"the item deadline of {config.item_deadline_s} s passed during an "
                                    f"attempt (after {spent:.1f} s on earlier attempts and waits)",
                                    retryable=False, exception="TimeoutError") from None
            raise _AttemptError("timeout", f"attempt took longer than {timeout} s", retryable=True,
                                exception="TimeoutError") from None

    async def _get(self, item: DownloadItem) -> tuple[bytes, str | None]:
        import httpx

        try:
            async with self.client.stream("GET", item.url) as response:
                if response.status_code != 200:
                    raise _status_error(response)
                return await self._read_body(response), response.headers.get("content-type")
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise _classify(exc, self.reasons) from None

    async def _read_body(self, response: httpx.Response) -> bytes:
        import httpx

        limit = self.config.max_bytes
        declared = _content_length(response)
        if declared is not None and declared > limit:
            raise _AttemptError("too_large", f"Content-Length {declared} exceeds the cap of {limit} bytes",
                                retryable=False, status=response.status_code)
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise _AttemptError("too_large", f"body exceeds the cap of {limit} bytes", retryable=False,
                                        status=response.status_code)
                chunks.append(chunk)
        except httpx.TransportError as exc:
            received = response.num_bytes_downloaded
            if declared is not None and received < declared:
                raise _AttemptError("truncated", f"connection ended after {received} of {declared} bytes "
                                    f"({type(exc).__name__})", retryable=True, status=response.status_code,
                                    exception=type(exc).__name__) from None
            raise
        # Compare on the wire (before any content decoding): that is what Content-Length counts.
        received = response.num_bytes_downloaded
        if declared is not None and received != declared:
            raise _AttemptError("truncated", f"received {received} bytes, Content-Length said {declared}",
                                retryable=True, status=response.status_code)
        return b"".join(chunks)

    def _finish(self, item: DownloadItem, body: bytes, content_type: str | None, attempt: int) -> Downloaded:
        from cladebench.images import ImageDecodeError, ImageTooLargeError, sniff_format

        digest = hashlib.sha256(body).hexdigest()
        if item.sha256 is not None and digest != item.sha256.lower():
            raise _AttemptError("sha256_mismatch", f"body SHA-256 {digest} differs from the expected {item.sha256}",
                                retryable=False, status=200)
        try:
            self.check(body)
        except ImageTooLargeError as exc:
            # The same image comes back on every attempt: not retried.
            raise _AttemptError("too_many_pixels", exc.reason, retryable=False, status=200,
                                exception=type(exc).__name__) from None
        except ImageDecodeError as exc:
            # Often a body cut short by a cache or proxy that then reported the short length; worth another try.
            raise _AttemptError("invalid_image", exc.reason, retryable=True, status=200,
                                exception=type(exc).__name__) from None
        self.store.put(body, digest)
        entry = Downloaded(item.key, item.url, digest, len(body), content_type, sniff_format(body), attempt,
                           time.time())
        if self.store.writes_manifest:
            self.store.record(entry)
        self.on_done()
        return entry


# --- the entry points ----------------------------------------------------------------------------


ItemLike = DownloadItem | tuple[str, str] | tuple[str, str, str | None]


def as_items(items: Iterable[ItemLike]) -> list[DownloadItem]:
    """The items as :class:`DownloadItem`, refusing a key given twice (keys are the resume key)."""
    out: list[DownloadItem] = []
    seen: set[str] = set()
    for raw in items:
        item = raw if isinstance(raw, DownloadItem) else DownloadItem(*raw)
        if item.key in seen:
            raise CladebenchError(f"duplicate download key {item.key!r}: keys must be unique (they are the resume key)")
        seen.add(item.key)
        out.append(item)
    return out


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
    http = _client(config) if own else client
    try:
        fetcher = _Fetcher(http, store, config, on_done)
        return list(await asyncio.gather(*(fetcher.fetch(i) for i in pending)))
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


def progress_bar(total: int, done: int, config: DownloadConfig) -> Any:
    """The tqdm bar of a run (disabled unless ``config.progress``), starting at the items already done."""
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc="downloading", unit="file", disable=not config.progress,
                leave=False)


async def download_async(items: Iterable[ItemLike], store: str | Path | DownloadStore,
                         config: DownloadConfig | None = None, *,
                         client: httpx.AsyncClient | None = None) -> DownloadReport:
    """Fetch every item not already in the store, in this process; see the module docstring for what is
    retried and kept.

    ``items`` are :class:`DownloadItem` or ``(key, url)`` / ``(key, url, sha256)`` tuples. ``client``
    replaces the client built from ``config`` (the caller then owns it; its limits apply as well).
    The failures are also written to the store's ``failures.parquet``. ``config.ray`` is refused here:
    Ray's calls block, so fetching on Ray goes through :func:`download`.
    """
    config = config or DownloadConfig()
    if config.ray is not None:
        raise CladebenchError("download_async fetches in this process; call download() to fetch on Ray")
    started = time.monotonic()
    wanted = as_items(items)
    store = store if isinstance(store, DownloadStore) else DownloadStore(store)
    cached, pending = split_cached(wanted, store)
    results: list[Downloaded | DownloadFailure] = []
    if pending:
        with progress_bar(len(wanted), len(cached), config) as bar:
            results = await fetch_pending(pending, store, config, client=client, on_done=lambda: bar.update(1))
    return finish_report(wanted, cached, results, store, started)


def download(items: Iterable[ItemLike], store: str | Path | DownloadStore,
             config: DownloadConfig | None = None) -> DownloadReport:
    """Blocking :func:`download_async`, for callers without an event loop of their own; with ``config.ray``
    set, :func:`cladebench.curate.fetch.ray.download_on_ray` (the shards fetched on a Ray cluster)."""
    config = config or DownloadConfig()
    if config.ray is not None:
        from cladebench.curate.fetch.ray import download_on_ray

        return download_on_ray(items, store, config)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(download_async(items, store, config))
    raise CladebenchError("download() was called inside a running event loop; await download_async(...) instead")


__all__ = [
    "IMAGE_CHECKS",
    "DownloadConfig",
    "DownloadFailure",
    "DownloadItem",
    "DownloadReport",
    "DownloadStore",
    "Downloaded",
    "RetryPolicy",
    "backoff_delay",
    "download",
    "download_async",
    "failures_table",
    "image_check",
    "parse_retry_after",
]
