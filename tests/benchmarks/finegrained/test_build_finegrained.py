"""``cladebench build finegrained`` on a planted catalog: every count known in advance.

The catalog has the three published groups, distractor taxa (a horse, a house mouse, a soft tick),
genus-only rows, every kind of license (kept and refused), planted bad rows, images of many sizes served
by a local HTTP server or read from local files (one URL answers 404, one file is missing, one corrupt),
and ``--seen`` lists as text and Parquet. The planted table below is the expectation; the build must
reproduce it exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import http.server
import io
import json
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from cladebench import store
from cladebench.benchmarks.finegrained.builder.build import build_finegrained
from cladebench.benchmarks.finegrained.builder.checks import classify_license, reason_docs
from cladebench.benchmarks.finegrained.builder.config import (
    DATASET_DIR,
    ChallengeGroup,
    FineGrainedBuildConfig,
    parse_embed,
)
from cladebench.config import add_config_arguments, config_from_args
from cladebench.errors import CladebenchError, UnknownNameError, UsageError
from cladebench.store import info
from cladebench.store.left_out import LEFT_OUT_FILE, left_out_counts, left_out_lines, read_left_out
from cladebench.taxonomy import Rank

PER_SPECIES = 5
GENUS_ONLY_CAP = 3

MOUSE = ("Animalia", "Chordata", "Mammalia", "Rodentia", "Cricetidae", "Peromyscus")
TICK = ("Animalia", "Arthropoda", "Arachnida", "Ixodida", "Ixodidae")
EQUUS = ("Animalia", "Chordata", "Mammalia", "Perissodactyla", "Equidae", "Equus")


@dataclass
class Planted:
    """One catalog row and what must become of it."""

    uuid: str | None
    ranks: tuple[str | None, ...]
    """kingdom .. species as the catalog writes them (species may be an epithet, a binomial or None)."""
    license_: str | None = "cc-by-nc-4.0"
    """Provenance license_name; None writes no provenance row at all."""
    link: str | None = "https://creativecommons.org/licenses/by-nc/4.0/"
    size: tuple[int, int] = (64, 48)
    source: str = "http"
    """http (served), http404, local, local_missing, local_corrupt, none (no source at all)."""
    mode: str = "RGB"
    outcome: str = "kept"
    """``kept``, ``maybe`` (a capped bucket: kept or capped), or the reason it is left out."""
    extra: dict = field(default_factory=dict)


def _plant() -> list[Planted]:
    rows: list[Planted] = []

    def add(prefix: str, n: int, ranks: tuple[str | None, ...], **kw) -> None:
        for i in range(n):
            rows.append(Planted(f"{prefix}-{i}", ranks, **kw))

    # Peromyscus: a capped species, a species with refused licenses, a capped genus-only bucket.
    add("pman", 7, (*MOUSE, "maniculatus"), outcome="maybe")
    add("pleu", 1, (*MOUSE, "Peromyscus leucopus"), license_="cc0-1.0",
        link="https://creativecommons.org/publicdomain/zero/1.0/", size=(1500, 1000))
    add("pleu-tall", 1, (*MOUSE, "leucopus"), license_="CC BY-SA 4.0", size=(900, 1200))
    add("pleu-gray", 1, (*MOUSE, "leucopus"), license_="cc-by-4.0", size=(800, 600), mode="L", source="local")
    add("pleu-nd", 1, (*MOUSE, "leucopus"), license_="cc-by-nd-4.0", outcome="license_no_derivatives")
    add("pleu-arr", 1, (*MOUSE, "leucopus"), license_="All rights reserved", outcome="license_all_rights_reserved")
    add("pgen", 5, (*MOUSE, None), license_="cc0-1.0", outcome="maybe")
    add("pgen-other", 1, (*MOUSE, None), license_="other", outcome="license_other")
    rows.append(Planted(None, (*MOUSE, "maniculatus"), outcome="missing_uuid"))
    add("pmismatch", 1, (*MOUSE, "Equus quagga"), outcome="species_genus_mismatch")
    # Ixodidae: epithet and binomial spellings, a genus-only row, NC-ND, missing link, duplicates, above genus.
    add("isca", 3, (*TICK, "Ixodes", "scapularis"), license_="cc-by-4.0")
    add("isca-big", 1, (*TICK, "Ixodes", "scapularis"), license_="cc-by-4.0", size=(721, 300))
    add("isca-edge", 1, (*TICK, "Ixodes", "scapularis"), license_="cc-by-4.0", size=(720, 540))
    add("isca-ncnd", 1, (*TICK, "Ixodes", "scapularis"), license_="CC BY-NC-ND 4.0", outcome="license_no_derivatives")
    add("isca-nolink", 1, (*TICK, "Ixodes", "scapularis"), link=None, outcome="missing_license_link")
    rows += [Planted("dup", (*TICK, "Ixodes", "scapularis"), outcome="duplicate_uuid") for _ in range(2)]
    add("dvar", 2, (*TICK, "Dermacentor", "Dermacentor variabilis"), license_="cc-by-sa-4.0")
    add("ambl", 1, (*TICK, "Amblyomma", None), license_="cc-by-nc-4.0", size=(300, 900))
    add("tick-family", 1, (*TICK, None, None), outcome="above_genus")
    add("isca-unknown", 1, (*TICK, "Ixodes", "scapularis"), license_="No known copyright restrictions",
        outcome="license_unrecognised")
    add("isca-amb", 1, (*TICK, "Ixodes", "scapularis"), outcome="ambiguous_provenance",
        extra={"second_license": "cc-by-4.0"})
    # zebras: a 404, missing provenance, local files (fine, missing, corrupt), a row without any image source.
    add("equa", 3, (*EQUUS, "quagga"))
    add("equa-404", 1, (*EQUUS, "quagga"), source="http404", outcome="image_fetch_failed")
    add("equa-noprov", 1, (*EQUUS, "quagga"), license_=None, outcome="missing_license")
    add("egre", 1, (*EQUUS, "Equus grevyi"), source="local", size=(2000, 1000))
    add("egre-missing", 1, (*EQUUS, "grevyi"), source="local_missing", outcome="image_file_missing")
    add("egre-corrupt", 1, (*EQUUS, "grevyi"), source="local_corrupt", outcome="image_decode_failed")
    add("ezeb", 1, (*EQUUS, "zebra"), license_="cc0", link="https://creativecommons.org/publicdomain/zero/1.0/")
    add("ezeb-nosrc", 1, (*EQUUS, "zebra"), source="none", outcome="no_image_source")
    # Distractors: same genus or family names elsewhere, never in a group.
    add("horse", 3, (*EQUUS, "caballus"), outcome="outside_groups")
    add("mouse", 2, ("Animalia", "Chordata", "Mammalia", "Rodentia", "Muridae", "Mus", "musculus"),
        outcome="outside_groups")
    add("argas", 2, ("Animalia", "Arthropoda", "Arachnida", "Ixodida", "Argasidae", "Argas", "persicus"),
        outcome="outside_groups")
    return rows


EXPECTED_IMAGES = {  # group -> taxon -> images in the dataset
    "Peromyscus": {"Peromyscus maniculatus": PER_SPECIES, "Peromyscus leucopus": 3, "Peromyscus": GENUS_ONLY_CAP},
    "Ixodidae": {"Ixodes scapularis": PER_SPECIES, "Dermacentor variabilis": 2, "Amblyomma": 1},
    "zebras": {"Equus quagga": 3, "Equus grevyi": 1, "Equus zebra": 1},
}
EXPECTED_LICENSES = {  # license code -> group -> images
    "cc-by-nc": {"Peromyscus": PER_SPECIES, "Ixodidae": 1, "zebras": 4},
    "cc-by": {"Peromyscus": 1, "Ixodidae": PER_SPECIES},
    "cc0": {"Peromyscus": 1 + GENUS_ONLY_CAP, "zebras": 1},
    "cc-by-sa": {"Peromyscus": 1, "Ixodidae": 2},
}


def _image(size: tuple[int, int], mode: str, seed: int) -> Image.Image:
    width, height = size
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)),
                    ((x // 7 + y // 5 + seed * 31) % 256)], axis=-1).astype(np.uint8)
    image = Image.fromarray(rgb)
    return image.convert(mode) if mode != "RGB" else image


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass(frozen=True)
class World:
    catalog: Path
    provenance: Path
    originals: dict[str, bytes]
    """uuid -> the original image bytes (served or on disk)."""
    planted: list[Planted]
    seen_text: Path
    seen_parquet: Path
    model_dir: Path
    root: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("finegrained")
    served, local = root / "served", root / "catalog" / "images"
    served.mkdir()
    local.mkdir(parents=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(served)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"

    planted = _plant()
    catalog_rows, provenance_rows, originals = [], [], {}
    for index, row in enumerate(planted):
        key = row.uuid or f"row{index}"
        buffer = io.BytesIO()
        _image(row.size, row.mode, index).save(buffer, "JPEG" if row.source.startswith("http") else "PNG")
        body = buffer.getvalue()
        url = image_path = None
        if row.source == "http":
            (served / f"{key}-{index}.jpg").write_bytes(body)
            url = f"{base_url}/{key}-{index}.jpg"
        elif row.source == "http404":
            url = f"{base_url}/gone-{index}.jpg"
        elif row.source == "local":
            (local / f"{key}.png").write_bytes(body)
            image_path = f"images/{key}.png"
        elif row.source == "local_missing":
            image_path = f"images/{key}-nowhere.png"
        elif row.source == "local_corrupt":
            (local / f"{key}.png").write_bytes(body[: len(body) // 3])
            image_path = f"images/{key}.png"
        if row.uuid and row.outcome in ("kept", "maybe"):
            originals[row.uuid] = body
        ranks = dict(zip(("kingdom", "phylum", "class", "order", "family", "genus", "species"),
                         (*row.ranks, *(None,) * (7 - len(row.ranks))), strict=True))
        catalog_rows.append({
            "uuid": row.uuid, **ranks, "source_dataset": "gbif", "source_id": str(10_000 + index),
            "scientific_name": None if ranks["species"] else (f"{ranks['genus']} Gloger, 1841" if ranks["genus"]
                                                              else None),
            "common_name": "deer mouse" if ranks["genus"] == "Peromyscus" else None, "publisher": "iNaturalist",
            "basisOfRecord": "HUMAN_OBSERVATION", "img_type": "Citizen Science", "source_url": url,
            "image_path": image_path,
        })
        if row.uuid and row.license_ is not None:
            provenance_rows.append({"uuid": row.uuid, "license_name": row.license_, "license_link": row.link,
                                    "copyright_owner": f"owner {index}"})
            if "second_license" in row.extra:
                provenance_rows.append({"uuid": row.uuid, "license_name": row.extra["second_license"],
                                        "license_link": row.link, "copyright_owner": f"owner {index}"})
    # The duplicated uuid's provenance once; every other planted row once (or not at all).
    catalog = root / "catalog" / "catalog.parquet"
    pq.write_table(pa.Table.from_pylist(catalog_rows), catalog)
    provenance = root / "provenance.csv"
    seen_once = {r["uuid"]: r for r in provenance_rows if r["uuid"] == "dup"}
    lines = ["uuid,license_name,license_link,copyright_owner"]
    for r in [r for r in provenance_rows if r["uuid"] != "dup"] + list(seen_once.values()):
        lines.append(",".join(f'"{r[c]}"' if r[c] is not None else "" for c in
                              ("uuid", "license_name", "license_link", "copyright_owner")))
    provenance.write_text("\n".join(lines) + "\n")

    seen_text = root / "seen_bioclip2.txt"
    seen_text.write_text("uuid\npman-0\n\npleu-0\nisca-0\nnot-in-catalog\n")
    seen_parquet = root / "seen_bioclip25.parquet"
    pq.write_table(pa.table({"uuid": ["pleu-0", "egre-0", "pleu-nd-0"]}), seen_parquet)

    from cladebench.models.tiny import write_tiny_model

    model_dir = write_tiny_model(root / "tiny")
    try:
        yield World(catalog, provenance, originals, planted, seen_text, seen_parquet, model_dir, root)
    finally:
        server.shutdown()
        server.server_close()


def _config(world: World, out: Path, **options) -> FineGrainedBuildConfig:
    values = dict(provenance=world.provenance, out=out, per_species=PER_SPECIES, genus_only_cap=GENUS_ONLY_CAP,
                  download_dir=world.root / "downloads", progress=False, workers=0, device="cpu")
    values.update(options)
    return FineGrainedBuildConfig(world.catalog, **values)


@pytest.fixture(scope="module")
def built(world, tmp_path_factory):
    out = tmp_path_factory.mktemp("built") / "fgc"
    config = _config(world, out, workers=2, min_index_rows=8,
                     seen=(f"bioclip-2={world.seen_text}", f"bioclip-2.5={world.seen_parquet}"),
                     embed=(f"tiny=local-dir:{world.model_dir}",))
    summary = build_finegrained(config)
    dataset = store.open_dataset(out / DATASET_DIR)
    return summary, dataset, dataset.to_table()


# --- what is kept and what is dropped ------------------------------------------------------------


def test_kept_counts_per_group_species_and_license(built):
    summary, _, table = built
    rows = table.to_pylist()
    images: dict[str, Counter] = {}
    licenses: dict[str, Counter] = {}
    for row in rows:
        name = row["species"] or row["genus"]  # species is the binomial, as the published card defines it
        images.setdefault(row["challenge_group"], Counter())[name] += 1
        licenses.setdefault(row["license_name"], Counter())[row["challenge_group"]] += 1
    assert {g: dict(c) for g, c in images.items()} == EXPECTED_IMAGES
    assert {lic: dict(c) for lic, c in licenses.items()} == EXPECTED_LICENSES
    assert summary.rows == len(rows) == sum(sum(v.values()) for v in EXPECTED_IMAGES.values())
    assert summary.species == {g: dict(sorted(v.items())) for g, v in EXPECTED_IMAGES.items()}
    assert [g for g in summary.groups] == ["Peromyscus", "Ixodidae", "zebras"]
    # Rows are ordered by group, then taxon: the fingerprint does not depend on the catalog's order.
    order = {"Peromyscus": 0, "Ixodidae": 1, "zebras": 2}
    assert [order[r["challenge_group"]] for r in rows] == sorted(order[r["challenge_group"]] for r in rows)


def test_every_row_is_kept_or_counted_under_its_reason(world, built):
    summary, _, table = built
    planted = Counter(p.outcome for p in world.planted if p.outcome not in ("kept", "maybe"))
    planted["species_cap"] = 7 - PER_SPECIES
    planted["genus_only_cap"] = 5 - GENUS_ONLY_CAP
    assert {r: n for r, n in summary.outcomes.items() if n} == dict(planted)
    assert list(summary.outcomes) == list(reason_docs())  # every reason listed, zeros included
    assert sum(summary.outcomes.values()) + summary.rows == summary.catalog_rows == len(world.planted)
    dropped = pq.read_table(summary.out / "left_out.parquet").to_pylist()
    assert Counter(r["reason"] for r in dropped) == planted - Counter({"outside_groups": planted["outside_groups"]})
    by_uuid = {r["uuid"]: r["reason"] for r in dropped if r["uuid"] not in (None, "dup")}
    for p in world.planted:
        if p.uuid not in (None, "dup") and p.outcome not in ("kept", "maybe", "outside_groups"):
            assert by_uuid[p.uuid] == p.outcome, p.uuid
    assert next(r for r in dropped if r["reason"] == "image_fetch_failed")["detail"].startswith("http_404")
    kept = set(table.column("uuid").to_pylist())
    assert {p.uuid for p in world.planted if p.outcome == "kept"} <= kept
    assert summary.notes["rows_in_several_groups"] == 1  # "Equus quagga" under the genus Peromyscus


def test_the_left_out_record_reads_the_same_through_info_and_the_card(built):
    summary, _, _ = built
    records = read_left_out(summary.out)
    assert Counter(r.reason for r in records) == Counter(
        r["reason"] for r in pq.read_table(summary.out / LEFT_OUT_FILE).to_pylist())
    stages = {r.reason: r.stage for r in records}
    assert (stages["species_cap"], stages["image_fetch_failed"], stages["above_genus"]) == ("sample", "fetch", "check")
    lines = left_out_lines(left_out_counts(records), LEFT_OUT_FILE)
    assert "\n".join(lines) in (summary.out / "README.md").read_text()
    described = info.describe(store.open_dataset(summary.dataset_path), str(summary.dataset_path))
    assert described["left_out"]["counts"] == left_out_counts(records)
    assert "\n".join(lines[1:]) in info.format_description(described)


@pytest.mark.parametrize(("raw", "reason", "code"), [
    ("cc0-1.0", None, "cc0"), ("cc-0-1.0", None, "cc0"), ("CC BY 4.0", None, "cc-by"),
    ("cc-by-nc-4.0", None, "cc-by-nc"), ("cc-by-sa", None, "cc-by-sa"),
    ("cc-by-nd-4.0", "license_no_derivatives", None), ("cc-by-nc-nd", "license_no_derivatives", None),
    ("Attribution-NoDerivatives", "license_no_derivatives", None),
    ("Attribution NoDerivs whatever", "license_no_derivatives", None),
    ("All rights reserved", "license_all_rights_reserved", None),
    ("All Rights Reserved.", "license_all_rights_reserved", None), ("other", "license_other", None),
    ("Other", "license_other", None), ("No known copyright restrictions", "license_unrecognised", None),
    (None, "missing_license", None), ("  ", "missing_license", None),
])
def test_license_classification(raw, reason, code):
    found, parsed = classify_license(raw)
    assert found == reason
    if code is not None:
        assert parsed is not None and parsed.code == code


# --- sampling ------------------------------------------------------------------------------------


def test_caps_hold_and_the_same_seed_gives_the_same_dataset(world, built, tmp_path):
    summary, _, table = built
    names = Counter((r["genus"], r["species"]) for r in table.to_pylist())
    assert max(n for (_, s), n in names.items() if s) <= PER_SPECIES
    assert max(n for (_, s), n in names.items() if s is None) <= GENUS_ONLY_CAP
    again = build_finegrained(_config(world, tmp_path / "again"))
    assert again.fingerprint == summary.fingerprint
    images = store.open_dataset(again.dataset_path).to_table(columns=["uuid", "image"])
    assert images.column("image").to_pylist() == table.column("image").to_pylist()  # byte-identical WebP
    other = build_finegrained(_config(world, tmp_path / "other", seed=7))
    assert other.fingerprint != summary.fingerprint
    assert other.rows == summary.rows  # a different choice inside the capped buckets, the same counts
    assert other.species == summary.species


# --- images --------------------------------------------------------------------------------------


def _expected_size(size: tuple[int, int], max_side: int = 720) -> tuple[int, int]:
    width, height = size
    if max(size) <= max_side:
        return size
    if width >= height:
        return max_side, max(1, round(height * max_side / width))
    return max(1, round(width * max_side / height)), max_side


def test_images_are_lossless_webp_within_720_px(world, built):
    _, _, table = built
    planted = {p.uuid: p for p in world.planted}
    resized = 0
    for row in table.to_pylist():
        data = row["image"]
        assert data[:4] == b"RIFF" and data[8:12] == b"WEBP" and data[12:16] == b"VP8L"  # VP8L: lossless
        stored = Image.open(io.BytesIO(data))
        assert stored.format == "WEBP" and max(stored.size) <= 720
        size = planted[row["uuid"]].size
        assert (row["original_width"], row["original_height"]) == size
        assert stored.size == (row["width"], row["height"]) == _expected_size(size)
        original = Image.open(io.BytesIO(world.originals[row["uuid"]])).convert("RGB")
        if max(size) > 720:
            resized += 1
            assert max(stored.size) == 720
            original = original.resize(stored.size, Image.Resampling.LANCZOS)
        # Lossless: every stored pixel is the resized (or original) pixel, exactly.
        assert np.array_equal(np.asarray(stored.convert("RGB")), np.asarray(original)), row["uuid"]
    assert resized == 6  # 1500x1000, 900x1200, 800x600 gray, 721x300, 300x900, 2000x1000 local; 720x540 kept
    assert set(table.column("image_format").to_pylist()) == {"webp"}


# --- provenance columns and seen_in_training -----------------------------------------------------


def test_seen_in_training_from_the_lists(built):
    summary, _, table = built
    seen = dict(zip(table.column("uuid").to_pylist(), table.column("seen_in_training").to_pylist(), strict=True))
    assert seen["pleu-0"] == ["bioclip-2", "bioclip-2.5"]
    assert seen["isca-0"] == ["bioclip-2"]
    assert seen["egre-0"] == ["bioclip-2.5"]
    assert seen.get("pman-0", ["bioclip-2"]) == ["bioclip-2"]  # pman-0 may have been capped away
    assert seen["ezeb-0"] == []
    in_dataset = 2 + ("pman-0" in seen)
    assert summary.seen_in_training == {"bioclip-2": {"listed": 4, "in_dataset": in_dataset},
                                        "bioclip-2.5": {"listed": 3, "in_dataset": 2}}
    assert summary.notes["seen_uuids_not_in_dataset"]["bioclip-2"] == 4 - in_dataset


def test_the_published_cards_species_query_finds_rows(built, tmp_path, capsys):
    """The Fine-Grained Challenges card's own example, ``species = 'Peromyscus maniculatus'``, through ``subset``."""
    from cladebench.cli import main

    _, dataset, table = built
    expected = sorted(r["uuid"] for r in table.to_pylist() if r["genus"] == "Peromyscus"
                      and r["species"] is not None and r["species"].endswith(" maniculatus"))
    assert expected  # the small catalog plants deer mice with the epithet only
    out = tmp_path / "deer-mice.lance"
    code = main(["subset", dataset.uri, "--where", "species = 'Peromyscus maniculatus'", "--columns", "species",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    copy = store.open_dataset(out).to_table()
    assert sorted(copy.column("uuid").to_pylist()) == expected
    assert set(copy.column("species").to_pylist()) == {"Peromyscus maniculatus"}
    assert store.read(dataset, where="species = 'maniculatus'").num_rows == 0  # the epithet alone is no name


def test_rows_carry_ranks_names_and_provenance(built, world):
    _, _, table = built
    rows = {r["uuid"]: r for r in table.to_pylist()}
    # The catalog gives the epithet; the dataset holds the binomial (the card's "species binomial").
    assert rows["dvar-0"]["species"] == "Dermacentor variabilis"
    assert rows["dvar-0"]["scientific_name"] == "Dermacentor variabilis"
    genus_only = next(r for u, r in rows.items() if u.startswith("pgen"))
    assert genus_only["species"] is None and genus_only["scientific_name"] == "Peromyscus Gloger, 1841"
    assert rows["pleu-0"]["license_link"] == "https://creativecommons.org/publicdomain/zero/1.0/"
    assert rows["pleu-0"]["attribution"].startswith("owner ") and "CC0" in rows["pleu-0"]["attribution"]
    assert rows["isca-0"]["copyright_owner"].startswith("owner ")
    assert {r["source_dataset"] for r in rows.values()} == {"gbif"}
    assert {r["img_type"] for r in rows.values()} == {"Citizen Science"}
    assert rows["egre-0"]["source_url"] is None  # read from its local file
    assert all(r["kingdom"] == "Animalia" and r["family"] for r in rows.values())


# --- embeddings, indices, card -------------------------------------------------------------------


def test_embeddings_sidecar_and_indices(built):
    summary, dataset, table = built
    field_ = dataset.schema.field("emb_tiny")
    assert field_.type == pa.list_(pa.float32(), 32)
    meta = store.embedding_metadata(field_)
    assert meta["model"].startswith("local-dir:") and meta["dim"] == 32
    assert table.column("emb_tiny").null_count == 0
    sidecar = json.loads((summary.out / "embedding_models.json").read_text())
    assert sidecar == json.loads((summary.dataset_path / "embedding_models.json").read_text())
    entry = sidecar["emb_tiny"]
    assert entry["dim"] == 32 and entry["model"] == meta["model"] and entry["revision"] and entry["preprocessing"]
    kinds = {tuple(i["columns"]): i["type"].upper() for i in store.indices(dataset)}
    assert "BTREE" in kinds[("uuid",)] and "BITMAP" in kinds[("challenge_group",)]
    assert "IVF_FLAT" in kinds[("emb_tiny",)]
    assert summary.vector_index_skipped is None
    hits = dataset.to_table(nearest={"column": "emb_tiny", "q": table.column("emb_tiny")[0].values.to_numpy(),
                                     "k": 3, "metric": "cosine"}, columns=["uuid"])
    assert hits.num_rows == 3


def _card_table(card: str, heading: str) -> list[list[str]]:
    section = card.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_card_tables_match_the_data(built):
    summary, _, table = built
    card = summary.card_path.read_text()
    rows = table.to_pylist()
    groups = {r[0]: r for r in _card_table(card, "Challenge groups")}
    for name, counts in EXPECTED_IMAGES.items():
        species = sum(1 for t in counts if " " in t)
        genus_only = sum(n for t, n in counts.items() if " " not in t)
        assert groups[name][2:] == [str(species), str(sum(counts.values())), str(genus_only)]
    assert groups["total"][3] == str(len(rows))
    assert groups["zebras"][1] == "species:Equus quagga, Equus grevyi, Equus zebra"
    licenses = {r[0]: r[1:] for r in _card_table(card, "Licenses")}
    for code, per_group in EXPECTED_LICENSES.items():
        expected = [str(per_group.get(g, 0)) for g in ("Peromyscus", "Ixodidae", "zebras")]
        assert licenses[code] == [*expected, str(sum(per_group.values()))]
    assert licenses["total"][-1] == str(len(rows))
    species = {(r[0], r[1]): int(r[2]) for r in _card_table(card, "Images per species")}
    assert species == {(g, t): n for g, v in EXPECTED_IMAGES.items() for t, n in v.items()}
    drops = {r[0]: int(r[1].replace(",", "")) for r in _card_table(card, "What was left out, and why")}
    assert drops == {**summary.outcomes, "in the dataset": len(rows)}
    seen = {r[0]: r[1:] for r in _card_table(card, "seen_in_training")}
    assert seen["bioclip-2.5"] == ["3", "2"]
    assert "emb_tiny" in card and "IVF_FLAT" in card
    build = json.loads((summary.out / "build.json").read_text())
    assert build["fingerprint"] == summary.fingerprint == store.fingerprint(store.open_dataset(summary.dataset_path))


def test_too_few_rows_for_a_vector_index(world, tmp_path):
    summary = build_finegrained(_config(world, tmp_path / "small", embed=(f"local-dir:{world.model_dir}",),
                                        group=("zebras=species:Equus quagga,Equus grevyi,Equus zebra",)))
    dataset = store.open_dataset(summary.dataset_path)
    assert summary.rows == 5 and "emb_tiny" in dataset.schema.names  # the column named after the model folder
    assert not any("emb_tiny" in i["columns"] for i in store.indices(dataset))
    assert "min_index_rows=256" in summary.vector_index_skipped
    assert summary.vector_index_skipped in summary.card_path.read_text()
    # The 10 planted zebra rows and the Peromyscus row whose species says "Equus quagga".
    assert summary.outcomes["outside_groups"] == len(world.planted) - 11
    assert all(r is None for r in dataset.to_table().column("seen_in_training").to_pylist())  # no lists: unknown


def test_each_embed_model_name_is_resolved_once(world, tmp_path, monkeypatch):
    from cladebench.models import registry

    resolved = Counter()
    original = registry.resolve_model

    def counting(name, revision=None):
        resolved[name] += 1
        return original(name, revision)

    monkeypatch.setattr(registry, "resolve_model", counting)
    model = f"local-dir:{world.model_dir}"
    summary = build_finegrained(_config(world, tmp_path / "once", embed=(f"tiny={model}",),
                                        group=("zebras=species:Equus quagga,Equus grevyi,Equus zebra",)))
    assert "emb_tiny" in store.open_dataset(summary.dataset_path).schema.names
    assert resolved == {model: 1}  # the config resolves it; the inputs check and the embedding use that spec


# --- failures leave nothing behind ---------------------------------------------------------------


def test_a_failure_leaves_no_output_and_an_existing_one_untouched(world, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(Exception, match="nowhere"):
        build_finegrained(_config(world, out, embed=("local-dir:/nowhere/model",)))
    assert list(tmp_path.iterdir()) == []  # neither out nor a staging folder
    build_finegrained(_config(world, out, group=("zebras=species:Equus zebra",)))
    before = store.fingerprint(store.open_dataset(out / DATASET_DIR))
    with pytest.raises(CladebenchError, match="already exists"):
        build_finegrained(_config(world, out))
    with pytest.raises(Exception, match="nowhere"):
        build_finegrained(_config(world, out, overwrite=True, embed=("local-dir:/nowhere/model",)))
    assert store.fingerprint(store.open_dataset(out / DATASET_DIR)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_no_image_at_all_is_an_error_not_an_empty_dataset(world, tmp_path):
    with pytest.raises(CladebenchError, match="nothing to write"):
        build_finegrained(_config(world, tmp_path / "none", group=("gone=species:Equus grevyi",),
                                  per_species=1, seed=_seed_picking(world, "egre-missing-0")))
    assert list(tmp_path.iterdir()) == []


def _seed_picking(world: World, uuid: str) -> int:
    """A seed whose first pick among the eligible Equus grevyi rows is ``uuid``."""
    from cladebench.benchmarks.finegrained.builder.checks import sample_key

    candidates = ["egre-0", "egre-missing-0", "egre-corrupt-0"]
    return next(s for s in range(1000) if min(candidates, key=lambda u: sample_key(s, u)) == uuid)


# --- the config and its CLI ----------------------------------------------------------------------


def test_config_maps_onto_cli_options(tmp_path):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, FineGrainedBuildConfig)
    args = parser.parse_args([
        str(tmp_path / "cat.parquet"), "--provenance", str(tmp_path / "p.csv"), "--out", str(tmp_path / "o"),
        "--group", "mice=genus:Peromyscus", "zebras=species:Equus quagga,Equus zebra", "--per-species", "7",
        "--genus-only-cap", "2", "--seen", "bioclip-2=a.txt", "--embed", "bioclip-2", "--no-progress",
    ])
    config = config_from_args(FineGrainedBuildConfig, args)
    assert config.group == ("mice=genus:Peromyscus", "zebras=species:Equus quagga,Equus zebra")
    assert (config.per_species, config.genus_only_cap, config.progress) == (7, 2, False)
    assert config.seen == ("bioclip-2=a.txt",) and config.embed == ("bioclip-2",)
    defaults = config_from_args(FineGrainedBuildConfig, parser.parse_args(
        [str(tmp_path / "c.csv"), "--provenance", "p.csv", "--out", "o"]))
    assert defaults.per_species == 100 and defaults.max_side == 720 and len(defaults.group) == 3
    with pytest.raises(SystemExit):
        parser.parse_args([str(tmp_path / "c.csv"), "--out", "o"])  # --provenance is required


@pytest.mark.parametrize("spec", ["mice", "mice=genus", "mice=genus:", "=genus:Peromyscus", "mice=tribe:X",
                                  "zebras=species:quagga"])
def test_bad_group_specs_are_usage_errors(spec, tmp_path):
    with pytest.raises(UsageError):
        FineGrainedBuildConfig(tmp_path, provenance=tmp_path, out=tmp_path, group=(spec,))


def test_groups_seen_and_embed_specs():
    group = ChallengeGroup.parse("Ixodidae=family: Ixodidae ")
    assert (group.rank, group.values, group.taxon) == (Rank.FAMILY, ("Ixodidae",), "family:Ixodidae")
    assert [(t.column, t.model) for t in parse_embed(("bioclip-2", "b25=bioclip-2.5", "emb_x=hf-hub:org/Model"))] == [
        ("emb_bioclip2", "bioclip-2"), ("emb_b25", "bioclip-2.5"), ("emb_x", "hf-hub:org/Model")]
    with pytest.raises(UsageError):
        parse_embed(("bioclip-2", "bioclip2=clip-vit-b-16"))  # both would write emb_bioclip2
    with pytest.raises(UnknownNameError, match="bioclip-2"):
        FineGrainedBuildConfig(Path("c"), provenance=Path("p"), out=Path("o"), embed=("bioclip2",))  # a typo
    with pytest.raises(UsageError):
        FineGrainedBuildConfig(Path("c"), provenance=Path("p"), out=Path("o"), group=("a=genus:X", "a=genus:Y"))
    with pytest.raises(UsageError):
        FineGrainedBuildConfig(Path("c"), provenance=Path("p"), out=Path("o"), seen=("bioclip-2",))
    with pytest.raises(UsageError):
        FineGrainedBuildConfig(Path("c"), provenance=Path("p"), out=Path("o"), per_species=0)


def test_docstring_examples_run():
    import doctest

    from cladebench.benchmarks.finegrained.builder import checks, config

    for module in (config, checks):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0


def test_describe_names_the_output_and_the_drops(built):
    summary, _, _ = built
    text = summary.describe()
    assert str(summary.dataset_path) in text and "outside the groups" in text and "emb_tiny" in text


@pytest.mark.parametrize("layout", ["csv", "parquet_folder"])
def test_catalog_as_csv_or_a_folder_of_parquet(world, tmp_path, layout):
    table = pq.read_table(world.catalog)
    if layout == "csv":
        import pyarrow.csv as pacsv

        catalog = world.catalog.with_name("catalog.csv")
        pacsv.write_csv(table, catalog)
    else:
        catalog = world.catalog.parent / "parts"
        catalog.mkdir(exist_ok=True)
        half = table.num_rows // 2
        pq.write_table(table.slice(0, half), catalog / "part-0.parquet")
        pq.write_table(table.slice(half), catalog / "part-1.parquet")
    group = ("zebras=species:Equus quagga,Equus grevyi,Equus zebra",)
    reference = build_finegrained(_config(world, tmp_path / "ref", group=group))
    config = _config(world, tmp_path / layout, group=group, image_dir=world.catalog.parent)
    summary = build_finegrained(FineGrainedBuildConfig(catalog, **{
        f: getattr(config, f) for f in config.__dataclass_fields__ if f != "catalog"}))
    assert (summary.fingerprint, summary.outcomes) == (reference.fingerprint, reference.outcomes)


def test_build_verb_gives_the_same_dataset(world, built, tmp_path, capsys):
    from cladebench.cli import main

    out = tmp_path / "cli"
    args = ["build", "finegrained", str(world.catalog), "--provenance", str(world.provenance), "--out", str(out),
            "--per-species", str(PER_SPECIES), "--genus-only-cap", str(GENUS_ONLY_CAP), "--download-dir",
            str(world.root / "downloads"), "--no-progress", "--workers", "0", "--device", "cpu",
            "--min-index-rows", "8",
            "--seen", f"bioclip-2={world.seen_text}", f"bioclip-2.5={world.seen_parquet}"]
    assert main(args) == 0
    assert str(out) in capsys.readouterr().out
    dataset = store.open_dataset(out / DATASET_DIR)
    assert store.fingerprint(dataset) == store.fingerprint(built[1])


# --- the output folder and inputs it cannot read -----------------------------------------------------


@pytest.mark.parametrize("where", ["catalog folder", "above the inputs", "model folder"])
def test_an_output_overlapping_an_input_is_refused_before_reading(world, where):
    out = {"catalog folder": world.catalog.parent, "above the inputs": world.root,
           "model folder": world.model_dir}[where]
    before = sorted(str(p) for p in out.rglob("*"))
    with pytest.raises(UsageError, match="the output must be a folder of its own") as refused:
        build_finegrained(_config(world, out, overwrite=True, embed=(f"tiny=local-dir:{world.model_dir}",)))
    assert refused.value.exit_code == 2
    assert sorted(str(p) for p in out.rglob("*")) == before


def test_overwrite_refuses_a_folder_it_did_not_write(world, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("mine")
    with pytest.raises(CladebenchError, match="is not an output of `cladebench build finegrained`"):
        build_finegrained(_config(world, out, overwrite=True))
    assert [p.name for p in out.iterdir()] == ["notes.md"] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_seen_list_that_is_not_utf8_is_exit_1(world, tmp_path):
    seen = tmp_path / "seen.txt"
    seen.write_bytes(b"uuid\npman-0\n\xff\xfe\n")
    with pytest.raises(CladebenchError, match="not UTF-8 text") as error:
        build_finegrained(_config(world, tmp_path / "out", seen=(f"bioclip-2={seen}",)))
    assert error.value.exit_code == 1 and "\n" not in str(error.value)


def test_a_truncated_catalog_is_exit_1(world, tmp_path):
    import gzip

    rows = pq.read_table(world.catalog).to_pylist()
    text = ",".join(rows[0]) + "\n" + "".join(
        ",".join("" if v is None else str(v) for v in r.values()) + "\n" for r in rows) * 200
    packed = gzip.compress(text.encode())
    catalog = tmp_path / "catalog.csv.gz"
    catalog.write_bytes(packed[: len(packed) // 2])
    config = dataclasses.replace(_config(world, tmp_path / "out"), catalog=catalog)
    with pytest.raises(CladebenchError, match="cannot read the catalog") as error:
        build_finegrained(config)
    assert error.value.exit_code == 1 and "\n" not in str(error.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.csv.gz"]
