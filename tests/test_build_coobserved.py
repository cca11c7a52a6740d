"""The iNat Co-Observed builder: real export files, and synthetic exports whose right answer is known."""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench.builders import get_builder
from cladebench.builders.coobserved import (
    ALLOWED_LICENSES,
    DATA_FILE,
    PHOTO_CHECKS,
    SAMPLING_REASONS,
    CoObservedBuildConfig,
    build_coobserved,
    sample_key,
)
from cladebench.config import add_config_arguments, config_from_args
from cladebench.errors import CladebenchError, UsageError
from cladebench.inat_export import PHOTO_DEFECTS, RANK_LEVELS, ExportConfig, write_export
from cladebench.sources.inquire import parse_license
from cladebench.taxonomy import RANK_COLUMNS, ancestry_from_parents

REAL_EXPORT = "pyinaturalist-convert/test/sample_data/inaturalist-open-data"
REAL_TAXONOMY = "pyinaturalist-convert/test/sample_data/taxonomy.csv"
UNCAPPED = {"per_rank": 100_000, "max_per_species": 100_000, "max_per_observer": 100_000}


def _build(export_dir: Path, out: Path, **options) -> tuple:
    summary = build_coobserved(CoObservedBuildConfig(export_dir, out, **options))
    return summary, pq.read_table(out / DATA_FILE)


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return write_export(tmp_path_factory.mktemp("export"), ExportConfig(n_photos=6000, n_coobserved=72))


@pytest.fixture(scope="module")
def uncapped(export, tmp_path_factory):
    return _build(export.export_dir, tmp_path_factory.mktemp("built") / "out", **UNCAPPED)


# --- the known answer ----------------------------------------------------------------------------


def test_checks_and_planted_defects_agree():
    reasons = [c.reason for c in PHOTO_CHECKS]
    assert [r for r in reasons if r not in ("single_observation", "excluded_photo_id")] == list(PHOTO_DEFECTS)


def test_kept_set_is_the_planted_eligible_set(export, uncapped):
    summary, table = uncapped
    expected = {p.photo_id: p for p in export.eligible}
    assert sorted(table.column("photo_id").to_pylist()) == sorted(expected)
    assert summary.rows == summary.eligible == len(expected)
    for row in table.to_pylist():
        planted = expected[row["photo_id"]]
        assert row["divergence_rank"] == planted.divergence_rank
        assert row["image_url"] == row["image_url_medium"] == planted.image_url
        assert row["attribution"] == planted.attribution
        assert row["license"] == planted.license
        assert row["n_photos_sharing_observation_pair"] == planted.n_photos_sharing_observation_pair
        organisms = row["organisms"]
        assert {o["observation_uuid"] for o in organisms} == set(planted.observation_uuids)
        assert {o["scientific_name"] for o in organisms} == set(planted.scientific_names)
        assert all(o["quality_grade"] == "research" and all(o[c] for c in RANK_COLUMNS) for o in organisms)
        assert all(o["species"] == o["scientific_name"].split()[1] for o in organisms)
        names = [tuple(o[c] for c in RANK_COLUMNS) for o in organisms]
        assert names == sorted(names)
        assert row["kingdom_pair"] == f"{organisms[0]['kingdom']} + {organisms[1]['kingdom']}"
        assert row["class_pair"] == f"{organisms[0]['class']} + {organisms[1]['class']}"
    assert any(p.extension == "JPG" and p.image_url.endswith("/medium.JPG") for p in expected.values())


def test_every_planted_bad_row_is_counted_under_its_reason(export, uncapped):
    summary, _ = uncapped
    expected = {**dict.fromkeys([c.reason for c in PHOTO_CHECKS] + list(SAMPLING_REASONS), 0),
                **export.photo_outcomes}
    assert summary.photo_outcomes == expected
    assert summary.row_issues == export.row_issues
    assert summary.notes["observers_without_name"] == export.observers_without_name
    assert summary.notes["malformed_line_kinds"] == {"photos": {"TOO MANY COLUMNS": 2}}
    assert summary.photo_ids == export.n_photo_ids
    assert summary.files["photos"]["rows"] == export.rows["photos"]
    assert summary.files["observations"]["rows"] == export.rows["observations"]
    dropped = pq.read_table(summary.out / "dropped.parquet").to_pylist()
    by_reason: dict[str, set[int]] = {}
    for row in dropped:
        by_reason.setdefault(row["reason"], set()).add(row["photo_id"])
    assert by_reason == {k: set(v) for k, v in export.planted.items()}


def test_observers_without_a_name_are_attributed_by_login(export, uncapped):
    summary, table = uncapped
    from_login = [r for r in table.to_pylist() if r["observer_name"] == r["observer_login"]]
    assert from_login and summary.notes["kept_attributions_from_login"] == len(from_login)
    for row in from_login:
        assert row["attribution"].startswith(f"© {row['observer_login']}, ") or row["attribution"].startswith(
            f"{row['observer_login']}, no rights reserved")


def test_card_has_the_published_tables_and_every_reason(uncapped):
    summary, _ = uncapped
    card = summary.card_path.read_text(encoding="utf-8")
    for heading in ("## Photos per divergence rank", "## Kingdom pairs", "## Species and class pairs",
                    "## What was left out, and why", summary.fingerprint):
        assert heading in card
    for reason in [c.reason for c in PHOTO_CHECKS] + list(SAMPLING_REASONS) + ["malformed_line", "duplicate_row"]:
        assert f"| {reason} |" in card


def test_licenses_outside_the_three_are_dropped_case_insensitively(export, uncapped):
    _, table = uncapped
    licenses = table.column("license").to_pylist()
    assert {parse_license(raw).code for raw in licenses} <= set(ALLOWED_LICENSES)
    assert {"cc-by-nc", "Cc0"} <= set(licenses)  # codes in any case are kept
    assert all(r["license_url"] == parse_license(r["license"]).link for r in table.to_pylist())


# --- sampling ------------------------------------------------------------------------------------


def test_sampling_caps_are_respected(export, tmp_path):
    summary, table = _build(export.export_dir, tmp_path / "out", per_rank=4, max_per_species=2, max_per_observer=3)
    rows = table.to_pylist()
    assert Counter(r["divergence_rank"] for r in rows).most_common(1)[0][1] <= 4
    assert max(Counter(r["observer_id"] for r in rows).values()) <= 3
    species = Counter(o["scientific_name"] for r in rows for o in r["organisms"])
    assert max(species.values()) <= 2
    caps = {r: summary.photo_outcomes[r] for r in SAMPLING_REASONS}
    assert all(caps.values()), caps  # each cap binds on this export
    assert summary.eligible == summary.rows + sum(caps.values())
    assert set(table.column("photo_id").to_pylist()) <= {p.photo_id for p in export.eligible}


def test_round_robin_over_kingdom_pairs(export, uncapped, tmp_path):
    everything = uncapped[1].to_pylist()
    for rank in ("kingdom", "phylum"):
        pairs = {r["kingdom_pair"] for r in everything if r["divergence_rank"] == rank}
        assert len(pairs) >= 2
        _, table = _build(export.export_dir, tmp_path / rank, per_rank=len(pairs), max_per_species=100,
                          max_per_observer=100)
        taken = [r["kingdom_pair"] for r in table.to_pylist() if r["divergence_rank"] == rank]
        assert sorted(taken) == sorted(pairs)  # each kingdom pair once before any twice


def test_same_seed_same_dataset_other_seed_differs(export, tmp_path):
    options = {"per_rank": 3, "max_per_species": 2, "max_per_observer": 4}
    first, table_1 = _build(export.export_dir, tmp_path / "a", seed=7, **options)
    second, table_2 = _build(export.export_dir, tmp_path / "b", seed=7, **options)
    other, table_3 = _build(export.export_dir, tmp_path / "c", seed=8, **options)
    assert table_1.equals(table_2) and first.fingerprint == second.fingerprint
    assert (tmp_path / "a" / DATA_FILE).read_bytes() == (tmp_path / "b" / DATA_FILE).read_bytes()
    assert other.fingerprint != first.fingerprint
    assert table_3.column("photo_id").to_pylist() != table_1.column("photo_id").to_pylist()


def test_sample_key_matches_duckdb():
    import duckdb

    assert duckdb.sql("SELECT md5(concat(3, ':', 35927::BIGINT))").fetchall()[0][0] == sample_key(3, 35927)


# --- options -------------------------------------------------------------------------------------


def test_exclusion_list_text_and_parquet(export, tmp_path):
    excluded = [p.photo_id for p in export.eligible[:3]]
    text = tmp_path / "exclude.txt"
    text.write_text("photo_id\n" + "\n".join(map(str, excluded)) + "\n\n")
    summary, table = _build(export.export_dir, tmp_path / "out", exclude_photo_ids=text, **UNCAPPED)
    assert summary.photo_outcomes["excluded_photo_id"] == 3
    assert not set(excluded) & set(table.column("photo_id").to_pylist())
    assert summary.rows == len(export.eligible) - 3
    parquet = tmp_path / "exclude.parquet"
    pq.write_table(pa.table({"photo_id": excluded[:1]}), parquet)
    summary, _ = _build(export.export_dir, tmp_path / "out2", exclude_photo_ids=parquet, **UNCAPPED)
    assert summary.photo_outcomes["excluded_photo_id"] == 1


def test_a_bad_exclusion_list_fails_before_anything_is_written(export, tmp_path):
    bad = tmp_path / "exclude.txt"
    bad.write_text("12\nnot-an-id\n")
    with pytest.raises(UsageError, match="not a list of photo ids"):
        _build(export.export_dir, tmp_path / "out", exclude_photo_ids=bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exclude.txt"]  # no output, no staging folder


def test_tol_species_flags_organisms(export, tmp_path):
    names = sorted({n for p in export.eligible[:5] for n in p.scientific_names})
    tol = tmp_path / "tol.txt"
    tol.write_text("\n".join(n.upper() for n in names) + "\n")  # matched without regard to case
    _, table = _build(export.export_dir, tmp_path / "out", tol_species=tol, **UNCAPPED)
    for row in table.to_pylist():
        assert row["in_tol200m"] is None
        for organism in row["organisms"]:
            assert organism["species_in_tol200m"] is (organism["scientific_name"] in names)


def test_old_observations_header_and_gzipped_files(tmp_path):
    config = ExportConfig(n_photos=1500, n_coobserved=12, n_defects=1, seed=3)
    plain = write_export(tmp_path / "plain", config)
    old = write_export(tmp_path / "old", dataclasses.replace(config, anomaly_score=False, compress=True))
    a, table_a = _build(plain.export_dir, tmp_path / "a", **UNCAPPED)
    b, table_b = _build(old.export_dir, tmp_path / "b", **UNCAPPED)
    assert len(b.files["observations"]["columns"]) == 8 and b.files["photos"]["file"].endswith(".csv.gz")
    assert table_a.equals(table_b) and a.photo_outcomes == b.photo_outcomes


def test_output_exists_unless_overwrite(export, tmp_path):
    out = tmp_path / "out"
    _build(export.export_dir, out, per_rank=2)
    with pytest.raises(CladebenchError, match="already exists"):
        _build(export.export_dir, out, per_rank=2)
    summary, table = _build(export.export_dir, out, per_rank=1, overwrite=True)
    assert table.num_rows == summary.rows <= 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_config_maps_onto_cli_options(tmp_path):
    import argparse

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, CoObservedBuildConfig)
    args = parser.parse_args(["--export-dir", str(tmp_path), "--out", str(tmp_path / "o"), "--per-rank", "5",
                              "--download"])
    config = config_from_args(CoObservedBuildConfig, args)
    assert config == CoObservedBuildConfig(tmp_path, tmp_path / "o", per_rank=5, download=True)
    assert get_builder("coobserved").config() is CoObservedBuildConfig
    with pytest.raises(SystemExit):
        parser.parse_args(["--export-dir", str(tmp_path)])  # --out is required
    with pytest.raises(UsageError):
        CoObservedBuildConfig(tmp_path, tmp_path, per_rank=0)


# --- images --------------------------------------------------------------------------------------


def test_download_writes_the_lance_dataset_from_cached_photos(export, tmp_path, monkeypatch):
    """With --download the photos are fetched into the download store; here they are in it already, so the
    build runs offline and the Lance dataset's fingerprint is the sample's."""
    from PIL import Image

    from cladebench import store
    from cladebench.download import Downloaded, DownloadStore
    from cladebench.sources.coobserved import row_uuid

    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    options = {"per_rank": 2, "max_per_species": 100, "max_per_observer": 100}
    plan, table = _build(export.export_dir, tmp_path / "plan", **options)
    downloads = DownloadStore(tmp_path / "cache" / "downloads")
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (40, 120, 60)).save(buffer, "JPEG")
    body = buffer.getvalue()
    import hashlib

    digest = hashlib.sha256(body).hexdigest()
    downloads.put(body, digest)
    for photo_id, url in zip(table.column("photo_id").to_pylist(), table.column("image_url").to_pylist(), strict=True):
        downloads.record(Downloaded(row_uuid(photo_id), url, digest, len(body), "image/jpeg", "jpeg", 1, time.time()))
    summary, _ = _build(export.export_dir, tmp_path / "out", download=True, **options)
    assert summary.dataset_path == tmp_path / "out" / "coobserved.lance"
    dataset = store.open_dataset(summary.dataset_path)
    assert dataset.count_rows() == summary.rows == plan.rows
    assert summary.dataset_fingerprint == summary.fingerprint == store.fingerprint(dataset)
    assert summary.photo_outcomes["image_fetch_failed"] == 0
    row = dataset.to_table(columns=["organisms", "divergence_rank", "image"]).slice(0, 1).to_pylist()[0]
    assert row["image"] == body and len(row["organisms"]) == 2


# --- real export files ---------------------------------------------------------------------------


def _copy_real_export(realdata, target: Path) -> Path:
    folder = realdata(f"{REAL_EXPORT}/photos.csv").parent
    target.mkdir()
    for name in ("photos.csv", "observations.csv", "taxa.csv", "observers.csv"):
        shutil.copy(folder / name, target / name)
        os.chmod(target / name, 0o644)
    return target


def _tsv(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


def _write_tsv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")


def _share_photo(folder: Path, photo_of: str, also_on: str, license_: str | None = None) -> int:
    """Attach the photo of observation ``photo_of`` to observation ``also_on`` too, as iNat exports a shared
    photo: a second row with the same photo id."""
    header, rows = _tsv(folder / "photos.csv")
    row = next(r for r in rows if r[2].startswith(photo_of))
    target = next(r[0] for r in _tsv(folder / "observations.csv")[1] if r[0].startswith(also_on))
    if license_:
        for r in rows:
            if r[1] == row[1]:
                r[5] = license_
    rows.append([*row[:2], target, *row[3:5], license_ or row[5], *row[6:8], "1"])
    _write_tsv(folder / "photos.csv", header, rows)
    return int(row[1])


def test_real_sample_builds_without_co_observed_photos(realdata, tmp_path):
    folder = _copy_real_export(realdata, tmp_path / "export")
    summary, table = _build(folder, tmp_path / "out")
    assert table.num_rows == summary.rows == 0
    assert summary.photo_ids == 50 and summary.photo_outcomes["single_observation"] == 50
    assert {t: f["rows"] for t, f in summary.files.items()} == dict.fromkeys(summary.files, 50)
    assert len(summary.files["observations"]["columns"]) == 8
    with (folder / "observers.csv").open(encoding="utf-8") as handle:
        named_none = sum(r["name"] == "None" for r in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert summary.notes["observers_without_name"] == named_none
    # Two casual rows of the real 2022 file carry a ninth, empty field under the 8-column header: counted, not fatal.
    assert summary.row_issues == {"observations": {"malformed_line": 2}}
    assert summary.notes["malformed_line_kinds"] == {"observations": {"TOO MANY COLUMNS": 2}}
    assert summary.card_path.is_file()


def test_real_taxa_missing_are_counted_as_unknown_taxa(realdata, tmp_path):
    folder = _copy_real_export(realdata, tmp_path / "export")
    # Observer 1620's photo shared by both of their research-grade observations; neither taxon is in the
    # sample's taxa.csv (a head sample of the file, not a closed tree).
    photo_id = _share_photo(folder, "9756a1c6", "bc932ad8")
    summary, table = _build(folder, tmp_path / "out")
    assert table.num_rows == 0
    assert summary.photo_outcomes["unknown_taxon"] == 1 and summary.photo_outcomes["single_observation"] == 49
    dropped = pq.read_table(summary.out / "dropped.parquet").to_pylist()
    assert dropped == [{"photo_id": photo_id, "reason": "unknown_taxon"}]


def _real_tree_taxa(realdata, folder: Path) -> dict[str, int]:
    """taxa.csv from the real closed 1,683-taxon tree (ancestry built from parent ids); returns the ids of
    four species with all seven ranks in four different genera."""
    with realdata(REAL_TAXONOMY).open(encoding="utf-8", newline="") as handle:
        taxa = list(csv.DictReader(handle))
    parents = {int(t["id"]): int(t["parent_id"]) if t["parent_id"] else None for t in taxa}
    ancestry = ancestry_from_parents(parents)
    rows = [[t["id"], ancestry[int(t["id"])], str(RANK_LEVELS.get(t["rank"], "")), t["rank"], t["name"], "true"]
            for t in taxa]
    _write_tsv(folder / "taxa.csv", ["taxon_id", "ancestry", "rank_level", "rank", "name", "active"], rows)
    by_id = {int(t["id"]): t for t in taxa}
    chosen: dict[str, int] = {}
    for t in taxa:
        if t["rank"] != "species":
            continue
        chain = [int(a) for a in ancestry[int(t["id"])].split("/")] + [int(t["id"])]
        ranks = {by_id[a]["rank"]: by_id[a]["name"] for a in chain if a in by_id}
        if all(r in ranks for r in RANK_COLUMNS) and ranks["genus"] not in chosen:
            chosen[ranks["genus"]] = int(t["id"])
        if len(chosen) == 4:
            break
    return chosen


def test_real_rows_on_the_real_tree(realdata, tmp_path):
    """Real photo, observation and observer rows on the real taxonomy tree: a JPG photo keeps its extension in
    the URL, an observer named None is attributed by login, an observer missing from observers.csv is counted."""
    folder = _copy_real_export(realdata, tmp_path / "export")
    species = list(_real_tree_taxa(realdata, folder).values())
    header, observations = _tsv(folder / "observations.csv")
    moved = {"28405cfc": species[0], "74b84f8f": species[1], "9756a1c6": species[2], "bc932ad8": species[3],
             "d097e547": species[0], "5f8b0439": species[2]}
    for row in observations:
        if row[0][:8] in moved:
            row[5] = str(moved[row[0][:8]])
    _write_tsv(folder / "observations.csv", header, observations)
    jpg = _share_photo(folder, "28405cfc", "74b84f8f")  # observer 1703, extension JPG, CC-BY
    unnamed = _share_photo(folder, "9756a1c6", "bc932ad8", license_="CC-BY")  # observer 1620 "cyric", name None
    _share_photo(folder, "d097e547", "5f8b0439")  # observer 3406 is not in observers.csv
    summary, table = _build(folder, tmp_path / "out")
    rows = {r["photo_id"]: r for r in table.to_pylist()}
    assert set(rows) == {jpg, unnamed}
    assert rows[jpg]["image_url"] == f"https://inaturalist-open-data.s3.amazonaws.com/photos/{jpg}/medium.JPG"
    assert rows[jpg]["attribution"] == "© Cheryl McCleary-Catalano, some rights reserved (CC-BY)"
    assert rows[unnamed]["attribution"] == "© cyric, some rights reserved (CC-BY)"
    assert rows[unnamed]["observer_name"] == "cyric"
    assert summary.photo_outcomes["unknown_observer"] == 1
    for row in rows.values():
        assert all(all(o[c] for c in RANK_COLUMNS) for o in row["organisms"])
        assert row["organisms"][0]["kingdom"] == "Animalia"


@pytest.mark.parametrize("name", ["builders", "builders.coobserved"])
def test_docstring_examples_run(name):
    import doctest
    import importlib

    module = importlib.import_module(f"cladebench.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_describe_names_the_output_and_the_drops(uncapped):
    summary, _ = uncapped
    text = summary.describe()
    assert str(summary.out) in text and "unknown_taxon 2" in text and "cladebench load inat-coobserved" in text


def test_build_verb_writes_the_same_output(export, uncapped, tmp_path, capsys):
    from cladebench.cli import main

    out = tmp_path / "cli"
    options = [f"--{k.replace('_', '-')}={v}" for k, v in UNCAPPED.items()]
    assert main(["build", "coobserved", "--export-dir", str(export.export_dir), "--out", str(out), *options]) == 0
    assert pq.read_table(out / DATA_FILE).equals(uncapped[1])
    assert str(out) in capsys.readouterr().out
    assert main(["build", "coobserved", "--export-dir", str(export.export_dir), "--out", str(out)]) == 1  # exists
