"""CrypticBio: the real benchmark CSV read exactly, clear errors on bad values, and a build over a local server."""

from __future__ import annotations

import csv
import datetime
import gzip
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.benchmarks.crypticbio.source import (
    CSV_COLUMNS,
    build_crypticbio_dataset,
    failures_path_for,
    photo_source_id,
    read_cryptic_lookup,
    read_crypticbio,
    read_stats,
    subset_name,
)
from cladebench.curate.fetch import DownloadConfig
from cladebench.curate.sources import get_source
from cladebench.errors import CladebenchError, SchemaError
from helpers.crypticbio_rows import GOOD_ROW, write_csv
from helpers.http_local import serving
from helpers.photo_host import PhotoHost, photo

COMMON = "Final_Multimodal_Group_11/input/CrypticBio-Common.csv"
LOOKUP = "Final_Multimodal_Group_11/input/small_lookup_cryptic_group.tsv"


@pytest.fixture(scope="module")
def common(realdata: Callable[[str], Path]):
    return read_crypticbio(realdata(COMMON), lookup=realdata(LOOKUP))


# --- the real CSV --------------------------------------------------------------------------------


def test_real_common_csv_is_read_exactly(common, realdata: Callable[[str], Path]) -> None:
    with open(realdata(COMMON), newline="", encoding="utf-8") as handle:
        raw = list(csv.DictReader(handle))
    assert common.num_rows == len(raw) == 15_801
    assert common.column("scientific_name").to_pylist() == [r["scientificName"] for r in raw]
    assert common.column("source_url").to_pylist() == [r["url"] for r in raw]
    assert len(set(common.column("uuid").to_pylist())) == 15_801
    species = Counter(common.column("scientific_name").to_pylist())
    assert len(species) == 158 and sorted(Counter(species.values()).items()) == [(100, 157), (101, 1)]
    assert common.column("source_dataset").unique().to_pylist() == ["crypticbio-common"]
    assert common.column("license_name").null_count == 15_801


def test_real_common_taxonomic_groups_and_squamata(common) -> None:
    groups = Counter(common.column("taxonomic_group").to_pylist())
    assert groups == {"Aves": 2500, "Gastropoda": 2401, "Agaricomycetes": 2300, "Insecta": 2300,
                      "Magnoliopsida": 2300, "Arachnida": 2200, "Squamata": 1800}
    squamata = common.filter(pc.equal(common.column("taxonomic_group"), "Squamata"))
    assert squamata.num_rows == 1800
    assert squamata.column("class").unique().to_pylist() == ["Squamata"]
    assert squamata.column("order").null_count == 1800
    assert common.column("order").null_count == 1800  # no other row lacks an order
    for rank in ("kingdom", "phylum", "class", "family", "genus", "species"):
        assert common.column(rank).null_count == 0, rank
    assert {"cryptic_group", "taxonomic_group"} <= set(store.group_columns(common.schema))


def test_real_common_names_dates_coordinates_and_ids(common) -> None:
    first = common.slice(0, 1).to_pylist()[0]
    assert (first["genus"], first["species"], first["scientific_name"]) == ("Latrodectus", "Latrodectus geometricus",
                                                                            "Latrodectus geometricus")
    assert first["common_name"] == "brown widow spider"
    assert first["vernacular_names"] == ["brown widow spider", "brown widow", "brown buttonspider",
                                         "brown button spider", "brown button"]
    assert first["observed_on"] == datetime.date(2018, 9, 5)
    assert (first["latitude"], first["longitude"]) == (25.838715, -100.204402)
    assert first["source_id"] == "inaturalist/photos/99353780"

    assert common.column("observed_on").null_count == 0
    years = pc.year(common.column("observed_on"))
    assert (pc.min(years).as_py(), pc.max(years).as_py()) == (1970, 2025)
    no_place = common.filter(pc.is_null(common.column("latitude")))
    assert no_place.num_rows == 4 and no_place.column("longitude").null_count == 4
    stats = read_stats(common)
    assert (stats["rows"], stats["missing_date"], stats["missing_coordinates"]) == (15_801, 0, 4)

    hosts = Counter(s.split("/photos/")[0] for s in common.column("source_id").to_pylist())
    assert hosts == {"inaturalist": 13_515, "observation.org": 2_286}
    assert len(set(common.column("source_id").to_pylist())) == 15_801


def test_real_lookup_attaches_a_cryptic_group_to_every_anchor(common, realdata: Callable[[str], Path]) -> None:
    lookup = read_cryptic_lookup(realdata(LOOKUP))
    assert len(lookup) == 261 and sum(len(g) == 1 for g in lookup.values()) == 8
    assert lookup["Mimetus puritanus"] == ("Mimetus puritanus", "Parasteatoda tepidariorum", "Neoscona arabesca")
    assert common.column("cryptic_group").null_count == 0 and read_stats(common)["without_cryptic_group"] == 0
    per_species = {}
    for name, group in zip(common.column("scientific_name").to_pylist(), common.column("cryptic_group").to_pylist(),
                           strict=True):
        per_species.setdefault(name, group)
        assert group == per_species[name] and group[0] == name
    assert len(per_species) == 158
    assert all(tuple(g) == lookup[s] for s, g in per_species.items())
    assert per_species["Larinioides cornutus"] == ["Larinioides cornutus"]  # an anchor with no confusables


# --- small synthetic CSVs ------------------------------------------------------------------------


@pytest.mark.parametrize(("field", "value", "message"), [
    ("year", "abc", "field 'year': 'abc' is not a number"),
    ("month", "2.5", "field 'month': '2.5' is not a whole number"),
    ("month", "13.0", "field 'month': '13.0' is not a month"),
    ("day", "30.0", "field 'day': '30.0' is not a day of 2021-02"),
    ("decimalLatitude", "200", "field 'decimalLatitude': '200' is outside [-90, 90]"),
    ("decimalLongitude", "-180.5", "field 'decimalLongitude': '-180.5' is outside [-180, 180]"),
    ("decimalLongitude", "nan", "field 'decimalLongitude': 'nan' is not a finite number"),
    ("decimalLongitude", "", "field 'decimalLongitude': missing while the other coordinate is given"),
    ("vernacularName", "['unclosed", "field 'vernacularName'"),
    ("url", "", "field 'url': empty"),
    ("scientificName", " ", "field 'scientificName': empty"),
    ("genus", "Lacerta", "field 'scientificName': 'Podarcis muralis' is not in the row's genus 'Lacerta'"),
    ("kingdom", "Plantae", "field 'scientificName': 'Podarcis muralis' is filed under kingdom 'Plantae' here and "
                           "under 'Animalia' at row 1"),
])
def test_bad_values_name_file_row_and_field(tmp_path: Path, field: str, value: str, message: str) -> None:
    path = write_csv(tmp_path / "CrypticBio-Invasive.csv", [GOOD_ROW, GOOD_ROW | {field: value}])
    with pytest.raises(SchemaError) as info:
        read_crypticbio(path)
    text = str(info.value)
    # Row 2 is the second row after the header, as a spreadsheet user counts rows of data.
    assert text.startswith(f"{path}: row 2 (1-based data row), ") and message in text


def test_bad_structure_is_an_error(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "a.csv", [GOOD_ROW], tuple(c for c in CSV_COLUMNS if c != "url"))
    with pytest.raises(SchemaError, match=r"missing column\(s\) \['url'\]"):
        read_crypticbio(path)
    path = tmp_path / "b.csv"
    write_csv(path, [GOOD_ROW])
    path.write_text(path.read_text() + "Felis catus,2020.0\n")
    with pytest.raises(SchemaError, match=r"row 2 \(1-based data row\): fewer fields than the header's 14"):
        read_crypticbio(path)
    lookup = tmp_path / "lookup.tsv"
    lookup.write_text("Podarcis muralis\tPodarcis liolepis\nno tab here\n")
    with pytest.raises(SchemaError, match="line 2: expected 'anchor<TAB>"):
        read_cryptic_lookup(lookup)


def test_a_header_naming_a_column_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "CrypticBio-Common.csv"
    header = ",".join([*CSV_COLUMNS, "genus"])
    path.write_text(header + "\n" + ",".join([f'"{GOOD_ROW[c]}"' for c in CSV_COLUMNS] + ["Lacerta"]) + "\n")
    with pytest.raises(SchemaError, match="the header names 'genus' more than once"):
        read_crypticbio(path)


def test_a_gzip_csv_is_read_decompressed_whatever_its_name(tmp_path: Path) -> None:
    plain = write_csv(tmp_path / "CrypticBio-Common.csv", [GOOD_ROW, GOOD_ROW | {"url": GOOD_ROW["url"] + "?2"}])
    for name in ("CrypticBio-Common.csv.gz", "compressed/CrypticBio-Common.csv"):
        packed = tmp_path / name
        packed.parent.mkdir(exist_ok=True)
        packed.write_bytes(gzip.compress(plain.read_bytes()))
        assert read_crypticbio(packed, subset="common").equals(read_crypticbio(plain, subset="common"))
    cut = tmp_path / "cut" / "CrypticBio-Common.csv"
    cut.parent.mkdir()
    cut.write_bytes(gzip.compress(plain.read_bytes())[:-12])
    with pytest.raises(SchemaError, match=r"cannot read .*: a gzip file that is cut short or damaged"):
        read_crypticbio(cut)


def test_missing_date_parts_give_a_null_date_and_are_counted(tmp_path: Path) -> None:
    rows = [GOOD_ROW, GOOD_ROW | {"day": ""}, GOOD_ROW | {"year": "", "month": "", "day": ""},
            GOOD_ROW | {"decimalLatitude": "", "decimalLongitude": ""}]
    table = read_crypticbio(write_csv(tmp_path / "CrypticBio-CommonUnseen.csv", rows))
    assert table.column("observed_on").to_pylist() == [datetime.date(2021, 2, 14), None, None,
                                                       datetime.date(2021, 2, 14)]
    stats = read_stats(table)
    assert (stats["missing_date"], stats["missing_coordinates"], stats["repeated_url"]) == (2, 1, 3)
    assert stats["source_dataset"] == "crypticbio-common-unseen" and stats["without_cryptic_group"] == 0
    assert len(set(table.column("uuid").to_pylist())) == 4  # a repeated URL still gets its own uuid
    assert table.column("cryptic_group").null_count == 4  # no lookup given


def test_counts_are_numbers_even_for_one_row(tmp_path: Path) -> None:
    stats = read_stats(read_crypticbio(write_csv(tmp_path / "CrypticBio-Endangered.csv", [GOOD_ROW]), lookup={}))
    assert stats == {"file": "CrypticBio-Endangered.csv", "source_dataset": "crypticbio-endangered", "rows": 1,
                     "lookup": "mapping", "missing_date": 0, "missing_coordinates": 0, "without_species": 0,
                     "without_cryptic_group": 1, "repeated_url": 0}


def test_names_and_ids() -> None:
    assert subset_name("CrypticBio-Common.csv") == "common"
    assert subset_name("/x/CrypticBio-CommonUnseen.csv") == "common-unseen"
    assert subset_name("crypticbio_endangered.csv") == "endangered"
    assert photo_source_id("https://observation.org/photos/45369181.jpg") == "observation.org/photos/45369181"
    assert photo_source_id("https://static.inaturalist.org/photos/5/medium.JPG") == "inaturalist/photos/5"
    assert photo_source_id("https://example.org/p.jpg") == "https://example.org/p.jpg"
    assert get_source("crypticbio").load("read_crypticbio") is read_crypticbio


# --- building a dataset against a local server ---------------------------------------------------


@pytest.fixture
def photos() -> Iterator[PhotoHost]:
    server = PhotoHost({"/1.jpg": photo("JPEG", 1), "/2.png": photo("PNG", 2), "/3.gif": photo("GIF", 3)})
    with serving(server):
        yield server


FAST = DownloadConfig(concurrency=2, connect_timeout_s=1.0, read_timeout_s=1.0, max_attempts=2,
                      backoff_base_s=0.01, backoff_max_s=0.02)


def synthetic_csv(tmp_path: Path, photos: PhotoHost) -> Path:
    rows = [
        GOOD_ROW | {"url": photos.url("/1.jpg")},
        GOOD_ROW | {"url": photos.url("/gone.jpg"), "scientificName": "Podarcis liolepis"},
        GOOD_ROW | {"url": photos.url("/2.png"), "class": "Aves", "order": "Passeriformes", "family": "Paridae",
                    "genus": "Parus", "scientificName": "Parus major", "vernacularName": "['great tit']"},
        GOOD_ROW | {"url": photos.url("/3.gif"), "decimalLatitude": "", "decimalLongitude": ""},
    ]
    return write_csv(tmp_path / "CrypticBio-Common.csv", rows)


def test_build_writes_fetched_rows_and_records_the_failed_one(tmp_path: Path, photos: PhotoHost) -> None:
    csv_path = synthetic_csv(tmp_path, photos)
    lookup = {"Podarcis muralis": ["Podarcis liolepis", "Podarcis muralis"], "Parus major": []}
    out = tmp_path / "crypticbio.lance"
    build = build_crypticbio_dataset(csv_path, out, lookup=lookup, download_config=FAST,
                                     download_dir=tmp_path / "downloads")
    assert (build.rows, build.written, build.failed, build.failed_by_reason) == (4, 3, 1, {"http_404": 1})
    assert build.read_stats["missing_coordinates"] == 1

    table = store.open_dataset(out).to_table()
    assert table.num_rows == 3
    by_url = {r["source_url"]: r for r in table.to_pylist()}
    for path, fmt in (("/1.jpg", "jpeg"), ("/2.png", "png"), ("/3.gif", "gif")):
        row = by_url[photos.url(path)]
        assert row["image"] == photos.photos[path]
        assert row["image_sha256"] == hashlib.sha256(photos.photos[path]).hexdigest()
        assert row["image_format"] == fmt
    assert by_url[photos.url("/1.jpg")]["cryptic_group"] == ["Podarcis muralis", "Podarcis liolepis"]
    assert by_url[photos.url("/2.png")]["cryptic_group"] == ["Parus major"]
    assert by_url[photos.url("/2.png")]["taxonomic_group"] == "Aves"
    assert by_url[photos.url("/3.gif")]["latitude"] is None

    failures = pq.read_table(build.failures_path).to_pylist()
    assert build.failures_path == failures_path_for(out) == tmp_path / "crypticbio.lance.failures.parquet"
    assert len(failures) == 1
    assert failures[0] | {"uuid": None} == {
        "row": 2, "uuid": None, "source_url": photos.url("/gone.jpg"), "scientific_name": "Podarcis liolepis",
        "taxonomic_group": "Squamata", "reason": "http_404", "detail": "HTTP 404 Not Found", "status": 404,
        "exception": None, "attempts": 1,
    }

    # A second build (another output) takes every fetched photo from the download store.
    before = Counter(photos.requests)
    again = build_crypticbio_dataset(csv_path, tmp_path / "again.lance", download_config=FAST,
                                     download_dir=tmp_path / "downloads")
    assert (again.download.ok, again.download.cached, again.written) == (0, 3, 3)
    assert photos.requests - before == Counter({"/gone.jpg": 1})
    assert store.fingerprint(store.open_dataset(tmp_path / "again.lance")) == store.fingerprint(
        store.open_dataset(out))


def test_build_refuses_an_existing_output_before_downloading(tmp_path: Path, photos: PhotoHost) -> None:
    out = tmp_path / "taken.lance"
    out.mkdir()
    (out / "something").write_text("x")
    with pytest.raises(CladebenchError, match="already exists"):
        build_crypticbio_dataset(synthetic_csv(tmp_path, photos), out, download_config=FAST,
                                 download_dir=tmp_path / "downloads")
    assert photos.requests == Counter()


def test_build_with_nothing_fetched_writes_no_dataset(tmp_path: Path, photos: PhotoHost) -> None:
    csv_path = write_csv(tmp_path / "CrypticBio-Common.csv", [GOOD_ROW | {"url": photos.url("/nope.jpg")}])
    out = tmp_path / "empty.lance"
    with pytest.raises(CladebenchError, match="no photo of the 1 rows could be fetched"):
        build_crypticbio_dataset(csv_path, out, download_config=FAST, download_dir=tmp_path / "downloads")
    assert not out.exists()
    assert pq.read_table(failures_path_for(out)).column("reason").to_pylist() == ["http_404"]


def test_build_limit_keeps_the_first_rows(tmp_path: Path, photos: PhotoHost) -> None:
    build = build_crypticbio_dataset(synthetic_csv(tmp_path, photos), tmp_path / "one.lance", download_config=FAST,
                                     download_dir=tmp_path / "downloads", limit=1)
    assert (build.rows, build.written) == (1, 1)
    assert photos.requests == Counter({"/1.jpg": 1})


def test_load_verb_builds_the_dataset_and_reports_failures(tmp_path: Path, photos: PhotoHost,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    csv_path = synthetic_csv(tmp_path, photos)
    out = tmp_path / "loaded.lance"
    code = main(["load", "crypticbio", str(csv_path), "--out", str(out), "--download-dir", str(tmp_path / "dl"),
                 "--concurrency", "2", "--retries", "2"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "3 of 4 rows written" in printed and "http_404 1" in printed
    assert str(failures_path_for(out)) in printed
    assert store.open_dataset(out).count_rows() == 3
    assert main(["load", "crypticbio", str(csv_path), "--out", str(out)]) == 1  # never over an existing dataset
    capsys.readouterr()
    with pytest.raises(SystemExit) as unknown:
        main(["load", "crypticbi", str(csv_path), "--out", str(tmp_path / "x.lance")])
    assert unknown.value.code == 2
    assert "unknown source 'crypticbi'" in (err := capsys.readouterr().err) and "Did you mean 'crypticbio'?" in err
