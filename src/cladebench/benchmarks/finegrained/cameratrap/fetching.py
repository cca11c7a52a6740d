"""Getting a collection's files: metadata and detections (a path, or fetched once into the download cache), and the
candidate images (fetched through :mod:`cladebench.curate.fetch`, or read from an image folder), then resized and
stored as lossless WebP exactly as ``build finegrained`` stores its images, by that builder's own functions
(:mod:`cladebench.benchmarks.finegrained.builder.images`: fetched into the download store by ``fetch_originals``,
encoded by ``encoded_files``: upright RGB, Lanczos to at most ``max_side``, WebP lossless, method 6).

A candidate whose image cannot be had is ``image_not_retrieved`` (the downloader's reason and detail kept), one
that arrives but does not decode is ``image_decode_failed``; every other candidate comes back with its WebP
bytes and sizes.

Why a module: the slow, failure-prone part of a cohort build (network, decoding, encoding in worker processes)
stays apart from the selection and screening rules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from cladebench.benchmarks.finegrained.builder.images import encoded_files, fetch_originals
from cladebench.benchmarks.finegrained.cameratrap.config import Cohort, Collection, is_url
from cladebench.errors import CladebenchError, RemoteUnavailableError

METADATA_MAX_BYTES = 16 * 2**30
"""Largest metadata or detections file fetched over HTTP (LILA's biggest zipped metadata is well under this)."""


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


def check_image_folders(cohort: Cohort) -> None:
    """Refuse (exit 1, naming the collection) a collection read from a local image root that is not a folder: its
    every image would otherwise be a missing file, and the collection would give no row without a word."""
    for collection in cohort.included():
        root = collection.images
        if root is None or is_url(root) or Path(root).is_dir():
            continue
        what = "is not a folder" if Path(root).exists() else "does not exist"
        raise CladebenchError(f"collection {collection.name!r}: its images folder {root} {what}; give the folder "
                              "its file names are relative to, or the URL prefix they are served under")


@contextlib.contextmanager
def named_as_given(location: str, path: Path) -> Iterator[None]:
    """An error reading ``path``, the local copy of ``location``, names ``location`` (the URL the cohort file
    gives), not the download store's object file, which the user never named and cannot fix."""
    try:
        yield
    except CladebenchError as error:
        if str(path) == location or str(path) not in str(error):
            raise
        raise type(error)(str(error).replace(str(path), location)) from None


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
                 ) -> tuple[dict[str, str], dict[str, str], dict[str, object]]:
    """Each task's local file, or why it could not be had; also the download counts."""
    from cladebench.curate.fetch import DownloadConfig

    files: dict[str, str] = {}
    failed: dict[str, str] = {}
    remote = [t for t in tasks if is_url(t.location)]
    for task in tasks:
        if not is_url(task.location):
            if Path(task.location).is_file():
                files[task.key] = task.location
            else:
                failed[task.key] = f"file_missing: no file {task.location}"
    counts: dict[str, object] = {"local": len(tasks) - len(remote), "fetched": 0, "cached": 0, "failed": 0}
    if remote:
        fetched, fetch_failed, fetch_counts = fetch_originals(
            [(t.key, t.location) for t in remote], root, DownloadConfig(concurrency=concurrency, progress=progress))
        files.update(fetched)
        failed.update(fetch_failed)
        counts.update(fetch_counts)
    return files, failed, counts


def failure_reason(detail: str) -> str:
    """The cohort's reason for an image that could not be had: a body that arrived whole but does not decode (the
    downloader's ``invalid_image``) is ``image_decode_failed``, anything else ``image_not_retrieved``."""
    return "image_decode_failed" if detail.startswith("invalid_image:") else "image_not_retrieved"


def encoded_images(files: Mapping[str, str], max_side: int, workers: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, WebP bytes and sizes, or a reason and detail) per file, in key order; ``workers`` processes (0: here).
    A file that cannot be read is ``image_not_retrieved`` here (the FGC builder's ``image_file_missing``)."""
    tasks = [(key, files[key], max_side) for key in sorted(files)]
    for key, result in encoded_files(tasks, workers):
        if result.get("reason") == "image_file_missing":
            result = {**result, "reason": "image_not_retrieved"}
        yield key, result


__all__ = ["METADATA_MAX_BYTES", "ImageTask", "check_image_folders", "encoded_images",
           "failure_reason", "gather_files", "image_location", "local_copy", "named_as_given"]
