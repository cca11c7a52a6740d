"""A CrypticBio row's id comes from the row's own source key (its photo), never from the file's name or place:
two copies of one CSV, under other names and folders, load into datasets with the same uuids and fingerprint."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cladebench import store
from cladebench.benchmarks.crypticbio.source import read_crypticbio
from cladebench.cli import main
from helpers.crypticbio_rows import GOOD_ROW, write_csv
from helpers.http_local import serving
from helpers.photo_host import PhotoHost, photo


@pytest.fixture
def photos() -> Iterator[PhotoHost]:
    server = PhotoHost({"/1.jpg": photo("JPEG", 1), "/2.png": photo("PNG", 2)})
    with serving(server):
        yield server


def test_two_copies_of_one_csv_load_with_the_same_ids(tmp_path: Path, photos: PhotoHost) -> None:
    rows = [GOOD_ROW | {"url": photos.url("/1.jpg")},
            GOOD_ROW | {"url": photos.url("/2.png"), "scientificName": "Podarcis liolepis"}]
    (tmp_path / "a").mkdir()
    first = write_csv(tmp_path / "a" / "CrypticBio-Common.csv", rows)
    second = tmp_path / "elsewhere" / "my-copy.csv"
    second.parent.mkdir()
    shutil.copyfile(first, second)
    datasets = []
    for number, csv_path in enumerate((first, second)):
        out = tmp_path / f"out{number}.lance"
        assert main(["load", "crypticbio", str(csv_path), "--out", str(out), "--download-dir",
                     str(tmp_path / "dl"), "--retries", "1"]) == 0
        datasets.append(store.open_dataset(out))
    uuids = [sorted(d.to_table(columns=["uuid"]).column("uuid").to_pylist()) for d in datasets]
    assert uuids[0] == uuids[1] and len(set(uuids[0])) == 2
    assert store.fingerprint(datasets[0]) == store.fingerprint(datasets[1])


def test_two_urls_of_one_photo_still_get_two_ids(tmp_path: Path) -> None:
    rows = [GOOD_ROW | {"url": "https://static.inaturalist.org/photos/5/medium.jpg"},
            GOOD_ROW | {"url": "https://static.inaturalist.org/photos/5/large.jpg"},
            GOOD_ROW | {"url": "https://static.inaturalist.org/photos/5/large.jpg"}]
    table = read_crypticbio(write_csv(tmp_path / "CrypticBio-Common.csv", rows))
    assert len(set(table.column("uuid").to_pylist())) == 3
