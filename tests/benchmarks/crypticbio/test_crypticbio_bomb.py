"""`load crypticbio` with a decompression bomb among the photos: one recorded failure, never a dead load.

A 400-megapixel PNG of zeros is a few dozen kilobytes on the wire. Served by a real HTTP server on
127.0.0.1 beside ordinary photos, it must become one row of the failures table (reason
``too_many_pixels``) while every other row is written, on the first run and on a rerun.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.benchmarks.crypticbio.source import failures_path_for
from helpers.crypticbio_rows import GOOD_ROW, write_csv
from helpers.http_local import serving
from helpers.huge_png import huge_png
from helpers.photo_host import PhotoHost, photo


@pytest.fixture
def photos() -> Iterator[PhotoHost]:
    server = PhotoHost({"/1.jpg": photo("JPEG", 1), "/bomb.png": huge_png(20_000, 20_000), "/3.gif": photo("GIF", 3)})
    with serving(server):
        yield server


def test_load_records_a_decompression_bomb_as_one_failure(tmp_path: Path, photos: PhotoHost,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    rows = [GOOD_ROW | {"url": photos.url(path)} for path in ("/1.jpg", "/bomb.png", "/3.gif")]
    csv_path = write_csv(tmp_path / "CrypticBio-Common.csv", rows)
    for attempt in ("first", "rerun"):
        out = tmp_path / f"{attempt}.lance"
        code = main(["load", "crypticbio", str(csv_path), "--out", str(out), "--download-dir", str(tmp_path / "dl"),
                     "--concurrency", "2", "--retries", "2"])
        printed = capsys.readouterr()
        assert code == 0, printed.err
        assert "2 of 3 rows written" in printed.out and "too_many_pixels 1" in printed.out
        table = store.open_dataset(out).to_table(columns=["source_url"])
        assert sorted(table.column("source_url").to_pylist()) == [photos.url("/1.jpg"), photos.url("/3.gif")]
        (failure,) = pq.read_table(failures_path_for(out)).to_pylist()
        assert (failure["row"], failure["source_url"], failure["reason"], failure["attempts"]) == (
            2, photos.url("/bomb.png"), "too_many_pixels", 1)
        assert "400,000,000 pixels, over the limit of 178,956,970" in failure["detail"]
    assert photos.requests["/bomb.png"] == 2  # once per run: refused, not retried
