"""A photo damaged in the download cache since it was fetched stops a source's build with one line naming the file
(both sources read fetched photos through ``DownloadStore.read_verified``), and the build leaves no dataset."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cladebench.benchmarks.coobserved.source import build_inat_coobserved
from cladebench.benchmarks.crypticbio.source import build_crypticbio_dataset
from cladebench.curate.fetch import DownloadConfig, DownloadStore, download
from cladebench.errors import CladebenchError
from helpers.coobserved_rows import jpeg, published_rows, write_published
from helpers.crypticbio_rows import GOOD_ROW, write_csv
from helpers.http_local import serving
from helpers.photo_host import PhotoHost, photo

FAST = DownloadConfig(concurrency=2, connect_timeout_s=1.0, read_timeout_s=1.0, max_attempts=2,
                      backoff_base_s=0.01, backoff_max_s=0.02)


@pytest.fixture
def photos() -> Iterator[PhotoHost]:
    server = PhotoHost({"/1.jpg": photo("JPEG", 1), "/2.png": photo("PNG", 2), "/5000.jpg": jpeg(5000, (64, 48))})
    with serving(server):
        yield server


def _damage_every_object(downloads: Path) -> int:
    """Flip one byte of each stored body, keeping its size (so the store still counts it as fetched)."""
    damaged = 0
    for path in sorted((downloads / "objects").rglob("*")):
        if path.is_file():
            body = bytearray(path.read_bytes())
            body[len(body) // 2] ^= 0xFF
            path.write_bytes(bytes(body))
            damaged += 1
    return damaged


def test_read_verified_returns_an_intact_body_and_refuses_a_damaged_one(tmp_path: Path, photos: PhotoHost) -> None:
    report = download([("a", photos.url("/1.jpg"))], tmp_path / "downloads", FAST)
    entry = report.downloaded["a"]
    store = DownloadStore(tmp_path / "downloads")
    assert store.read_verified(entry) == photos.photos["/1.jpg"] == store.read_bytes(entry)
    assert _damage_every_object(tmp_path / "downloads") == 1
    with pytest.raises(CladebenchError, match="does not match its SHA-256; the download cache is damaged") as info:
        store.read_verified(entry)
    assert str(store.object_path(entry.sha256)) in str(info.value)


def test_crypticbio_build_refuses_a_damaged_cached_photo(tmp_path: Path, photos: PhotoHost) -> None:
    csv_path = write_csv(tmp_path / "CrypticBio-Common.csv", [GOOD_ROW | {"url": photos.url("/1.jpg")},
                                                              GOOD_ROW | {"url": photos.url("/2.png")}])
    first = build_crypticbio_dataset(csv_path, tmp_path / "first.lance", download_config=FAST,
                                     download_dir=tmp_path / "downloads")
    assert first.written == 2
    assert _damage_every_object(tmp_path / "downloads") == 2
    with pytest.raises(CladebenchError, match="does not match its SHA-256"):
        build_crypticbio_dataset(csv_path, tmp_path / "again.lance", download_config=FAST,
                                 download_dir=tmp_path / "downloads")
    assert not (tmp_path / "again.lance").exists()


def test_coobserved_build_refuses_a_damaged_cached_photo(tmp_path: Path, photos: PhotoHost) -> None:
    rows = published_rows()
    rows[1].update(image={"bytes": None, "path": None}, image_url=photos.url("/5000.jpg"))
    path = write_published(tmp_path / "train.parquet", rows)
    first = build_inat_coobserved(path, tmp_path / "first.lance", download_config=FAST,
                                  download_dir=tmp_path / "downloads")
    assert first.stats["image_fetched"] == 1
    assert _damage_every_object(tmp_path / "downloads") == 1
    with pytest.raises(CladebenchError, match="does not match its SHA-256"):
        build_inat_coobserved(path, tmp_path / "again.lance", download_config=FAST,
                              download_dir=tmp_path / "downloads")
    assert not (tmp_path / "again.lance").exists()
