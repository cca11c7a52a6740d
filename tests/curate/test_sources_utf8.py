"""Where a source file stops being UTF-8: the line, the offset and the byte, wherever the bad byte falls."""

from __future__ import annotations

from pathlib import Path

import pytest

from cladebench.curate.sources import first_bad_utf8


@pytest.mark.parametrize(("data", "expected"), [
    (b"ab\n\xff", (2, 3, 0xFF)),
    ("\ufeff".encode() + b"ab\n\xff", (2, 6, 0xFF)),  # a BOM is three bytes of the file, counted as such
    (b"ab\n\xe2\x82", (2, 3, 0xE2)),  # the file ends inside a character: that character's first byte
    (b"x" * ((1 << 20) - 1) + "€".encode() + b"\n\xff", (2, (1 << 20) + 3, 0xFF)),  # a character across blocks
    (b"x" * ((1 << 20) - 1) + b"\xe2\x28", (1, (1 << 20) - 1, 0xE2)),  # a bad sequence across blocks
])
def test_first_bad_utf8_names_the_right_byte(tmp_path: Path, data: bytes, expected: tuple[int, int, int]) -> None:
    path = tmp_path / "file.csv"
    path.write_bytes(data)
    assert first_bad_utf8(path) == expected
