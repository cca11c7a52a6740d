"""The images of a Fine-Grained Challenges build, and the table rows that carry them.

**Images** are fetched with :mod:`cladebench.curate.fetch` (resumable; the originals are kept in
``--download-dir``, by default the cladebench cache, so a rerun fetches only what is missing) or read
from the local paths, decoded upright to RGB (:func:`cladebench.images.decode_image`), shrunk with
Lanczos so the longest side is at most ``max_side`` (720 px, as published; smaller images are kept as
they are), and stored as **lossless** WebP (method 6, the slowest and smallest): the stored pixels are
exactly the resized ones, so a model sees what the resize made and nothing a codec invented.
Resizing runs in ``--workers`` processes.

**seen_in_training** lists, per row, the models (in the order given) whose ``--seen MODEL=FILE`` list
holds its uuid; ``[]`` when none does, null for every row when no list was given (unknown, not
"unseen").

Why a module: image work is the slow part of a build (fetching, decoding, resizing, encoding in worker
processes); the table's schema lives beside it because a row is written only once its image is.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cladebench import store
from cladebench.benchmarks.finegrained.builder.config import (
    CHUNK_ROWS,
    PASSTHROUGH_COLUMNS,
    WEBP_METHOD,
    FineGrainedBuildConfig,
)
from cladebench.taxonomy import RANK_COLUMNS, Lineage

if TYPE_CHECKING:
    from PIL import Image

    from cladebench.curate.fetch import DownloadConfig


def fit_within(image: Image.Image, max_side: int) -> Image.Image:
    """The image shrunk with Lanczos so its longest side is ``max_side`` (aspect kept); unchanged when it fits."""
    from PIL import Image

    width, height = image.size
    longest = max(width, height)
    if longest <= max_side:
        return image
    scale = max_side / longest
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    # The longest side is exactly max_side, whatever rounding does to the other.
    size = (max_side, size[1]) if width >= height else (size[0], max_side)
    return image.resize(size, Image.Resampling.LANCZOS)


def encode_webp(data: bytes, max_side: int) -> tuple[bytes, tuple[int, int], tuple[int, int]]:
    """Decode (upright RGB), fit within ``max_side`` and encode as lossless WebP; also the new and original sizes."""
    from cladebench.images import decode_image

    image = decode_image(data)
    original = image.size
    image = fit_within(image, max_side)
    buffer = io.BytesIO()
    image.save(buffer, "WEBP", lossless=True, method=WEBP_METHOD)
    return buffer.getvalue(), image.size, original


def _encode_file(task: tuple[str, str, int]) -> tuple[str, dict[str, object]]:
    """One image, in a worker process: its file to WebP bytes, or the reason it failed (never raises)."""
    from cladebench.images import ImageDecodeError

    uuid, path, max_side = task
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return uuid, {"reason": "image_file_missing", "detail": f"no file {path}"}
    except OSError as exc:
        return uuid, {"reason": "image_file_missing", "detail": f"cannot read {path}: {exc}"}
    try:
        webp, size, original = encode_webp(data, max_side)
    except ImageDecodeError as exc:
        return uuid, {"reason": "image_decode_failed", "detail": exc.reason}
    except Exception as exc:  # an image that decodes but cannot be resized or encoded is still this row's failure
        return uuid, {"reason": "image_decode_failed", "detail": f"{type(exc).__name__}: {exc}"}
    return uuid, {"image": webp, "width": size[0], "height": size[1], "original_width": original[0],
                  "original_height": original[1]}


def encoded_files(tasks: Sequence[tuple[str, str, int]], workers: int) -> Iterator[tuple[str, dict[str, object]]]:
    """``(key, path, max_side)`` tasks as ``(key, WebP bytes and sizes)``, or ``(key, reason and detail)`` for a
    file that cannot be read (``image_file_missing``) or decoded (``image_decode_failed``), in task order,
    ``workers`` processes at a time (inline when 0). The camera-trap builder stores its images with it too."""
    if workers == 0 or len(tasks) < 2:
        yield from map(_encode_file, tasks)
        return
    import multiprocessing
    import warnings

    # Forked workers only run Pillow on files; they never touch Lance or DuckDB, which are not fork-safe.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="lance is not fork-safe")
        pool = context.Pool(min(workers, len(tasks)))
    with pool:
        yield from pool.imap(_encode_file, tasks, chunksize=4)


def _local_path(value: str, base: Path) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def fetch_originals(pairs: Sequence[tuple[str, str]], root: Path, config: DownloadConfig
                    ) -> tuple[dict[str, str], dict[str, str], dict[str, object]]:
    """``(key, url)`` pairs fetched into the download store at ``root`` (the originals stay there, so a rerun
    fetches only what is missing): each fetched key's file, each failed key's ``"reason: detail"``, and the
    download counts (``fetched``, ``cached``, ``failed``, ``failed_by_reason``, ``download_dir``)."""
    from cladebench.curate.fetch import DownloadStore, download

    download_store = DownloadStore(root)
    report = download(list(pairs), download_store, config)
    files = {key: str(download_store.object_path(entry.sha256)) for key, entry in report.downloaded.items()}
    failed = {failure.key: f"{failure.reason}: {failure.detail}" for failure in report.failures}
    counts = {"fetched": report.ok, "cached": report.cached, "failed": report.failed,
              "failed_by_reason": report.failed_by_reason, "download_dir": str(root)}
    return files, failed, counts


def image_sources(kept: Sequence[dict[str, Any]], config: FineGrainedBuildConfig, dropped: list[dict[str, object]],
                  downloads: Path) -> tuple[list[dict[str, object]], dict[str, object]]:
    """Every kept row's image file: its local path, or the original fetched into ``downloads``. Rows whose fetch
    failed go to ``dropped``; returns the rows with a file and the download counts."""
    from cladebench.curate.fetch import DownloadConfig

    catalog = Path(config.catalog)
    base = Path(config.image_dir) if config.image_dir is not None else (catalog if catalog.is_dir() else
                                                                         catalog.parent)
    remote = [r for r in kept if not r["image_path"]]
    counts: dict[str, object] = {"local": len(kept) - len(remote), "fetched": 0, "cached": 0, "failed": 0}
    files: dict[str, str] = {r["uuid"]: _local_path(r["image_path"], base) for r in kept if r["image_path"]}
    if remote:
        fetched, failed, fetch_counts = fetch_originals(
            [(r["uuid"], r["source_url"]) for r in remote], downloads,
            DownloadConfig(concurrency=config.concurrency, progress=config.progress, ray=config.ray))
        counts.update(fetch_counts)
        files.update(fetched)
        for row in remote:
            if row["uuid"] in failed:
                dropped.append({**row, "reason": "image_fetch_failed", "detail": failed[row["uuid"]]})
    with_files = [r for r in kept if r["uuid"] in files]
    for row in with_files:
        row["image_file"] = files[row["uuid"]]
    return with_files, counts


# --- the table -----------------------------------------------------------------------------------

EXTRA_FIELDS: tuple[pa.Field, ...] = (
    pa.field("challenge_group", pa.string()),
    pa.field("copyright_owner", pa.string()),
    *(pa.field(c, pa.string()) for c in PASSTHROUGH_COLUMNS),
    pa.field("width", pa.int32()),
    pa.field("height", pa.int32()),
    pa.field("original_width", pa.int32()),
    pa.field("original_height", pa.int32()),
)
"""Columns beside the canonical ones."""
OUTPUT_SCHEMA = pa.schema([
    *(pa.field(c.name, c.type, nullable=not c.required) for c in store.CANONICAL_COLUMNS
      if c.name not in ("taxon_id", "latitude", "longitude", "observed_on")),
    *EXTRA_FIELDS,
])
"""Columns of every batch written (the canonical columns the catalog has nothing for are added as nulls)."""


def _output_row(row: Mapping[str, Any], image: Mapping[str, object], seen: Sequence[tuple[str, set[str]]] | None
                ) -> dict[str, object]:
    lineage: Lineage = row["lineage"]
    license_ = row["license"]
    owner = row["copyright_owner"]
    return {
        "uuid": row["uuid"], "image": image["image"], "image_format": "webp",
        **{c: lineage.names[i] for i, c in enumerate(RANK_COLUMNS)},
        "scientific_name": row["scientific_name"] or lineage.scientific_name, "common_name": lineage.common_name,
        "source_dataset": row["source_dataset"], "source_id": row["source_id"], "source_url": row["source_url"],
        "license_name": license_.code, "license_link": row["license_link"],
        "attribution": license_.attribution(owner) if owner else None,
        "seen_in_training": None if seen is None else [m for m, uuids in seen if row["uuid"] in uuids],
        "challenge_group": row["challenge_group"], "copyright_owner": owner,
        **{c: row[c] for c in PASSTHROUGH_COLUMNS},
        **{k: image[k] for k in ("width", "height", "original_width", "original_height")},
    }


def output_batches(rows: Sequence[dict[str, Any]], config: FineGrainedBuildConfig,
             seen: Sequence[tuple[str, set[str]]] | None, dropped: list[dict[str, object]],
             workers: int, count: Callable[[int, int], None]) -> Generator[pa.Table, None, None]:
    """The dataset's rows as Arrow tables of at most :data:`CHUNK_ROWS`; rows whose image fails go to ``dropped``;
    ``count(1, total)`` for each image encoded (the write stage's bar)."""
    by_uuid = {r["uuid"]: r for r in rows}
    tasks = [(r["uuid"], r["image_file"], config.max_side) for r in rows]
    pending: list[dict[str, Any]] = []
    for uuid, result in encoded_files(tasks, workers):
        count(1, len(tasks))
        row = by_uuid[uuid]
        if "reason" in result:
            dropped.append({**row, **result})
            continue
        pending.append(_output_row(row, result, seen))
        if len(pending) >= CHUNK_ROWS:
            yield pa.Table.from_pylist(pending, schema=OUTPUT_SCHEMA)
            pending = []
    if pending:
        yield pa.Table.from_pylist(pending, schema=OUTPUT_SCHEMA)



__all__ = ["EXTRA_FIELDS", "OUTPUT_SCHEMA", "encode_webp", "encoded_files", "fetch_originals", "fit_within",
           "image_sources", "output_batches"]
