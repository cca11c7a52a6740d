"""Images as the server should see them: sent as they are when that is safe, else re-encoded upright as JPEG."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

ACCEPTED_IMAGE_TYPES: dict[str, str] = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp",
                                        "gif": "image/gif"}
"""Formats sent as they are (those the OpenAI API accepts) -> their MIME type."""

_EXIF_ORIENTATION = 0x0112

PREPARATION_VERSION = 1
"""Bump when prepare_image changes what it sends, so old cache entries are not reused."""


@dataclass(frozen=True)
class PreparedImage:
    """Bytes as they go over the wire."""

    data: bytes
    mime_type: str
    reencoded_because: str | None
    """Why the image was re-encoded as JPEG; ``None`` when sent as given."""

    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{base64.b64encode(self.data).decode('ascii')}"


def _reencode_reason(data: bytes, image_format: str | None, max_side: int | None) -> str | None:
    """Why the server would not see what ``decode_image`` sees if the bytes went as they are; ``None`` if it would."""
    from cladebench.images import open_image

    if image_format not in ACCEPTED_IMAGE_TYPES:
        return f"format {image_format or 'unknown'} is not one the API accepts"
    with open_image(data) as raw:
        if raw.getexif().get(_EXIF_ORIENTATION, 1) not in (0, 1):
            return "EXIF orientation to apply"
        if raw.mode in ("RGBA", "LA", "PA") or "transparency" in raw.info:
            return "transparency to flatten"
        if getattr(raw, "is_animated", False):
            return "animated"
        if max_side is not None and max(raw.size) > max_side:
            return f"longer side {max(raw.size)} px exceeds {max_side} px"
    return None


def prepare_image(data: bytes, max_side: int | None = None, jpeg_quality: int = 90) -> PreparedImage:
    """Check that ``data`` decodes and decide what to send (see :mod:`cladebench.models.vlm`).

    Raises :class:`cladebench.images.ImageDecodeError` when it does not decode.
    """
    from PIL import Image

    from cladebench.images import decode_image, sniff_format

    image = decode_image(data)  # a full decode: a corrupt file is caught here, not by the server
    image_format = sniff_format(data)
    reason = _reencode_reason(data, image_format, max_side)
    if reason is None:
        return PreparedImage(data, ACCEPTED_IMAGE_TYPES[image_format], None)  # type: ignore[index]
    if max_side is not None and max(image.size) > max_side:
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=jpeg_quality)
    return PreparedImage(buffer.getvalue(), "image/jpeg", reason)
