"""iNat Co-Observed: Parquet files in the published schema (and with aliases) built into the store's pair shape,
divergence ranks checked against the lineages, photos fetched when only a URL is given, bad input refused."""

from __future__ import annotations

import datetime
import doctest
import hashlib
import io
import uuid as uuidlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from cladebench import store
from cladebench.benchmarks.coobserved import source as coobserved
from cladebench.benchmarks.coobserved.source import (
    IMAGE_COUNTS,
    ORGANISM_TYPE,
    READ_SCHEMA,
    ROW_COUNTS,
    UUID_NAMESPACE,
    build_inat_coobserved,
    failures_path_for,
    iter_inat_coobserved_batches,
    parse_divergence_rank,
    read_inat_coobserved,
    read_stats,
    row_uuid,
)
from cladebench.curate.fetch import DownloadConfig
from cladebench.curate.sources import get_source
from cladebench.errors import CladebenchError, SchemaError
from cladebench.taxonomy import RANK_COLUMNS
from helpers.coobserved_rows import (
    ALIAS_SCHEMA,
    ANEMONE,
    OAK,
    PUBLISHED_ORGANISM,
    PUBLISHED_SCHEMA,
    ROBIN,
    alias_rows,
    jpeg,
    organism,
    published_rows,
    write_published,
)
from helpers.http_local import serving
from helpers.photo_host import PhotoHost

# --- files in the published schema -----------------------------------------------------------------


@pytest.fixture
def published_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "inat-coobserved" / "data"
    write_published(folder / "train-00000-of-00002.parquet", published_rows())
    write_published(folder / "train-00001-of-00002.parquet", alias_rows(), ALIAS_SCHEMA)
    return tmp_path / "inat-coobserved"


# --- the built dataset ------------------------------------------------------------------------------


def test_build_maps_published_and_aliased_rows_into_the_pair_shape(published_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "coobserved.lance"
    build = build_inat_coobserved(published_dir, out)
    assert (build.rows, build.read, build.failed, build.fetch) == (4, 4, 0, None)
    table = store.open_dataset(out).to_table()
    rows = {r["source_id"]: r for r in table.to_pylist()}
    assert list(rows) == ["4047", "5000", "6001", "7000"]  # file order, then row order

    # Identity, images and the canonical columns a pair leaves null.
    published = {r["photo_id"]: r for r in published_rows()}
    for photo_id, row in rows.items():
        assert row["uuid"] == str(uuidlib.uuid5(UUID_NAMESPACE, photo_id)) == row_uuid(int(photo_id))
        assert row["image"] == jpeg(int(photo_id)) and row["image_format"] == "jpeg"
        assert row["image_sha256"] == hashlib.sha256(row["image"]).hexdigest()
        assert row["source_dataset"] == "inat-coobserved" and row["photo_id"] == int(photo_id)
        assert all(row[c] is None for c in (*RANK_COLUMNS, "scientific_name", "common_name", "taxon_id"))
        assert len(row["organisms"]) == 2
        Image.open(io.BytesIO(row["image"])).verify()
    assert rows["4047"]["image"] == published[4047]["image"]["bytes"]

    # Organisms: published fields kept, an epithet species joined to its genus (the binomial), scientific_name
    # as given.
    first, second = rows["4047"]["organisms"]
    assert first == {
        "observation_uuid": "00000000-0000-4000-8000-000000000001", "taxon_id": 1001,
        **dict(zip(RANK_COLUMNS, ANEMONE, strict=True)), "species": "Anthopleura elegantissima",
        "scientific_name": "Anthopleura elegantissima",
        "common_name": None, "observation_url": "https://www.inaturalist.org/observations/"
        "00000000-0000-4000-8000-000000000001", "taxon_url": "https://www.inaturalist.org/taxa/1001",
        "quality_grade": "research", "species_in_tol200m": True,
    }
    assert (second["genus"], second["species"], second["scientific_name"]) == (
        "Littorina", "Littorina scutulata", "Littorina scutulata")

    # Divergence ranks: normalised, checked against the lineages, a mismatch kept and recomputed beside it.
    ranks = {k: (r["divergence_rank"], r["divergence_rank_recomputed"]) for k, r in rows.items()}
    assert ranks == {"4047": ("phylum", "phylum"), "5000": ("order", "family"), "6001": ("kingdom", "kingdom"),
                     "7000": ("genus", "genus")}
    assert build.stats["divergence_rank_mismatch"] == 1
    assert build.stats["divergence_rank_mismatches"] == [
        {"file": "train-00000-of-00002.parquet", "row": 2, "photo_id": 5000, "published": "order",
         "recomputed": "family"}]
    assert build.stats["divergence_ranks"] == {"kingdom": 1, "phylum": 1, "order": 1, "genus": 1}

    # Provenance, place and date.
    row = rows["4047"]
    assert (row["license_name"], row["license_link"], row["license_raw"]) == (
        "cc-by", "https://creativecommons.org/licenses/by/4.0/", "CC-BY")
    assert row["attribution"] == "(c) Ken-ichi Ueda, CC-BY, via iNaturalist photo 4047"
    assert (row["observed_on"], row["latitude"], row["longitude"]) == (datetime.date(2009, 6, 14), 36.641014,
                                                                       -121.930046)
    assert (row["kingdom_pair"], row["class_pair"]) == ("Animalia + Animalia", "Anthozoa + Gastropoda")
    assert row["source_url"] == "https://inaturalist-open-data.s3.amazonaws.com/photos/4047/original.jpg"
    assert (row["observer_id"], row["observer_login"], row["observer_name"]) == (1, "kueda", "Ken-ichi Ueda")
    assert (row["n_photos_sharing_observation_pair"], row["in_tol200m"]) == (1, True)
    assert row["published_image_sha256"] == row["image_sha256"]
    row = rows["6001"]
    assert (row["license_name"], row["license_link"]) == ("cc0", "https://creativecommons.org/publicdomain/zero/1.0/")
    assert row["attribution"] == "Jane Doe, no rights reserved (CC0)"
    assert (row["latitude"], row["longitude"]) == (None, None)

    # The aliased file: inat_photo_id, a plain binary image, photo_url, date text, lat/lon, cls.
    row = rows["7000"]
    assert (row["observed_on"], row["latitude"], row["longitude"]) == (datetime.date(2020, 5, 1), -33.9, 18.4)
    assert (row["license_name"], row["attribution"]) == ("cc-by-nc", "© A. Observer, some rights reserved (CC-BY-NC)")
    assert row["source_url"] == "https://example.org/7000.jpg"
    assert [o["class"] for o in row["organisms"]] == ["Aves", "Aves"]
    assert [o["observation_uuid"] for o in row["organisms"]] == ["obs-7", "obs-8"]
    assert row["kingdom_pair"] is None and row["photo_uuid"] is None

    counts = {k: build.stats[k] for k in ("image_embedded", "missing_coordinates", "attribution_from_license",
                                          "organism_species_normalised", "image_sha256_differs",
                                          "unknown_image_format", "without_attribution")}
    assert counts == {"image_embedded": 4, "missing_coordinates": 1, "attribution_from_license": 2,
                      # every organism published with the epithet alone (all but the periwinkle's binomial)
                      "organism_species_normalised": 7, "image_sha256_differs": 1, "unknown_image_format": 0,
                      "without_attribution": 0}
    assert set(build.stats) >= {*ROW_COUNTS, *IMAGE_COUNTS}
    files = build.stats["files"]
    assert files[1]["columns"]["photo_id"] == "inat_photo_id" and files[1]["columns"]["observed_on"] == "date"
    assert "kingdom_pair" in files[1]["absent_columns"] and "observation_url" in files[1]["absent_organism_fields"]
    assert failures_path_for(out).exists() and pq.read_table(failures_path_for(out)).num_rows == 0


def test_organisms_extend_the_synthetic_pair_shape_and_the_store_keeps_them(published_dir: Path,
                                                                             tmp_path: Path) -> None:
    from cladebench.synthetic import ORGANISM_TYPE as SYNTHETIC_ORGANISM_TYPE

    synthetic = list(SYNTHETIC_ORGANISM_TYPE)
    assert list(ORGANISM_TYPE)[: len(synthetic)] == synthetic
    dataset = store.open_dataset(build_inat_coobserved(published_dir, tmp_path / "d.lance").dataset_path)
    assert dataset.schema.field("organisms").type == pa.list_(ORGANISM_TYPE)
    assert dataset.schema.field("divergence_rank").type == pa.string()
    assert dataset.schema.field("image").type == pa.large_binary()


def test_builds_are_deterministic(published_dir: Path, tmp_path: Path) -> None:
    one = build_inat_coobserved(published_dir, tmp_path / "one.lance", batch_rows=1)
    two = build_inat_coobserved(published_dir, tmp_path / "two.lance")
    uuids = store.open_dataset(one.dataset_path).to_table(columns=["uuid"]).column(0).to_pylist()
    assert uuids == store.open_dataset(two.dataset_path).to_table(columns=["uuid"]).column(0).to_pylist()
    assert uuids == [row_uuid(p) for p in (4047, 5000, 6001, 7000)]
    assert one.fingerprint == two.fingerprint == store.fingerprint_uuids(uuids)
    assert one.stats == two.stats


def test_reader_gives_rows_without_images_and_its_counts(published_dir: Path) -> None:
    table = read_inat_coobserved(published_dir)
    assert table.schema.remove_metadata().equals(READ_SCHEMA)
    assert table.column("photo_id").to_pylist() == [4047, 5000, 6001, 7000]
    stats = read_stats(table)
    assert stats["rows"] == 4 and stats["divergence_rank_mismatch"] == 1
    assert "image_embedded" not in stats  # the photos were not read
    with_images = read_inat_coobserved(published_dir, images=True, limit=2)
    assert with_images.column_names[:4] == ["uuid", "image", "image_format", "image_sha256"]
    assert with_images.column("photo_id").to_pylist() == [4047, 5000]
    batches = list(iter_inat_coobserved_batches(published_dir, batch_rows=2))
    assert [b.num_rows for b in batches] == [2, 1, 1]


def test_an_organism_named_only_to_genus_is_kept_and_counted(tmp_path: Path) -> None:
    rows = published_rows()[:1]
    quercus = organism((*OAK[:6], None), 9)
    quercus["scientific_name"] = None
    rows[0]["organisms"] = [organism(OAK, 5), quercus]
    rows[0]["divergence_rank"] = "species"  # a congener named only to genus differs at the species rank
    table = read_inat_coobserved(write_published(tmp_path / "genus.parquet", rows))
    _, second = table.column("organisms").to_pylist()[0]
    assert (second["genus"], second["species"], second["scientific_name"]) == ("Quercus", None, "Quercus")
    assert table.column("divergence_rank_recomputed").to_pylist() == ["species"]
    stats = read_stats(table)
    assert stats["organism_without_species"] == 1 and stats["organism_scientific_name_from_lineage"] == 1
    assert stats["divergence_rank_mismatch"] == 0


def test_limit_keeps_the_first_rows_across_files(published_dir: Path, tmp_path: Path) -> None:
    build = build_inat_coobserved(published_dir, tmp_path / "three.lance", limit=3, batch_rows=2)
    assert (build.rows, build.read) == (3, 3)
    assert build.fingerprint == store.fingerprint_uuids([row_uuid(p) for p in (4047, 5000, 6001)])


def test_divergence_rank_names() -> None:
    assert [parse_divergence_rank(v) for v in ("Kingdom", " class ", "cls", "SPECIES")] == [
        "kingdom", "class", "class", "species"]
    for bad in ("tribe", "", None, 3):
        with pytest.raises(ValueError, match="not a rank name"):
            parse_divergence_rank(bad)


def test_docstring_examples_run() -> None:
    result = doctest.testmod(coobserved, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_registered_as_a_source(published_dir: Path) -> None:
    source = get_source("inat-coobserved")
    assert source.load(source.reader) is read_inat_coobserved
    assert source.load(source.builder) is build_inat_coobserved
    assert source.read(published_dir).num_rows == 4
    with pytest.raises(CladebenchError, match="inat-coobserved"):
        get_source("inat-coobserve")


def test_load_verb_builds_the_dataset(published_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    out = tmp_path / "loaded.lance"
    assert main(["load", "inat-coobserved", str(published_dir), "--out", str(out)]) == 0
    assert "4 rows written" in capsys.readouterr().out
    assert store.open_dataset(out).count_rows() == 4


# --- bad input: a clear error, nothing written ------------------------------------------------------


def _assert_nothing_written(out: Path) -> None:
    assert not out.exists()
    assert not failures_path_for(out).exists()


@pytest.mark.parametrize(("drop", "named"), [
    ("divergence_rank", "'divergence_rank'"),
    ("organisms", "'organisms'"),
    ("photo_id", "'photo_id' (or 'inat_photo_id', 'photoID')"),
    ("observed_on", "'observed_on' (or 'date'"),
])
def test_a_missing_column_names_the_file_the_column_and_the_columns_found(
        tmp_path: Path, drop: str, named: str) -> None:
    schema = PUBLISHED_SCHEMA.remove(PUBLISHED_SCHEMA.get_field_index(drop))
    rows = [{k: v for k, v in r.items() if k != drop} for r in published_rows()]
    good = write_published(tmp_path / "in" / "a-good.parquet", published_rows())
    bad = write_published(tmp_path / "in" / "b-bad.parquet", rows, schema)
    out = tmp_path / "out.lance"
    with pytest.raises(SchemaError) as caught:
        build_inat_coobserved([good, bad], out)
    message = str(caught.value)
    assert str(bad) in message and f"missing column(s) {named}" in message
    assert "it has ['photo_id'" in message or "it has ['photo_uuid'" in message
    assert drop not in message.split("it has ")[1]
    _assert_nothing_written(out)


def test_a_missing_organism_field_names_the_field_and_those_found(tmp_path: Path) -> None:
    struct = pa.struct([f for f in PUBLISHED_ORGANISM if f.name != "family"])
    schema = PUBLISHED_SCHEMA.set(PUBLISHED_SCHEMA.get_field_index("organisms"), pa.field("organisms",
                                                                                          pa.list_(struct)))
    rows = published_rows()
    for row in rows:
        row["organisms"] = [{k: v for k, v in o.items() if k != "family"} for o in row["organisms"]]
    path = write_published(tmp_path / "no-family.parquet", rows, schema)
    with pytest.raises(SchemaError, match=r"no-family\.parquet: column 'organisms': organisms lack field\(s\) "
                                          r"'family'; they have \['observation_uuid'"):
        read_inat_coobserved(path)


def test_a_file_without_images_or_image_urls_is_refused(tmp_path: Path) -> None:
    schema = PUBLISHED_SCHEMA
    for name in ("image", "image_url"):
        schema = schema.remove(schema.get_field_index(name))
    rows = [{k: v for k, v in r.items() if k not in ("image", "image_url")} for r in published_rows()]
    path = write_published(tmp_path / "bare.parquet", rows, schema)
    with pytest.raises(SchemaError, match=r"bare\.parquet: .*no image column \('image' \(or 'image_bytes'\)\) "
                                          r"and no image URL column"):
        build_inat_coobserved(path, tmp_path / "out.lance")
    _assert_nothing_written(tmp_path / "out.lance")


def _second_row(**changes: Any) -> list[dict[str, Any]]:
    rows = published_rows()
    rows[1].update(changes)
    return rows


@pytest.mark.parametrize(("rows", "field", "problem"), [
    (_second_row(divergence_rank="tribe"), "divergence_rank", "'tribe' is not a rank name"),
    (_second_row(divergence_rank=None), "divergence_rank", "None is not a rank name"),
    (_second_row(organisms=[organism(ROBIN, 3)]), "organisms", "exactly two organisms, found 1 entry"),
    (_second_row(organisms=[organism(ROBIN, 3)] * 3), "organisms", "found 3 entries"),
    (_second_row(organisms=[organism(ROBIN, 3), organism((None,) * 7, 4, scientific_name="x")]),
     "organisms[1]", "no rank is named"),
    (_second_row(latitude=95.0), "latitude", "95.0 is outside [-90, 90]"),
    (_second_row(longitude=None), "longitude", "missing while the other coordinate is given"),
    (_second_row(photo_id=4047), "photo_id", "photo 4047 is already at train.parquet row 1"),
    (_second_row(photo_id=None), "photo_id", "None is not a photo id"),
    (_second_row(image={"bytes": None, "path": None}, image_url=None), "image", "no image bytes and no image URL"),
])
@pytest.mark.parametrize("fetch_missing", [True, False])
def test_a_bad_value_names_file_row_and_field_and_writes_nothing(
        tmp_path: Path, rows: list[dict[str, Any]], field: str, problem: str, fetch_missing: bool) -> None:
    path = write_published(tmp_path / "train.parquet", rows)
    out = tmp_path / "out.lance"
    with pytest.raises(SchemaError) as caught:
        # Fetching checks every row before writing; without it the first row is already on its way to the
        # writer when the second fails, and the uncommitted write must leave nothing behind.
        build_inat_coobserved(path, out, batch_rows=1, fetch_missing=fetch_missing)
    assert str(caught.value).startswith(f"{path}: row 2 (1-based data row), field '{field}': ")
    assert problem in str(caught.value)
    _assert_nothing_written(out)


def test_bad_values_in_aliased_and_nested_fields_use_the_file_s_own_names(tmp_path: Path) -> None:
    rows = alias_rows()
    rows[0]["date"] = "2020-13-01"
    path = write_published(tmp_path / "aliases.parquet", rows, ALIAS_SCHEMA)
    with pytest.raises(SchemaError, match=r"aliases\.parquet: row 1 \(1-based data row\), field 'date': "):
        read_inat_coobserved(path)
    schema = PUBLISHED_SCHEMA.set(PUBLISHED_SCHEMA.get_field_index("organisms"), pa.field("organisms", pa.list_(
        pa.struct([f.with_type(pa.string()) if f.name == "taxon_id" else f for f in PUBLISHED_ORGANISM]))))
    rows = published_rows()
    for row in rows:
        row["organisms"] = [dict(o, taxon_id=str(o["taxon_id"])) for o in row["organisms"]]
    rows[2]["organisms"][1]["taxon_id"] = "abc"
    path = write_published(tmp_path / "taxa.parquet", rows, schema)
    with pytest.raises(SchemaError,
                       match=r"row 3 \(1-based data row\), field 'organisms\[1\]\.taxon_id': 'abc' is not"):
        read_inat_coobserved(path)


def test_an_existing_output_is_refused(published_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "d.lance"
    build_inat_coobserved(published_dir, out)
    with pytest.raises(CladebenchError, match="already exists"):
        build_inat_coobserved(published_dir, out)


# --- rows with a URL but no image bytes --------------------------------------------------------------


@pytest.fixture
def photos() -> Iterator[PhotoHost]:
    server = PhotoHost({"/5000.jpg": jpeg(5000, (64, 48))})
    with serving(server):
        yield server


FAST = DownloadConfig(concurrency=2, connect_timeout_s=1.0, read_timeout_s=1.0, max_attempts=2,
                      backoff_base_s=0.01, backoff_max_s=0.02)


def url_only_file(tmp_path: Path, photos: PhotoHost) -> Path:
    rows = published_rows()
    rows[1].update(image={"bytes": None, "path": None}, image_url=photos.url("/5000.jpg"))
    rows[2].update(image=None, image_url=photos.url("/gone.jpg"))
    return write_published(tmp_path / "train.parquet", rows)


def test_build_fetches_photos_given_only_by_url_and_records_the_failed_one(tmp_path: Path, photos: PhotoHost) -> None:
    path = url_only_file(tmp_path, photos)
    out = tmp_path / "fetched.lance"
    build = build_inat_coobserved(path, out, download_config=FAST, download_dir=tmp_path / "downloads")
    assert (build.read, build.rows, build.failed, build.failed_by_reason) == (3, 2, 1, {"http_404": 1})
    assert build.stats["image_embedded"] == 1 and build.stats["image_fetched"] == 1
    assert build.stats["image_fetch_failed"] == 1
    table = store.open_dataset(out).to_table()
    rows = {r["photo_id"]: r for r in table.to_pylist()}
    assert sorted(rows) == [4047, 5000]
    assert rows[5000]["image"] == photos.photos["/5000.jpg"] and rows[5000]["image_format"] == "jpeg"
    assert rows[5000]["source_url"] == photos.url("/5000.jpg")
    failures = pq.read_table(build.failures_path).to_pylist()
    assert failures == [{
        "file": "train.parquet", "row": 3, "uuid": row_uuid(6001), "photo_id": 6001,
        "source_url": photos.url("/gone.jpg"), "reason": "http_404", "detail": "HTTP 404 Not Found", "status": 404,
        "exception": None, "attempts": 1,
    }]
    # A second build takes the fetched photo from the download store.
    before = Counter(photos.requests)
    again = build_inat_coobserved(path, tmp_path / "again.lance", download_config=FAST,
                                  download_dir=tmp_path / "downloads")
    assert (again.fetch.ok, again.fetch.cached, again.rows) == (0, 1, 2)
    assert photos.requests - before == Counter({"/gone.jpg": 1})
    assert again.fingerprint == build.fingerprint


def test_rows_without_bytes_are_errors_when_not_fetched(tmp_path: Path, photos: PhotoHost) -> None:
    path = url_only_file(tmp_path, photos)
    out = tmp_path / "out.lance"
    with pytest.raises(SchemaError, match=r"row 2 \(1-based data row\), field 'image': no image bytes; "
                                          "build_inat_coobserved fetches it"):
        build_inat_coobserved(path, out, fetch_missing=False)
    _assert_nothing_written(out)
    with pytest.raises(SchemaError, match=r"row 2 .*no image bytes"):
        read_inat_coobserved(path, images=True)
    assert read_inat_coobserved(path).num_rows == 3  # metadata alone needs no photo
    assert sum(photos.requests.values()) == 0


def test_a_bad_value_stops_the_build_before_any_download(tmp_path: Path, photos: PhotoHost) -> None:
    rows = published_rows()
    rows[0].update(image=None, image_url=photos.url("/5000.jpg"))
    rows[2].update(divergence_rank="clade")
    path = write_published(tmp_path / "train.parquet", rows)
    with pytest.raises(SchemaError, match=r"row 3 .*'divergence_rank'"):
        build_inat_coobserved(path, tmp_path / "out.lance", download_config=FAST, download_dir=tmp_path / "dl")
    assert sum(photos.requests.values()) == 0
    _assert_nothing_written(tmp_path / "out.lance")


def test_nothing_fetched_and_nothing_embedded_is_an_error_with_the_failures_written(tmp_path: Path,
                                                                                     photos: PhotoHost) -> None:
    rows = published_rows()[:1]
    rows[0].update(image=None, image_url=photos.url("/gone.jpg"))
    path = write_published(tmp_path / "train.parquet", rows)
    out = tmp_path / "out.lance"
    with pytest.raises(CladebenchError, match="no photo of the 1 rows could be fetched"):
        build_inat_coobserved(path, out, download_config=FAST, download_dir=tmp_path / "dl")
    assert not out.exists()
    assert pq.read_table(failures_path_for(out)).column("reason").to_pylist() == ["http_404"]
