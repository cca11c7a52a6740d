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
from typing import Any

from cladebench.errors import CladebenchError
from cladebench.store import sql_literal

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


def _link(value: Any) -> str | None:
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


def read_photos(uri: str, version: Any, uuids: Sequence[str]) -> tuple[dict[str, Photo], str | None]:
    """Photos of ``uuids`` in the dataset at ``uri`` (at ``version`` when it still exists), and a note on what
    could not be read."""
    from cladebench import store

    if not uuids:
        return {}, None
    note = None
    try:
        try:
            dataset = store.open_dataset(uri, version=version)
        except CladebenchError:
            if version is None:
                raise
            dataset = store.open_dataset(uri)
            note = f"version {version} of {uri} is gone; photos are from version {dataset.version}"
        columns = ["uuid", *(c for c in COLUMNS if c in dataset.schema.names)]
        where = f"uuid IN ({', '.join(sql_literal(str(u)) for u in dict.fromkeys(uuids))})"
        rows = store.read(dataset, columns=columns, where=where).to_pylist()
    except (CladebenchError, OSError, ValueError) as exc:
        return {}, f"photos not available: {exc}"
    photos = {}
    for row in rows:
        uri_, problem, width, height = thumbnail(row.get("image")) if "image" in row else (None, "no image column",
                                                                                              0, 0)
        photos[row["uuid"]] = Photo(thumbnail=uri_, problem=problem, width=width, height=height,
                                    license_name=row.get("license_name"), license_link=_link(row.get("license_link")),
                                    attribution=row.get("attribution"), scientific_name=row.get("scientific_name"),
                                    source_url=_link(row.get("source_url")))
    missing = len(set(uuids) - set(photos))
    if missing:
        note = "; ".join(filter(None, [note, f"{missing} photo(s) not found in {uri}"]))
    return photos, note
