"""Decode stored image bytes into RGB, the same way everywhere, or say exactly why not.

Real benchmark images arrive as JPEG, WebP, PNG and GIF (and a phone's HEIC, read with the ``heif`` extra), in
RGB, grayscale (L), CMYK, palette (P) and RGBA, sometimes EXIF-rotated, sometimes truncated or empty. Models
want upright RGB. Every consumer (embedding, galleries, VLM requests) decodes through :func:`decode_image`, so a
camera-trap photo stored on its side is upright for every model, and a broken file becomes an :class:`ImageDecodeError`
with a reason that is recorded, never a silent drop.
"""

from __future__ import annotations

import io
import re
import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

from cladebench.errors import CladebenchError

MAX_PIXELS = 178_956_970
"""The most pixels (width x height) an image may have; anything larger is refused as too large.

Decompression bombs are a real risk with scraped data: a 400-megapixel PNG of zeros is a few hundred
kilobytes on the wire and gigabytes once decoded. Honest photos are far below this (2048 px originals
are about 4 MP; the largest camera sensors about 150 MP), so about 179 MP (Pillow's own error threshold,
twice its warning threshold) is generous for them and still stops a bomb. This one number decides:
Pillow's warning band (above ``PIL.Image.MAX_IMAGE_PIXELS``) is not a refusal here, and Pillow's
``DecompressionBombError`` becomes an :class:`ImageDecodeError` like every other refusal. Every
decoder of the project goes through :func:`open_image` (:func:`decode_image`, the downloader's
checks, the VLM client), so the same image is accepted or refused everywhere.
"""


class ImageDecodeError(CladebenchError):
    """Image bytes that cannot be turned into an RGB picture; ``reason`` is short and recordable."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ImageTooLargeError(ImageDecodeError):
    """An image with more than :data:`MAX_PIXELS` pixels: refused before its pixels are decoded.

    A subclass, so that a downloader can tell it from a cut-short body: fetching it again gets the same
    image, so it is not worth a retry.
    """


def _too_large(size: str) -> ImageTooLargeError:
    return ImageTooLargeError(f"image too large: {size} pixels, over the limit of {MAX_PIXELS:,} pixels "
                              "(cladebench.images.MAX_PIXELS)")


def _bomb_error(exc: Exception) -> ImageTooLargeError:
    """Pillow's ``DecompressionBombError`` in the words of :func:`_too_large` (it names the pixel count only)."""
    found = re.search(r"\((\d+) pixels\)", str(exc))
    return _too_large(f"{int(found[1]):,}" if found else "more than Pillow's limit of")


HEIF_BRANDS = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"hevm", b"hevs", b"mif1", b"msf1"})
"""The ``ftyp`` brands of HEIC/HEIF files (a phone's photos): Pillow reads them only with pillow-heif's plugin."""

HEIF_EXTRA = "pip install 'cladebench[heif]'"
"""How to get the HEIF reader: one line, said wherever a HEIC photo cannot be read without it."""


def is_heif(data: bytes) -> bool:
    """Whether the bytes are a HEIC/HEIF file (an ISO-BMFF ``ftyp`` box with a HEIF brand)."""
    return data[4:8] == b"ftyp" and data[8:12] in HEIF_BRANDS


def _register_heif() -> None:
    """pillow-heif's opener registered with Pillow (once; registering again is harmless), or a decode error
    naming the extra to install."""
    try:
        import pillow_heif
    except ImportError:
        raise ImageDecodeError(f"a HEIC/HEIF photo, which needs the heif extra to be read ({HEIF_EXTRA})") from None
    pillow_heif.register_heif_opener()


def open_image(data: bytes) -> Image.Image:
    """``PIL.Image.open`` on the bytes (header read, pixels not yet decoded), with the pixel limit applied.

    Raises :class:`ImageTooLargeError` above :data:`MAX_PIXELS` and lets Pillow's other errors through
    (the callers sort them). Pillow's own bomb check is subsumed: its warning is not a refusal (the
    limit here is the documented one), and its error becomes :class:`ImageTooLargeError`.
    """
    if is_heif(data):
        _register_heif()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:
        # Pillow refuses above twice its warning threshold, which is this module's limit (or lower, when
        # another library lowered Pillow's global): the same refusal, in the same words.
        raise _bomb_error(exc) from None
    if image.width * image.height > MAX_PIXELS:
        image.close()
        raise _too_large(f"{image.width}x{image.height} = {image.width * image.height:,}")
    return image


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
        image = open_image(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image.load()  # force the full decode here, so truncation is caught here
    except ImageDecodeError:
        raise
    except UnidentifiedImageError:
        raise ImageDecodeError(f"not a recognised image format ({len(data)} bytes, starts {data[:8]!r})") from None
    except Image.DecompressionBombError as exc:  # a frame or tile larger than the header said
        raise _bomb_error(exc) from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        message = str(exc) or type(exc).__name__
        raise ImageDecodeError(f"corrupt or truncated image: {message}") from None
    try:
        return to_rgb(image)
    except (OSError, ValueError) as exc:
        raise ImageDecodeError(f"cannot convert {image.mode} image to RGB: {exc}") from None


def sniff_format(data: bytes) -> str | None:
    """The image format from the bytes' signature (``jpeg``, ``png``, ``webp``, ``gif``, ``bmp``, ``tiff``,
    ``heif``), without decoding."""
    if data.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if is_heif(data):
        return "heif"
    if data[:2] == b"BM":
        return "bmp"
    if data[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    return None


def image_format(data: bytes) -> str | None:
    """The format of a whole image: its signature (:func:`sniff_format`), else the name of the format Pillow
    reads it as (``ppm``, ``tga``, ``heif``, ...: its header only, nothing decoded); None when Pillow reads none."""
    known = sniff_format(data)
    if known is not None:
        return known
    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.format.lower() if image.format else None
    except (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError):
        return None
