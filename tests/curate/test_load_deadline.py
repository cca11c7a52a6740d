"""`load crypticbio --image-deadline-s`: a host that trickles one photo's bytes costs the deadline, not minutes.

The per-read timeout restarts with every byte, so only a wall-clock limit on the whole image stops such a
host; the load then records that photo as one failure with reason ``deadline`` and writes the others.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench.benchmarks.crypticbio.source import failures_path_for
from helpers.crypticbio_rows import GOOD_ROW, write_csv
from helpers.http_local import serving
from helpers.photo_host import PhotoHandler, PhotoHost, photo


class _TricklingHandler(PhotoHandler):
    def do_GET(self) -> None:
        if self.path != "/slow.jpg":
            super().do_GET()
            return
        body = photo("JPEG", 2)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            for byte in body:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass  # the client gave up, as it should


@pytest.fixture
def photos() -> Iterator[PhotoHost]:
    server = PhotoHost({"/1.jpg": photo("JPEG", 1)})
    server.RequestHandlerClass = _TricklingHandler
    with serving(server):
        yield server


def test_a_trickling_photo_fails_at_the_image_deadline(tmp_path: Path, photos: PhotoHost,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    rows = [GOOD_ROW | {"url": photos.url(path)} for path in ("/1.jpg", "/slow.jpg")]
    csv_path = write_csv(tmp_path / "CrypticBio-Common.csv", rows)
    started = time.monotonic()
    code = main(["load", "crypticbio", str(csv_path), "--out", str(tmp_path / "out.lance"),
                 "--download-dir", str(tmp_path / "dl"), "--retries", "3", "--image-deadline-s", "1"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "1 of 2 rows written" in printed.out
    (failure,) = pq.read_table(failures_path_for(tmp_path / "out.lance")).to_pylist()
    assert (failure["source_url"], failure["reason"]) == (photos.url("/slow.jpg"), "deadline")
    assert time.monotonic() - started < 20  # a few hundred bytes at 20 a second would take far longer


@pytest.mark.parametrize(("option", "value"), [("--image-deadline-s", "0"), ("--image-deadline-s", "nan"),
                                               ("--concurrency", "0"), ("--retries", "0"), ("--limit", "-1")])
def test_load_options_out_of_range_are_usage_errors(tmp_path: Path, option: str, value: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    csv_path = write_csv(tmp_path / "CrypticBio-Common.csv", [GOOD_ROW])
    code = main(["load", "crypticbio", str(csv_path), "--out", str(tmp_path / "out.lance"), option, value])
    err = capsys.readouterr().err
    assert code == 2 and option in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out.lance").exists()
