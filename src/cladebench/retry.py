"""When to retry a request and how long to wait first: the one policy downloads and the VLM client follow.

Why a module of its own at the foundation: image downloads (:mod:`cladebench.curate.fetch`) and requests to a
generative model's endpoint (:mod:`cladebench.models.vlm`) meet the same failures (timeouts, 429 and 5xx, a
``Retry-After``), and a reader should find one answer to "is this retried, and after how long". Both configs
build a :class:`RetryPolicy` from their own fields, so the two cannot drift apart, and neither stage imports
the other.

Example:
    >>> policy = RetryPolicy(backoff_base_s=1.0, backoff_max_s=5.0, jitter=0.0, deadline_s=10.0)
    >>> [policy.backoff_delay(attempt) for attempt in (1, 2, 3, 4)]
    [1.0, 2.0, 4.0, 5.0]
    >>> policy.backoff_delay(1, retry_after=3600.0)
    30.0
    >>> policy.time_left(7.5), policy.would_pass_deadline(spent=7.5, delay=2.5)
    (2.5, True)
    >>> parse_retry_after("7"), parse_retry_after("soon")
    (7.0, None)
    >>> [status for status in (400, 404, 408, 429, 500, 503) if retryable_status(status)]
    [408, 429, 500, 503]
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TypeVar

from cladebench.errors import CladebenchError

RETRYABLE_STATUSES = frozenset({408, 429})
"""HTTP statuses besides every 5xx that are retried: 408 Request Timeout and 429 Too Many Requests say "not
now", not "never"."""


def retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another attempt: one of :data:`RETRYABLE_STATUSES` or any 5xx (the server's
    trouble, not the request's); every other 4xx would only be refused again."""
    return status in RETRYABLE_STATUSES or status >= 500


@dataclass(frozen=True)
class RetryPolicy:
    """When to retry a failed request and how long to wait first; shared by downloads and the VLM client.

    Built from a config's retry fields (:attr:`cladebench.curate.fetch.DownloadConfig.retry_policy`,
    :attr:`cladebench.models.vlm.VLMConfig.retry_policy`), so the two cannot drift apart.
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


__all__ = ["RETRYABLE_STATUSES", "RetryPolicy", "parse_retry_after", "retryable_status"]


_T = TypeVar("_T")


async def gather_or_cancel(coroutines: list[Coroutine[object, object, _T]]) -> list[_T]:
    """``asyncio.gather`` that cancels the other tasks when one fails (or on Ctrl-C), so none runs on after the
    error, against a closed client, each printing its own traceback as the loop shuts down: the one way a batch of
    requests is awaited (downloads, endpoint questions). The results are in the order of ``coroutines``."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
