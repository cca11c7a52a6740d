"""Thumbnails and licensing of the photos in error galleries, read from the run's own dataset.

The dataset a run names in its provenance (URI and version) is opened and only the gallery's rows are
read (``uuid IN (...)``, pushed down to Lance). Each photo becomes a JPEG of at most
:data:`THUMBNAIL_PX` pixels a side, embedded as a data URI, so the page stays one file. Its license and
attribution are read beside it: a photo shown in a report is a reproduction, and the license asks for
the credit. A photo that cannot be decoded is shown as its reason, never as a broken image.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cladebench.errors import CladebenchError
from cladebench.store import sql_literal

if TYPE_CHECKING:
    import lance

THUMBNAIL_PX = 256
"""Longest side of a thumbnail, in pixels."""
JPEG_QUALITY = 85
"""JPEG quality of thumbnails."""
COLUMNS = ("image", "license_name", "license_link", "attribution", "scientific_name", "source_url")
"""Dataset columns read for a gallery (those the dataset has)."""
LINK_SCHEMES = ("https://", "http://")
"""Schemes a link from data may have to be shown as a link (never ``javascript:``)."""


@dataclass(frozen=True)
class Photo:
    """One gallery photo: its thumbnail (or why there is none) and its credits."""

    thumbnail: str | None
    """JPEG data URI, or None (see ``problem``)."""
    problem: str | None
    """Why there is no thumbnail."""
    width: int = 0
    height: int = 0
    license_name: str | None = None
    license_link: str | None = None
    """Link to the license text, only when it is an http(s) URL."""
    attribution: str | None = None
    scientific_name: str | None = None
    source_url: str | None = None
    """Link to the source record, only when it is an http(s) URL."""


def _link(value: object) -> str | None:
    return value if isinstance(value, str) and value.lower().startswith(LINK_SCHEMES) else None


def thumbnail(data: bytes | None) -> tuple[str | None, str | None, int, int]:
    """(JPEG data URI, problem, width, height) of encoded image bytes, at most THUMBNAIL_PX a side."""
    from cladebench.images import ImageDecodeError, decode_image

    try:
        image = decode_image(data)
    except ImageDecodeError as exc:
        return None, exc.reason, 0, 0
    image.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    uri = "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
    return uri, None, image.width, image.height


def read_photos(uri: str, version: int | str | None, uuids: Sequence[str], cache: dict[object, Any] | None = None
                ) -> tuple[dict[str, Photo], str | None]:
    """Photos of ``uuids`` in the dataset at ``uri`` (at ``version`` when it still exists), and a note on what
    could not be read.

    ``cache`` (one dict for a whole report) keeps every photo made and every dataset opened, so runs on the same
    examples, whose galleries show many of the same photos, decode and shrink each photo once.
    """
    if not uuids:
        return {}, None
    cache = {} if cache is None else cache
    made = cache.setdefault(("photos", uri, version), {})
    wanted = [u for u in dict.fromkeys(uuids) if u not in made]
    note = None
    if wanted:
        opened = cache.get(("dataset", uri, version))
        if opened is None:
            opened = cache[("dataset", uri, version)] = _open(uri, version)
        dataset, note = opened
        if dataset is None:
            return {}, note
        try:
            columns = ["uuid", *(c for c in COLUMNS if c in dataset.schema.names)]
            where = f"uuid IN ({', '.join(sql_literal(str(u)) for u in wanted)})"
            from cladebench import store

            rows = store.read(dataset, columns=columns, where=where).to_pylist()
        except (CladebenchError, OSError, ValueError) as exc:
            return {}, f"photos not available: {exc}"
        for row in rows:
            made[row["uuid"]] = _photo(row)
        made.update({u: None for u in wanted if u not in made})  # not in the dataset: not asked for again
    else:
        note = cache.get(("dataset", uri, version), (None, None))[1]
    photos = {u: made[u] for u in dict.fromkeys(uuids) if made.get(u) is not None}
    missing = len(set(uuids) - set(photos))
    if missing:
        note = "; ".join(filter(None, [note, f"{missing} photo(s) not found in {uri}"]))
    return photos, note


def _open(uri: str, version: int | str | None) -> tuple[lance.LanceDataset | None, str | None]:
    """The dataset at ``version`` (the latest, with a note, when that version is gone), or None and why not."""
    from cladebench import store

    try:
        try:
            return store.open_dataset(uri, version=version), None
        except CladebenchError:
            if version is None:
                raise
            dataset = store.open_dataset(uri)
            return dataset, f"version {version} of {uri} is gone; photos are from version {dataset.version}"
    except (CladebenchError, OSError, ValueError) as exc:
        return None, f"photos not available: {exc}"


def _photo(row: dict[str, Any]) -> Photo:
    uri, problem, width, height = thumbnail(row.get("image")) if "image" in row else (None, "no image column", 0, 0)
    return Photo(thumbnail=uri, problem=problem, width=width, height=height, license_name=row.get("license_name"),
                 license_link=_link(row.get("license_link")), attribution=row.get("attribution"),
                 scientific_name=row.get("scientific_name"), source_url=_link(row.get("source_url")))
