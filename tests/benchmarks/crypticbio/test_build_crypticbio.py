"""CrypticBio curation from a YAML config: real metadata end to end, the filter rule, checks, subsets, download."""

from __future__ import annotations

import ast
import csv
import datetime
import hashlib
import io
import json
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from cladebench.benchmarks.crypticbio.builder.build import build_crypticbio
from cladebench.benchmarks.crypticbio.builder.filters import FILTER_KEYS, parse_condition
from cladebench.benchmarks.crypticbio.builder.sections import CrypticBioBuildConfig, load_config, parse_config
from cladebench.benchmarks.crypticbio.builder.subsets import sample_key
from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS, read_cryptic_lookup, read_crypticbio
from cladebench.errors import CladebenchError, SchemaError, UsageError
from helpers.http_local import serving
from helpers.photo_host import PhotoHost

COMMON = "Final_Multimodal_Group_11/input/CrypticBio-Common.csv"
LOOKUP = "Final_Multimodal_Group_11/input/small_lookup_cryptic_group.tsv"


def write_yaml(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict[str, str]], extra: tuple[str, ...] = ()) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*CSV_COLUMNS, *extra], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


TAXA = {
    "Podarcis muralis": ("Animalia", "Chordata", "Squamata", "", "Lacertidae", "Podarcis"),
    "Podarcis siculus": ("Animalia", "Chordata", "Squamata", "", "Lacertidae", "Podarcis"),
    "Parus major": ("Animalia", "Chordata", "Aves", "Passeriformes", "Paridae", "Parus"),
    "Quercus robur": ("Plantae", "Tracheophyta", "Magnoliopsida", "Fagales", "Fagaceae", "Quercus"),
}


def row(name: str, url: str, date: str | None = "2020-05-17", lat: str = "45.1", lon: str = "7.6",
        vernacular: str = "['a name']", **extra: str) -> dict[str, str]:
    kingdom, phylum, klass, order, family, genus = TAXA.get(name, TAXA["Podarcis muralis"])
    year, month, day = (f"{float(p)}" for p in date.split("-")) if date else ("", "", "")
    return {"scientificName": name, "year": year, "month": month, "day": day, "decimalLatitude": lat,
            "decimalLongitude": lon, "url": url, "kingdom": kingdom, "phylum": phylum, "class": klass,
            "order": order, "family": family, "genus": genus, "vernacularName": vernacular, **extra}


def config_for(tmp_path: Path, metadata: Path | list[Path], **sections: Any) -> dict[str, Any]:
    paths = [str(p) for p in metadata] if isinstance(metadata, list) else str(metadata)
    dataset = {"metadata": paths, "out": str(tmp_path / "out"), **sections.pop("dataset", {})}
    return {"dataset": dataset, **sections}


def build(tmp_path: Path, config: dict[str, Any], name: str = "config.yaml"):
    return build_crypticbio(write_yaml(tmp_path / name, config))


# --- the real CrypticBio-Common metadata, end to end -----------------------------------------------


REAL_FILTERS = {
    "kingdom": "Animalia",
    "class": ["Aves", "Insecta", "Squamata"],
    "year": [2015, 2023],
    "latitude": [20, 60],
    "longitude": [-130, 40],
    "vernacular_name": True,
}


def real_expectations(raw: list[dict[str, str]]) -> tuple[Counter[str], Counter[str], list[dict[str, str]]]:
    """First-reason drops, each filter's own failures and the kept rows, with plain Python."""

    def number(text: str) -> float | None:
        return float(text) if text.strip() else None

    def between(value: float | None, low: float, high: float) -> bool:
        return value is not None and low <= value <= high

    checks: list[tuple[str, Callable[[dict[str, str]], bool]]] = [
        ("filter:kingdom", lambda r: r["kingdom"] == "Animalia"),
        ("filter:class", lambda r: r["class"] in {"Aves", "Insecta", "Squamata"}),
        ("filter:year", lambda r: between(number(r["year"]), 2015, 2023)),
        ("filter:latitude", lambda r: between(number(r["decimalLatitude"]), 20, 60)),
        ("filter:longitude", lambda r: between(number(r["decimalLongitude"]), -130, 40)),
        ("filter:vernacular_name", lambda r: bool(ast.literal_eval(r["vernacularName"] or "[]"))),
    ]
    first: Counter[str] = Counter()
    own: Counter[str] = Counter()
    kept, urls = [], set()
    for r in raw:
        verdicts = [(name, check(r)) for name, check in checks]
        own.update(name for name, ok in verdicts if not ok)
        failed = next((name for name, ok in verdicts if not ok), None)
        if failed is not None:
            first[failed] += 1
        elif r["url"] in urls:
            first["duplicate_url"] += 1
        else:
            urls.add(r["url"])
            kept.append(r)
    return first, own, kept


def test_real_common_curated_end_to_end(tmp_path: Path, realdata: Callable[[str], Path]) -> None:
    raw = read_rows(realdata(COMMON))
    first, own, kept = real_expectations(raw)
    config = config_for(tmp_path, realdata(COMMON), filters=REAL_FILTERS)
    summary = build(tmp_path, config)

    assert summary.rows_read == len(raw) == 15_801
    assert summary.kept == len(kept) == 3748
    assert summary.dropped == {name: first[name] for name in summary.dropped}
    assert sum(summary.dropped.values()) + summary.kept == summary.rows_read
    assert summary.dropped == {"filter:kingdom": 4600, "filter:class": 4601, "filter:year": 1751,
                               "filter:latitude": 833, "filter:longitude": 268, "filter:vernacular_name": 0}
    assert summary.failing == {name: own[name] for name in summary.dropped}
    assert summary.malformed_lines == 0

    out = tmp_path / "out"
    written = read_rows(out / "CrypticBio-Curated.csv")
    assert list(written[0]) == list(CSV_COLUMNS)
    by_url = {r["url"]: r for r in kept}
    assert sorted(r["url"] for r in written) == sorted(by_url)
    for w in written:
        original = by_url[w["url"]]
        for column in ("scientificName", "kingdom", "phylum", "class", "order", "family", "genus"):
            assert w[column] == original[column]
        for column in ("year", "month", "day", "decimalLatitude", "decimalLongitude"):
            assert float(w[column]) == float(original[column])
        assert ast.literal_eval(w["vernacularName"]) == ast.literal_eval(original["vernacularName"])
    classes = Counter(r["class"] for r in kept)
    assert summary.subsets["curated"]["taxonomic_groups"] == dict(classes)
    assert summary.subsets["curated"]["species"] == len({r["scientificName"] for r in kept})

    # The output is a CrypticBio benchmark CSV: the published reader takes it as it is.
    table = read_crypticbio(out / "CrypticBio-Curated.csv")
    assert table.num_rows == len(kept)
    assert set(table.column("source_dataset").to_pylist()) == {"crypticbio-curated"}

    card = (out / "README.md").read_text()
    for text in ("15801 rows read", "3748 rows kept", "| filter:class | 4,601 | 9,201 |", "`year from 2015 to 2023`",
                 f"| Aves | {classes['Aves']:,} |"):
        assert text in card
    record = json.loads((out / "build.json").read_text())
    assert record["kept"] == 3748 and record["config"]["dataset"]["seed"] == 0
    assert pq.read_table(out / "left_out.parquet").num_rows == 0
    assert sorted(p.name for p in out.iterdir()) == [".cladebench-output.json", "CrypticBio-Curated.csv", "README.md",
                                                     "build.json", "left_out.parquet"]


def test_real_common_with_groups_and_subsets(tmp_path: Path, realdata: Callable[[str], Path]) -> None:
    raw = read_rows(realdata(COMMON))
    lookup = read_cryptic_lookup(realdata(LOOKUP))
    config = config_for(
        tmp_path, realdata(COMMON), dataset={"seed": 3},
        filters={"cryptic_group": True},
        generate_pairs={"lookup": str(realdata(LOOKUP))},
        subsets={"common": {"more_than": 60, "per_species": 25}, "common_unseen": {"start": "2024-01-01"}},
    )
    summary = build(tmp_path, config)

    with_group = [r for r in raw if len(lookup[r["scientificName"]]) > 1]
    assert summary.dropped == {"filter:cryptic_group": len(raw) - len(with_group)} == {"filter:cryptic_group": 300}

    def in_window(r: dict[str, str]) -> bool:
        return bool(r["year"]) and int(float(r["year"])) >= 2024

    pool: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in with_group:
        if not in_window(r):
            pool[r["scientificName"]].append(r)
    common_species = {s for s, rows in pool.items() if len(rows) > 60}
    expected_common = {u for s in common_species
                       for u in sorted((r["url"] for r in pool[s]),
                                       key=lambda u: hashlib.md5(f"3:{u}".encode()).hexdigest())[:25]}
    out = tmp_path / "out"
    assert {r["url"] for r in read_rows(out / "CrypticBio-Common.csv")} == expected_common
    expected_unseen = {r["url"] for r in with_group if in_window(r) and r["scientificName"] in common_species}
    assert {r["url"] for r in read_rows(out / "CrypticBio-CommonUnseen.csv")} == expected_unseen
    assert summary.subsets["common"]["rows"] == 25 * len(common_species)
    assert summary.subsets["common"]["species_with_group"] == len(common_species)

    written_lookup = read_cryptic_lookup(out / "cryptic_groups.tsv")
    assert written_lookup == {s: lookup[s] for s in common_species}
    table = read_crypticbio(out / "CrypticBio-Common.csv", lookup=out / "cryptic_groups.tsv")
    assert table.column("cryptic_group").null_count == 0
    assert "Source: lookup small_lookup_cryptic_group.tsv" in (out / "README.md").read_text()


# --- the filter rule, kind by kind -----------------------------------------------------------------


FILTER_ROWS = {
    "r1": row("Podarcis muralis", "u1", "2019-05-17", "45.1", "7.6", "['common wall lizard', 'wall lizard']",
              crypticGroup="['Podarcis siculus']", license="CC-BY"),
    "r2": row("Parus major", "u2", "2020-12-03", "51.5", "-0.1", "['great tit']", crypticGroup="[]", license="cc0"),
    "r3": row("Quercus robur", "u3", "2021-01-20", "-33.9", "151.2", "", crypticGroup="", license="CC BY-NC 4.0"),
    "r4": row("Parus major", "u4", None, "60.0", "179.5", "['great tit', 'Kohlmeise']",
              crypticGroup="['Parus minor']", license="cc-by-nc"),
    "r5": row("Podarcis siculus", "u5", "2020-06-30", "", "", "['Italian wall lizard']",
              crypticGroup="['Podarcis muralis']", license="CC-BY-SA"),
    "r6": row("Quercus robur", "u6", "2020-02-29", "10.0", "-175.0", "['oak']", crypticGroup="", license="cc0"),
}
ALL = set(FILTER_ROWS)


@pytest.mark.parametrize(("key", "value", "kept"), [
    # text: scalar = equality, list = membership, bool = (not) null
    ("kingdom", "Plantae", {"r3", "r6"}),
    ("class", ["Aves", "Squamata"], {"r1", "r2", "r4", "r5"}),
    ("scientific_name", ["Parus major", "Quercus robur"], {"r2", "r3", "r4", "r6"}),
    ("order", True, {"r2", "r3", "r4", "r6"}),
    ("order", False, {"r1", "r5"}),
    ("license", ["cc-by", "cc0"], {"r1", "r2", "r6"}),
    ("license", "cc-by-sa", {"r5"}),
    # ordered: list = inclusive [from, to] with open ends, scalar = equality, bool = (not) null
    ("year", [2020, 2021], {"r2", "r3", "r5", "r6"}),
    ("year", [2020, None], {"r2", "r3", "r5", "r6"}),
    ("year", [None, 2019], {"r1"}),
    ("year", 2019, {"r1"}),
    ("year", False, {"r4"}),
    ("month", 6, {"r5"}),
    ("month", [11, 2], {"r2", "r3", "r6"}),  # wraps round the new year
    ("day", [1, 17], {"r1", "r2"}),
    ("observed_on", [datetime.date(2020, 3, 1), datetime.date(2020, 12, 31)], {"r2", "r5"}),
    ("observed_on", True, ALL - {"r4"}),
    ("latitude", [40, 61], {"r1", "r2", "r4"}),
    ("longitude", [170, -170], {"r4", "r6"}),  # across the antimeridian
    ("latitude", False, {"r5"}),
    # list-valued: list = any member shared, scalar = contains, bool = non-empty / empty
    ("vernacular_name", True, ALL - {"r3"}),
    ("vernacular_name", False, {"r3"}),
    ("vernacular_name", ["Kohlmeise", "oak"], {"r4", "r6"}),
    ("vernacular_name", "wall lizard", {"r1"}),
    ("cryptic_group", True, {"r1", "r4", "r5"}),
    ("cryptic_group", False, {"r2", "r3", "r6"}),
    ("cryptic_group", ["Podarcis muralis", "Parus minor"], {"r4", "r5"}),
])
def test_the_filter_rule_for_each_kind(tmp_path: Path, key: str, value: Any, kept: set[str]) -> None:
    metadata = write_csv(tmp_path / "meta.csv", list(FILTER_ROWS.values()), extra=("crypticGroup", "license"))
    summary = build(tmp_path, config_for(tmp_path, metadata, filters={key: value}))
    urls = {r["url"] for r in read_rows(tmp_path / "out" / "CrypticBio-Curated.csv")}
    assert urls == {FILTER_ROWS[k]["url"] for k in kept}
    assert summary.dropped == {f"filter:{key}": len(ALL) - len(kept)}


def test_every_filter_key_is_exercised() -> None:
    tested = {"kingdom", "class", "scientific_name", "order", "license", "year", "month", "day", "observed_on",
              "latitude", "longitude", "vernacular_name", "cryptic_group"}
    assert tested | {"phylum", "family", "genus"} == set(FILTER_KEYS)  # the other ranks share the text kind


def test_first_reason_and_own_counts_differ_when_filters_overlap(tmp_path: Path) -> None:
    metadata = write_csv(tmp_path / "meta.csv", list(FILTER_ROWS.values()), extra=("crypticGroup", "license"))
    summary = build(tmp_path, config_for(tmp_path, metadata, filters={"year": [2020, 2021], "kingdom": "Animalia"}))
    # Filters apply in registry order (kingdom before year), whatever the YAML order.
    assert summary.filters == ["kingdom = Animalia", "year from 2020 to 2021"]
    assert summary.dropped == {"filter:kingdom": 2, "filter:year": 2}
    assert summary.failing == {"filter:kingdom": 2, "filter:year": 2}
    assert summary.kept == 2


def test_filter_names_that_match_no_row_are_reported(tmp_path: Path) -> None:
    metadata = write_csv(tmp_path / "meta.csv", list(FILTER_ROWS.values()))
    summary = build(tmp_path, config_for(tmp_path, metadata,
                                         filters={"scientific_name": ["Parus major", "Parus mayor"]}))
    assert summary.unmatched_filter_names == ["Parus mayor"]
    assert "`Parus mayor`" in (tmp_path / "out" / "README.md").read_text()


# --- bad configs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("change", "message"), [
    ({"filter": {}}, "unknown config section 'filter'; known: dataset, download, filters, generate_pairs, subsets. "
                     "Did you mean 'filters'?"),
    ({"dataset": {"metdata": "x.csv", "out": "o"}}, ("dataset: unknown key 'metdata'", "Did you mean 'metadata'?")),
    ({"filters": {"scientificName": ["A b"]}},
     ("filters: unknown key 'scientificName'", "Did you mean 'scientific_name'?")),
    ({"dataset": {"seed": "x"}}, "dataset.seed: expected an integer, got 'x' (str)"),
    ({"dataset": {"overwrite": "yes please"}}, "dataset.overwrite: expected true/false"),
    ({"filters": {"year": "2015"}}, "filters.year: expected a number, got '2015' (str)"),
    ({"filters": {"year": [2015]}}, "filters.year: a list is an inclusive [from, to] range"),
    ({"filters": {"year": [2023, 2015]}}, "filters.year: from 2023 is after to 2015"),
    ({"filters": {"kingdom": None}}, "filters.kingdom: expected true/false, text or a list, got None"),
    ({"filters": {"class": ["Aves", 3]}}, "filters.class[1]: expected text, got 3 (int)"),
    ({"filters": {"class": []}}, "filters.class: an empty list matches nothing"),
    ({"filters": {"observed_on": ["2020-13-01", None]}}, "filters.observed_on[0]: expected a date"),
    ({"filters": ["kingdom"]}, "filters: expected a mapping of keys"),
    ({"subsets": {"common": {"per_species": "all"}}}, "subsets.common.per_species: expected an integer or null"),
    ({"subsets": {"common": {"per_species": 0}}}, "common.per_species must be at least 1"),
    ({"subsets": {"rare": {}}}, "subsets: unknown key 'rare'"),
    ({"subsets": {}}, "subsets: name at least one of common, common_unseen, endangered, invasive, curated"),
    ({"subsets": {"common_unseen": {}}}, "common_unseen needs a start or an end date"),
    ({"subsets": {"endangered": {"name_column": "x"}}}, "subsets.endangered: missing required key(s) ['species_list']"),
    ({"download": {"concurrency": 0}}, "download: concurrency must be at least 1, got 0"),
    ({"download": {"threads": 4}}, "download: unknown key 'threads'"),
    ({"download": {"cache_dir": 5}}, "download.cache_dir: expected a path or null, got 5 (int)"),
    ({"generate_pairs": {"lookup": "a.tsv", "edges": "b.csv"}}, "give exactly one source of pairs"),
    ({"generate_pairs": {"identifications": "ids.csv"}}, "identifications and observations go together"),
    ({"generate_pairs": {"edges": "e.csv", "min_fraction": 2}}, "min_fraction is a fraction in [0, 1], got 2.0"),
])
def test_bad_configs_name_the_key(tmp_path: Path, change: dict[str, Any], message: str | tuple[str, ...]) -> None:
    config: dict[str, Any] = {"dataset": {"metadata": "meta.csv", "out": "out"}}
    for section, value in change.items():
        config[section] = {**config[section], **value} if section == "dataset" and "metdata" not in value else value
    with pytest.raises(UsageError) as info:
        load_config(write_yaml(tmp_path / "config.yaml", config))
    for part in (message,) if isinstance(message, str) else message:
        assert part in str(info.value)
    assert str(info.value).startswith(str(tmp_path / "config.yaml"))


def test_yaml_problems_are_clear(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("dataset:\n  metadata: a.csv\n  out: o\nfilters:\n  year: [2015, 2020]\n  year: [2016, 2017]\n")
    with pytest.raises(UsageError, match="key 'year' is given twice"):
        load_config(path)
    path.write_text("dataset: [unclosed\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_config(path)
    path.write_text("filters: {}\n")
    with pytest.raises(UsageError, match="the dataset section is required"):
        load_config(path)
    with pytest.raises(UsageError, match="no such config file"):
        load_config(tmp_path / "missing.yaml")


def test_paths_resolve_against_the_yaml_folder_and_empty_sections_take_defaults(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    path = write_yaml(tmp_path / "conf" / "config.yaml", {
        "dataset": {"metadata": ["a.csv", "/abs/b.parquet"], "out": "../out"},
        "subsets": {"common": None}, "download": None,
    })
    config = load_config(path)
    assert config.dataset.metadata == (tmp_path / "conf" / "a.csv", Path("/abs/b.parquet"))
    assert config.dataset.out == tmp_path / "conf" / ".." / "out"
    assert (config.subsets.common.more_than, config.subsets.common.per_species) == (150, 100)
    assert config.subsets.curated is None
    assert config.download is not None and config.download.enabled and config.download.fetch.concurrency == 16
    assert config.source == path
    assert parse_config({"dataset": {"metadata": "x.csv", "out": "o"}}, base_dir=tmp_path).subsets.curated is not None


def test_parse_condition_describes_itself() -> None:
    assert parse_condition("longitude", [170, -170]).describe() == "longitude from 170 to -170"
    assert parse_condition("year", [None, 2019]).describe() == "year to 2019"
    assert parse_condition("kingdom", "Fungi").describe() == "kingdom = Fungi"
    assert parse_condition("cryptic_group", False).describe() == "cryptic_group absent"


def test_missing_files_and_columns_are_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        build(tmp_path, config_for(tmp_path, tmp_path / "nope.csv"))
    bad = tmp_path / "bad.csv"
    bad.write_text("scientificName,url\nParus major,u1\n")
    with pytest.raises(SchemaError, match=r"missing column\(s\) \['year'"):
        build(tmp_path, config_for(tmp_path, bad))
    metadata = write_csv(tmp_path / "meta.csv", list(FILTER_ROWS.values()))
    with pytest.raises(SchemaError, match="the configured column 'licence' is not there"):
        build(tmp_path, config_for(tmp_path, metadata, dataset={"license_column": "licence"}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "config.yaml", "meta.csv"]  # nothing half-built


# --- data checks -----------------------------------------------------------------------------------


def test_bad_rows_are_counted_by_reason_and_listed(tmp_path: Path) -> None:
    good = row("Parus major", "g1", license="cc-by")
    rows = [
        good,
        row("Parus major", "g2", license="cc0"),
        row("Parus major", "g3", license="cc0") | {"year": "nan"},  # NaN is missing, not invalid
        row("Parus major", "d1", license="cc0") | {"scientificName": " "},
        row("Parus major", "", license="cc0"),
        row("Parus major", "", license="cc0") | {"year": "abc"},  # both: the first reason counts
        row("Parus major", "d3", license="cc0") | {"year": "abc"},
        row("Parus major", "d4", license="cc0") | {"year": "2020.5"},
        row("Parus major", "d5", "2021-02-29", license="cc0"),
        row("Parus major", "d6", license="cc0") | {"month": "13.0"},
        row("Parus major", "d7", lat="95", license="cc0"),
        row("Parus major", "d8", lon="", license="cc0"),
        row("Parus major", "d9", vernacular="['unclosed", license="cc0"),
        row("Parus major", "d10", crypticGroup="[1, 2]", license="cc0"),
        row("Parus major", "d11", license="cc0") | {"scientificName": "Parus"},
        row("Parus major", "d12", license="cc0") | {"genus": "Podarcis"},
        row("Parus major", "d13", license=""),
        row("Parus major", "d14", license="No known copyright restrictions"),
        good | {"license": "CC-BY-NC"},  # the same photo again
    ]
    metadata = write_csv(tmp_path / "meta.csv", rows, extra=("crypticGroup", "license"))
    metadata.write_text(metadata.read_text() + "Parus major,2020.0,1.0,1.0,1,2,u,x,x,x,x,x,x,x,extra,extra,extra\n")
    summary = build(tmp_path, config_for(tmp_path, metadata))
    assert summary.dropped == {
        "missing_scientific_name": 1, "missing_url": 2, "invalid_number": 2, "invalid_date": 2,
        "invalid_coordinates": 2, "malformed_vernacular_name": 1, "malformed_cryptic_group": 1,
        "unresolved_name": 2, "missing_license": 1, "unknown_license": 1, "duplicate_url": 1,
    }
    assert (summary.rows_read, summary.kept, summary.malformed_lines) == (len(rows), 3, 1)
    written = read_rows(tmp_path / "out" / "CrypticBio-Curated.csv")
    assert sorted(r["url"] for r in written) == ["g1", "g2", "g3"]
    assert next(r for r in written if r["url"] == "g3")["year"] == ""

    rejected = pq.read_table(tmp_path / "out" / "left_out.parquet").to_pylist()
    assert Counter(r["reason"] for r in rejected) == Counter(summary.dropped | {"malformed_line": 1})
    # the photo's second row is left out as a duplicate, under its own file and row, the first one kept
    (duplicate,) = (r for r in rejected if r["reason"] == "duplicate_url")
    assert (duplicate["key"], duplicate["stage"], duplicate["url"]) == (f"meta.csv:{len(rows)}", "check", good["url"])
    by_url = {r["url"]: r for r in rejected if r["url"]}
    assert (by_url["d9"]["row"], by_url["d9"]["file"], by_url["d9"]["reason"]) == (13, "meta.csv",
                                                                                 "malformed_vernacular_name")
    assert next(r for r in rejected if r["reason"] == "malformed_line")["text"].endswith("extra,extra,extra")
    assert "| unknown_license | 1 | – |" in (tmp_path / "out" / "README.md").read_text()


def test_parquet_metadata_with_lists_nan_and_group_column(tmp_path: Path) -> None:
    table = pa.table({
        "scientificName": ["Parus major", "Podarcis muralis", "Quercus robur"],
        "year": [2020.0, float("nan"), 2021.0], "month": [5.0, float("nan"), 1.0], "day": [17.0, float("nan"), 2.0],
        "decimalLatitude": [51.5, 45.1, None], "decimalLongitude": [-0.1, 7.6, None],
        "url": ["p1", "p2", "p3"],
        "kingdom": ["Animalia", "Animalia", "Plantae"], "phylum": ["Chordata", "Chordata", "Tracheophyta"],
        "class": ["Aves", "Squamata", "Magnoliopsida"], "order": ["Passeriformes", None, "Fagales"],
        "family": ["Paridae", "Lacertidae", "Fagaceae"], "genus": ["Parus", "Podarcis", "Quercus"],
        "vernacularName": [["great tit", "Kohlmeise"], ["wall lizard"], []],
        "crypticGroup": [["Parus major", "Parus minor"], ["Podarcis siculus"], None],
        "id": [1, 2, 3],
    })
    pq.write_table(table, tmp_path / "meta.parquet")
    summary = build(tmp_path, config_for(tmp_path, tmp_path / "meta.parquet", filters={"cryptic_group": True}))
    assert summary.dropped == {"filter:cryptic_group": 1}
    written = {r["url"]: r for r in read_rows(tmp_path / "out" / "CrypticBio-Curated.csv")}
    assert written["p1"]["vernacularName"] == "['great tit', 'Kohlmeise']"
    assert (written["p2"]["year"], written["p2"]["order"]) == ("", "")
    assert read_cryptic_lookup(tmp_path / "out" / "cryptic_groups.tsv") == {
        "Parus major": ("Parus major", "Parus minor"), "Podarcis muralis": ("Podarcis muralis", "Podarcis siculus")}
    assert summary.cryptic["source"] == "the metadata's cryptic group column"


# --- subsets ---------------------------------------------------------------------------------------


SUBSET_SPECIES = {
    "Lacerta agilis": (151, 10),  # (rows before the window, rows in it): Common, with unseen rows
    "Lacerta viridis": (150, 5),  # 155 in all, but 150 in Common's pool: not Common
    "Lacerta bilineata": (300, 7),
    "Zootoca vivipara": (40, 0),  # endangered
    "Podarcis siculus": (20, 3),  # invasive
}


def subset_rows() -> list[dict[str, str]]:
    rows = []
    for name, (before, inside) in SUBSET_SPECIES.items():
        genus = name.split()[0]
        for i in range(before + inside):
            day = datetime.date(2018, 1, 1) + datetime.timedelta(days=i * 5 % 2000)
            date = f"2025-03-{1 + i % 28:02d}" if i >= before else day.isoformat()
            url = f"https://example.org/{name.replace(' ', '_')}/{i}.jpg"
            rows.append(row(name, url, date) | {"genus": genus})
    return rows


def subsets_config(tmp_path: Path, metadata: Path, seed: int = 0, out: str = "out") -> dict[str, Any]:
    (tmp_path / "redlist.csv").write_text(
        "assessmentId,scientificName,redlistCategory\n1,Zootoca vivipara (Lichtenstein, 1823),Vulnerable\n"
        "2,Vipera ursinii,Endangered\n")
    (tmp_path / "gisd.csv").write_text("Species,System\nPodarcis siculus,terrestrial\nRattus rattus,terrestrial\n")
    return config_for(tmp_path, metadata, dataset={"seed": seed, "out": str(tmp_path / out)}, subsets={
        "common": {}, "common_unseen": {"start": "2025-01-01"},
        "endangered": {"species_list": "redlist.csv", "per_species": 30},
        "invasive": {"species_list": "gisd.csv", "name_column": "Species", "per_species": None},
    })


def test_the_four_subsets(tmp_path: Path) -> None:
    rows = subset_rows()
    metadata = write_csv(tmp_path / "meta.csv", rows)
    summary = build(tmp_path, subsets_config(tmp_path, metadata))
    out = tmp_path / "out"

    common = read_rows(out / "CrypticBio-Common.csv")
    assert Counter(r["scientificName"] for r in common) == {"Lacerta agilis": 100, "Lacerta bilineata": 100}
    assert all(r["year"] != "2025.0" for r in common)
    pool = defaultdict(list)
    for r in rows:
        if r["year"] != "2025.0":
            pool[r["scientificName"]].append(r["url"])
    for name in ("Lacerta agilis", "Lacerta bilineata"):
        expected = sorted(pool[name], key=lambda u: sample_key(0, u))[:100]
        assert [r["url"] for r in common if r["scientificName"] == name] == expected
    assert summary.subsets["common"]["notes"] == {"qualifying_species": 2, "pool_species": 5}

    unseen = read_rows(out / "CrypticBio-CommonUnseen.csv")
    assert Counter(r["scientificName"] for r in unseen) == {"Lacerta agilis": 10, "Lacerta bilineata": 7}
    assert not {r["url"] for r in unseen} & {r["url"] for r in common}

    endangered = read_rows(out / "CrypticBio-Endangered.csv")
    assert Counter(r["scientificName"] for r in endangered) == {"Zootoca vivipara": 30}
    assert summary.subsets["endangered"]["notes"] == {
        "species_listed": 2, "species_matched": 1, "species_unmatched": 1, "unmatched_examples": ["Vipera ursinii"]}
    invasive = read_rows(out / "CrypticBio-Invasive.csv")
    assert Counter(r["scientificName"] for r in invasive) == {"Podarcis siculus": 23}
    assert summary.subsets["invasive"]["notes"]["unmatched_examples"] == ["Rattus rattus"]
    card = (out / "README.md").read_text()
    assert "| common | `CrypticBio-Common.csv` | 200 | 2 |" in card and "`Vipera ursinii`" in card
    for path in out.glob("CrypticBio-*.csv"):
        assert read_crypticbio(path).num_rows == len(read_rows(path))


def test_sampling_is_seeded_and_independent_of_row_order(tmp_path: Path) -> None:
    rows = subset_rows()
    first = build(tmp_path, subsets_config(tmp_path, write_csv(tmp_path / "a.csv", rows), out="first"))
    shuffled = rows[:]
    random.Random(5).shuffle(shuffled)
    build(tmp_path, subsets_config(tmp_path, write_csv(tmp_path / "b.csv", shuffled), out="again"))
    build(tmp_path, subsets_config(tmp_path, write_csv(tmp_path / "c.csv", rows), seed=1, out="other"))
    for name in ("CrypticBio-Common.csv", "CrypticBio-Endangered.csv", "CrypticBio-CommonUnseen.csv"):
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()
    assert (tmp_path / "first" / "CrypticBio-Common.csv").read_bytes() != (
        tmp_path / "other" / "CrypticBio-Common.csv").read_bytes()
    assert first.subsets["common"]["rows"] == 200

    # A species' sample does not move when other species leave the metadata.
    only_agilis = [r for r in rows if r["scientificName"] == "Lacerta agilis"]
    build(tmp_path, subsets_config(tmp_path, write_csv(tmp_path / "d.csv", only_agilis), out="alone"))
    agilis = [r for r in read_rows(tmp_path / "first" / "CrypticBio-Common.csv")
              if r["scientificName"] == "Lacerta agilis"]
    assert read_rows(tmp_path / "alone" / "CrypticBio-Common.csv") == agilis


def test_existing_output_is_kept_unless_overwrite(tmp_path: Path) -> None:
    metadata = write_csv(tmp_path / "meta.csv", list(FILTER_ROWS.values()))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(CladebenchError, match="already exists"):
        build(tmp_path, config_for(tmp_path, metadata))
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    # overwrite: true replaces only a previous output of this builder: a user's folder is refused, untouched.
    with pytest.raises(CladebenchError, match="is not an output of `cladebench build crypticbio`") as refused:
        build(tmp_path, config_for(tmp_path, metadata, dataset={"overwrite": True}))
    assert refused.value.exit_code == 1
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "mine"
    (out / "keep.txt").unlink()
    build(tmp_path, config_for(tmp_path, metadata))  # an empty folder is fine
    first = (out / "CrypticBio-Curated.csv").read_text()
    # A build that fails midway (a species list without its column) leaves the old output as it was.
    (tmp_path / "list.csv").write_text("name\nParus major\n")
    broken = config_for(tmp_path, metadata, dataset={"overwrite": True},
                        subsets={"endangered": {"species_list": "list.csv"}})
    with pytest.raises(SchemaError, match="no column 'scientificName'"):
        build(tmp_path, broken)
    assert (out / "CrypticBio-Curated.csv").read_text() == first
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    build(tmp_path, config_for(tmp_path, metadata, dataset={"overwrite": True, "seed": 1},
                               subsets={"common": {"more_than": 0}}))
    assert "CrypticBio-Curated.csv" not in [p.name for p in out.iterdir()]  # replaced as a whole
    assert (out / "CrypticBio-Common.csv").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


def test_pairs_mined_from_identifications(tmp_path: Path) -> None:
    metadata = write_csv(tmp_path / "meta.csv", list(FILTER_ROWS.values()))
    lines = ["observation_id,taxon,current"]
    obs = ["observation_id,community_taxon"]
    for oid in range(20):
        obs.append(f"{oid},Parus major")
        lines.append(f"{oid},Parus major,true")
        if oid < 6:
            lines.append(f"{oid},Parus minor,{'true' if oid % 2 else 'false'}")
    (tmp_path / "ids.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "obs.csv").write_text("\n".join(obs) + "\n")
    config = config_for(tmp_path, metadata, filters={"cryptic_group": True}, generate_pairs={
        "identifications": "ids.csv", "observations": "obs.csv", "min_observations": 5, "min_fraction": 0.25})
    summary = build(tmp_path, config)
    out = tmp_path / "out"
    assert summary.kept == 2  # the two Parus major rows: the only species with a mined confusable
    assert pq.read_table(out / "cryptic_pairs.parquet").to_pylist() == [
        {"anchor": "Parus major", "confusable": "Parus minor", "n_observations_with_confusable_id": 6,
         "n_observations_of_anchor": 20, "fraction": 0.3}]
    assert read_cryptic_lookup(out / "cryptic_groups.tsv") == {"Parus major": ("Parus major", "Parus minor")}
    assert summary.cryptic["mining"]["identifications"]["evidence"] == 6
    assert "Mining: B joins A's group when at least 5 observations" in (out / "README.md").read_text()


# --- download --------------------------------------------------------------------------------------


@pytest.fixture
def photos() -> Iterator[PhotoHost]:
    from PIL import Image

    def photo(seed: int) -> bytes:
        buffer = io.BytesIO()
        Image.new("RGB", (16, 12), (seed * 60 % 256, 80, 140)).save(buffer, "PNG")
        return buffer.getvalue()

    server = PhotoHost({"/1.png": photo(1), "/2.png": photo(2)})
    with serving(server):
        yield server


def test_download_writes_lance_per_subset(tmp_path: Path, photos: PhotoHost) -> None:
    from cladebench import store

    rows = [row("Parus major", photos.url("/1.png")), row("Podarcis muralis", photos.url("/2.png")),
            row("Podarcis muralis", photos.url("/gone.png"))]
    metadata = write_csv(tmp_path / "meta.csv", rows)
    (tmp_path / "lookup.tsv").write_text("Podarcis muralis\tPodarcis siculus\nParus major\t\n")
    config = config_for(tmp_path, metadata, generate_pairs={"lookup": "lookup.tsv"}, download={
        "cache_dir": "downloads", "concurrency": 2, "connect_timeout_s": 1.0, "read_timeout_s": 1.0,
        "max_attempts": 2, "backoff_base_s": 0.01, "backoff_max_s": 0.02})
    summary = build_crypticbio(CrypticBioBuildConfig(write_yaml(tmp_path / "config.yaml", config)))
    out = tmp_path / "out"
    assert summary.downloads == {"curated": {
        "dataset": "CrypticBio-Curated.lance", "failures": "CrypticBio-Curated.lance.failures.parquet", "rows": 3,
        "written": 2, "failed": 1, "failed_by_reason": {"http_404": 1}}}
    table = store.open_dataset(out / "CrypticBio-Curated.lance").to_table()
    by_url = {r["source_url"]: r for r in table.to_pylist()}
    assert by_url[photos.url("/1.png")]["image"] == photos.photos["/1.png"]
    assert by_url[photos.url("/2.png")]["cryptic_group"] == ["Podarcis muralis", "Podarcis siculus"]
    assert by_url[photos.url("/1.png")]["cryptic_group"] == ["Parus major"]
    assert set(table.column("source_dataset").to_pylist()) == {"crypticbio-curated"}
    failures = pq.read_table(out / "CrypticBio-Curated.lance.failures.parquet").to_pylist()
    assert [f["source_url"] for f in failures] == [photos.url("/gone.png")]
    assert (tmp_path / "downloads").is_dir()
    assert "| curated | `CrypticBio-Curated.lance` | 2 | 1 | http_404 1 |" in (out / "README.md").read_text()


def test_a_subset_with_no_photo_fetched_is_reported_not_fatal(tmp_path: Path, photos: PhotoHost) -> None:
    rows = [row("Parus major", photos.url("/1.png")), row("Podarcis muralis", photos.url("/gone.png"))]
    metadata = write_csv(tmp_path / "meta.csv", rows)
    (tmp_path / "redlist.csv").write_text("scientificName\nPodarcis muralis\n")
    config = config_for(tmp_path, metadata, subsets={"curated": {}, "endangered": {"species_list": "redlist.csv"}},
                        download={"cache_dir": "downloads", "max_attempts": 1, "connect_timeout_s": 1.0})
    summary = build(tmp_path, config)
    assert summary.downloads["endangered"] == {
        "dataset": None, "failures": "CrypticBio-Endangered.lance.failures.parquet", "rows": 1, "written": 0,
        "failed": 1, "failed_by_reason": {"http_404": 1}}
    assert summary.downloads["curated"]["written"] == 1
    out = tmp_path / "out"
    assert not (out / "CrypticBio-Endangered.lance").exists()
    assert (out / "CrypticBio-Endangered.lance.failures.parquet").is_file()
    assert "none (no photo fetched)" in (out / "README.md").read_text()


def test_build_verb_runs_a_yaml_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    metadata = write_csv(tmp_path / "observations.csv", [
        row("Podarcis muralis", "https://example.org/1.jpg"), row("Parus major", "https://example.org/2.jpg"),
        row("Quercus robur", "https://example.org/3.jpg")])
    config = write_yaml(tmp_path / "config.yaml", config_for(tmp_path, metadata, filters={"kingdom": "Animalia"}))
    assert main(["build", "crypticbio", "--config", str(config)]) == 0
    assert str(tmp_path / "out") in capsys.readouterr().out
    kept = read_rows(next((tmp_path / "out").glob("CrypticBio-*.csv")))
    assert sorted(r["scientificName"] for r in kept) == ["Parus major", "Podarcis muralis"]
    bad = write_yaml(tmp_path / "bad.yaml", {**config_for(tmp_path, metadata), "filterz": {}})
    assert main(["build", "crypticbio", "--config", str(bad)]) != 0


# --- inputs it cannot read, outputs it may not write: one line, the documented exit code ------------------


def _run(config: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from cladebench.cli import main

    code = main(["build", "crypticbio", "--config", str(config)])
    error = capsys.readouterr().err
    assert error.count("\n") <= 1, error  # one line
    return code, error


def _three_rows() -> list[dict[str, str]]:
    return [row("Podarcis muralis", "u1"), row("Parus major", "u2"), row("Quercus robur", "u3")]


def test_a_config_that_is_not_utf8_or_not_a_file_is_a_usage_error(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    metadata = write_csv(tmp_path / "meta.csv", _three_rows())
    config = tmp_path / "config.yaml"
    config.write_bytes(f"dataset:\n  metadata: {metadata}\n  out: caf\xe9\n".encode("latin-1"))
    code, error = _run(config, capsys)
    assert code == 2 and "not UTF-8 text" in error
    (tmp_path / "folder.yaml").mkdir()
    code, error = _run(tmp_path / "folder.yaml", capsys)
    assert code == 2 and "a folder, not a config file" in error
    config.write_text("dataset: [unclosed\n")
    code, error = _run(config, capsys)
    assert code == 2 and "not valid YAML" in error  # PyYAML's message spans lines; the error does not


def test_metadata_that_is_not_utf8_or_truncated_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    metadata = write_csv(tmp_path / "meta.csv", _three_rows())
    raw = metadata.read_bytes()
    metadata.write_bytes(raw.replace(b"Parus major", b"Parus m\xe4jor"))
    code, error = _run(write_yaml(tmp_path / "config.yaml", config_for(tmp_path, metadata)), capsys)
    assert code == 1 and "cannot read" in error and "meta.csv" in error
    packed = gzip.compress(raw * 500)
    truncated = tmp_path / "meta.csv.gz"
    truncated.write_bytes(packed[: len(packed) // 2])
    code, error = _run(write_yaml(tmp_path / "config.yaml", config_for(tmp_path, truncated)), capsys)
    assert code == 1 and "cannot read" in error and "meta.csv.gz" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "meta.csv", "meta.csv.gz"]


def test_a_species_list_csv_python_cannot_read_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metadata = write_csv(tmp_path / "meta.csv", _three_rows())
    species = tmp_path / "redlist.csv"
    for content, message in ((b"scientificName\n" + b"x" * 140_000 + b"\nParus major\n", "field larger"),
                             (b"scientificName\nParus m\xe4jor\n", "not UTF-8 text")):
        species.write_bytes(content)
        config = config_for(tmp_path, metadata, subsets={"endangered": {"species_list": str(species)}})
        code, error = _run(write_yaml(tmp_path / "config.yaml", config), capsys)
        assert code == 1 and message in error and "redlist.csv" in error


def test_an_output_that_holds_the_inputs_is_refused_before_reading(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    metadata = write_csv(tmp_path / "meta.csv", _three_rows())
    config = write_yaml(tmp_path / "config.yaml", config_for(tmp_path, metadata, dataset={"out": ".",
                                                                                          "overwrite": True}))
    before = sorted(p.name for p in tmp_path.iterdir())
    code, error = _run(config, capsys)
    assert code == 2 and "contains the input" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == before and metadata.is_file()


def test_an_output_path_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metadata = write_csv(tmp_path / "meta.csv", _three_rows())
    (tmp_path / "out").write_text("mine")
    code, error = _run(write_yaml(tmp_path / "config.yaml", config_for(tmp_path, metadata,
                                                                       dataset={"overwrite": True})), capsys)
    assert code == 1 and "is not a folder" in error and (tmp_path / "out").read_text() == "mine"
