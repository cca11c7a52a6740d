"""Image downloads spread over a Ray cluster: the same fetcher, a shard of items per task, one manifest writer.

Why: one process with a few dozen requests in flight fetches a few hundred photos a second at best,
and a build of millions of iNaturalist photos wants many machines (and many source addresses). This
module keeps everything that makes :mod:`cladebench.curate.fetch` trustworthy — retries, checks,
content-addressed bodies, resume, every item in exactly one bin — and only changes who fetches:

- the driver (this process) loads the manifest, sets the finished items aside as cached exactly as a
  local run does, and cuts the rest into shards of ``config.ray_shard_size`` items;
- each shard is a Ray task (one CPU, Ray's default, so a node runs as many shards at once as it has
  CPUs) running the usual async fetcher (``config.concurrency`` requests in flight) into the same store
  directory. It writes bodies into ``objects/`` (a temporary file renamed into
  place, named by digest, so many processes can write at once) but no manifest line and no
  ``failures.parquet``: it returns its records;
- the driver appends each finished shard's manifest lines itself, as shards finish. Being the one
  writer, a worker killed mid-write can never tear a line, and a shard that Ray reran (its worker
  died) is recorded once, from the attempt that returned. At the end it writes ``failures.parquet``
  and builds the same :class:`~cladebench.curate.fetch.download_store.DownloadReport` as a local run.

**The store must be on a filesystem every node sees** (NFS, Lustre, a POSIX mount of a bucket) at the
same path as on the driver; on one machine any directory will do. Workers import cladebench, so every
node needs it installed (see :mod:`cladebench.raycluster`).

A driver killed mid-run loses only the shards not yet gathered: the next run, on Ray or not, resumes
from the manifest, and bodies already in ``objects/`` without a manifest line are fetched again
(:meth:`~cladebench.curate.fetch.download_store.DownloadStore.put_file` leaves an identical body as it is).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from cladebench.curate.fetch.config import DownloadConfig
from cladebench.curate.fetch.core import fetch_pending, finish_report, progress_bar, split_cached
from cladebench.curate.fetch.download_store import (
    Downloaded,
    DownloadFailure,
    DownloadItem,
    DownloadReport,
    DownloadStore,
    ItemLike,
    as_items,
)
from cladebench.raycluster import exit_if_marked, ray_session

if TYPE_CHECKING:
    from cladebench.progress import Bar

SHARD_MAX_RETRIES = 3
"""Times Ray reruns a shard whose worker process died (a node lost, an OOM kill); a shard that raised is
not rerun, since the same items would raise again."""

FAULT_MARKER_ENV = "CLADEBENCH_DOWNLOAD_RAY_FAULT"
"""Fault-injection point for tests, unset in normal use: the path of a marker file. The first shard task
that finds the file removes it and ends its own worker process (``os._exit``) after fetching its items and
before returning them, as a node lost mid-shard would: its bodies are stored, its records are not."""

Result = Downloaded | DownloadFailure


def fetch_shard(items: list[DownloadItem], root: str, config: DownloadConfig) -> list[Result]:
    """One Ray task: fetch ``items`` into the shared store at ``root``, bodies only; the records go back."""
    store = DownloadStore(root, writes_manifest=False)
    results = asyncio.run(fetch_pending(items, store, config))
    exit_if_marked(FAULT_MARKER_ENV)
    return results


def _shards(pending: list[DownloadItem], size: int) -> list[list[DownloadItem]]:
    return [pending[start:start + size] for start in range(0, len(pending), size)]


def _shard_failures(shard: list[DownloadItem], error: Exception) -> list[Result]:
    """A shard that failed for good becomes one failure per item, so the other shards' work is kept and the
    next run tries these again (failures are not remembered as done). Attempts are unknown: 0."""
    cause = getattr(error, "cause", None) or error  # a RayTaskError wraps what the task raised
    lines = [line for line in str(cause).splitlines() if line.strip()]
    detail = f"shard of {len(shard)} items failed on Ray: {type(cause).__name__}: {lines[-1] if lines else ''}"
    return [DownloadFailure(i.key, i.url, "ray_task", detail, None, type(cause).__name__, 0) for i in shard]


def _gather(ray: ModuleType, tasks: dict[object, list[DownloadItem]], store: DownloadStore, bar: Bar) -> list[Result]:
    """Every shard's records, taken as shards finish; the driver appends their manifest lines."""
    results: list[Result] = []
    try:
        while tasks:
            ready, _ = ray.wait(list(tasks), num_returns=1)
            for ref in ready:
                shard = tasks.pop(ref)
                try:
                    records = ray.get(ref)
                except ray.exceptions.RayError as error:
                    records = _shard_failures(shard, error)
                for record in records:
                    if isinstance(record, Downloaded):
                        store.record(record)
                results.extend(records)
                bar.update(len(shard))
    finally:
        # Left only when gathering stopped early (Ctrl-C): in a session the caller keeps open, the tasks would
        # go on fetching for nobody.
        for ref in tasks:
            ray.cancel(ref, force=True)
    return results


def download_on_ray(items: Iterable[ItemLike], store: str | Path | DownloadStore,
                    config: DownloadConfig) -> DownloadReport:
    """Fetch every item not already in ``store`` on the Ray cluster ``config.ray``; see the module docstring.

    Takes what :func:`cladebench.curate.fetch.download` takes and returns the same report: bins in the order
    asked for, failures in ``failures.parquet``. ``store`` must be on a filesystem every node sees.
    """
    started = time.monotonic()
    wanted = as_items(items)
    store = store if isinstance(store, DownloadStore) else DownloadStore(store)
    cached, pending = split_cached(wanted, store)
    results: list[Result] = []
    if pending:
        root = str(store.root.resolve())
        with ray_session(config.ray) as ray, progress_bar(len(wanted), len(cached), config) as bar:
            task = ray.remote(max_retries=SHARD_MAX_RETRIES, retry_exceptions=False)(fetch_shard)
            tasks = {task.remote(shard, root, config): shard for shard in _shards(pending, config.ray_shard_size)}
            results = _gather(ray, tasks, store, bar)
    return finish_report(wanted, cached, results, store, started)


__all__ = ["FAULT_MARKER_ENV", "SHARD_MAX_RETRIES", "download_on_ray", "fetch_shard"]
