"""Body checks a download must pass before it counts as done, by name (``DownloadConfig.image_check``).

Why apart: the config validates the name it is given against this registry, and the fetcher runs the check, so
both import it; a check is a small function that raises :class:`cladebench.images.ImageDecodeError` on a bad
body, and a new one is added with ``@IMAGE_CHECKS.register(name)``.

Example:
    >>> sorted(IMAGE_CHECKS)
    ['decode', 'none', 'verify']
"""

from __future__ import annotations

from collections.abc import Callable

from cladebench.registry import Registry

ImageCheck = Callable[[bytes], None]
IMAGE_CHECKS: Registry[ImageCheck] = Registry("image check")
"""Registry of body checks run before an item counts as done: name -> function raising on a bad image."""


@IMAGE_CHECKS.register("none")
def _check_nothing(body: bytes) -> None:
    """Accept any body (for non-image downloads)."""



@IMAGE_CHECKS.register("verify")
def _check_verify(body: bytes) -> None:
    """Pillow's ``verify()``: cheap, catches broken PNG/GIF structure, but not a JPEG cut short. Images over
    :data:`cladebench.images.MAX_PIXELS` are refused, as every decoder refuses them."""
    from cladebench.images import ImageDecodeError, open_image

    try:
        with open_image(body) as image:
            image.verify()
    except ImageDecodeError:
        raise
    except Exception as exc:  # Pillow raises many types for corrupt input
        raise ImageDecodeError(f"image does not verify: {exc or type(exc).__name__}") from None



@IMAGE_CHECKS.register("decode")
def _check_decode(body: bytes) -> None:
    """A full decode, as every consumer does it: the only check that catches a truncated JPEG (and, as every
    decoder does, refuses images over :data:`cladebench.images.MAX_PIXELS`)."""
    from cladebench.images import decode_image

    decode_image(body)


__all__ = ["IMAGE_CHECKS", "ImageCheck"]
