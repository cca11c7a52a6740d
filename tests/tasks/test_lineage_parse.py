"""Reading lineages out of VLM answers in the shapes models actually give them."""

from __future__ import annotations

import pytest

from cladebench.tasks.lineage.parse import (
    UNPARSEABLE,
    clean_binomial,
    clean_uninomial,
    names_match,
    parse_lineage_answer,
)

BELOW_CLASS = ["order", "family", "genus", "species"]
HONEY_BEE = {"order": "Hymenoptera", "family": "Apidae", "genus": "Apis", "species": "Apis mellifera"}


def asked(names: dict[str, str | None], ranks: list[str] = BELOW_CLASS) -> dict[str, str | None]:
    return {r: names[r] for r in ranks}


@pytest.mark.parametrize(("text", "status"), [
    ('{"order": "Hymenoptera", "family": "Apidae", "genus": "Apis", "species": "Apis mellifera"}', "json"),
    ('{"Order": "HYMENOPTERA", "Family": " apidae ", "Genus": "Apis", "Species": "mellifera"}', "json"),
    ('{"order": "Hymenoptera", "family": "Apidae", "genus": "Apis", "species": "Apis mellifera L., 1758"}', "json"),
    ('{"lineage": {"order": "Hymenoptera", "family": "Apidae", "genus": "Apis", "species": "Apis mellifera"}}',
     "json"),
    ('[{"rank": "order", "name": "Hymenoptera"}, {"rank": "family", "name": "Apidae"}, '
     '{"rank": "genus", "name": "Apis"}, {"rank": "species", "name": "Apis mellifera"}]', "json"),
    ('{"order": {"name": "Hymenoptera"}, "family": ["Apidae"], "genus": "Apis", "scientific_name": "Apis mellifera"}',
     "json"),
    ('Here is my answer:\n```json\n{"order": "Hymenoptera", "family": "Apidae", "genus": "Apis", '
     '"species": "Apis mellifera"}\n```\nHope that helps.', "json_embedded"),
    ('The organism is a bee. {"order": "Hymenoptera", "family": "Apidae (bees)", "genus": "Apis", '
     '"species": "Apis mellifera",} I am fairly sure.', "json_embedded"),
    ("{'order': 'Hymenoptera', 'family': 'Apidae', 'genus': 'Apis', 'species': 'Apis mellifera'}", "json_embedded"),
    ("Order: Hymenoptera\nFamily: Apidae\nGenus: Apis\nSpecies: Apis mellifera (Western honey bee)", "fields"),
    ("- **Order**: *Hymenoptera*\n- **Family**: Apidae\n- **Genus**: _Apis_\n- **Species**: *Apis mellifera*",
     "fields"),
    ("1. Order - Hymenoptera\n2. Family - Apidae\n3. Genus - Apis\n4. Species - mellifera", "fields"),
    ("| Rank | Name |\n|---|---|\n| Order | Hymenoptera |\n| Family | Apidae |\n| Genus | Apis |\n"
     "| Species | Apis mellifera |", "fields"),
    ("ORDER = hymenoptera; FAMILY = apidae; GENUS = apis; SPECIES = apis mellifera".replace("; ", "\n"), "fields"),
    ("Hymenoptera > Apidae > Apis > Apis mellifera", "sequence"),
    ("Hymenoptera, Apidae, Apis, Apis mellifera", "sequence"),
    ("It belongs to the order Hymenoptera, family Apidae, genus Apis, and is the species Apis mellifera.", "prose"),
])
def test_honey_bee_in_every_shape(text: str, status: str) -> None:
    answer = parse_lineage_answer(text, BELOW_CLASS)
    assert answer.status == status
    assert asked(answer.names) == HONEY_BEE


def test_a_binomial_alone_gives_species_and_genus() -> None:
    answer = parse_lineage_answer("This looks like a *Apis mellifera* worker on a flower.", BELOW_CLASS)
    assert answer.status == "binomial"
    assert asked(answer.names) == {"order": None, "family": None, "genus": "Apis", "species": "Apis mellifera"}
    plain = parse_lineage_answer("Probably Bombus terrestris, judging by the white tail.", ["genus", "species"])
    assert plain.names["species"] == "Bombus terrestris" and plain.status == "binomial"


def test_sentence_starts_are_not_binomials() -> None:
    for text in ("This is a bee.", "It appears to be an insect.", "The photo shows two animals.", "",
                 "   ", "I cannot identify this organism.", "Sorry, no idea.", None):
        answer = parse_lineage_answer(text, BELOW_CLASS)
        assert answer.status == UNPARSEABLE and not answer.parsed
        assert all(v is None for v in answer.names.values())


def test_common_mistakes_are_repaired() -> None:
    # binomial in the species field with no genus given: the genus follows from it
    answer = parse_lineage_answer('{"family": "Apidae", "species": "Apis mellifera"}', BELOW_CLASS)
    assert answer.names["genus"] == "Apis" and answer.names["species"] == "Apis mellifera"
    # binomial written in the genus field
    answer = parse_lineage_answer('{"genus": "Apis mellifera"}', ["genus", "species"])
    assert answer.names["genus"] == "Apis" and answer.names["species"] == "Apis mellifera"
    # abbreviated genus, qualifiers, authority, subspecies
    answer = parse_lineage_answer('{"genus": "Apis", "species": "A. mellifera ligustica Spinola"}',
                                  ["genus", "species"])
    assert answer.names["species"] == "Apis mellifera"
    answer = parse_lineage_answer('{"genus": "Apis", "species": "Apis cf. mellifera"}', ["genus", "species"])
    assert answer.names["species"] == "Apis mellifera"
    # a separate epithet key
    answer = parse_lineage_answer('{"genus": "Apis", "specific_epithet": "mellifera"}', ["genus", "species"])
    assert answer.names["species"] == "Apis mellifera"
    # "unknown" and "sp." mean nothing named, without hiding the ranks that were named
    answer = parse_lineage_answer('{"order": "Hymenoptera", "family": "unknown", "genus": "Apis", "species": '
                                  '"Apis sp."}', BELOW_CLASS)
    assert asked(answer.names) == {"order": "Hymenoptera", "family": None, "genus": "Apis", "species": None}
    assert answer.status == "json"
    # the genus repeated as the species is no species
    assert parse_lineage_answer('{"genus": "Apis", "species": "Apis"}', ["genus", "species"]).names["species"] is None


def test_a_json_object_without_asked_ranks_falls_through_to_lines() -> None:
    text = '{"confidence": 0.4}\nOrder: Hymenoptera'
    answer = parse_lineage_answer(text, ["order"])
    assert answer.status == "fields" and answer.names["order"] == "Hymenoptera"


def test_only_asked_ranks_decide_parseability() -> None:
    # a model that repeats the hint but names nothing below it has not answered
    answer = parse_lineage_answer('{"kingdom": "Animalia", "class": "Insecta"}', BELOW_CLASS)
    assert answer.status == UNPARSEABLE
    full = parse_lineage_answer('{"kingdom": "Animalia", "division": "Tracheophyta", "cls": "Magnoliopsida"}',
                                ["kingdom", "phylum", "class"])
    assert (full.names["kingdom"], full.names["phylum"], full.names["class"]) == ("Animalia", "Tracheophyta",
                                                                                 "Magnoliopsida")


def test_cleaning_and_matching() -> None:
    assert clean_uninomial("the family **Apidae** (bees)") == "Apidae"
    assert clean_uninomial("N/A") is None and clean_uninomial("Unknown family") is None and clean_uninomial(3) is None
    assert clean_binomial("apis MELLIFERA") == "Apis mellifera"
    assert clean_binomial("mellifera") is None and clean_binomial("mellifera", "Apis") == "Apis mellifera"
    assert clean_binomial("A. mellifera") is None  # an abbreviation with no genus to expand it
    assert names_match("Apis  Mellifera", "apis mellifera") and not names_match(None, None)
    assert not names_match("Apis", "Bombus")
