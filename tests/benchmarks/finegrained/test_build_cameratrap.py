"""``cladebench build cameratrap`` on a planted pair of collections (and an excluded third), served from 127.0.0.1.

The collections (:mod:`helpers.cameratrap_planted`) are written exactly to the published formats, every selected
image planted with the outcome it must get, so the kept set and the count per reason are known in advance, per
collection.
"""

from __future__ import annotations

import io
import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from cladebench import store
from cladebench.benchmarks.finegrained.cameratrap.build import build_cameratrap
from cladebench.benchmarks.finegrained.cameratrap.config import CameraTrapBuildConfig, Collection
from cladebench.benchmarks.finegrained.cameratrap.megadetector import read_detections, read_detector_run
from cladebench.benchmarks.finegrained.cameratrap.records import (
    BadRecords,
    labelled_images,
    read_categories,
    read_images,
)
from cladebench.benchmarks.finegrained.cameratrap.screening import REASONS
from cladebench.benchmarks.finegrained.cameratrap.table import row_uuid
from cladebench.cli import main
from cladebench.errors import CladebenchError
from cladebench.store.left_out import LEFT_OUT_FILE, left_out_counts, left_out_lines, read_left_out
from helpers.cameratrap_planted import EXPECTED, KEPT, REAL, planted_collections, tiny_fgc


@pytest.fixture
def planted(tmp_path: Path):
    with planted_collections(tmp_path) as planted:
        yield planted


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


def test_the_left_out_images_are_the_one_left_out_record_and_info_shows_them(planted, capsys) -> None:
    root, cohort_path, taxonomy, _host = planted
    out = root / "cohort-out"
    assert main(["build", "cameratrap", str(cohort_path), "--out", str(out), "--taxonomy", str(taxonomy),
                 "--download-dir", str(root / "downloads"), "--workers", "0", "--no-progress"]) == 0
    records = read_left_out(out)
    expected = sum((Counter({r: k for r, k in reasons.items() if r != "kept"}) for reasons in EXPECTED.values()),
                   Counter())
    assert Counter(r.reason for r in records) == expected
    assert {r.stage for r in records if r.reason == "person_detected"} == {"screen"}
    lines = left_out_lines(left_out_counts(records), LEFT_OUT_FILE)
    assert "\n".join(lines) in (out / "README.md").read_text()
    capsys.readouterr()
    assert main(["info", str(out / "data" / "challenges.lance"), "--no-fingerprint"]) == 0
    assert "\n".join(lines[1:]) in capsys.readouterr().out


def test_a_collection_whose_image_folder_is_missing_is_refused_naming_it(planted, capsys) -> None:
    root, cohort_path, taxonomy, host = planted
    shutil.rmtree(root / "nacti-images")
    out = root / "cohort-out"
    rc = main(["build", "cameratrap", str(cohort_path), "--out", str(out), "--taxonomy", str(taxonomy),
               "--download-dir", str(root / "downloads"), "--workers", "0", "--no-progress"])
    error = capsys.readouterr().err
    assert rc == 1 and f"collection 'nacti': its images folder {root / 'nacti-images'} does not exist" in error
    assert not out.exists() and host.requests == Counter()  # refused before anything was fetched


def test_a_fetched_file_of_the_wrong_kind_is_named_by_its_url(planted, capsys) -> None:
    root, cohort_path, taxonomy, host = planted
    metadata_url = host.url("/meta/nacti.json.gz")
    cohort_path.write_text(cohort_path.read_text().replace(host.url("/md/nacti.json"), metadata_url))
    rc = main(["build", "cameratrap", str(cohort_path), "--out", str(root / "cohort-out"), "--taxonomy",
               str(taxonomy), "--download-dir", str(root / "downloads"), "--workers", "0", "--no-progress"])
    error = capsys.readouterr().err
    assert rc == 4 and f"{metadata_url}: no detection_categories" in error and "downloads" not in error


def test_a_second_run_over_the_same_out_is_refused_without_overwrite(planted) -> None:
    root, cohort_path, taxonomy, _ = planted
    config = CameraTrapBuildConfig(cohort=cohort_path, out=root / "o", taxonomy=taxonomy,
                                   download_dir=root / "downloads", workers=0, progress=False)
    build_cameratrap(config)
    with pytest.raises(CladebenchError, match="already exists"):
        build_cameratrap(config)


def test_append_to_a_built_fgc_dataset_adds_one_version_and_keeps_the_bookkeeping(planted, tiny_model: str) -> None:
    root, cohort_path, taxonomy, _ = planted
    fgc = tiny_fgc(root, tiny_model)
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
    # A confidence outside [0, 1] is unreadable: kept as None (it may drop an image, never keep one), and counted.
    (detection,) = read_detections(old, {"a.jpg"}, run, bad)["a.jpg"].detections
    assert (detection.category, detection.conf, detection.bbox) == ("animal", None, None)
    assert bad.counts == Counter({"detection_bad_conf": 1, "detection_bad_bbox": 1})


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
