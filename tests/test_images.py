"""Image decoding: every mode becomes upright RGB, every broken file a recorded reason."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from cladebench.curate.fetch import IMAGE_CHECKS
from cladebench.images import MAX_PIXELS, ImageDecodeError, ImageTooLargeError, decode_image, open_image, sniff_format
from helpers.huge_png import huge_png
from helpers.realdata import camera_trap_dir

CAMERA_TRAP = camera_trap_dir()


def encode(image: Image.Image, fmt: str, **kwargs: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **kwargs)
    return buffer.getvalue()


def test_modes_become_rgb() -> None:
    gray = Image.new("L", (10, 6), 77)
    decoded = decode_image(encode(gray, "PNG"))
    assert decoded.mode == "RGB" and decoded.getpixel((0, 0)) == (77, 77, 77)
    cmyk = Image.new("CMYK", (8, 8), (0, 255, 255, 0))  # pure red in CMYK
    red = decode_image(encode(cmyk, "JPEG", quality=95)).getpixel((4, 4))
    assert red[0] > 200 and red[1] < 60 and red[2] < 60
    palette = Image.new("P", (4, 4))
    palette.putpalette([0, 0, 255] * 256)
    assert decode_image(encode(palette, "GIF")).getpixel((1, 1)) == (0, 0, 255)


def test_transparency_is_flattened_on_white() -> None:
    rgba = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    assert decode_image(encode(rgba, "PNG")).getpixel((0, 0)) == (255, 255, 255)
    half = Image.new("RGBA", (4, 4), (0, 0, 0, 128))
    value = decode_image(encode(half, "PNG")).getpixel((0, 0))
    assert 120 <= value[0] <= 135


def test_sixteen_bit_gray_is_stretched_not_clipped() -> None:
    values = np.linspace(0, 65535, 64, dtype=np.uint16).reshape(8, 8)
    image = Image.fromarray(values)
    assert image.mode.startswith("I")
    decoded = np.asarray(decode_image(encode(image, "PNG")))
    assert decoded.min() == 0 and decoded.max() == 255 and len(np.unique(decoded)) > 32


def test_exif_orientation_is_applied() -> None:
    image = Image.new("RGB", (40, 20), (0, 0, 0))
    image.paste((255, 255, 255), (0, 0, 10, 20))  # white stripe on the left
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 CW to display
    decoded = decode_image(encode(image, "JPEG", exif=exif, quality=95))
    assert decoded.size == (20, 40)
    assert decoded.getpixel((10, 2))[0] > 200  # the stripe is now on top
    assert decoded.getpixel((10, 38))[0] < 60


@pytest.mark.parametrize("data, reason", [
    (b"", "zero-byte"),
    (None, "null"),
    (b"this is not an image at all", "not a recognised image format"),
])
def test_broken_inputs_have_reasons(data: bytes | None, reason: str) -> None:
    with pytest.raises(ImageDecodeError) as exc:
        decode_image(data)
    assert reason in exc.value.reason


def test_truncated_jpeg_is_an_error_not_a_grey_image() -> None:
    data = encode(Image.effect_noise((200, 200), 50).convert("RGB"), "JPEG", quality=90)
    with pytest.raises(ImageDecodeError) as exc:
        decode_image(data[: len(data) // 2])
    assert "truncated" in exc.value.reason


def test_an_image_over_the_pixel_limit_is_a_reason_not_a_crash() -> None:
    bomb = huge_png(20_000, 20_000)  # 400 MP: Pillow raises DecompressionBombError, not its warning
    assert len(bomb) < 1_000_000
    for check in (decode_image, open_image, IMAGE_CHECKS["decode"], IMAGE_CHECKS["verify"]):
        with pytest.raises(ImageTooLargeError, match=r"image too large: 400,000,000 pixels, over the limit of "
                                                      r"178,956,970 pixels"):
            check(bomb)


def test_embed_records_a_bomb_with_the_same_reason() -> None:
    from cladebench.embed.core import decode_block

    small = encode(Image.new("RGB", (4, 4), (1, 2, 3)), "PNG")
    class Pixels:  # stands in for the model's transform, whose output has .numpy() as a tensor does
        def __init__(self, image: Image.Image) -> None:
            self.size = image.size

        def numpy(self) -> np.ndarray:
            return np.zeros(self.size)

    block = decode_block(["bomb", "ok"], [huge_png(20_000, 20_000), small], transform=Pixels)
    assert block["uuids"] == ["ok"]
    ((uuid, reason),) = block["failed"]
    assert uuid == "bomb" and reason.startswith("image too large: 400,000,000 pixels, over the limit of 178,956,970")


def test_the_pixel_limit_is_one_number_for_every_check() -> None:
    side = int(MAX_PIXELS**0.5)
    assert side * side <= MAX_PIXELS < (side + 1) * (side + 1)
    # Pillow warns above 89.5 MP; that band is below the documented limit and must not be refused.
    band = huge_png(10_000, 10_000)
    at_limit = huge_png(side, side)
    for data in (band, at_limit):
        with open_image(data) as image:
            assert image.size[0] * image.size[1] <= MAX_PIXELS
        IMAGE_CHECKS["verify"](data)  # the downloader's cheap check agrees
    over = huge_png(side + 1, side + 1)
    for check in (decode_image, open_image, IMAGE_CHECKS["verify"]):
        with pytest.raises(ImageTooLargeError, match="over the limit"):
            check(over)
    assert issubclass(ImageTooLargeError, ImageDecodeError)


def test_sniff_format() -> None:
    image = Image.new("RGB", (4, 4))
    assert sniff_format(encode(image, "JPEG")) == "jpeg"
    assert sniff_format(encode(image, "WEBP")) == "webp"
    assert sniff_format(encode(image, "PNG")) == "png"
    assert sniff_format(b"nothing") is None


@pytest.mark.skipif(not CAMERA_TRAP.exists(), reason="../shared/realdata not present")
def test_real_camera_trap_edge_cases() -> None:
    reference = np.asarray(decode_image((CAMERA_TRAP / "african_elephants.jpg").read_bytes()), dtype=np.float32)
    gray = decode_image((CAMERA_TRAP / "african_elephants_bw.jpg").read_bytes())
    cmyk = decode_image((CAMERA_TRAP / "african_elephants_cmyk.jpg").read_bytes())
    rotated = decode_image((CAMERA_TRAP / "african_elephants_with_exif_orientation.jpg").read_bytes())
    assert gray.mode == cmyk.mode == rotated.mode == "RGB"
    assert gray.size == cmyk.size == rotated.size == (2048, 1536)  # stored 1536x2048, EXIF orientation 6
    # The CMYK and rotated copies show the same picture as the reference, upright.
    for other in (cmyk, rotated):
        diff = np.abs(np.asarray(other, dtype=np.float32) - reference).mean()
        assert diff < 12, diff
    with pytest.raises(ImageDecodeError, match="truncated"):
        decode_image((CAMERA_TRAP / "african_elephants_truncated_file.jpg").read_bytes())
