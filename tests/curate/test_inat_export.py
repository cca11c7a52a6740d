"""The iNat open-data export format (against the real files) and the generator of exports with known answers."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from cladebench.curate.inat_export import (
    HEADERS,
    OBSERVATIONS_2022,
    attribution_name,
    export_file,
    photo_url,
    read_header,
)
from cladebench.errors import CladebenchError, SchemaError
from cladebench.synthetic.inat_export import PHOTO_DEFECTS, ExportConfig, write_export

REAL_EXPORT = "pyinaturalist-convert/test/sample_data/inaturalist-open-data"
STRUCTURE_SQL = "inaturalist-open-data/Metadata/structure.sql"


def _rows(path: Path) -> list[dict[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def _table_columns(sql: str) -> dict[str, tuple[str, ...]]:
    """Column names per table from structure.sql's CREATE TABLE statements."""
    tables: dict[str, tuple[str, ...]] = {}
    for block in sql.split("CREATE TABLE ")[1:]:
        name, body = block.split("(", 1)
        columns = [line.strip().split()[0] for line in body.split(");")[0].splitlines() if line.strip()]
        tables[name.strip()] = tuple(columns)
    return tables


# --- the format, against the real files ----------------------------------------------------------


def test_headers_are_the_real_schema(realdata):
    tables = _table_columns(realdata(STRUCTURE_SQL).read_text())
    assert set(tables) == set(HEADERS)
    for table, columns in tables.items():
        assert HEADERS[table][0] == columns
    assert tables["observations"][:-1] == OBSERVATIONS_2022 and tables["observations"][-1] == "anomaly_score"


def test_real_sample_headers_are_accepted(realdata):
    folder = realdata(f"{REAL_EXPORT}/photos.csv").parent
    headers = {table: read_header(export_file(folder, table), table) for table in HEADERS}
    assert headers["observations"] == OBSERVATIONS_2022  # the 2022 export has no anomaly_score
    assert headers["photos"] == HEADERS["photos"][0]


def test_a_foreign_header_is_a_schema_error(tmp_path):
    path = tmp_path / "photos.csv"
    path.write_text("photo_id,observation_uuid\n1,a\n")
    with pytest.raises(SchemaError, match="not an iNat open-data photos file"):
        read_header(path, "photos")
    with pytest.raises(CladebenchError, match=r"no taxa\.csv"):
        export_file(tmp_path, "taxa")


def test_photo_urls_keep_the_extension_as_written(realdata):
    photos = _rows(realdata(f"{REAL_EXPORT}/photos.csv"))
    upper = [p for p in photos if p["extension"] == "JPG"]
    assert len(upper) == 6
    for photo in upper:
        url = photo_url(int(photo["photo_id"]), photo["extension"])
        assert url == f"https://inaturalist-open-data.s3.amazonaws.com/photos/{photo['photo_id']}/medium.JPG"
    with pytest.raises(CladebenchError, match="unknown photo size"):
        photo_url(1, "jpg", "huge")


def test_observers_named_none_are_attributed_by_login(realdata):
    observers = _rows(realdata(f"{REAL_EXPORT}/observers.csv"))
    unnamed = [o for o in observers if o["name"] == "None"]
    assert unnamed, "the sample has observers whose name is the literal None"
    for observer in unnamed:
        assert attribution_name(observer["login"], observer["name"]) == observer["login"]
    assert attribution_name("kueda", "Ken-ichi Ueda") == "Ken-ichi Ueda"
    assert attribution_name("x", "  ") == "x" and attribution_name("", None) is None


# --- the generator -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export")
    return write_export(folder, ExportConfig(n_photos=3000, n_coobserved=24, chunk_rows=500))


def test_generated_files_have_the_real_headers_and_counts(export):
    for table, path in export.files.items():
        assert read_header(path, table) == HEADERS[table][0]
        assert sum(1 for _ in path.open(encoding="utf-8")) - 1 == export.rows[table]
    assert export.rows["photos"] == 3000


def test_no_quoting_fields_keep_quotes_literally(export):
    observers = export.files["observers"].read_text(encoding="utf-8")
    assert "O'Brien" in observers and '"Birdy"' in observers
    # Read without quoting, every well-formed line splits into the header's columns.
    lines = export.files["observers"].read_text(encoding="utf-8").splitlines()
    assert {len(line.split("\t")) for line in lines} == {3}


def test_a_shared_photo_is_one_row_per_observation(export):
    photos = _rows(export.files["photos"])
    rows_of: dict[str, set[str]] = {}
    for row in photos:
        rows_of.setdefault(row["photo_id"], set()).add(row["observation_uuid"])
    for planted in export.eligible:
        assert rows_of[str(planted.photo_id)] == set(planted.observation_uuids)
    three = export.planted["more_than_two_observations"][0]
    assert len(rows_of[str(three)]) == 3


def test_manifest_counts_every_planted_kind(export):
    assert set(export.planted) == set(PHOTO_DEFECTS)
    assert all(len(ids) == 2 for ids in export.planted.values())
    assert export.photo_outcomes["single_observation"] + sum(len(v) for v in export.planted.values()) + len(
        export.eligible) == export.n_photo_ids
    assert {p.divergence_rank for p in export.eligible} == {"kingdom", "phylum", "class", "order", "family", "genus"}
    assert any(p.extension == "JPG" for p in export.eligible)
    assert any(p.n_photos_sharing_observation_pair == 2 for p in export.eligible)
    assert export.row_issues["photos"]["malformed_line"] == 2


def test_taxonomy_has_intermediate_ranks_and_inactive_taxa(export):
    taxa = _rows(export.files["taxa"])
    ranks = {t["rank"] for t in taxa}
    assert {"kingdom", "phylum", "class", "order", "family", "genus", "species", "subspecies"} <= ranks
    assert ranks & {"subfamily", "tribe", "superfamily", "suborder"}
    assert any(t["active"] == "false" for t in taxa)
    life = next(t for t in taxa if t["taxon_id"] == "48460")
    assert life["ancestry"] == "" and life["rank"] == "stateofmatter"
    assert all(t["ancestry"].startswith("48460") for t in taxa if t["rank"] == "species" and "x" not in t["ancestry"]
               and "//" not in t["ancestry"])


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    config = ExportConfig(n_photos=600, n_coobserved=8, n_defects=1, chunk_rows=100)
    a = write_export(tmp_path / "a", config)
    b = write_export(tmp_path / "b", config)
    c = write_export(tmp_path / "c", ExportConfig(n_photos=600, n_coobserved=8, n_defects=1, chunk_rows=100, seed=1))
    for table in HEADERS:
        assert a.files[table].read_bytes() == b.files[table].read_bytes()
    assert a.files["photos"].read_bytes() != c.files["photos"].read_bytes()


def test_old_header_and_gzip(tmp_path):
    manifest = write_export(tmp_path, ExportConfig(n_photos=600, n_coobserved=8, n_defects=1, anomaly_score=False,
                                                   compress=True))
    path = export_file(tmp_path, "observations")
    assert path.name == "observations.csv.gz"
    assert read_header(path, "observations") == OBSERVATIONS_2022
    assert len(_rows(path)) == manifest.rows["observations"]


def test_too_few_photos_for_the_plants_is_an_error(tmp_path):
    with pytest.raises(CladebenchError, match="fewer than"):
        write_export(tmp_path, ExportConfig(n_photos=10))


def test_docstring_examples_run():
    import doctest

    from cladebench.curate import inat_export

    result = doctest.testmod(inat_export, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_read_header_decodes_only_the_header_line(tmp_path):
    header = "\t".join(HEADERS["observers"][0]).encode()
    path = tmp_path / "observers.csv"
    path.write_bytes(header + b"\n1\tlogin\tN\xe4me in Latin-1\n")  # a bad row is the reader's to count
    assert read_header(path, "observers") == HEADERS["observers"][0]
    path.write_bytes(header.replace(b"login", b"l\xf6gin") + b"\n")
    with pytest.raises(SchemaError, match="header is not UTF-8"):
        read_header(path, "observers")
    gz = tmp_path / "photos.csv.gz"
    gz.write_bytes(b"not gzip at all")
    with pytest.raises(CladebenchError, match="cannot read") as error:
        read_header(gz, "photos")
    assert error.value.exit_code == 1
