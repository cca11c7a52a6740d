"""A small dataset of each ``load`` source's shape, each made by the source's own loader from files in the layout
its source publishes (a CrypticBio CSV and lookup with photos on a local host, INQUIRE-Rerank and Co-Observed
Parquet snapshots, a folder of photos per taxon): what ``serve`` and the other readers must take whatever loaded."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from cladebench.cli import main
from helpers.coobserved_rows import published_rows, write_published
from helpers.crypticbio_rows import GOOD_ROW, write_csv
from helpers.http_local import serving
from helpers.inquire_rows import CONDOR, CONDOR_QUERY, HERMIT, HERMIT_QUERY, candidate, flat_jpeg, write_shard
from helpers.photo_host import PhotoHost, photo


def _crypticbio(root: Path) -> Path:
    host = PhotoHost({f"/{i}.jpg": photo("JPEG", i) for i in range(4)})
    with serving(host):
        rows = [GOOD_ROW | {"url": host.url("/0.jpg")}, GOOD_ROW | {"url": host.url("/1.jpg")},
                GOOD_ROW | {"url": host.url("/2.jpg"), "scientificName": "Podarcis liolepis"},
                GOOD_ROW | {"url": host.url("/3.jpg"), "scientificName": "Podarcis hispanicus"}]
        csv_path = write_csv(root / "CrypticBio-Common.csv", rows)
        lookup = root / "lookup.tsv"
        lookup.write_text("Podarcis muralis\tPodarcis liolepis,Podarcis hispanicus\n"
                          "Podarcis liolepis\tPodarcis muralis\n", encoding="utf-8")
        out = root / "crypticbio.lance"
        assert main(["load", "crypticbio", str(csv_path), "--lookup", str(lookup), "--out", str(out),
                     "--download-dir", str(root / "downloads"), "--retries", "1"]) == 0
    return out


def _inquire(root: Path) -> Path:
    rows = [candidate(CONDOR_QUERY, 26, 9000 + i, flat_jpeg((40 * i, 90, 160)), CONDOR, i % 2) for i in range(3)]
    rows += [candidate(HERMIT_QUERY, 27, 9100 + i, flat_jpeg((90, 40 * i, 160)), HERMIT, i % 2) for i in range(3)]
    (root / "snapshot" / "data").mkdir(parents=True)
    write_shard(root / "snapshot" / "data" / "validation-00000-of-00001.parquet", rows)
    out = root / "inquire.lance"
    assert main(["load", "inquire-rerank", str(root / "snapshot"), "--out", str(out)]) == 0
    return out


def _coobserved(root: Path) -> Path:
    (root / "snapshot" / "data").mkdir(parents=True)
    write_published(root / "snapshot" / "data" / "train-00000-of-00001.parquet", published_rows())
    out = root / "coobserved.lance"
    assert main(["load", "inat-coobserved", str(root / "snapshot"), "--out", str(out)]) == 0
    return out


def _images(root: Path) -> Path:
    for folder, colour in (("Bos taurus", (120, 80, 40)), ("Canis familiaris", (40, 80, 120))):
        (root / "photos" / folder).mkdir(parents=True)
        for i in range(2):
            buffer = io.BytesIO()
            Image.new("RGB", (32, 24), (colour[0], colour[1] + 30 * i, colour[2])).save(buffer, "JPEG")
            (root / "photos" / folder / f"{i}.jpg").write_bytes(buffer.getvalue())
    out = root / "images.lance"
    assert main(["load", "images", str(root / "photos"), "--out", str(out)]) == 0
    return out


LOADER_SHAPES: dict[str, Callable[[Path], Path]] = {
    "crypticbio": _crypticbio, "inquire-rerank": _inquire, "inat-coobserved": _coobserved, "images": _images,
}
"""Source name -> a writer of a small dataset in its shape under a folder (returns the dataset's path)."""
