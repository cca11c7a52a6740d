"""Pictures for the embedding tests: deterministic synthetic photos, a mix of good and broken files, a dataset of
them, and reference embeddings computed one image at a time.

Shared by the local, Ray and S3 embedding tests, so that each compares against the same images and the same
straightforward loop.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
from PIL import Image

from cladebench import store
from helpers.realdata import camera_trap_dir

CAMERA_TRAP = camera_trap_dir()
"""Real camera-trap JPEGs (greyscale, CMYK, EXIF-rotated, truncated), used when present."""
BROKEN = frozenset({"zero-bytes", "garbage", "truncated", "real-african_elephants_truncated_file"})
"""The keys of :func:`mixed_images` (and :func:`with_real_camera_trap`) that no decoder reads."""


def picture(seed: int, size: tuple[int, int] = (120, 90), fmt: str = "JPEG") -> bytes:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 255, size=(size[1] // 10, size[0] // 10, 3), dtype=np.uint8)
    image = Image.fromarray(pixels).resize(size, Image.Resampling.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, quality=90)
    return buffer.getvalue()


def write_images(path: Path, images: dict[str, bytes]) -> None:
    table = pa.table({
        "uuid": list(images),
        "image": pa.array(list(images.values()), pa.large_binary()),
    })
    store.write_dataset(table, path)


def mixed_images() -> dict[str, bytes]:
    images = {f"syn-{i:03d}": picture(i, fmt="WEBP" if i % 3 == 0 else "JPEG") for i in range(24)}
    images["zero-bytes"] = b""
    images["garbage"] = b"definitely not an image"
    whole = picture(99, size=(300, 200))
    images["truncated"] = whole[: len(whole) // 2]
    rgba = Image.new("RGBA", (50, 40), (10, 200, 30, 128))
    buffer = io.BytesIO()
    rgba.save(buffer, format="PNG")
    images["rgba-png"] = buffer.getvalue()
    return images


def with_real_camera_trap(images: dict[str, bytes]) -> dict[str, bytes]:
    """``images`` plus the real camera-trap edge cases where they are present: a test using it derives what it
    expects from the keys it got (``BROKEN & set(images)``), so it holds with and without them."""
    if CAMERA_TRAP.exists():
        for name in ("african_elephants_bw", "african_elephants_cmyk", "african_elephants_with_exif_orientation",
                     "african_elephants_truncated_file"):
            images = {**images, f"real-{name}": (CAMERA_TRAP / f"{name}.jpg").read_bytes()}
    return images


def reference_embeddings(model: str, images: dict[str, bytes],
                         preprocessing: str = "openclip") -> dict[str, np.ndarray]:
    """An independent straightforward loop: decode, preprocess, encode one image at a time (needs torch)."""
    from cladebench.images import decode_image
    from cladebench.models import load_encoder

    encoder = load_encoder(model, preprocessing=preprocessing, device="cpu")
    transform = encoder.preprocessing.build()
    out = {}
    for key, data in images.items():
        try:
            image = decode_image(data)
        except Exception:
            continue
        out[key] = encoder.encode_images(transform(image).unsqueeze(0))[0]
    return out
