"""INQUIRE: the real query CSVs and annotation excerpt read exactly; INQUIRE-Rerank shards in the HF schema built
into a Lance dataset with its licenses, attributions and images intact, and bad input refused with nothing written."""

from __future__ import annotations

import datetime
import hashlib
import io
import math
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from PIL import Image

from cladebench import store
from cladebench.benchmarks.inquire.source import (
    QUERIES_SCHEMA,
    RERANK_SCHEMA,
    UUID_NAMESPACE,
    build_inquire_rerank,
    inat24_file_key,
    iter_inquire_rerank_batches,
    parse_license,
    parse_observed_on,
    read_inquire_annotations,
    read_inquire_queries,
    read_inquire_rerank,
    read_stats,
    species_folder_lineage,
    split_from_name,
)
from cladebench.curate.sources import get_source
from cladebench.errors import CladebenchError, SchemaError
from helpers.inquire_rows import (
    CONDOR,
    CONDOR_QUERY,
    HERMIT,
    HERMIT_QUERY,
    MONGOOSE,
    MONGOOSE_QUERY,
    TAMANDUA,
    candidate,
    flat_jpeg,
    write_shard,
)

QUERIES_TEST = "INQUIRE/data/inquire/inquire_queries_test.csv"
QUERIES_VAL = "INQUIRE/data/inquire/inquire_queries_val.csv"
ANNOTATIONS_EXCERPT = "Yuyan-C-llm-course-project/data/inquire/inquire_annotations.EXCERPT_query3.csv"
QUERY_IMAGES = "inquire-benchmark.github.io/public/images/queries"


# --- the real query files --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def test_queries(realdata: Callable[[str], Path]) -> pa.Table:
    return read_inquire_queries(realdata(QUERIES_TEST))


@pytest.fixture(scope="module")
def val_queries(realdata: Callable[[str], Path]) -> pa.Table:
    return read_inquire_queries(realdata(QUERIES_VAL))


def _as_written(text: str) -> bytes:
    """How the CSV writer wrote a field: quoted (inner quotes doubled) when it holds a comma or a quote."""
    if any(c in text for c in ',"\n'):
        text = '"' + text.replace('"', '""') + '"'
    return text.encode("utf-8")


def test_real_test_queries_are_read_exactly(test_queries: pa.Table, realdata: Callable[[str], Path]) -> None:
    assert test_queries.schema.equals(QUERIES_SCHEMA)
    assert test_queries.num_rows == 200
    ids = test_queries.column("query_id").to_pylist()
    assert len(set(ids)) == 200 and min(ids) == 3 and max(ids) == 308
    assert Counter(test_queries.column("supercategory").to_pylist()) == {
        "Behavior": 67, "Appearance": 66, "Context": 49, "Species": 18}
    assert len(set(test_queries.column("category").to_pylist())) == 16
    groups = Counter(test_queries.column("iconic_group").to_pylist())
    assert groups["Animalia"] == 6 and groups["Combo"] == 2 and groups["Mammals"] == 55
    assert groups[None] == 2  # two queries have an empty iconic_group cell
    assert set(test_queries.column("split").to_pylist()) == {"test"}
    assert read_stats(test_queries)["without_iconic_group"] == 2
    # Every text is in the file byte for byte, as the CSV writer escaped it.
    raw = realdata(QUERIES_TEST).read_bytes()
    texts = test_queries.column("query_text").to_pylist()
    assert all(b"," + _as_written(t) + b"," in raw for t in texts)
    assert 'Strawberry poison-dart frog with the "la gruta" color morph from Isla Colon' in texts
    assert "Hübner's Wasp Moth mating" in texts
    assert texts[0] == "A mongoose standing upright alert" and ids[0] == 3


def test_real_val_queries_and_no_overlap(val_queries: pa.Table, test_queries: pa.Table,
                                         realdata: Callable[[str], Path]) -> None:
    assert val_queries.num_rows == 50
    assert Counter(val_queries.column("supercategory").to_pylist()) == {
        "Appearance": 17, "Behavior": 17, "Context": 12, "Species": 4}
    assert set(val_queries.column("split").to_pylist()) == {"val"}
    val_ids = set(val_queries.column("query_id").to_pylist())
    test_ids = set(test_queries.column("query_id").to_pylist())
    assert not val_ids & test_ids and len(val_ids | test_ids) == 250
    texts = val_queries.column("query_text").to_pylist()
    # The trailing space is part of the query the official code encodes; it must survive.
    assert "red fox showing signs of sarcoptic mange " in texts
    raw = realdata(QUERIES_VAL).read_bytes()
    assert all(b"," + _as_written(t) + b"," in raw for t in texts)


def test_real_query_files_hold_no_typographic_quotes(val_queries: pa.Table, test_queries: pa.Table) -> None:
    # The website's "green “26”" query is "California Condor tagged with green 26" in the val CSV; the
    # typographic quotes are only on the page. Quotes are checked on a file that has them, below.
    texts = val_queries.column("query_text").to_pylist() + test_queries.column("query_text").to_pylist()
    assert not any(c in t for t in texts for c in "“”‘’")
    assert "California Condor tagged with green 26" in texts


def test_queries_keep_typographic_quotes_and_read_without_the_index_column(tmp_path: Path) -> None:
    path = tmp_path / "my_queries.csv"
    text = "California condor tagged with a green “26”"
    path.write_text(
        "query_id,query_text,supercategory,category,iconic_group\n"
        f"26,{text},Appearance,Tracking and Identification,Birds\n"
        "70,A tamandua’s pup ,Behavior,\"Mating, Courtship, Reproduction\",\n",
        encoding="utf-8",
    )
    table = read_inquire_queries(path, split="val")
    assert table.column("query_text").to_pylist() == [text, "A tamandua’s pup "]
    assert table.column("query_text")[0].as_py().encode() == text.encode("utf-8")
    assert table.column("category").to_pylist() == ["Tracking and Identification", "Mating, Courtship, Reproduction"]
    assert table.column("iconic_group").to_pylist() == ["Birds", None]
    assert table.column("split").to_pylist() == ["val", "val"]
    assert read_inquire_queries(path).column("split").to_pylist() == [None, None]  # no split in the name


def test_queries_repeated_id_names_the_file_and_both_rows(tmp_path: Path) -> None:
    path = tmp_path / "inquire_queries_test.csv"
    path.write_text(",query_id,query_text,supercategory,category,iconic_group\n"
                    "0,3,a,Behavior,c,Mammals\n1,4,b,Behavior,c,Birds\n2,3,d,Context,c,Birds\n", encoding="utf-8")
    with pytest.raises(SchemaError, match=r"inquire_queries_test\.csv: row 3 .*'query_id'.*repeats row 1"):
        read_inquire_queries(path)


def test_queries_bad_header_and_id(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("query_id,text\n3,a\n", encoding="utf-8")
    with pytest.raises(SchemaError, match=r"q\.csv: not an INQUIRE queries CSV: missing column\(s\) \['query_text'"):
        read_inquire_queries(path)
    path.write_text("query_id,query_text,supercategory,category,iconic_group\nx3,a,b,c,d\n", encoding="utf-8")
    with pytest.raises(SchemaError, match=r"q\.csv: row 1 .*'query_id': 'x3' is not an integer"):
        read_inquire_queries(path)


# --- the real annotation excerpt --------------------------------------------------------------------


def test_real_annotation_excerpt(realdata: Callable[[str], Path]) -> None:
    path = realdata(ANNOTATIONS_EXCERPT)
    table = read_inquire_annotations(path)
    assert table.num_rows == 38
    assert set(table.column("query_id").to_pylist()) == {3}
    assert Counter(table.column("scientific_name").to_pylist()) == {"Mungos mungo": 31, "Urva auropunctata": 7}
    assert Counter(table.column("inat24_category_id").to_pylist()) == {4686: 31, 4687: 7}
    first = table.slice(0, 1).to_pylist()[0]
    assert {k: first[k] for k in ("kingdom", "phylum", "class", "order", "family", "genus", "species")} == {
        "kingdom": "Animalia", "phylum": "Chordata", "class": "Mammalia", "order": "Carnivora",
        "family": "Herpestidae", "genus": "Mungos", "species": "Mungos mungo"}
    assert first["image_id"] == 4702270
    paths = table.column("image_path").to_pylist()
    assert table.column("inat24_file_name").to_pylist() == paths  # the key is the annotation path itself
    assert all(p.startswith("train/") and p.endswith(".jpg") for p in paths)
    # The official Fullrank match: an index path (no extension) + ".jpg" in the annotation paths.
    pos_images = set(paths)
    index_paths = [p.removesuffix(".jpg") for p in paths]
    assert all(p + ".jpg" in pos_images for p in index_paths)
    assert {inat24_file_key(p) for p in index_paths} == pos_images
    assert read_stats(table) == {"file": path.name, "rows": 38, "queries": 1, "repeated_pairs": 0}


def test_annotation_path_without_species_folder_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "inquire_annotations.csv"
    path.write_text("query_id,image_id,image_path\n3,1,train/04686_Animalia_Mungos_mungo/a.jpg\n", encoding="utf-8")
    with pytest.raises(SchemaError, match=r"inquire_annotations\.csv: row 1 .*'image_path'.*species folder"):
        read_inquire_annotations(path)


def test_species_folder_and_file_key() -> None:
    category_id, lineage = species_folder_lineage(
        "04687_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Urva_auropunctata")
    assert category_id == 4687 and lineage.scientific_name == "Urva auropunctata"
    assert lineage.names[:3] == ("Animalia", "Chordata", "Mammalia")
    for bad in ("Animalia_Chordata", "04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos",
                "x_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo"):
        with pytest.raises(ValueError, match="not an iNat24 species folder"):
            species_folder_lineage(bad)
    assert inat24_file_key("train/a/b.jpg") == "train/a/b.jpg"
    assert inat24_file_key("train/a/b") == "train/a/b.jpg"
    assert split_from_name("validation-00000-of-00001.parquet") == "val"
    assert split_from_name("test-00003-of-00004.parquet") == "test"
    assert split_from_name("inquire_queries_val.csv") == "val"
    assert split_from_name("train-00000-of-00004.parquet") is None


@pytest.mark.parametrize(("raw", "code", "link"), [
    ("CC BY-NC 4.0", "cc-by-nc", "https://creativecommons.org/licenses/by-nc/4.0/"),
    ("cc-by-nc", "cc-by-nc", "https://creativecommons.org/licenses/by-nc/4.0/"),
    ("CC-BY-NC-SA", "cc-by-nc-sa", "https://creativecommons.org/licenses/by-nc-sa/4.0/"),
    ("cc_by_nd", "cc-by-nd", "https://creativecommons.org/licenses/by-nd/4.0/"),
    ("Attribution-NonCommercial License", "cc-by-nc", "https://creativecommons.org/licenses/by-nc/4.0/"),
    ("Attribution-NonCommercial-NoDerivs License", "cc-by-nc-nd",
     "https://creativecommons.org/licenses/by-nc-nd/4.0/"),
    ("Creative Commons Attribution-ShareAlike 3.0", "cc-by-sa", "https://creativecommons.org/licenses/by-sa/3.0/"),
    ("http://creativecommons.org/licenses/by/2.0/", "cc-by", "https://creativecommons.org/licenses/by/2.0/"),
    ("CC0", "cc0", "https://creativecommons.org/publicdomain/zero/1.0/"),
    ("cc0-1.0", "cc0", "https://creativecommons.org/publicdomain/zero/1.0/"),
    ("https://creativecommons.org/publicdomain/zero/1.0/", "cc0", "https://creativecommons.org/publicdomain/zero/1.0/"),
    ("all rights reserved", "all-rights-reserved", None),
])
def test_parse_license(raw: str, code: str, link: str | None) -> None:
    parsed = parse_license(raw)
    assert parsed is not None and parsed.code == code and parsed.link == link


@pytest.mark.parametrize("raw", ["No known copyright restrictions", "1", "CC BY-SA-ND", "nc", "", None])
def test_unrecognised_license_is_not_guessed(raw: str | None) -> None:
    assert parse_license(raw) is None


def test_attribution_follows_inaturalist() -> None:
    assert parse_license("cc-by-nc").attribution("Jane Doe") == "© Jane Doe, some rights reserved (CC-BY-NC)"
    assert parse_license("CC0").attribution("jdoe") == "jdoe, no rights reserved (CC0)"
    assert parse_license("arr").attribution("A") == "© A, all rights reserved"


@pytest.mark.parametrize(("raw", "date"), [
    ("2019-06-23", datetime.date(2019, 6, 23)),
    ("2019-06-23 18:02:00+00:00", datetime.date(2019, 6, 23)),
    ("2019-06-23T23:30:00-07:00", datetime.date(2019, 6, 23)),  # the written day, not shifted to UTC
    ("2018-12-31T23:59:59Z", datetime.date(2018, 12, 31)),
    ("2020-02-29 07:15", datetime.date(2020, 2, 29)),
    ("2020-02-29 07:15:01.123456+0530", datetime.date(2020, 2, 29)),
    (" 2021-01-05 ", datetime.date(2021, 1, 5)),
    ("", None),
    (None, None),
    (datetime.datetime(2017, 5, 1, 12, 0), datetime.date(2017, 5, 1)),
    (datetime.date(2017, 5, 1), datetime.date(2017, 5, 1)),
])
def test_parse_observed_on(raw: Any, date: datetime.date | None) -> None:
    assert parse_observed_on(raw) == date


@pytest.mark.parametrize("raw", ["2019-02-30", "2019-13-01", "23/06/2019", "2019-06-23 25:00:00", "nan",
                                 "2019-06-23 10:00:00+24:00", "20190623"])
def test_parse_observed_on_rejects(raw: str) -> None:
    with pytest.raises(ValueError, match=r"not a date|out of range"):
        parse_observed_on(raw)


# --- INQUIRE-Rerank shards in the Hugging Face schema ----------------------------------------------


# Species folders in iNat24's form; the numeric prefixes are made up for the fixture.


@pytest.fixture
def real_images(realdata: Callable[[str], Path]) -> dict[str, bytes]:
    return {name: realdata(f"{QUERY_IMAGES}/{name}").read_bytes()
            for name in ("condor_1.jpeg", "tamandua_1.jpeg", "hermit_1.png")}


@pytest.fixture
def shards(tmp_path: Path, real_images: dict[str, bytes]) -> dict[str, Any]:
    """Three queries over three shards (one val, two test); 10 candidates with varied metadata."""
    synthetic = {i: flat_jpeg((40 * i % 255, 90, 160)) for i in range(1, 6)}
    condor, tamandua, hermit = (real_images[n] for n in ("condor_1.jpeg", "tamandua_1.jpeg", "hermit_1.png"))
    bird = {"iconic_group": "Birds"}
    crab = {"supercategory": "Context", "category": "Human Impact", "iconic_group": "Animalia",
            "inat24_species_id": 1500, "inat24_species_name": "Coenobita clypeatus"}
    mongoose = {"supercategory": "Behavior", "category": "Defensive and Survival Behaviors",
                "iconic_group": "Mammals", "inat24_species_id": 4686, "inat24_species_name": "Mungos mungo"}
    val = [
        candidate(CONDOR_QUERY, 26, 9001, condor, CONDOR, 1, **bird),
        candidate(CONDOR_QUERY, 26, 9002, synthetic[1], CONDOR, 0, license="cc0", rights_holder="jdoe", **bird),
        candidate(CONDOR_QUERY, 26, 9003, tamandua, TAMANDUA, 0, license="No known copyright restrictions",
                   date="2021-01-05", **bird),
    ]
    test_a = [
        candidate(HERMIT_QUERY, 27, 9101, hermit, HERMIT, 1, license="CC-BY-SA", **crab),
        candidate(HERMIT_QUERY, 27, 9102, synthetic[2], HERMIT, 0, rights_holder="", **crab),
        candidate(HERMIT_QUERY, 27, 9103, synthetic[3], HERMIT, 1, license=None, date=None, **crab),
        candidate(HERMIT_QUERY, 27, 9001, condor, CONDOR, 0, **crab),  # the same photo, another query
    ]
    test_b = [
        candidate(MONGOOSE_QUERY, 3, 9201, synthetic[4], MONGOOSE, 1, license="Attribution License",
                   date="2018-12-31T23:59:59Z", **mongoose),
        candidate(MONGOOSE_QUERY, 3, 9202, synthetic[5], MONGOOSE, 0, latitude=math.nan, longitude=math.nan,
                   location_uncertainty=math.nan, **mongoose),
        candidate(MONGOOSE_QUERY, 3, 9001, condor, "9001.jpg", 0, latitude=None, longitude=None, **mongoose),
    ]
    directory = tmp_path / "INQUIRE-Rerank" / "data"
    directory.mkdir(parents=True)
    # In the order a directory is read (sorted names), so a list of these paths builds the same dataset.
    paths = [write_shard(directory / "test-00000-of-00002.parquet", test_a),
             write_shard(directory / "test-00001-of-00002.parquet", test_b),
             write_shard(directory / "validation-00000-of-00001.parquet", val)]
    rows = [("test", r) for r in test_a + test_b] + [("val", r) for r in val]
    return {"dir": directory, "paths": paths, "rows": rows, "by_name": {"val": val, "test_a": test_a,
                                                                       "test_b": test_b}}


def _expected_uuid(split: str, query_id: int, image_id: int) -> str:
    namespace = uuidlib.uuid5(uuidlib.NAMESPACE_URL, "https://huggingface.co/datasets/evendrow/INQUIRE-Rerank")
    assert namespace == UUID_NAMESPACE
    return str(uuidlib.uuid5(namespace, f"{split}/{query_id}/{image_id}"))


def test_build_rerank_maps_every_candidate(shards: dict[str, Any], tmp_path: Path,
                                           real_images: dict[str, bytes]) -> None:
    build = build_inquire_rerank(shards["dir"], tmp_path / "rerank.lance", batch_rows=2)
    dataset = store.open_dataset(build.dataset_path)
    table = dataset.to_table()
    assert build.rows == table.num_rows == 10
    rows = {(r["split"], r["query_id"], r["inat24_image_id"]): r for r in table.to_pylist()}
    source = {(split, r["query_id"], r["inat24_image_id"]): r for split, r in shards["rows"]}
    assert rows.keys() == source.keys()
    assert table.column("uuid").to_pylist() == [_expected_uuid(s, r["query_id"], r["inat24_image_id"])
                                                for s, r in shards["rows"]]  # file order, deterministic ids
    for key, row in rows.items():
        given = source[key]
        assert row["image"] == given["image"]["bytes"]  # bytes unchanged
        assert row["relevant"] is bool(given["relevant"])
        assert row["query"] == given["query"] and row["clip_score"] == given["clip_score"]
        assert row["source_dataset"] == "inquire-rerank" and row["source_id"] == str(key[2])
        assert row["inat24_file_name"] == given["inat24_file_name"] and row["license_raw"] == given["license"]
    # Real images: PNG and a grayscale JPEG are stored as they came and their formats sniffed.
    assert rows[("test", 27, 9101)]["image_format"] == "png"
    assert rows[("val", 26, 9003)]["image_format"] == "jpeg"
    assert Image.open(io.BytesIO(rows[("val", 26, 9003)]["image"])).mode == "L"
    assert hashlib.sha256(rows[("val", 26, 9001)]["image"]).digest() == hashlib.sha256(
        real_images["condor_1.jpeg"]).digest()
    # Relevance per query.
    relevant = Counter((k[0], k[1]) for k, r in rows.items() if r["relevant"])
    assert relevant == {("val", 26): 1, ("test", 27): 2, ("test", 3): 1}
    # The typographic quotes of the query text survive the round trip.
    assert rows[("val", 26, 9001)]["query"].encode() == CONDOR_QUERY.encode("utf-8")
    # Licenses and attributions.
    assert rows[("val", 26, 9001)]["license_name"] == "cc-by-nc"
    assert rows[("val", 26, 9001)]["license_link"] == "https://creativecommons.org/licenses/by-nc/4.0/"
    assert rows[("val", 26, 9001)]["attribution"] == "© Jane Doe, some rights reserved (CC-BY-NC)"
    assert rows[("val", 26, 9002)]["attribution"] == "jdoe, no rights reserved (CC0)"
    assert rows[("test", 27, 9101)]["attribution"] == "© Jane Doe, some rights reserved (CC-BY-SA)"
    assert rows[("test", 3, 9201)]["license_name"] == "cc-by"
    unknown = rows[("val", 26, 9003)]
    assert (unknown["license_name"], unknown["attribution"], unknown["license_raw"]) == (
        None, None, "No known copyright restrictions")
    assert rows[("test", 27, 9102)]["attribution"] is None and rows[("test", 27, 9102)]["license_name"] == "cc-by-nc"
    assert rows[("test", 27, 9103)]["license_name"] is None and rows[("test", 27, 9103)]["license_raw"] is None
    # Dates, coordinates (NaN becomes null), lineage from the species folder.
    assert rows[("val", 26, 9001)]["observed_on"] == datetime.date(2019, 6, 23)
    assert rows[("test", 3, 9201)]["observed_on"] == datetime.date(2018, 12, 31)
    assert rows[("test", 27, 9103)]["observed_on"] is None
    assert (rows[("val", 26, 9001)]["latitude"], rows[("val", 26, 9001)]["longitude"]) == (34.5, -118.75)
    nan_row = rows[("test", 3, 9202)]
    assert (nan_row["latitude"], nan_row["longitude"], nan_row["location_uncertainty"]) == (None, None, None)
    assert rows[("test", 3, 9201)]["scientific_name"] == "Mungos mungo"
    assert rows[("test", 3, 9201)]["family"] == "Herpestidae" and rows[("test", 3, 9201)]["species"] == "Mungos mungo"
    assert rows[("test", 3, 9001)]["scientific_name"] is None  # a file name without a species folder
    assert rows[("test", 27, 9001)]["inat24_species_name"] == "Coenobita clypeatus"
    # The same photo under three queries is three rows with three uuids.
    assert len({rows[k]["uuid"] for k in rows if k[2] == 9001}) == 3
    # Schema: canonical columns first, then the extras in their types.
    schema = dataset.schema
    assert schema.field("image").type == pa.large_binary() and schema.field("relevant").type == pa.bool_()
    assert schema.field("query_id").type == pa.int64() and schema.field("observed_on").type == pa.date32()
    assert set(RERANK_SCHEMA.names) <= set(schema.names)
    stats = build.stats
    assert stats["rows"] == 10 and stats["rows_by_split"] == {"test": 7, "val": 3}
    assert stats["queries"] == 3 and stats["positives"] == 4
    assert stats["candidates_per_query"] == {"min": 3, "max": 4} and stats["queries_without_positive"] == 0
    assert stats["unrecognised_licenses"] == {"No known copyright restrictions": 1}
    assert (stats["missing_license"], stats["missing_date"], stats["missing_coordinates"]) == (1, 1, 2)
    assert (stats["missing_rights_holder"], stats["without_attribution"], stats["without_lineage"]) == (1, 3, 1)
    assert stats.get("unknown_image_format", 0) == 0
    assert stats["files"] == [p.name for p in shards["paths"]]


def test_rebuild_gives_the_same_uuids_and_fingerprint(shards: dict[str, Any], tmp_path: Path) -> None:
    first = build_inquire_rerank(shards["paths"], tmp_path / "a.lance")
    second = build_inquire_rerank(shards["dir"], tmp_path / "b.lance", batch_rows=1)
    assert first.fingerprint == second.fingerprint
    expected = [_expected_uuid(s, r["query_id"], r["inat24_image_id"]) for s, r in shards["rows"]]
    assert first.fingerprint == store.fingerprint_uuids(expected)
    a, b = (store.open_dataset(p).to_table(columns=["uuid", "image"]) for p in (tmp_path / "a.lance",
                                                                               tmp_path / "b.lance"))
    assert a.equals(b)


def test_batches_stream_and_the_reader_skips_images(shards: dict[str, Any]) -> None:
    batches = list(iter_inquire_rerank_batches(shards["dir"], batch_rows=2))
    assert [b.num_rows for b in batches] == [2, 2, 2, 1, 2, 1]  # per file, never more than batch_rows
    assert batches[0].column_names[:3] == ["uuid", "image", "image_format"]
    table = read_inquire_rerank(shards["dir"])
    assert table.schema.equals(RERANK_SCHEMA) and table.num_rows == 10
    assert table.column("uuid").to_pylist() == pa.concat_tables(batches).column("uuid").to_pylist()
    assert read_stats(table)["positives"] == 4
    with_images = read_inquire_rerank(shards["paths"][2], images=True)
    assert with_images.column("image").to_pylist() == [r["image"]["bytes"] for r in shards["by_name"]["val"]]
    assert read_inquire_rerank(shards["paths"][2], split="test").column("split").to_pylist() == ["test"] * 3


def test_registry_names_the_rerank_source(shards: dict[str, Any], tmp_path: Path) -> None:
    source = get_source("inquire-rerank")
    assert (source.reader, source.builder) == ("read_inquire_rerank", "build_inquire_rerank")
    assert source.read(shards["paths"][2]).num_rows == 3
    assert source.build(shards["paths"][2], tmp_path / "v.lance").rows == 3


# --- bad input: clear errors, nothing written -------------------------------------------------------


def _assert_nothing_written(out: Path) -> None:
    assert not out.exists() or not any(out.iterdir())


def test_bad_date_names_file_row_and_field_and_writes_nothing(shards: dict[str, Any], tmp_path: Path) -> None:
    rows = shards["by_name"]["test_b"]
    rows[2]["date"] = "2019-02-30"
    write_shard(shards["paths"][1], rows)
    out = tmp_path / "bad.lance"
    # batch_rows=1: several batches have gone to the writer before the bad row is reached.
    with pytest.raises(SchemaError, match=r"test-00001-of-00002\.parquet: row 3 \(1-based data row\), field 'date': "
                                          r"'2019-02-30' is not a date that exists"):
        build_inquire_rerank(shards["dir"], out, batch_rows=1)
    _assert_nothing_written(out)


def test_missing_column_names_file_and_column_and_writes_nothing(shards: dict[str, Any], tmp_path: Path) -> None:
    write_shard(shards["paths"][1], shards["by_name"]["test_b"], drop=("relevant",))
    out = tmp_path / "bad.lance"
    with pytest.raises(SchemaError, match=r"test-00001-of-00002\.parquet: not an INQUIRE-Rerank Parquet file: "
                                          r"missing column\(s\) \['relevant'\]"):
        build_inquire_rerank(shards["dir"], out)
    _assert_nothing_written(out)


@pytest.mark.parametrize(("change", "message"), [
    ({"relevant": 2}, r"row 2 \(1-based data row\), field 'relevant': 2 is not 0 or 1"),
    ({"latitude": 91.0}, r"row 2 \(1-based data row\), field 'latitude': 91.0 is outside \[-90, 90\]"),
    ({"longitude": None}, r"row 2 \(1-based data row\), field 'longitude': missing while the other"),
    ({"image": {"bytes": None, "path": "x.jpg"}}, r"row 2 \(1-based data row\), field 'image': no image bytes"),
    ({"image": {"bytes": b"", "path": "x.jpg"}}, r"row 2 \(1-based data row\), field 'image': no image bytes"),
    ({"inat24_image_id": 9001}, r"row 2 \(1-based data row\), field 'inat24_image_id': image 9001 is already a "
                                r"candidate of val query 26 \(validation-00000-of-00001\.parquet row 1\)"),
    ({"query": "another text"}, r"row 2 \(1-based data row\), field 'query': 'another text' differs"),
    ({"clip_score": float("inf")}, r"row 2 \(1-based data row\), field 'clip_score': inf is not a finite number"),
    ({"clip_score": float("-inf")}, r"row 2 \(1-based data row\), field 'clip_score': -inf is not a finite number"),
])
def test_bad_values_are_errors(shards: dict[str, Any], tmp_path: Path, change: dict[str, Any],
                               message: str) -> None:
    rows = shards["by_name"]["val"]
    rows[1].update(change)
    write_shard(shards["paths"][2], rows)
    with pytest.raises(SchemaError, match=r"validation-00000-of-00001\.parquet: " + message):
        build_inquire_rerank(shards["paths"][2], tmp_path / "bad.lance")
    _assert_nothing_written(tmp_path / "bad.lance")


def test_query_ids_from_the_query_files_when_the_shard_has_none(shards: dict[str, Any], tmp_path: Path) -> None:
    path = write_shard(tmp_path / "test-00000-of-00001.parquet", shards["by_name"]["test_b"], drop=("query_id",))
    with pytest.raises(SchemaError, match=r"missing column\(s\) \['query_id'\] \(give the INQUIRE query CSVs, "
                                          r"with --queries or queries= from Python"):
        read_inquire_rerank(path)
    queries = tmp_path / "inquire_queries_test.csv"
    queries.write_text(f",query_id,query_text,supercategory,category,iconic_group\n0,3,{MONGOOSE_QUERY},Behavior,"
                       "Defensive and Survival Behaviors,Mammals\n", encoding="utf-8")
    table = read_inquire_rerank(path, queries=queries)
    assert table.column("query_id").to_pylist() == [3, 3, 3]
    other = tmp_path / "q2.csv"
    other.write_text("query_id,query_text,supercategory,category,iconic_group\n5,something else,a,b,c\n",
                     encoding="utf-8")
    with pytest.raises(SchemaError, match=r"row 1 \(1-based data row\), field 'query': .* has no query id"):
        read_inquire_rerank(path, queries=read_inquire_queries(other))


def test_split_must_be_known(shards: dict[str, Any], tmp_path: Path) -> None:
    path = write_shard(tmp_path / "train-00000-of-00004.parquet", shards["by_name"]["val"])
    with pytest.raises(SchemaError, match=r"train-00000-of-00004\.parquet: cannot tell the split"):
        read_inquire_rerank(path)
    assert set(read_inquire_rerank(path, split="val").column("split").to_pylist()) == {"val"}
    with pytest.raises(CladebenchError, match="unknown split 'validation'"):
        read_inquire_rerank(path, split="validation")


def test_existing_output_is_refused(shards: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "taken.lance"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(CladebenchError, match="already exists"):
        build_inquire_rerank(shards["dir"], out)
    assert (out / "keep.txt").read_text() == "x"


def test_load_verb_builds_inquire_rerank(shards: dict[str, Any], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    out = tmp_path / "cli.lance"
    assert main(["load", "inquire-rerank", str(shards["dir"]), "--out", str(out)]) == 0
    assert f"{out}: 10 rows written" in capsys.readouterr().out
    assert store.open_dataset(out).count_rows() == 10
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:  # a CrypticBio-only option is a usage error, not ignored
        main(["load", "inquire-rerank", str(shards["dir"]), "--out", str(tmp_path / "x.lance"),
              "--lookup", str(shards["paths"][0])])
    assert refused.value.code == 2 and "unrecognized arguments: --lookup" in capsys.readouterr().err
    assert not (tmp_path / "x.lance").exists()
