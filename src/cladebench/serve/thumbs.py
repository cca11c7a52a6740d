"""Thumbnails made once and kept on disk, so a page of the grid costs one read of 100 small files.

A thumbnail is keyed by the dataset (its URI's hash), its version and the row's uuid, in the cache folder
(``$CLADEBENCH_CACHE_DIR/serve-thumbnails/<dataset>-v<version>/``): a new version of the dataset gets new ones,
and deleting the folder only costs the time to remake them. File names are hashes of the uuid, so a uuid with
``/`` or ``..`` in it never names a path. Each file is written whole (:func:`cladebench.paths.atomic_write`), so
two requests making the same thumbnail at once both end with a good file. An image that does not decode gets no
file; the page shows a placeholder for it and the image page says why.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cladebench.cache import cache_dir
from cladebench.images import ImageDecodeError, open_image, to_rgb
from cladebench.paths import atomic_write
from cladebench.serve.state import ServeState

THUMBNAIL_SIDE = 256
"""Longest side of a thumbnail in pixels (shown at 128 CSS pixels: sharp on a high-density screen)."""
THUMBNAIL_QUALITY = 82
"""JPEG quality of thumbnails."""
WORKERS = 4
"""Images decoded at once when a page needs new thumbnails (Pillow decodes without holding the GIL)."""


def folder(state: ServeState) -> Path:
    """Where this dataset version's thumbnails are kept (created on first use, then remembered)."""
    def make() -> Path:
        if state.thumbnail_root is not None:
            path = state.thumbnail_root / state.key
            path.mkdir(parents=True, exist_ok=True)
            return path
        return cache_dir("serve-thumbnails", state.key)

    return state.remembered(("thumbnails", state.thumbnail_root), make)


def path_of(state: ServeState, uuid: str) -> Path:
    """The thumbnail file of ``uuid`` (it may not exist yet)."""
    return folder(state) / (hashlib.sha256(uuid.encode()).hexdigest()[:40] + ".jpg")


def make_thumbnail(data: bytes | None, side: int = THUMBNAIL_SIDE) -> bytes:
    """JPEG bytes of ``data`` shrunk to at most ``side`` pixels; :class:`ImageDecodeError` when it does not
    decode. JPEG decodes at a reduced scale first (``draft``), which is most of the speed of a first page."""
    if not data:
        raise ImageDecodeError("no image bytes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            image = open_image(data)
            image.draft("RGB", (side, side))
            image.load()
            image = to_rgb(image)
            image.thumbnail((side, side))
    except ImageDecodeError:
        raise
    except Exception as exc:  # truncated, corrupt, unknown format: Pillow's many exception types
        raise ImageDecodeError(f"cannot decode the image: {exc}") from None
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=THUMBNAIL_QUALITY)
    return out.getvalue()


def _write(state: ServeState, uuid: str, data: bytes | None) -> bool:
    try:
        atomic_write(path_of(state, uuid), make_thumbnail(data))
        return True
    except ImageDecodeError:
        return False


def ensure(state: ServeState, uuids: Sequence[str], row_ids: Sequence[int] | None = None) -> set[str]:
    """Make the thumbnails of ``uuids`` that are not cached yet; returns the uuids that have one now.

    ``row_ids`` (Lance's ``_rowid`` of each uuid, from the scan that found them) lets the images be read in one
    take instead of a filtered scan.
    """
    missing = [(i, u) for i, u in enumerate(uuids) if not path_of(state, u).exists()]
    have = {u for u in uuids if u not in dict((u, None) for _, u in missing)}
    if not missing:
        return have
    images = _read_images(state, [u for _, u in missing],
                          None if row_ids is None else [int(row_ids[i]) for i, _ in missing])
    with ThreadPoolExecutor(WORKERS) as pool:
        done = pool.map(lambda item: (item[0], _write(state, item[0], item[1])), images.items())
        have.update(u for u, ok in done if ok)
    return have


def _read_images(state: ServeState, uuids: list[str], row_ids: list[int] | None) -> dict[str, object]:
    """uuid -> image bytes of ``uuids`` (by row id when known, else by a filter on uuid)."""
    from cladebench.store import sql_literal

    if row_ids is not None:
        table = state.dataset._take_rows(row_ids, columns=["uuid", "image"])
    else:
        listed = ", ".join(sql_literal(u) for u in uuids)
        table = state.dataset.to_table(columns=["uuid", "image"], filter=f"uuid IN ({listed})")
    return dict(zip(table.column("uuid").to_pylist(), table.column("image").to_pylist(), strict=True))


def thumbnail_file(state: ServeState, uuid: str) -> Path | None:
    """The thumbnail of ``uuid``, made now if needed; None when its image does not decode."""
    path = path_of(state, uuid)
    if path.exists():
        return path
    return path if uuid in ensure(state, [uuid]) else None
