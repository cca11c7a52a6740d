"""How to fetch: the one config of a download run, local or on Ray (:class:`DownloadConfig`).

Why apart: the fetcher (:mod:`cladebench.curate.fetch.core`), the local and the Ray runners and every builder
that downloads read it, while it depends on nothing of theirs; its retry fields become the shared
:class:`cladebench.retry.RetryPolicy`.
"""

from __future__ import annotations

from dataclasses import dataclass

from cladebench.curate.fetch.checks import IMAGE_CHECKS
from cladebench.errors import CladebenchError
from cladebench.retry import RetryPolicy

DEFAULT_USER_AGENT = "cladebench/0.1 (+https://github.com/cladebench/cladebench)"
"""``User-Agent`` sent by default; image hosts ask clients to identify themselves."""


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
    """Body check before an item counts as done: a name in
    :data:`~cladebench.curate.fetch.checks.IMAGE_CHECKS` (``decode``, ``verify``, ``none``)."""
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
        IMAGE_CHECKS.get_named(self.image_check)  # an unknown name lists the known ones
        if self.ray_shard_size < 1:
            raise CladebenchError(f"ray_shard_size must be at least 1, got {self.ray_shard_size}")

    @property
    def retry_policy(self) -> RetryPolicy:
        """The retry fields (``max_attempts``, the backoff, ``max_retry_after_s``, ``item_deadline_s``) as the
        :class:`RetryPolicy` the fetcher follows."""
        return RetryPolicy(max_attempts=self.max_attempts, backoff_base_s=self.backoff_base_s,
                           backoff_max_s=self.backoff_max_s, jitter=self.jitter,
                           max_retry_after_s=self.max_retry_after_s, deadline_s=self.item_deadline_s)


__all__ = ["DEFAULT_USER_AGENT", "DownloadConfig"]
