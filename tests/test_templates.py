"""Prompt template sets and label texts (core: no torch)."""

from __future__ import annotations

import pytest

from cladebench.errors import UnknownNameError
from cladebench.taxonomy import Lineage
from cladebench.templates import (
    PLACEHOLDER,
    TEMPLATE_SETS,
    fill,
    get_templates,
    label_texts,
    normalize_template,
    register_template_set,
)

CAT = Lineage.from_names("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Felis", "catus",
                         common_name="domestic cat")
LION = CAT.replace(genus="Panthera", species="leo", common_name="lion")


def test_openai_imagenet_has_80_distinct_templates_with_one_placeholder_spelling():
    templates = get_templates("openai-imagenet")
    assert len(templates) == 80
    assert len(set(templates)) == 80
    assert all(t.count(PLACEHOLDER) == 1 for t in templates)
    assert not any("{}" in t for t in templates)
    # First and last of OpenAI's list, in its order.
    assert templates[0] == "a bad photo of a {c}."
    assert templates[-1] == "a tattoo of the {c}."
    assert "itap of my {c}." in templates


def test_openai_imagenet_matches_open_clip_when_installed():
    metadata = pytest.importorskip("open_clip.zero_shot_metadata")
    assert get_templates("openai-imagenet") == tuple(t("{c}") for t in metadata.OPENAI_IMAGENET_TEMPLATES)


def test_named_sets():
    assert get_templates("photo") == ("a photo of {c}.",)
    assert get_templates("bioclip") == ("an image of {c}.",)
    assert get_templates("none") == get_templates("raw") == ("{c}",)
    assert set(TEMPLATE_SETS) >= {"photo", "bioclip", "openai-imagenet", "none", "raw"}


def test_placeholder_spellings_normalise_to_one():
    assert normalize_template("a photo of {}.") == "a photo of {c}."
    assert get_templates(["a {} b", "c {c} d"]) == ("a {c} b", "c {c} d")
    assert get_templates("a drawing of {}.") == ("a drawing of {c}.",)  # one template given as a string


def test_template_without_placeholder_is_an_error():
    with pytest.raises(ValueError, match="placeholder"):
        normalize_template("a photo")
    with pytest.raises(ValueError):
        get_templates([])


def test_unknown_set_lists_known_and_closest():
    with pytest.raises(UnknownNameError) as info:
        get_templates("openai-imagnet")
    message = str(info.value)
    assert "openai-imagenet" in message and "Did you mean 'openai-imagenet'?" in message


def test_label_texts_per_lineage_and_style():
    texts = label_texts([CAT, LION], "sci", "bioclip")
    assert texts == [["an image of Felis catus."], ["an image of Panthera leo."]]
    texts = label_texts([CAT], "taxon_com", ["a photo of {}.", "{c}"])
    assert texts == [[
        "a photo of Animalia Chordata Mammalia Carnivora Felidae Felis catus with common name domestic cat.",
        "Animalia Chordata Mammalia Carnivora Felidae Felis catus with common name domestic cat",
    ]]
    assert [len(row) for row in label_texts([CAT, LION], "com", "openai-imagenet")] == [80, 80]


def test_braces_in_labels_are_kept_literally():
    assert fill("a photo of {c}.", "x {y} z") == "a photo of x {y} z."
    assert fill("{c} in {braces}", "cat") == "cat in {braces}"


def test_register_template_set():
    stored = register_template_set("test-two", ["one {}", "two {c}"])
    try:
        assert stored == ("one {c}", "two {c}")
        assert get_templates("test-two") == stored
    finally:
        TEMPLATE_SETS.pop("test-two")
