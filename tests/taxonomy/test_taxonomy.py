"""Ranks, lineages, name styles, divergence, roll-up; and the readers against real-format taxonomy files."""

from __future__ import annotations

import ast
import dataclasses
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from cladebench.errors import CladebenchError, SchemaError, UnknownNameError
from cladebench.taxonomy import (
    NAME_STYLES,
    RANK_COLUMNS,
    RANKS,
    Lineage,
    Rank,
    ancestry_from_parents,
    divergence_rank,
    get_name_style,
    inat_lineages,
    inat_rank_table,
    lineages_from_table,
    membership_matrix,
    read_inat_taxa,
    unique_species,
)

SEVEN = ("kingdom", "phylum", "class", "order", "family", "genus", "species")

Realdata = Callable[[str], Path]


def cat() -> Lineage:
    return Lineage.from_names("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Felis", "Felis catus",
                              common_name="domestic cat")


def lizard(family: str = "Lacertidae", genus: str = "Podarcis", species: str = "muralis") -> Lineage:
    """A CrypticBio-style Squamata lineage: Squamata in the class slot, no order."""
    return Lineage.from_names("Animalia", "Chordata", "Squamata", None, family, genus, species)


# --- ranks ---------------------------------------------------------------------------------------


def test_ranks_are_ordered_kingdom_to_species() -> None:
    assert [r.column for r in RANKS] == list(SEVEN)
    assert RANK_COLUMNS == SEVEN
    assert list(Rank) == sorted(Rank)
    assert Rank.KINGDOM < Rank.PHYLUM < Rank.CLASS < Rank.ORDER < Rank.FAMILY < Rank.GENUS < Rank.SPECIES
    assert [int(r) for r in RANKS] == list(range(7))
    assert Rank.CLASS.column == "class"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("cls", Rank.CLASS),
        ("class", Rank.CLASS),
        ("CLS", Rank.CLASS),
        ("Class", Rank.CLASS),
        (" Genus ", Rank.GENUS),
        ("species", Rank.SPECIES),
        (3, Rank.ORDER),
        (0, Rank.KINGDOM),
        (np.int64(4), Rank.FAMILY),
        (Rank.PHYLUM, Rank.PHYLUM),
    ],
)
def test_rank_parse_accepts_names_aliases_and_indices(value: object, expected: Rank) -> None:
    assert Rank.parse(value) is expected  # type: ignore[arg-type]


def test_unknown_rank_lists_the_known_names_and_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError) as info:
        Rank.parse("famly")
    message = str(info.value)
    assert "'famly'" in message
    for name in SEVEN:
        assert name in message
    assert "Did you mean 'family'?" in message
    # One error class for every registry miss: the CLI maps it to an exit code; callers may catch KeyError.
    assert isinstance(info.value, CladebenchError)
    assert isinstance(info.value, KeyError)


@pytest.mark.parametrize("value", [7, -1, "subspecies", ""])
def test_out_of_range_or_unknown_ranks_are_unknown_name_errors(value: object) -> None:
    with pytest.raises(UnknownNameError, match="known: "):
        Rank.parse(value)  # type: ignore[arg-type]


# --- lineage normalisation ---------------------------------------------------------------------------


def test_empty_and_blank_names_become_none() -> None:
    lineage = Lineage.from_names("Animalia", "", "  ", None, float("nan"), "Felis", "", common_name="")  # type: ignore[arg-type]
    assert lineage.names == ("Animalia", None, None, None, None, "Felis", None)
    assert lineage.common_name is None
    assert lineage.deepest_rank is Rank.GENUS


def test_names_are_stripped() -> None:
    lineage = Lineage.from_names(" Animalia ", "Chordata\t", common_name="  cat ")
    assert lineage.names[:2] == ("Animalia", "Chordata")
    assert lineage.common_name == "cat"


def test_binomial_in_species_slot_stays_and_fills_genus() -> None:
    lineage = Lineage.from_names("Animalia", None, None, None, None, None, "Homo sapiens")
    assert lineage.names[Rank.GENUS] == "Homo"
    assert lineage.names[Rank.SPECIES] == "Homo sapiens"
    assert lineage.epithet == "sapiens"
    assert lineage.scientific_name == "Homo sapiens"


def test_binomial_does_not_override_a_given_genus() -> None:
    lineage = Lineage.from_names(None, None, None, None, None, "Felis", "Felis catus")
    assert lineage.names[Rank.GENUS:] == ("Felis", "Felis catus")


def test_epithet_with_a_genus_becomes_the_binomial() -> None:
    epithet = Lineage.from_names(None, None, None, None, None, "Felis", "catus")
    assert epithet == Lineage.from_names(None, None, None, None, None, "Felis", "Felis catus")
    assert epithet.label("sci") == "Felis catus"  # the genus is not written twice
    assert epithet.label("taxon") == "Felis catus"
    tautonym = Lineage.from_names(None, None, None, None, None, "Gorilla", "gorilla")
    assert tautonym.names[Rank.SPECIES] == "Gorilla gorilla"
    assert tautonym == Lineage(tautonym.names)  # normalising a binomial again changes nothing
    assert Lineage.from_names(None, None, None, None, None, "Felis", "silvestris lybica").names[Rank.SPECIES] == (
        "Felis silvestris lybica")
    without_genus = Lineage.from_names("Animalia", None, None, None, None, None, "catus")
    assert (without_genus.names[Rank.SPECIES], without_genus.epithet, without_genus.label("sci")) == (
        "catus", "catus", "catus")


def test_epithet_is_lower_case_and_infraspecific_part_kept() -> None:
    assert Lineage.from_names(None, None, None, None, None, "Felis", "Catus").names[Rank.SPECIES] == "Felis catus"
    trinomial = Lineage.from_names(None, None, None, None, None, None, "Crocodylus niloticus africanus")
    assert trinomial.names[Rank.GENUS] == "Crocodylus"
    assert trinomial.names[Rank.SPECIES] == "Crocodylus niloticus africanus"
    assert trinomial.epithet == "niloticus africanus"
    assert trinomial.label("taxon") == "Crocodylus niloticus africanus"


def test_lineage_shape_errors() -> None:
    with pytest.raises(ValueError, match="at most 7"):
        Lineage.from_names(*"abcdefgh")
    with pytest.raises(ValueError, match="7 ranks"):
        Lineage(("Animalia",))


def test_lineage_is_immutable_hashable_and_compared_by_value() -> None:
    a, b = cat(), cat()
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.common_name = "lion"  # type: ignore[misc]


def test_getitem_by_rank_name_alias_and_index() -> None:
    lineage = cat()
    assert lineage[Rank.FAMILY] == "Felidae"
    assert lineage["cls"] == lineage["class"] == lineage[2] == "Mammalia"
    assert lineage["species"] == "Felis catus"


def test_replace_changes_a_copy() -> None:
    original = cat()
    lion = original.replace(genus="Panthera", species="leo", common_name="lion", taxon_id=41964)
    assert lion.names[Rank.GENUS:] == ("Panthera", "Panthera leo")
    assert lion.common_name == "lion"
    assert lion.taxon_id == 41964
    assert original.names[Rank.GENUS:] == ("Felis", "Felis catus")
    assert original.replace(cls="Aves")["class"] == "Aves"
    # A new genus alone keeps the epithet under it (never "Panthera felis catus").
    assert original.replace(genus="Panthera").names[Rank.GENUS:] == ("Panthera", "Panthera catus")
    assert original.replace(genus=None).names[Rank.GENUS:] == (None, "catus")


def test_deepest_rank_completeness_and_scientific_name_fallbacks() -> None:
    assert cat().is_complete
    assert cat().deepest_rank is Rank.SPECIES
    genus_only = Lineage.from_names("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Felis")
    assert not genus_only.is_complete
    assert genus_only.scientific_name == "Felis"
    family_only = Lineage.from_names("Animalia", None, None, None, "Felidae")
    assert family_only.deepest_rank is Rank.FAMILY
    assert family_only.scientific_name == "Felidae"
    empty = Lineage.from_names()
    assert empty.deepest_rank is None
    assert empty.scientific_name is None


@pytest.mark.parametrize(("given", "taxon_id"), [(7, 7), ("7", 7), (" 7 ", 7), (7.0, 7), (float("nan"), None),
                                                ("", None), (None, None)])
def test_a_taxon_id_is_a_whole_number_or_missing(given: object, taxon_id: int | None) -> None:
    assert Lineage.from_row({"genus": "Aramus", "species": "guarauna", "taxon_id": given}).taxon_id == taxon_id


@pytest.mark.parametrize("given", [1.5, True, "abc", "7a", [7]])
def test_a_taxon_id_that_is_not_a_whole_number_is_a_schema_error(given: object) -> None:
    """Before, 1.5 and True became taxon 1 silently, and text crashed (int() raised a bare ValueError)."""
    with pytest.raises(SchemaError, match=r"column 'taxon_id': .* is not a taxon id"):
        Lineage.from_row({"genus": "Aramus", "species": "guarauna", "taxon_id": given})


def test_from_row_spellings() -> None:
    tol = Lineage.from_row({"kingdom": "Animalia", "phylum": "Chordata", "class": "Aves", "order": "Gruiformes",
                            "family": "Aramidae", "genus": "Aramus", "species": "guarauna",
                            "common_name": "Limpkin", "taxon_id": "7"})
    assert tol.names == ("Animalia", "Chordata", "Aves", "Gruiformes", "Aramidae", "Aramus", "Aramus guarauna")
    assert tol.common_name == "Limpkin"
    assert tol.taxon_id == 7
    rare = Lineage.from_row({"kingdom": "Animalia", "cls": "Aves", "order_": "Gruiformes", "species": "guarauna",
                             "genus": "Aramus"})
    assert rare.names == ("Animalia", None, "Aves", "Gruiformes", None, "Aramus", "Aramus guarauna")
    dwca = Lineage.from_row({"genus": "Aramus", "specificEpithet": "guarauna", "vernacularName": "Limpkin"})
    assert dwca.scientific_name == "Aramus guarauna"
    assert dwca.common_name == "Limpkin"


def test_from_row_prefers_cls_over_a_class_label_column() -> None:
    # Rare Species: `cls` is the taxonomic class, `class` is the "Genus species" label.
    row = {"kingdom": "Animalia", "phylum": "Mollusca", "cls": "Bivalvia", "order": "Unionida",
           "family": "Unionidae", "genus": "Cyclonaias", "species": "tuberculata", "class": "Cyclonaias tuberculata"}
    lineage = Lineage.from_row(row)
    assert lineage["class"] == "Bivalvia"
    assert lineage.label("taxon") == "Animalia Mollusca Bivalvia Unionida Unionidae Cyclonaias tuberculata"


def test_from_row_species_from_scientific_name_only_when_genus_agrees() -> None:
    filled = Lineage.from_row({"genus": "Podarcis", "scientificName": "Podarcis muralis"})
    assert filled.names[Rank.GENUS:] == ("Podarcis", "Podarcis muralis")
    no_genus = Lineage.from_row({"scientific_name": "Podarcis muralis"})
    assert no_genus.names[Rank.GENUS:] == ("Podarcis", "Podarcis muralis")
    conflicting = Lineage.from_row({"genus": "Lacerta", "scientificName": "Podarcis muralis"})
    assert conflicting.names[Rank.GENUS:] == ("Lacerta", None)
    uninomial = Lineage.from_row({"scientificName": "Podarcis"})
    assert uninomial.names[Rank.SPECIES] is None


@pytest.mark.parametrize(
    ("vernacular", "expected"),
    [
        ("['brown widow spider', 'brown widow']", "brown widow spider"),
        ("['', 'second']", "second"),
        ("[]", None),
        ("[not a list", "[not a list"),
        ("plain name", "plain name"),
        ("", None),
        (None, None),
    ],
)
def test_vernacular_list_strings(vernacular: str | None, expected: str | None) -> None:
    assert Lineage.from_row({"genus": "Latrodectus", "vernacularName": vernacular}).common_name == expected


# --- name styles -----------------------------------------------------------------------------------


def test_name_styles_registered() -> None:
    assert set(NAME_STYLES) == {"sci", "com", "taxon", "taxon_com", "mixed"}


def test_every_style_on_a_complete_lineage() -> None:
    lineage = cat()
    assert lineage.label("mixed") == "Felis catus (domestic cat)"
    assert lineage.replace(common_name=None).label("mixed") == "Felis catus"
    assert lineage.label("sci") == "Felis catus"
    assert lineage.label("com") == "domestic cat"
    assert lineage.label("taxon") == "Animalia Chordata Mammalia Carnivora Felidae Felis catus"
    assert lineage.label("taxon_com") == (
        "Animalia Chordata Mammalia Carnivora Felidae Felis catus with common name domestic cat"
    )


def test_styles_without_a_common_name() -> None:
    lineage = cat().replace(common_name=None)
    assert lineage.label("com") == "Felis catus"
    assert lineage.label("taxon_com") == lineage.label("taxon")
    assert "common name" not in lineage.label("taxon_com")


def test_taxon_style_skips_missing_ranks_capitalises_ranks_and_keeps_epithet_lower() -> None:
    lineage = Lineage.from_names("animalia", "chordata", "squamata", None, "lacertidae", "podarcis", "Muralis")
    assert lineage.label("taxon") == "Animalia Chordata Squamata Lacertidae Podarcis muralis"
    assert lineage.label("sci") == "podarcis muralis"  # sci keeps the names as given


def test_styles_on_a_lineage_that_stops_above_species() -> None:
    genus_only = Lineage.from_names("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Felis",
                                    common_name="small cats")
    assert genus_only.label("sci") == "Felis"
    assert genus_only.label("com") == "small cats"
    assert genus_only.label("taxon") == "Animalia Chordata Mammalia Carnivora Felidae Felis"
    assert genus_only.label("taxon_com") == (
        "Animalia Chordata Mammalia Carnivora Felidae Felis with common name small cats"
    )


@pytest.mark.parametrize("style", ["sci", "com", "taxon", "taxon_com"])
def test_empty_lineage_has_no_label(style: str) -> None:
    with pytest.raises(ValueError, match="no names"):
        Lineage.from_names().label(style)


def test_unknown_style_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError, match=r"known: com, mixed, sci, taxon, taxon_com\. Did you mean 'taxon'\?"):
        get_name_style("taxn")


# --- divergence ----------------------------------------------------------------------------------


def test_divergence_rank_cases() -> None:
    felis = cat()
    assert divergence_rank(felis, felis.replace(genus="Panthera", species="leo")) is Rank.GENUS
    assert divergence_rank(felis, felis.replace(species="silvestris")) is Rank.SPECIES
    assert divergence_rank(felis, cat()) is None
    assert divergence_rank(felis, felis.replace(common_name="house cat", taxon_id=118552)) is None
    plant = Lineage.from_names("Plantae", "Tracheophyta", "Magnoliopsida", "Fagales", "Fagaceae", "Quercus", "alba")
    assert divergence_rank(felis, plant) is Rank.KINGDOM
    assert divergence_rank(plant, felis) is Rank.KINGDOM


def test_divergence_rank_with_squamata_style_missing_order() -> None:
    # Both lack an order: that is not a difference; they differ first at family.
    assert divergence_rank(lizard(), lizard(family="Gekkonidae", genus="Tarentola", species="mauritanica")) \
        is Rank.FAMILY
    assert divergence_rank(lizard(), lizard(species="bocagei")) is Rank.SPECIES
    # One has an order, the other not: they differ at order.
    assert divergence_rank(lizard(), lizard().replace(order="Squamata")) is Rank.ORDER


def test_divergence_of_homonym_genera_is_at_kingdom() -> None:
    moth = Lineage.from_names("Animalia", None, None, None, None, "Laelia", "rosea")
    orchid = Lineage.from_names("Plantae", None, None, None, None, "Laelia", "rosea")
    assert divergence_rank(moth, orchid) is Rank.KINGDOM


# --- truncate / key --------------------------------------------------------------------------------


def test_truncate_and_key() -> None:
    lineage = cat()
    family = lineage.truncate("family")
    assert family.names == ("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", None, None)
    assert family.common_name is None
    assert family.taxon_id is None
    assert family.deepest_rank is Rank.FAMILY
    assert lineage.truncate(Rank.SPECIES).names == lineage.names
    assert lineage.truncate("kingdom").names == ("Animalia", *(None,) * 6)
    assert lineage.key("cls") == ("Animalia", "Chordata", "Mammalia")
    assert lineage.key(Rank.SPECIES) == lineage.names
    assert lizard().key("order") == ("Animalia", "Chordata", "Squamata", None)


# --- membership / roll-up ---------------------------------------------------------------------------


def _random_species(rng: np.random.Generator, n: int) -> list[Lineage]:
    """Species from a small random tree, with homonym genera across kingdoms and some missing ranks."""
    species = []
    for i in range(n):
        kingdom = ["Animalia", "Plantae"][rng.integers(2)]
        phylum = f"P{rng.integers(3)}"
        klass = f"C{rng.integers(3)}"
        order = None if rng.random() < 0.15 else f"O{rng.integers(3)}"
        family = None if rng.random() < 0.1 else f"F{rng.integers(4)}"
        genus = f"G{rng.integers(5)}"  # the same genus names recur in both kingdoms: homonyms
        names = [kingdom, phylum, klass, order, family, genus, f"s{i}"]
        for rank in range(7):
            if rng.random() < 0.05:
                names[rank] = None
        species.append(Lineage(tuple(names)))
    return species


def _brute_roll_up(species: list[Lineage], probs: np.ndarray, rank: int) -> dict[tuple[str | None, ...], np.ndarray]:
    totals: dict[tuple[str | None, ...], np.ndarray] = {}
    for i, lineage in enumerate(species):
        if lineage.names[rank] is None:
            continue
        key = lineage.names[: rank + 1]
        totals[key] = totals.get(key, np.zeros(probs.shape[0])) + probs[:, i]
    return totals


@pytest.mark.parametrize("rank", list(Rank))
def test_roll_up_equals_brute_force_sum(rank: Rank) -> None:
    rng = np.random.default_rng(1234 + int(rank))
    species = _random_species(rng, 60)
    logits = rng.normal(size=(9, len(species)))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)

    membership = membership_matrix(species, rank.column)
    expected = _brute_roll_up(species, probs, rank)

    assert membership.rank is rank
    assert membership.matrix.shape == (len(species), len(expected))
    assert membership.matrix.dtype == np.float32
    assert set(membership.taxa) == set(expected)
    assert len(set(membership.taxa)) == len(membership.taxa)
    rolled = membership.roll_up(probs)
    assert rolled.shape == (9, len(expected))
    for j, taxon in enumerate(membership.taxa):
        np.testing.assert_allclose(rolled[:, j], expected[taxon], rtol=1e-6, atol=1e-9)
    assert membership.labels == [t[-1] for t in membership.taxa]
    # Each species sits in at most one taxon; those without a name at the rank in none.
    row_sums = np.asarray(membership.matrix.sum(axis=1)).ravel()
    has_name = np.array([s.names[rank] is not None for s in species])
    np.testing.assert_array_equal(row_sums, has_name.astype(np.float32))
    np.testing.assert_allclose(rolled.sum(axis=1), probs[:, has_name].sum(axis=1), rtol=1e-6)


def test_roll_up_keeps_homonyms_apart_and_leaves_missing_rank_rows_empty() -> None:
    species = [
        Lineage.from_names("Animalia", "Arthropoda", "Insecta", "Lepidoptera", "Erebidae", "Laelia", "rosea"),
        Lineage.from_names("Plantae", "Tracheophyta", "Liliopsida", "Asparagales", "Orchidaceae", "Laelia", "rosea"),
        Lineage.from_names("Plantae", "Tracheophyta", "Liliopsida", "Asparagales", "Orchidaceae", "Laelia", "anceps"),
        Lineage.from_names("Animalia", "Chordata", "Squamata", None, "Lacertidae", "Podarcis", "muralis"),
    ]
    genus = membership_matrix(species, "genus")
    assert genus.labels.count("Laelia") == 2
    probs = np.array([[0.1, 0.2, 0.3, 0.4]])
    by_taxon = dict(zip(genus.taxa, genus.roll_up(probs)[0], strict=True))
    assert by_taxon[species[0].key("genus")] == pytest.approx(0.1)
    assert by_taxon[species[1].key("genus")] == pytest.approx(0.5)
    assert by_taxon[species[3].key("genus")] == pytest.approx(0.4)

    order = membership_matrix(species, Rank.ORDER)
    assert order.matrix[3].nnz == 0
    assert order.roll_up(probs)[0].sum() == pytest.approx(0.6)
    # A single image as a 1-D vector rolls up the same way.
    np.testing.assert_allclose(order.roll_up(probs[0]), order.roll_up(probs)[0])


def test_membership_of_no_species() -> None:
    membership = membership_matrix([], "genus")
    assert membership.matrix.shape == (0, 0)
    assert membership.taxa == ()


def test_unique_species_keeps_first_seen_order_and_first_common_name() -> None:
    a = cat()
    b = a.replace(common_name="house cat")
    c = a.replace(genus="Panthera", species="leo", common_name="lion")
    assert unique_species([a, c, b, c]) == [a, c]


# --- ancestry ------------------------------------------------------------------------------------


def test_ancestry_from_parents_small_tree() -> None:
    parents = {48460: None, 1: 48460, 2: 1, 3: 2, 10: 999}
    ancestry = ancestry_from_parents(parents)
    assert ancestry == {48460: "", 1: "48460", 2: "48460/1", 3: "48460/1/2", 10: "999"}


def test_ancestry_cycle_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="cycle"):
        ancestry_from_parents({1: 2, 2: 3, 3: 1})
    with pytest.raises(SchemaError, match="cycle"):
        ancestry_from_parents({5: 5})


def test_inat_rank_table_from_ancestry_strings() -> None:
    taxa = pa.table({
        "taxon_id": pa.array([48460, 1, 2, 3, 4, 5, 6, 7, 8], pa.int64()),
        "ancestry": ["", "48460", "48460/1", "48460/1/2", "48460/1/2/3", "48460/1/2/3/4", "48460/1/2/3/4/5",
                     "48460/1/2/3/4/5/6", "48460/1/2/3/4/5/6/7"],
        "rank": ["stateofmatter", "kingdom", "phylum", "class", "order", "family", "genus", "species",
                 "subspecies"],
        "name": ["Life", "Animalia", "Chordata", "Aves", "Gruiformes", "Aramidae", "Aramus", "Aramus guarauna",
                 "Aramus guarauna pictus"],
    })
    lineages = inat_lineages(taxa)
    full = ("Animalia", "Chordata", "Aves", "Gruiformes", "Aramidae", "Aramus", "Aramus guarauna")
    assert lineages[7].names == full
    assert lineages[7].taxon_id == 7
    assert lineages[8].names == full  # a subspecies rolls into its species
    assert lineages[6].names == (*full[:6], None)
    assert lineages[48460].names == (None,) * 7
    with pytest.raises(SchemaError, match="ancestry"):
        inat_rank_table(taxa.drop_columns(["ancestry"]))


# --- real-format data ------------------------------------------------------------------------------

INAT_TREE = "pyinaturalist-convert/test/sample_data/taxonomy.csv"
INAT_TAXA_EXPORT = "pyinaturalist-convert/test/sample_data/inaturalist-open-data/taxa.csv"
RARE_SPECIES = "bioclip/data/annotation/rare_species/metadata.csv"
CRYPTICBIO = "Final_Multimodal_Group_11/input/CrypticBio-Common.csv"
TAXONOPY_SAMPLE = "TaxonoPy/examples/input/sample.csv"


@pytest.fixture(scope="module")
def inat_tree(realdata: Realdata) -> list[dict]:
    return pacsv.read_csv(realdata(INAT_TREE)).to_pylist()


def _brute_ancestry(taxon: int, by_id: dict[int, dict]) -> list[int]:
    chain = []
    parent = by_id[taxon]["parent_id"]
    while parent is not None:
        chain.append(parent)
        parent = by_id[parent]["parent_id"] if parent in by_id else None
    return chain[::-1]


def _brute_lineage(taxon: int, by_id: dict[int, dict]) -> tuple[str | None, ...]:
    names: dict[str, str | None] = dict.fromkeys(SEVEN)
    for node in [*_brute_ancestry(taxon, by_id), taxon]:
        if by_id[node]["rank"] in names:
            names[by_id[node]["rank"]] = by_id[node]["name"]
    if names["species"] is not None:
        first, rest = names["species"].split(" ", 1)
        names["genus"] = names["genus"] or first
        names["species"] = f"{names['genus']} {rest.lower()}"
    return tuple(names.values())


def test_real_inat_tree_ancestry_and_lineages(inat_tree: list[dict]) -> None:
    by_id = {row["id"]: row for row in inat_tree}
    assert len(by_id) == 1683
    parents = {row["id"]: row["parent_id"] for row in inat_tree}
    ancestry = ancestry_from_parents(parents)
    assert ancestry[48460] == ""
    assert ancestry[7] == "48460/1/2/355675/3/4/5/6"
    for taxon in by_id:
        assert ancestry[taxon] == "/".join(map(str, _brute_ancestry(taxon, by_id)))

    taxa = pa.table({
        "taxon_id": pa.array(list(ancestry), pa.int64()),
        "ancestry": list(ancestry.values()),
        "rank": [by_id[t]["rank"] for t in ancestry],
        "name": [by_id[t]["name"] for t in ancestry],
    })
    lineages = inat_lineages(taxa)
    assert set(lineages) == set(by_id)
    for taxon in by_id:
        assert lineages[taxon].names == _brute_lineage(taxon, by_id), by_id[taxon]

    limpkin = lineages[7]
    assert limpkin.label("taxon") == "Animalia Chordata Aves Gruiformes Aramidae Aramus guarauna"
    assert limpkin.label("sci") == "Aramus guarauna"
    assert limpkin.taxon_id == 7
    assert lineages[47129].names == ("Plantae", "Tracheophyta", "Magnoliopsida", "Saxifragales", "Grossulariaceae",
                                     "Ribes", "Ribes californicum")
    assert lineages[47164].names == ("Fungi", "Basidiomycota", "Agaricomycetes", "Agaricales", "Entolomataceae",
                                     "Entoloma", "Entoloma bloxamii")
    assert lineages[48216].label("sci") == "Fucus vesiculosus"
    # iNat has no order between Gastropoda and Plakobranchidae for this sea slug.
    assert lineages[47798].names == ("Animalia", "Mollusca", "Gastropoda", None, "Plakobranchidae", "Elysia",
                                     "Elysia hedgpethi")
    # A subspecies carries its species' lineage.
    assert lineages[26050].label("sci") == "Crocodylus niloticus"

    species = [t for t, row in by_id.items() if row["rank"] == "species"]
    assert len(species) == 580
    assert all(lineages[t].scientific_name == by_id[t]["name"] for t in species)
    complete = sum(lineages[t].is_complete for t in species)
    assert complete >= 0.99 * len(species)
    assert Counter(lineages[t].names[0] for t in species)["Animalia"] > 0


def test_real_inat_export_sample(realdata: Realdata) -> None:
    path = realdata(INAT_TAXA_EXPORT)
    raw = read_inat_taxa(path)
    assert raw.num_rows == 50
    assert pa.types.is_int64(raw.schema.field("taxon_id").type)
    assert raw.column("ancestry")[0].as_py().startswith("48460/1/2/")

    table = inat_rank_table(path)
    assert table.num_rows == 50
    assert table.column_names == ["taxon_id", "rank", "name", *SEVEN]
    rows = table.to_pylist()
    assert Counter(r["rank"] for r in rows) == {"species": 36, "subspecies": 11, "genus": 3}
    for row in rows:
        # Each taxon's ancestors are absent from this head sample, so the higher ranks are unknown.
        assert [row[c] for c in SEVEN[:5]] == [None] * 5
        if row["rank"] == "species":
            genus, epithet = row["name"].split(" ")
            assert row["genus"] == genus
            assert row["species"] == f"{genus} {epithet.lower()}" == row["name"]
        elif row["rank"] == "genus":
            assert row["genus"] == row["name"]
            assert row["species"] is None
    by_id = {r["taxon_id"]: r for r in rows}
    assert (by_id[28799]["genus"], by_id[28799]["species"]) == ("Rhadinella", "Rhadinella pilonaorum")

    lineages = inat_lineages(path)
    assert len(lineages) == 50
    assert lineages[28799].label("sci") == "Rhadinella pilonaorum"
    assert lineages[28799].label("taxon") == "Rhadinella pilonaorum"


@pytest.fixture(scope="module")
def rare_species(realdata: Realdata) -> pa.Table:
    return pacsv.read_csv(realdata(RARE_SPECIES))


def test_real_rare_species(rare_species: pa.Table) -> None:
    assert rare_species.num_rows == 11983
    lineages = lineages_from_table(rare_species)
    assert len(lineages) == rare_species.num_rows
    assert len(unique_species(lineages)) == 400
    labels = rare_species.column("class").to_pylist()
    assert [lineage.label("sci") for lineage in lineages] == labels
    # The taxonomic class comes from `cls`, not from the `class` label column.
    assert [lineage["class"] for lineage in lineages] == rare_species.column("cls").to_pylist()
    assert Counter(lineage["class"] for lineage in lineages)["Aves"] == 2909
    assert Counter(lineage["class"] for lineage in lineages)["Mammalia"] == 2250
    assert all(lineage.is_complete for lineage in lineages)
    assert all(lineage.epithet == lineage.epithet.lower() for lineage in lineages)
    assert all(lineage["species"] == f"{lineage['genus']} {lineage.epithet}" for lineage in lineages)
    assert [lineage.common_name for lineage in lineages] == rare_species.column("common_name").to_pylist()
    first = lineages[0]
    assert first.label("taxon") == "Animalia Mollusca Bivalvia Unionida Unionidae Cyclonaias tuberculata"
    assert first.label("taxon_com") == (
        "Animalia Mollusca Bivalvia Unionida Unionidae Cyclonaias tuberculata with common name purple wartyback"
    )
    assert first.label("com") == "purple wartyback"
    # Row by row, from_row agrees with the table reader.
    assert Lineage.from_row(rare_species.slice(5, 1).to_pylist()[0]) == lineages[5]


@pytest.fixture(scope="module")
def crypticbio(realdata: Realdata) -> pa.Table:
    return pacsv.read_csv(realdata(CRYPTICBIO))


def test_real_crypticbio(crypticbio: pa.Table) -> None:
    assert crypticbio.num_rows == 15801
    assert "species" not in crypticbio.column_names
    lineages = lineages_from_table(crypticbio)
    species = unique_species(lineages)
    assert len(species) == 158
    assert [lineage.label("sci") for lineage in lineages] == crypticbio.column("scientificName").to_pylist()
    assert Counter(lineage["class"] for lineage in lineages) == {
        "Aves": 2500, "Gastropoda": 2401, "Agaricomycetes": 2300, "Insecta": 2300, "Magnoliopsida": 2300,
        "Arachnida": 2200, "Squamata": 1800,
    }
    squamata = [lineage for lineage in lineages if lineage["class"] == "Squamata"]
    assert len(squamata) == 1800
    assert all(lineage["order"] is None for lineage in squamata)
    assert all(lineage.is_complete for lineage in lineages if lineage["class"] != "Squamata")

    vernacular = crypticbio.column("vernacularName").to_pylist()
    for lineage, names in zip(lineages, vernacular, strict=True):
        parsed = ast.literal_eval(names) if names else []
        assert lineage.common_name == (parsed[0] if parsed else None)
    assert lineages[0].label("com") == "brown widow spider"
    assert lineages[0].label("taxon_com") == (
        "Animalia Arthropoda Arachnida Araneae Theridiidae Latrodectus geometricus with common name brown widow spider"
    )
    lizard_row = squamata[0]
    assert lizard_row.label("taxon").startswith("Animalia Chordata Squamata ")
    assert len(lizard_row.label("taxon").split()) == 6

    # Two Squamata species of different families diverge at family, not at the missing order.
    squamata_species = unique_species(squamata)
    pairs = [(a, b) for a in squamata_species for b in squamata_species if a["family"] != b["family"]]
    assert pairs
    assert all(divergence_rank(a, b) is Rank.FAMILY for a, b in pairs)

    # Roll-up over the 158 species: every species has a class; the Squamata ones have no order.
    probs = np.full((1, len(species)), 1 / len(species))
    by_class = membership_matrix(species, "class").roll_up(probs)
    assert by_class.shape == (1, 7)
    assert by_class.sum() == pytest.approx(1.0)
    n_squamata = sum(s["class"] == "Squamata" for s in species)
    assert n_squamata == 18
    assert membership_matrix(species, "order").roll_up(probs).sum() == pytest.approx(1 - n_squamata / len(species))


def test_real_taxonopy_sample(realdata: Realdata) -> None:
    table = pacsv.read_csv(realdata(TAXONOPY_SAMPLE))
    lineages = lineages_from_table(table)
    assert len(lineages) == 7
    human, oak, bee, amanita, moth, orchid, empty = lineages
    assert human.names == ("Metazoa", "Chordata", "Mammalia", "Primates", "Hominidae", "Homo", "Homo sapiens")
    assert oak.names == ("Plantae", "Tracheophyta", None, "Fagales", "Fagaceae", "Quercus", "Quercus alba")
    assert oak.label("taxon") == "Plantae Tracheophyta Fagales Fagaceae Quercus alba"
    assert bee.names == ("Animalia", None, None, "Hymenoptera", "Apidae", "Apis", "Apis mellifera")
    assert amanita.names == (None, None, None, None, None, "Amanita", "Amanita muscaria")
    assert amanita.label("taxon") == "Amanita muscaria"
    assert moth.label("sci") == orchid.label("sci") == "Laelia rosea"
    assert divergence_rank(moth, orchid) is Rank.KINGDOM
    assert len(membership_matrix([moth, orchid], "genus").taxa) == 2
    assert len(unique_species(lineages)) == 7
    assert empty.names == (None,) * 7
    assert empty.deepest_rank is None
    with pytest.raises(ValueError, match="no names"):
        empty.label("sci")
    assert [lineage.label("sci") for lineage in lineages[:6]] == table.column("species").to_pylist()[:6]


@pytest.mark.parametrize(("row", "genus", "species"), [
    # Fine-Grained Challenges writes genus-only camera-trap rows with the genus's authority.
    ({"genus": "Peromyscus", "scientific_name": "Peromyscus Gloger, 1841", "species": None}, "Peromyscus", None),
    ({"scientific_name": "Peromyscus maniculatus (Wagner, 1845)"}, "Peromyscus", "Peromyscus maniculatus"),
    ({"scientific_name": "Equus quagga Boddaert, 1785"}, "Equus", "Equus quagga"),
    ({"scientificName": "Felis silvestris lybica"}, "Felis", "Felis silvestris lybica"),
    ({"scientificName": "Salix alba var. vitellina"}, "Salix", "Salix alba var. vitellina"),
    ({"scientific_name": "Ixodidae"}, None, None),
])
def test_scientific_names_with_authorities_are_not_read_as_binomials(row, genus, species) -> None:
    lineage = Lineage.from_row(row)
    assert (lineage.names[Rank.GENUS], lineage.names[Rank.SPECIES]) == (genus, species)
