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
pixel limit (:data:`cladebench.images.MAX_PIXELS`), a body whose SHA-256 differs from the expected one
(the content changed; retrying fetches the same bytes), a redirect loop (``redirects``) and a body that fails
its ``Content-Encoding`` (``decoding``: gzip declared over raw JPEG). Whatever one URL does, it is that URL's
failure row, never the end of the run.

Every item has a time budget by the wall clock: each attempt is cut at ``attempt_timeout_s`` (a host
that trickles a byte every few seconds never trips the read timeout), ``Retry-After`` is honoured up to
``max_retry_after_s``, and an item that has spent ``item_deadline_s`` on attempts and waits fails as
``deadline`` instead of retrying on.

Bodies, the manifest that makes runs resumable and the failures of the latest run live in a
:class:`DownloadStore` directory (:mod:`cladebench.curate.fetch.download_store` describes its layout).
Failed items are not remembered as done: the next run tries them again. One run at a time per store:
two processes appending to one manifest is safe, but the repair of a torn line on opening is not.

With ``DownloadConfig(ray=...)`` the same fetcher runs in Ray tasks, a shard of items each, and the
driver alone appends the manifest (see :mod:`cladebench.curate.fetch.ray`).

This package presents the API on purpose: what a caller needs (:class:`DownloadConfig`, :func:`download`,
:func:`download_async`, the store, the records and the report) is importable from here. Its modules, in the
order they build on each other: :mod:`~cladebench.curate.fetch.checks` (body checks by name),
:mod:`~cladebench.curate.fetch.config` (the config), :mod:`~cladebench.curate.fetch.download_store` (items,
records, the store on disk, the report), :mod:`~cladebench.curate.fetch.core` (the attempts of one item and the
steps every run shares), :mod:`~cladebench.curate.fetch.local` and :mod:`~cladebench.curate.fetch.ray` (who
fetches); :func:`download` here chooses between the last two. Retries follow
:class:`cladebench.retry.RetryPolicy`, which the VLM client follows too.

Example:
    >>> import tempfile
    >>> report = download([], tempfile.mkdtemp())
    >>> report.ok, report.cached, report.failed
    (0, 0, 0)
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from cladebench.curate.fetch.checks import IMAGE_CHECKS
from cladebench.curate.fetch.config import DEFAULT_USER_AGENT, DownloadConfig
from cladebench.curate.fetch.download_store import (
    Downloaded,
    DownloadFailure,
    DownloadItem,
    DownloadReport,
    DownloadStore,
    ItemLike,
)
from cladebench.curate.fetch.local import download_async
from cladebench.errors import CladebenchError


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
    "DEFAULT_USER_AGENT",
    "IMAGE_CHECKS",
    "DownloadConfig",
    "DownloadFailure",
    "DownloadItem",
    "DownloadReport",
    "DownloadStore",
    "Downloaded",
    "ItemLike",
    "download",
    "download_async",
]
