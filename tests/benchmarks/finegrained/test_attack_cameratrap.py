"""``cladebench build cameratrap`` attacked: hostile records, hostile file names, broken files, the real LILA
camera-trap images with boxes from their published labels, and appends that are interrupted or run twice at once.

Each test states what a user must get: a malformed record counted and never keeping an image it should not, a file
name that never reaches outside the image root, one line and the documented exit code for a broken file, and an
appended dataset that is either whole (rows, tag, counts, sidecars, indices, ``build.json``, card) or exactly as it
was before, whatever happened in between.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.benchmarks.finegrained.cameratrap import append as appending
from cladebench.benchmarks.finegrained.cameratrap.build import build_cameratrap
from cladebench.benchmarks.finegrained.cameratrap.config import CameraTrapBuildConfig, parse_cohort
from cladebench.benchmarks.finegrained.cameratrap.megadetector import read_detections, read_detector_run
from cladebench.benchmarks.finegrained.cameratrap.records import BadRecords
from cladebench.benchmarks.finegrained.cameratrap.screening import screen
from cladebench.cli import main
from cladebench.paths import held_lock
from helpers.cameratrap_planted import REAL, det, jpeg, md_output, planted_collections, tiny_fgc, write_taxonomy

PEROMYSCUS = {"name": "c", "challenge_group": "Peromyscus", "taxon": "genus:Peromyscus", "labels": ["peromyscus"]}


def _cohort(tmp_path: Path, images: str, metadata: dict, detections: dict) -> Path:
    (tmp_path / "meta.json").write_text(json.dumps(metadata))
    (tmp_path / "md.json").write_text(json.dumps(detections))
    cohort = {**PEROMYSCUS, "collections": [{"name": "local", "metadata": "meta.json", "detections": "md.json",
                                             "images": images}]}
    path = tmp_path / "cohort.json"
    path.write_text(json.dumps(cohort))
    return path


def _cct(file_names: dict[str, str]) -> dict:
    """COCO Camera Traps metadata: every image (id -> file name) labelled peromyscus."""
    return {"info": {"version": "1", "description": "attack"},
            "categories": [{"id": 0, "name": "empty"}, {"id": 1, "name": "peromyscus"}],
            "annotations": [{"id": f"a-{i}", "image_id": i, "category_id": 1} for i in file_names],
            "images": [{"id": i, "file_name": name, "location": "L", "seq_id": f"s-{i}"}
                       for i, name in file_names.items()]}


def _build(tmp_path: Path, cohort: Path, *extra: str) -> int:
    return main(["build", "cameratrap", str(cohort), "--out", str(tmp_path / "out"), "--taxonomy",
                 str(write_taxonomy(tmp_path / "taxa.parquet")), "--workers", "0", "--no-progress", *extra])


# --- detections that break the format ------------------------------------------------------------------------


def test_a_person_with_an_unreadable_confidence_drops_the_image(tmp_path: Path) -> None:
    """conf as a string, or outside [0, 1]: the detection is counted as bad and, for a person, still drops the image;
    for an animal it never keeps one."""
    path = tmp_path / "md.json"
    path.write_text(json.dumps(md_output([
        {"file": "p.jpg", "detections": [{"category": "2", "conf": "0.9", "bbox": [0.1, 0.1, 0.2, 0.2]},
                                         det("1", 0.95)]},
        {"file": "a.jpg", "detections": [{"category": "1", "conf": 1.7, "bbox": [0.1, 0.1, 0.2, 0.2]}]},
    ])))
    bad = BadRecords()
    found = read_detections(path, {"p.jpg", "a.jpg"}, read_detector_run(path), bad)
    cohort = parse_cohort({**PEROMYSCUS, "collections": [{"name": "x", "metadata": "m", "detections": "d",
                                                          "images": "i"}]}, tmp_path)
    assert screen(found["p.jpg"], cohort) == ("person_detected", None)
    assert screen(found["a.jpg"], cohort) == ("no_animal_detection", None)
    assert bad.counts["detection_bad_conf"] == 2


def test_boxes_outside_the_unit_square_are_counted(tmp_path: Path) -> None:
    """The format's boxes are normalised; one in pixels, or reaching past the image, is a bad box (still screened)."""
    path = tmp_path / "md.json"
    path.write_text(json.dumps(md_output([
        {"file": "px.jpg", "detections": [det("1", 0.9, [120.0, 40.0, 300.0, 200.0])]},
        {"file": "neg.jpg", "detections": [det("1", 0.9, [-0.2, 0.1, 0.3, 0.3])]},
        {"file": "past.jpg", "detections": [det("1", 0.9, [0.8, 0.1, 0.5, 0.3])]},
        {"file": "ok.jpg", "detections": [det("1", 0.9, [0.0, 0.02083, 1.0, 0.6816])]},
    ])))
    bad = BadRecords()
    found = read_detections(path, {"px.jpg", "neg.jpg", "past.jpg", "ok.jpg"}, read_detector_run(path), bad)
    assert bad.counts == {"detection_bad_bbox": 3}
    assert [found[f].detections[0].bbox for f in ("px.jpg", "neg.jpg", "past.jpg")] == [None, None, None]
    assert found["ok.jpg"].detections[0].bbox == (0.0, 0.02083, 1.0, 0.6816)
    assert all(found[f].detections[0].conf == 0.9 for f in found)


def test_detections_without_an_images_array_are_a_schema_error(tmp_path: Path, capsys) -> None:
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.jpg").write_bytes(jpeg(1))
    detections = {"info": {"format_version": "1.4"}, "detection_categories": {"1": "animal"},
                  "images": {"file": "a.jpg", "detections": []}}
    assert _build(tmp_path, _cohort(tmp_path, "images", _cct({"a": "a.jpg"}), detections)) == 4
    err = capsys.readouterr().err.strip()
    assert "no top-level 'images' array" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ['{"categories": [{"id": 1, "name": "peromyscus"}], "annotations": [',
                                  '{"categories": [{"id": 1, "name": "peromyscus", "x": NaN}]}'])
def test_broken_metadata_is_one_line_and_exit_1(tmp_path: Path, capsys, text: str) -> None:
    """yajl's parse errors run over three lines (message, text, caret); the user gets the first, once."""
    (tmp_path / "md.json").write_text(json.dumps(md_output([])))
    (tmp_path / "images").mkdir()
    cohort = _cohort(tmp_path, "images", {}, md_output([]))
    (tmp_path / "meta.json").write_text(text)
    assert _build(tmp_path, cohort) == 1
    err = capsys.readouterr().err.strip()
    assert "not valid JSON" in err and len(err.splitlines()) == 1, err


# --- file names ----------------------------------------------------------------------------------------------


def test_file_names_that_leave_the_image_root_are_counted_and_never_read(tmp_path: Path) -> None:
    images = tmp_path / "images"
    (images / "cams").mkdir(parents=True)
    (images / "cams" / "ok.jpg").write_bytes(jpeg(1))
    (images / "cams" / "odd |<b>| name.jpg").write_bytes(jpeg(2))
    (tmp_path / "secret.jpg").write_bytes(jpeg(3))  # a valid image outside the image root
    names = {"ok": "cams/ok.jpg", "odd": "cams/odd |<b>| name.jpg", "up": "../secret.jpg",
             "deep": "cams/../../secret.jpg", "win": "cams\\..\\..\\secret.jpg", "nul": "cams/ok.jpg\x00.png",
             "abs": str(tmp_path / "secret.jpg")}
    detections = md_output([{"file": name, "detections": [det("1", 0.9)]} for name in names.values()])
    assert _build(tmp_path, _cohort(tmp_path, "images", _cct(names), detections)) == 0
    summary = json.loads((tmp_path / "out" / "build.json").read_text())
    assert summary["bad_records"]["local"]["metadata"]["counts"] == {"image_unsafe_file_name": 4}
    outcomes = {r["image_id"]: r["reason"] for r in pq.read_table(tmp_path / "out" / "candidates.parquet").to_pylist()}
    assert outcomes == {"ok": None, "odd": None, "up": "image_record_missing", "deep": "image_record_missing",
                        "win": "image_record_missing", "nul": "image_record_missing",
                        # an absolute file name is read as relative to the root: not there, so not retrieved
                        "abs": "image_not_retrieved"}
    rows = store.read(store.open_dataset(tmp_path / "out" / "data/challenges.lance")).to_pylist()
    assert sorted(r["source_id"] for r in rows) == ["odd", "ok"]


# --- the real camera-trap images ---------------------------------------------------------------------------


def test_real_lila_images_with_boxes_from_their_published_labels(tmp_path: Path) -> None:
    """The 14 LILA images of cameratrapai's test data (CDLA-Permissive), with MegaDetector output made from the
    published label file's boxes: people and vehicles dropped, blanks screened out, the truncated JPEG
    image_decode_failed, the grayscale, CMYK and EXIF-rotated copies kept upright as RGB."""
    if not (REAL / "labels_from_classifier_test.csv").is_file():
        pytest.skip("../shared/realdata/cameratrapai is not here")
    with open(REAL / "labels_from_classifier_test.csv", newline="") as handle:
        labels = list(csv.DictReader(handle))
    entries, names = [], {}
    for row in labels:
        name = row["filepath"].removeprefix("test_data/")
        names[Path(name).stem] = name
        box = [float(row[k]) for k in ("bbox_xmin", "bbox_ymin", "bbox_width", "bbox_height")] \
            if row["bbox_xmin"] else None
        kind = row["common_name"]
        category = {"human": "2", "vehicle": "3"}.get(kind, "1")
        found = [] if kind == "blank" or box is None else [det(category, 0.9, box)]
        entries.append({"file": "test_data\\" + name.replace("/", "\\"), "detections": found})
    metadata = _cct({stem: f"test_data/{name}" for stem, name in names.items()})
    images = tmp_path / "images"
    images.mkdir()
    (images / "test_data").symlink_to(REAL)
    assert _build(tmp_path, _cohort(tmp_path, "images", metadata, md_output(entries))) == 0
    summary = json.loads((tmp_path / "out" / "build.json").read_text())
    assert summary["bad_records"]["local"]["detections"]["counts"] == {}  # every published box is normalised
    outcomes = {r["image_id"]: r["reason"] for r in pq.read_table(tmp_path / "out" / "candidates.parquet").to_pylist()}
    assert outcomes.pop("human") == "person_detected" and outcomes.pop("vehicle") == "vehicle_detected"
    assert outcomes.pop("african_elephants_truncated_file") == "image_decode_failed"
    assert {outcomes.pop(b) for b in ("blank", "blank2", "blank3")} == {"no_animal_detection"}
    assert set(outcomes.values()) == {None}
    total = summary["accounting"]["total"]
    assert (total["selected"], total["retrieved"], total["screened_out"], total["kept"]) == (14, 13, 5, 8)
    rows = {r["source_id"]: r for r in store.read(store.open_dataset(tmp_path / "out/data/challenges.lance"))
            .to_pylist()}
    rotated = rows["african_elephants_with_exif_orientation"]
    assert (rotated["original_width"], rotated["original_height"]) == (2048, 1536)  # stored 1536x2048, EXIF 6
    assert all((r["width"], r["height"]) == (720, 540) for k, r in rows.items() if k.startswith("african"))


# --- appends interrupted, and at once ----------------------------------------------------------------------------


def _append_args(root: Path, cohort: Path, taxonomy: Path, fgc: Path, out: str) -> list[str]:
    return ["build", "cameratrap", str(cohort), "--out", str(root / out), "--append-to", str(fgc), "--taxonomy",
            str(taxonomy), "--download-dir", str(root / "downloads"), "--workers", "0", "--no-progress",
            "--device", "cpu"]


def _state(fgc: Path) -> dict:
    """What a reader of the folder would count: rows, tags, the embedding counts, the appends listed."""
    dataset = store.open_dataset(fgc / "data/challenges.lance")
    field = store.embedding_metadata(dataset.schema.field("emb_tiny"))
    return {"rows": dataset.count_rows(), "tags": sorted(store.tags(dataset)),
            "field_valid": int(field["valid_rows"]),
            "sidecars": [json.loads((p / "embedding_models.json").read_text())["emb_tiny"]["valid_rows"]
                         for p in (fgc, fgc / "data/challenges.lance")],
            "appended": [a["cohort"] for a in json.loads((fgc / "build.json").read_text()).get("appended", [])],
            "card_sections": (fgc / "README.md").read_text().count("(appended)"),
            "unindexed": sum(dataset.stats.index_stats(i["name"])["num_unindexed_rows"]
                             for i in store.indices(dataset)),
            "journal": (fgc / appending.JOURNAL_DIR).exists()}


DONE = {"rows": 8, "tags": ["cameratrap-peromyscus-ct"], "field_valid": 8, "sidecars": [8, 8],
        "appended": ["peromyscus-ct"], "card_sections": 1, "unindexed": 0, "journal": False}
UNTOUCHED = {"rows": 4, "tags": [], "field_valid": 4, "sidecars": [4, 4], "appended": [], "card_sections": 0,
             "unindexed": 0, "journal": False}


@pytest.fixture
def fgc_and_cohort(tmp_path: Path, tiny_model: str):
    with planted_collections(tmp_path) as (root, cohort, taxonomy, _host):
        fgc = tiny_fgc(root, tiny_model)
        old = store.read(store.open_dataset(fgc / "data/challenges.lance")).to_pylist()
        yield root, cohort, taxonomy, fgc, old


def _old_rows_untouched(fgc: Path, old: list[dict]) -> None:
    now = {r["uuid"]: r for r in store.read(store.open_dataset(fgc / "data/challenges.lance")).to_pylist()}
    for row in old:
        assert {k: v for k, v in now[row["uuid"]].items() if k in row} == row


def test_an_append_killed_after_its_rows_is_undone_by_the_next_run(fgc_and_cohort, monkeypatch) -> None:
    """A kill -9 after the rows were committed (and before the tag) leaves the rows with nothing that counts them as
    appended; the next run restores the version before, then appends whole. The kill is stood for by an error in
    the last step with the immediate rollback switched off (a kill -9 runs no rollback)."""
    root, cohort, taxonomy, fgc, old = fgc_and_cohort
    real_roll_back = appending.roll_back

    def killed(*args: object) -> None:
        raise RuntimeError("killed")

    monkeypatch.setattr(appending, "tag_appended", killed)
    monkeypatch.setattr(appending, "roll_back", lambda folder, dataset: None)
    config = CameraTrapBuildConfig(cohort=cohort, out=root / "first", append_to=fgc, taxonomy=taxonomy,
                                   download_dir=root / "downloads", workers=0, progress=False, device="cpu")
    with pytest.raises(RuntimeError, match="killed"):
        build_cameratrap(config)
    half = _state(fgc)
    assert half["journal"] and half["rows"] == 8 and half["tags"] == []  # not counted as done: journal, no tag
    monkeypatch.undo()
    assert appending.roll_back is real_roll_back

    assert main(_append_args(root, cohort, taxonomy, fgc, "second")) == 0
    assert _state(fgc) == DONE
    _old_rows_untouched(fgc, old)
    undone = json.loads((root / "second" / "build.json").read_text())["append"]["rolled_back"]
    assert undone["cohort"] == "peromyscus-ct" and undone["version_abandoned"] > undone["version_before"]
    assert not list(fgc.glob(appending.JOURNAL_DIR + "*"))


def test_ctrl_c_mid_append_leaves_the_dataset_as_it_was(fgc_and_cohort, monkeypatch) -> None:
    root, cohort, taxonomy, fgc, old = fgc_and_cohort
    real = appending.update_bookkeeping

    def interrupted(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(appending, "update_bookkeeping", interrupted)
    assert main(_append_args(root, cohort, taxonomy, fgc, "first")) == 130
    assert _state(fgc) == UNTOUCHED
    _old_rows_untouched(fgc, old)
    assert not (root / "first").exists()
    monkeypatch.undo()
    assert main(_append_args(root, cohort, taxonomy, fgc, "second")) == 0
    assert _state(fgc) == DONE


def test_an_append_while_another_holds_the_folder_is_refused(fgc_and_cohort, capsys) -> None:
    """Two appends at once would both pass the 'not appended yet' check; the second is refused, exit 1."""
    root, cohort, taxonomy, fgc, _old = fgc_and_cohort
    version = store.open_dataset(fgc / "data/challenges.lance").version
    with held_lock(fgc, wait_s=0):  # what a running append holds
        assert main(_append_args(root, cohort, taxonomy, fgc, "second")) == 1
    assert "is appending to it now" in capsys.readouterr().err
    assert store.open_dataset(fgc / "data/challenges.lance").version == version
    assert _state(fgc) == UNTOUCHED and not (root / "second").exists()
