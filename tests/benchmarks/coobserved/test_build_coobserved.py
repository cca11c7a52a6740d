"""The iNat Co-Observed builder: real export files, and synthetic exports whose right answer is known."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench.benchmarks.coobserved.builder.build import build_coobserved
from cladebench.benchmarks.coobserved.builder.checks import PHOTO_CHECKS, SAMPLING_REASONS
from cladebench.benchmarks.coobserved.builder.config import ALLOWED_LICENSES, DATA_FILE, CoObservedBuildConfig
from cladebench.benchmarks.coobserved.builder.sampling import sample_key
from cladebench.config import add_config_arguments, config_from_args
from cladebench.curate.builders import get_builder
from cladebench.curate.inat_export import RANK_LEVELS
from cladebench.curate.sources.values import parse_license
from cladebench.errors import CladebenchError, UsageError
from cladebench.synthetic.inat_export import PHOTO_DEFECTS, ExportConfig, write_export
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
        assert all(o["species"] == f"{o['genus']} {o['scientific_name'].split()[1]}" for o in organisms)
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
    dropped = pq.read_table(summary.out / "left_out.parquet").to_pylist()
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
    from cladebench.benchmarks.coobserved.source import row_uuid
    from cladebench.curate.fetch import Downloaded, DownloadStore

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
    dropped = pq.read_table(summary.out / "left_out.parquet", columns=["photo_id", "reason"]).to_pylist()
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


def test_an_export_reduced_to_candidate_photos_builds_the_same_rows(tmp_path):
    """A researcher shares an export already cut down to the photos on two or more rows: no photo is on a
    single observation, and the accounting must not need one."""
    export = write_export(tmp_path / "export", ExportConfig(n_photos=300, n_coobserved=6, n_defects=1))
    full, full_table = _build(export.export_dir, tmp_path / "full", **UNCAPPED)
    photos = export.export_dir / "photos.csv"
    header, *lines = photos.read_text().splitlines()
    rows_per_id = Counter(line.split("\t")[1] for line in lines)
    photos.write_text("\n".join([header, *(line for line in lines if rows_per_id[line.split("\t")[1]] > 1)]) + "\n")
    reduced, reduced_table = _build(export.export_dir, tmp_path / "reduced", **UNCAPPED)
    assert reduced.photo_outcomes["single_observation"] == 0 < full.photo_outcomes["single_observation"]
    assert sorted(reduced_table.column("photo_id").to_pylist()) == sorted(full_table.column("photo_id").to_pylist())
    assert reduced.rows == full.rows > 0


# --- the output folder: what --overwrite may replace, inputs, killed runs -------------------------


def _cli(*args: str) -> int:
    from cladebench.cli import main

    return main(["build", "coobserved", *args])


def _listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def test_overwrite_refuses_a_users_folder_and_keeps_its_files(export, tmp_path, capsys):
    precious = tmp_path / "results"
    (precious / "figures").mkdir(parents=True)
    (precious / "thesis.tex").write_text("years of work")
    (precious / "figures" / "a.png").write_bytes(b"png")
    before = _listing(precious)
    assert _cli("--export-dir", str(export.export_dir), "--out", str(precious), "--overwrite") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "is not an output of `cladebench build coobserved`" in error
    assert _listing(precious) == before and (precious / "thesis.tex").read_text() == "years of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]  # no staging folder either


@pytest.mark.parametrize("where", ["the export itself", "a parent of the export", "inside the export"])
def test_an_output_overlapping_the_export_is_refused_and_the_export_kept(tmp_path, capsys, where):
    export = write_export(tmp_path / "data" / "export", ExportConfig(n_photos=300, n_coobserved=4, n_defects=1))
    out = {"the export itself": export.export_dir, "a parent of the export": tmp_path / "data",
           "inside the export": export.export_dir / "built"}[where]
    before = _listing(tmp_path)
    assert _cli("--export-dir", str(export.export_dir), "--out", str(out), "--overwrite") == 2
    assert "the output must be a folder of its own" in capsys.readouterr().err
    assert _listing(tmp_path) == before


def test_an_exclusion_list_inside_the_output_is_refused(export, tmp_path):
    out = _build(export.export_dir, tmp_path / "out", per_rank=1)[0].out
    (out / "exclude.txt").write_text("1\n")
    with pytest.raises(UsageError, match="contains the input"):
        _build(export.export_dir, out, exclude_photo_ids=out / "exclude.txt", overwrite=True)
    assert (out / "exclude.txt").is_file()


def test_overwrite_replaces_its_own_previous_output(export, tmp_path):
    out = tmp_path / "out"
    first, _ = _build(export.export_dir, out, per_rank=2)
    assert json.loads((out / ".cladebench-output.json").read_text())["writer"] == "build coobserved"
    second, table = _build(export.export_dir, out, per_rank=1, overwrite=True)
    assert table.num_rows == second.rows < first.rows
    assert json.loads((out / "build.json").read_text())["config"]["per_rank"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_overwrite_keeps_what_the_user_added_to_the_output(export, tmp_path, capsys):
    out = tmp_path / "out"
    _build(export.export_dir, out, per_rank=1)
    (out / "notes.txt").write_text("which photos I checked")
    (out / "coobserved.lance" / "_versions").mkdir(parents=True)
    (out / "coobserved.lance" / "_versions" / "1.manifest").write_bytes(b"rows I fetched")
    before = _listing(out)
    assert _cli("--export-dir", str(export.export_dir), "--out", str(out), "--overwrite") == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "coobserved.lance, notes.txt" in error
    assert _listing(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_output_path_that_is_a_file_is_refused(export, tmp_path, capsys):
    file = tmp_path / "out.parquet"
    file.write_bytes(b"mine")
    assert _cli("--export-dir", str(export.export_dir), "--out", str(file), "--overwrite") == 1
    assert "is not a folder" in capsys.readouterr().err and file.read_bytes() == b"mine"
    assert _cli("--export-dir", str(export.export_dir), "--out", str(file / "sub")) == 1
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="permissions do not bind root")
def test_a_read_only_output_folder_is_exit_1(export, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        assert _cli("--export-dir", str(export.export_dir), "--out", str(locked / "out")) == 1
        assert "cannot write" in capsys.readouterr().err
    finally:
        locked.chmod(0o755)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_build_killed_mid_way_leaves_nothing_the_rerun_does_not_clean(export, tmp_path):
    import subprocess
    import sys

    script = f"""
import os, signal
from pathlib import Path
from cladebench.benchmarks.coobserved.builder import build, config, stages
def die(self):
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 after the export was read into DuckDB
stages.Stages.lineages = die
build.build_coobserved(config.CoObservedBuildConfig(Path({str(export.export_dir)!r}), Path("out")))
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == -9, result.stderr
    [left] = [p for p in tmp_path.iterdir()]
    assert left.name.startswith(".out.building-") and (left / ".work" / "build.duckdb").is_file()
    summary, table = _build(export.export_dir, tmp_path / "out", per_rank=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and table.num_rows == summary.rows > 0
    assert not (tmp_path / "out" / ".work").exists()


# --- input the reader cannot read, and Ctrl-C: their exit codes -------------------------------------


def _copy_export(export, tmp_path: Path) -> Path:
    target = tmp_path / "export"
    shutil.copytree(export.export_dir, target)
    return target


def test_a_truncated_gzip_file_is_exit_1_naming_it(tmp_path, capsys):
    export = write_export(tmp_path / "export", ExportConfig(n_photos=3000, n_coobserved=4, n_defects=1,
                                                          compress=True))
    photos = export.export_dir / "photos.csv.gz"
    data = photos.read_bytes()
    photos.write_bytes(data[: len(data) // 2])
    assert _cli("--export-dir", str(export.export_dir), "--out", str(tmp_path / "out")) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "cannot read the export" in error and "GZIP" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


def test_bytes_that_are_not_utf8_in_a_header_are_a_schema_error(export, tmp_path, capsys):
    copy = _copy_export(export, tmp_path)
    taxa = copy / "taxa.csv"
    taxa.write_bytes(taxa.read_bytes().replace(b"ancestry", b"ances\xfftry", 1))
    assert _cli("--export-dir", str(copy), "--out", str(tmp_path / "out")) == 4
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "header is not UTF-8" in error


def test_bytes_that_are_not_utf8_in_an_early_row_are_a_counted_malformed_line(export, tmp_path):
    copy = _copy_export(export, tmp_path)
    photos = copy / "photos.csv"
    lines = photos.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"\t", b"\t\xff\xfe", 1)
    photos.write_bytes(b"\n".join(lines))
    summary, _ = _build(copy, tmp_path / "out", per_rank=1)
    assert summary.row_issues["photos"]["malformed_line"] == export.row_issues["photos"]["malformed_line"] + 1


def test_duckdb_interrupt_is_a_keyboard_interrupt_and_leaves_no_staging(export, tmp_path, monkeypatch, capsys):
    import threading

    from cladebench.benchmarks.coobserved.builder import build, stages

    connections, left = [], threading.Event()
    real_connect = build._connect

    def connect(*args, **kwargs):
        connections.append(real_connect(*args, **kwargs))
        return connections[-1]

    def endless(self):
        try:
            self.sql("CREATE TABLE spin AS SELECT count(*) FROM range(1000000000000) t(i) WHERE i % 7 = 3")
        finally:
            left.set()

    def interrupt_until_it_stops():
        while not left.wait(0.01):
            if connections:
                connections[0].interrupt()  # what Ctrl-C does, from another thread

    monkeypatch.setattr(build, "_connect", connect)
    monkeypatch.setattr(stages.Stages, "photos", endless)
    thread = threading.Thread(target=interrupt_until_it_stops)
    thread.start()
    try:
        assert _cli("--export-dir", str(export.export_dir), "--out", str(tmp_path / "out")) == 130
    finally:
        left.set()
        thread.join()
    assert capsys.readouterr().err.strip() == "cladebench build: interrupted"
    assert list(tmp_path.iterdir()) == []


def test_query_interrupted_by_sigint_is_exit_130(export, tmp_path, monkeypatch, capsys):
    """What DuckDB's Python client raises when SIGINT arrives during a query (7 of 12 attacks ended in exit 70)."""
    from cladebench.benchmarks.coobserved.builder import stages

    def interrupted(self):
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(stages.Stages, "taxa", interrupted)
    assert _cli("--export-dir", str(export.export_dir), "--out", str(tmp_path / "out")) == 130
    assert capsys.readouterr().err.strip() == "cladebench build: interrupted"
    assert list(tmp_path.iterdir()) == []


# --- counted, and said --------------------------------------------------------------------------------


def test_duplicate_observer_ids_are_counted_and_resolved_whatever_the_order(export, tmp_path):
    copy = _copy_export(export, tmp_path)
    observers = copy / "observers.csv"
    header, *lines = observers.read_text(encoding="utf-8").rstrip("\n").split("\n")
    observer_id = export.eligible[0].observer_id
    [line] = [x for x in lines if x.split("\t")[0] == str(observer_id)]
    login = line.split("\t")[1]
    conflicting = f"{observer_id}\t{login}\tAnother Name"
    other = lines[1]  # an exact duplicate of another observer's row
    observers.write_text("\n".join([header, conflicting, other, *lines]) + "\n", encoding="utf-8")
    first, table_first = _build(copy, tmp_path / "a", **UNCAPPED)
    observers.write_text("\n".join([header, *lines, other, conflicting]) + "\n", encoding="utf-8")
    second, table_second = _build(copy, tmp_path / "b", **UNCAPPED)
    assert second.row_issues == first.row_issues
    assert first.row_issues["observers"]["duplicate_observer_id"] == 2
    assert first.notes["observer_ids_on_disagreeing_rows"] == 1
    assert "| duplicate_observer_id |" in first.card_path.read_text(encoding="utf-8")
    assert table_first.equals(table_second)  # the file order does not decide
    names = {r["observer_name"] for r in table_first.to_pylist() if r["observer_id"] == observer_id}
    assert len(names) == 1


def test_with_both_csv_and_gz_the_build_is_refused(export, tmp_path, capsys):
    copy = _copy_export(export, tmp_path)
    with open(copy / "photos.csv", "rb") as source, gzip.open(copy / "photos.csv.gz", "wb") as target:
        target.write(source.read())
    (copy / "photos.csv").write_text((copy / "photos.csv").read_text().splitlines()[0] + "\n")  # a stale one
    assert _cli("--export-dir", str(copy), "--out", str(tmp_path / "out")) == 1
    assert "both photos.csv and photos.csv.gz; keep the one that is the export" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("table", "make", "said"), [
    ("photos", lambda p: p.mkdir(), "a folder"),
    ("taxa", lambda p: os.mkfifo(p), "not a regular file"),
    ("observers", lambda p: p.symlink_to(p.parent / "gone.csv"), "a link to nothing"),
])
def test_an_export_table_that_is_not_a_file_says_what_it_is(export, tmp_path, capsys, table, make, said):
    copy = _copy_export(export, tmp_path)
    (copy / f"{table}.csv").unlink()
    make(copy / f"{table}.csv")
    assert _cli("--export-dir", str(copy), "--out", str(tmp_path / "out")) == 1
    error = capsys.readouterr().err
    assert f"{copy / (table + '.csv')}: {said}" in error and "no " + table not in error


def test_a_list_option_that_is_a_folder_or_missing_names_itself(export, tmp_path, capsys):
    folder = tmp_path / "species"
    folder.mkdir()
    for option, path, said in (("--tol-species", folder, "a folder, not a file"),
                               ("--exclude-photo-ids", tmp_path / "gone.txt", "no such file")):
        assert _cli("--export-dir", str(export.export_dir), "--out", str(tmp_path / "out"), option, str(path)) == 2
        assert f"{option}: {path}: {said}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
