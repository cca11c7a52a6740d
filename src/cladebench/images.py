"""Decode stored image bytes into RGB, the same way everywhere, or say exactly why not.

Real benchmark images arrive as JPEG, WebP, PNG and GIF, in RGB, grayscale (L), CMYK, palette (P) and
RGBA, sometimes EXIF-rotated, sometimes truncated or empty. Models want upright RGB. Every consumer
(embedding, galleries, VLM requests) decodes through :func:`decode_image`, so a camera-trap photo
stored on its side is upright for every model, and a broken file becomes an :class:`ImageDecodeError`
with a reason that is recorded, never a silent drop.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

from cladebench.errors import CladebenchError

# Decompression bombs are a real risk with scraped data; 2048 px originals are ~4 MP, so 178 MP
# (Pillow's own warning threshold x2) is generous for honest photos and still stops a bomb.
MAX_PIXELS = 178_956_970


class ImageDecodeError(CladebenchError):
    """Image bytes that cannot be turned into an RGB picture; ``reason`` is short and recordable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _flatten_alpha(image: Image.Image, background: tuple[int, int, int] = (255, 255, 255)) -> Image.Image:
    """Composite transparency over white, as a viewer shows it (black would invent dark pixels)."""
    rgba = image.convert("RGBA")
    canvas = Image.new("RGBA", rgba.size, (*background, 255))
    canvas.alpha_composite(rgba)
    return canvas.convert("RGB")


def to_rgb(image: Image.Image) -> Image.Image:
    """Upright RGB: EXIF orientation applied first, then CMYK/L/P/I/F converted, alpha flattened on white."""
    image = ImageOps.exif_transpose(image)
    if image.mode == "RGB":
        return image
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        return _flatten_alpha(image)
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        # 16-bit and float grayscale: stretch to 8 bits instead of clipping everything to white.
        import numpy as np

        values = np.asarray(image, dtype=np.float64)
        low, high = float(values.min()), float(values.max())
        scaled = (values - low) / (high - low) * 255.0 if high > low else np.zeros_like(values)
        return Image.fromarray(scaled.round().astype(np.uint8)).convert("RGB")
    return image.convert("RGB")


def decode_image(data: bytes | None) -> Image.Image:
    """Decode bytes to an upright RGB image, fully loaded; raise :class:`ImageDecodeError` with a reason."""
    if data is None:
        raise ImageDecodeError("no image bytes (null)")
    if len(data) == 0:
        raise ImageDecodeError("zero-byte image")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            if image.width * image.height > MAX_PIXELS:
                raise ImageDecodeError(f"image too large: {image.width}x{image.height} pixels")
            image.load()  # force the full decode here, so truncation is caught here
    except ImageDecodeError:
        raise
    except UnidentifiedImageError:
        raise ImageDecodeError(f"not a recognised image format ({len(data)} bytes, starts {data[:8]!r})") from None
    except Image.DecompressionBombWarning as exc:
        raise ImageDecodeError(f"decompression bomb: {exc}") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        message = str(exc) or type(exc).__name__
        raise ImageDecodeError(f"corrupt or truncated image: {message}") from None
    try:
        return to_rgb(image)
    except (OSError, ValueError) as exc:
        raise ImageDecodeError(f"cannot convert {image.mode} image to RGB: {exc}") from None


def sniff_format(data: bytes) -> str | None:
    """The image format from the bytes' signature (``jpeg``, ``png``, ``webp``, ``gif``), without decoding."""
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None
