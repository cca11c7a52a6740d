"""Fetching in this process: one event loop, ``concurrency`` requests in flight over one pooled client.

Why apart: it is one of the two ways a run fetches (the other is :mod:`cladebench.curate.fetch.ray`); what
both share is in :mod:`cladebench.curate.fetch.core`, and :func:`cladebench.curate.fetch.download` chooses.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.curate.fetch.config import DownloadConfig
from cladebench.curate.fetch.core import fetch_pending, finish_report, progress_bar, split_cached
from cladebench.curate.fetch.download_store import (
    Downloaded,
    DownloadFailure,
    DownloadReport,
    DownloadStore,
    ItemLike,
    as_items,
)
from cladebench.errors import CladebenchError

if TYPE_CHECKING:
    import httpx


async def download_async(items: Iterable[ItemLike], store: str | Path | DownloadStore,
                         config: DownloadConfig | None = None, *,
                         client: httpx.AsyncClient | None = None) -> DownloadReport:
    """Fetch every item not already in the store, in this process; :mod:`cladebench.curate.fetch` says what
    is retried and kept.

    ``items`` are :class:`~cladebench.curate.fetch.download_store.DownloadItem` or ``(key, url)`` /
    ``(key, url, sha256)`` tuples. ``client`` replaces the client built from ``config`` (the caller then owns
    it; its limits apply as well).
    The failures are also written to the store's ``failures.parquet``. ``config.ray`` is refused here:
    Ray's calls block, so fetching on Ray goes through :func:`cladebench.curate.fetch.download`.
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


__all__ = ["download_async"]
