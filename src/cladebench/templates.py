"""Prompt templates for zero-shot classification, and the label texts they make. Core: no torch.

A zero-shot number depends on the prompts as much as on the model: BioCLIP was evaluated with one
template, OpenAI CLIP with an ensemble of 80, and pybioclip uses the 80 for custom labels. So template
sets are named (:data:`TEMPLATE_SETS`) and a run records the name and the texts.

A template holds the placeholder ``{c}`` where the label goes; ``{}`` is accepted on input and stored
as ``{c}``, so the same set written either way has one cache key. Labels are put in with ``str.replace``,
not ``str.format``, so a label or a template with other braces cannot break it.

Example:
    >>> from cladebench.taxonomy import Lineage
    >>> cat = Lineage.from_names("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Felis", "catus")
    >>> label_texts([cat], "sci", "bioclip")
    [['an image of Felis catus.']]
    >>> len(get_templates("openai-imagenet"))
    80
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from cladebench.registry import Registry

if TYPE_CHECKING:
    from cladebench.taxonomy import Lineage

PLACEHOLDER = "{c}"
"""Where the label goes in a template."""

_PLACEHOLDER_SPELLINGS = ("{c}", "{}")

TEMPLATE_SETS: Registry[tuple[str, ...]] = Registry("template set")
"""Named template sets: name -> templates, each with :data:`PLACEHOLDER`."""


def normalize_template(template: str) -> str:
    """The template with its placeholder spelled ``{c}``; a template without one is an error."""
    text = template.replace("{}", PLACEHOLDER)
    if PLACEHOLDER not in text:
        raise ValueError(f"template {template!r} has no placeholder; write {PLACEHOLDER} where the label goes")
    return text


def register_template_set(name: str, templates: Iterable[str]) -> tuple[str, ...]:
    """Register a named template set (placeholders normalised); returns the stored tuple."""
    stored = tuple(normalize_template(t) for t in templates)
    if not stored:
        raise ValueError(f"template set {name!r} is empty")
    return TEMPLATE_SETS.add(name, stored)


def get_templates(templates: str | Sequence[str]) -> tuple[str, ...]:
    """Templates from a set name, one template string (it has a placeholder), or a sequence of templates."""
    if isinstance(templates, str):
        if any(p in templates for p in _PLACEHOLDER_SPELLINGS):
            return (normalize_template(templates),)
        return TEMPLATE_SETS.get_named(templates)
    stored = tuple(normalize_template(t) for t in templates)
    if not stored:
        raise ValueError("no templates given")
    return stored


def fill(template: str, label: str) -> str:
    """One prompt: the label put into the template's placeholder."""
    return normalize_template(template).replace(PLACEHOLDER, label)


def label_texts(lineages: Sequence[Lineage], style: str, templates: str | Sequence[str]) -> list[list[str]]:
    """For each lineage, its label in name ``style`` (``sci``, ``com``, ``taxon``, ``taxon_com``) in every template."""
    resolved = get_templates(templates)
    return [[t.replace(PLACEHOLDER, lineage.label(style)) for t in resolved] for lineage in lineages]


register_template_set("photo", ["a photo of {c}."])
register_template_set("bioclip", ["an image of {c}."])  # BioCLIP's zero-shot prompt (Stevens et al., 2024)
register_template_set("none", ["{c}"])  # the bare label
register_template_set("raw", ["{c}"])  # the same, under the name some papers use

# OpenAI CLIP's 80 ImageNet prompts, in their order (CLIP repo, notebooks/Prompt_Engineering_for_ImageNet;
# open_clip.zero_shot_metadata.OPENAI_IMAGENET_TEMPLATES). Written out so the core does not import open_clip.
register_template_set("openai-imagenet", [
    'a bad photo of a {c}.',
    'a photo of many {c}.',
    'a sculpture of a {c}.',
    'a photo of the hard to see {c}.',
    'a low resolution photo of the {c}.',
    'a rendering of a {c}.',
    'graffiti of a {c}.',
    'a bad photo of the {c}.',
    'a cropped photo of the {c}.',
    'a tattoo of a {c}.',
    'the embroidered {c}.',
    'a photo of a hard to see {c}.',
    'a bright photo of a {c}.',
    'a photo of a clean {c}.',
    'a photo of a dirty {c}.',
    'a dark photo of the {c}.',
    'a drawing of a {c}.',
    'a photo of my {c}.',
    'the plastic {c}.',
    'a photo of the cool {c}.',
    'a close-up photo of a {c}.',
    'a black and white photo of the {c}.',
    'a painting of the {c}.',
    'a painting of a {c}.',
    'a pixelated photo of the {c}.',
    'a sculpture of the {c}.',
    'a bright photo of the {c}.',
    'a cropped photo of a {c}.',
    'a plastic {c}.',
    'a photo of the dirty {c}.',
    'a jpeg corrupted photo of a {c}.',
    'a blurry photo of the {c}.',
    'a photo of the {c}.',
    'a good photo of the {c}.',
    'a rendering of the {c}.',
    'a {c} in a video game.',
    'a photo of one {c}.',
    'a doodle of a {c}.',
    'a close-up photo of the {c}.',
    'a photo of a {c}.',
    'the origami {c}.',
    'the {c} in a video game.',
    'a sketch of a {c}.',
    'a doodle of the {c}.',
    'a origami {c}.',
    'a low resolution photo of a {c}.',
    'the toy {c}.',
    'a rendition of the {c}.',
    'a photo of the clean {c}.',
    'a photo of a large {c}.',
    'a rendition of a {c}.',
    'a photo of a nice {c}.',
    'a photo of a weird {c}.',
    'a blurry photo of a {c}.',
    'a cartoon {c}.',
    'art of a {c}.',
    'a sketch of the {c}.',
    'a embroidered {c}.',
    'a pixelated photo of a {c}.',
    'itap of the {c}.',
    'a jpeg corrupted photo of the {c}.',
    'a good photo of a {c}.',
    'a plushie {c}.',
    'a photo of the nice {c}.',
    'a photo of the small {c}.',
    'a photo of the weird {c}.',
    'the cartoon {c}.',
    'art of the {c}.',
    'a drawing of the {c}.',
    'a photo of the large {c}.',
    'a black and white photo of a {c}.',
    'the plushie {c}.',
    'a dark photo of a {c}.',
    'itap of a {c}.',
    'graffiti of the {c}.',
    'a toy {c}.',
    'itap of my {c}.',
    'a photo of a cool {c}.',
    'a photo of a small {c}.',
    'a tattoo of the {c}.',
])
