"""Real PNG files with a huge pixel count and a tiny size on the wire, for decompression-bomb tests.

An all-zero bilevel PNG compresses about 1000:1, so 400 megapixels are a few dozen kilobytes. The file
is written row by row through zlib, so making it never holds the pixels in memory either.
"""

from __future__ import annotations

import struct
import zlib


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def huge_png(width: int, height: int) -> bytes:
    """A valid all-black 1-bit grayscale PNG of ``width`` x ``height`` pixels."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # bit depth 1, grayscale
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte "none", then the packed bits
    compressor = zlib.compressobj(9)
    parts = [compressor.compress(row) for _ in range(height)]
    parts.append(compressor.flush())
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", b"".join(parts)) + _chunk(b"IEND", b"")
