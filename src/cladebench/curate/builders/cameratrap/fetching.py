"""Getting a collection's files: metadata and detections (a path, or fetched once into the download cache), and the
candidate images (fetched through :mod:`cladebench.curate.fetch`, or read from an image folder), then resized and
stored as lossless WebP exactly as ``build finegrained`` stores its images
(:func:`cladebench.curate.builders.finegrained.images.encode_webp`: upright RGB, Lanczos to at most ``max_side``,
WebP lossless, method 6).

A candidate whose image cannot be had is ``image_not_retrieved`` (the downloader's reason and detail kept), one
that arrives but does not decode is ``image_decode_failed``; every other candidate comes back with its WebP
bytes and sizes.

Why a module: the slow, failure-prone part of a cohort build (network, decoding, encoding in worker processes)
stays apart from the selection and screening rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cladebench.curate.builders.cameratrap.config import Collection, is_url
from cladebench.errors import RemoteUnavailableError

METADATA_MAX_BYTES = 16 * 2**30
"""Largest metadata or detections file fetched over HTTP (LILA's biggest zipped metadata is well under this)."""


def download_root(download_dir: Path | None) -> Path:
    if download_dir is not None:
        return Path(download_dir)
    from cladebench.cache import cache_dir

    return cache_dir("downloads", "cameratrap")


def local_copy(location: str, key: str, root: Path, progress: bool) -> Path:
    """``location`` itself when it is a path; else the file fetched once into the download store at ``root``,
    streamed to disk as it arrives (a collection's metadata may be gigabytes; it is never held in memory; a
    failure is a remote-unreachable error, exit 5, naming the URL and the reason)."""
    if not is_url(location):
        return Path(location)
    from cladebench.curate.fetch import DownloadConfig, DownloadStore, download

    store = DownloadStore(root)
    report = download([(key, location)], store, DownloadConfig(concurrency=1, progress=progress, image_check="none",
                                                               max_bytes=METADATA_MAX_BYTES))
    if report.failures:
        failure = report.failures[0]
        raise RemoteUnavailableError(f"cannot fetch {location}: {failure.reason} ({failure.detail})")
    return store.object_path(report.downloaded[key].sha256)


def image_location(collection: Collection, file_name: str) -> str:
    """Where a candidate's image is: the URL under the collection's image root, or the file under its folder."""
    root = str(collection.images)
    if is_url(root):
        return root.rstrip("/") + "/" + quote(file_name, safe="/")
    return str(Path(root) / file_name)


@dataclass(frozen=True)
class ImageTask:
    """One candidate's image to get: its row key, where it is, and whether it is fetched."""

    key: str
    location: str


def gather_files(tasks: Sequence[ImageTask], root: Path, concurrency: int, progress: bool
                 ) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """Each task's local file, or why it could not be had; also the download counts."""
    from cladebench.curate.fetch import DownloadConfig, DownloadStore, download

    files: dict[str, str] = {}
    failed: dict[str, str] = {}
    remote = [t for t in tasks if is_url(t.location)]
    for task in tasks:
        if not is_url(task.location):
            if Path(task.location).is_file():
                files[task.key] = task.location
            else:
                failed[task.key] = f"file_missing: no file {task.location}"
    counts: dict[str, Any] = {"local": len(tasks) - len(remote), "fetched": 0, "cached": 0, "failed": 0}
    if remote:
        store = DownloadStore(root)
        report = download([(t.key, t.location) for t in remote], store,
                          DownloadConfig(concurrency=concurrency, progress=progress))
        counts.update(fetched=report.ok, cached=report.cached, failed=report.failed,
                      failed_by_reason=report.failed_by_reason, download_dir=str(root))
        for key, entry in report.downloaded.items():
            files[key] = str(store.object_path(entry.sha256))
        for failure in report.failures:
            failed[failure.key] = f"{failure.reason}: {failure.detail}"
    return files, failed, counts


def failure_reason(detail: str) -> str:
    """The cohort's reason for an image that could not be had: a body that arrived whole but does not decode (the
    downloader's ``invalid_image``) is ``image_decode_failed``, anything else ``image_not_retrieved``."""
    return "image_decode_failed" if detail.startswith("invalid_image:") else "image_not_retrieved"


def _encode(task: tuple[str, str, int]) -> tuple[str, dict[str, Any]]:
    """One image file to WebP in a worker process, or the reason it failed (never raises)."""
    from cladebench.curate.builders.finegrained.images import encode_webp
    from cladebench.images import ImageDecodeError

    key, path, max_side = task
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return key, {"reason": "image_not_retrieved", "detail": f"cannot read {path}: {exc}"}
    try:
        webp, size, original = encode_webp(data, max_side)
    except ImageDecodeError as exc:
        return key, {"reason": "image_decode_failed", "detail": exc.reason}
    except Exception as exc:  # decodes but cannot be resized or encoded: still this image's failure
        return key, {"reason": "image_decode_failed", "detail": f"{type(exc).__name__}: {exc}"}
    return key, {"image": webp, "width": size[0], "height": size[1], "original_width": original[0],
                 "original_height": original[1]}


def encoded_images(files: Mapping[str, str], max_side: int, workers: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, WebP bytes and sizes, or a reason and detail) per file, in key order; ``workers`` processes (0: here)."""
    tasks = [(key, files[key], max_side) for key in sorted(files)]
    if workers == 0 or len(tasks) < 2:
        yield from map(_encode, tasks)
        return
    import multiprocessing
    import warnings

    # Forked workers only run Pillow on files; they never touch Lance, which is not fork-safe.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="lance is not fork-safe")
        pool = context.Pool(min(workers, len(tasks)))
    with pool:
        yield from pool.imap(_encode, tasks, chunksize=4)


__all__ = ["METADATA_MAX_BYTES", "ImageTask", "download_root", "encoded_images", "failure_reason", "gather_files",
           "image_location", "local_copy"]
