"""How each synthetic species looks, decided rank by rank, and the common names that describe it.

Why it exists: a model should find distant clades easy and sister species hard, as in real photos.
Each rank decides its own part of the look (kingdom and phylum the palette, class and order the
body, family and genus the coat pattern, species only small details), so two species share their
look down to the rank where their lineages part. The renderer (:mod:`cladebench.synthetic.render`)
draws what this module decides.
"""

from __future__ import annotations

import colorsys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cladebench.synthetic.seeds import SALT_LOOK, SALT_TREE, seeded_rng
from cladebench.taxonomy import Rank


@dataclass(frozen=True)
class Appearance:
    """How a species looks; each group of fields is decided at one pair of ranks, so images of close
    relatives share most of their look and differ only at the scale of the rank where they diverge."""

    body_rgb: tuple[int, int, int]
    """Body colour (kingdom: hue; phylum: shade)."""
    pattern_rgb: tuple[int, int, int]
    """Colour of the coat pattern (kingdom and phylum)."""
    accent_rgb: tuple[int, int, int]
    """Colour of legs, tail and rim (kingdom and phylum)."""
    lobes: int
    """Number of lobes of the body outline, 0 for a smooth one (class)."""
    lobe_depth: float
    """Depth of the lobes relative to the body radius (class)."""
    taper: float
    """How much broader the head end is than the tail end (class)."""
    aspect: float
    """Body width over body length (order)."""
    leg_pairs: int
    """Pairs of legs or fins (order)."""
    leg_length: float
    """Length of a leg relative to body length (order)."""
    tail: float
    """Length of the tail relative to body length, 0 for none (order)."""
    pattern: str
    """Kind of coat pattern: bars, stripes, spots, rings, chevrons, checker, blotches, speckle (family)."""
    pattern_count: int
    """How many elements the pattern has (genus)."""
    pattern_width: float
    """Thickness of the pattern's elements, as a fraction of their spacing (genus)."""
    pattern_angle: float
    """Tilt of bars, stripes and chevrons in radians (genus)."""
    pattern_seed: int
    """Seed of where spots and blotches sit (genus)."""
    eye_colour: str
    """Name of the eye colour (species); also the colour of the marks."""
    marks: int
    """Number of small marks on the flank (species)."""
    mark_shape: str
    """Shape of the marks: ``dot``, ``bar`` or ``tri`` (species)."""
    rim: float
    """Width of the dark outline relative to body length, 0 for none (species)."""

    @property
    def eye_rgb(self) -> tuple[int, int, int]:
        """The eye colour as RGB."""
        return _EYE_COLOURS[self.eye_colour]


_PHYLUM_SCHEMES = (
    # (body saturation, body value, how the pattern colour relates to the body)
    (0.80, 0.90, "dark"),
    (0.60, 0.55, "light"),
    (0.85, 0.70, "complement"),
    (0.45, 0.85, "deep"),
    (0.95, 0.45, "pale"),
    (0.70, 0.75, "analog"),
)
_CLASS_SHAPES = (
    # (lobes, lobe depth, taper)
    (0, 0.0, 0.0),     # ellipse
    (0, 0.0, 0.35),    # teardrop
    (3, 0.16, 0.05),   # three-lobed
    (5, 0.20, 0.0),    # five-lobed
    (7, 0.30, 0.0),    # star
    (4, 0.10, 0.20),   # rounded diamond
    (2, 0.22, 0.0),    # peanut
    (12, 0.07, 0.10),  # scalloped
)
_ORDER_ASPECTS = (0.40, 0.55, 0.70, 0.88)
_ORDER_LEGS = (0, 2, 3, 4)
_FAMILY_PATTERNS = ("bars", "stripes", "spots", "rings", "chevrons", "checker", "blotches", "speckle")
# Genus options are dealt in rotation, not shuffled, so neighbouring siblings get counts and widths that
# differ by a lot (3 then 8, thin then thick) rather than 7 and 8.
_GENUS_COUNTS = (3, 8, 5, 10, 4, 6)
_GENUS_WIDTHS = (0.30, 0.65, 0.45)
_EYE_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30), "amber": (255, 170, 0), "pink": (255, 105, 180), "blue": (40, 90, 235),
    "black": (12, 12, 12), "green": (40, 205, 60), "violet": (150, 55, 205), "yellow": (250, 240, 50),
}
_MARK_SHAPES = {"dot": "spotted", "bar": "barred", "tri": "flecked"}
_MARK_COUNTS = (1, 2, 3, 4)
# Eye colour, mark count and mark shape are dealt independently among sister species; their cycle
# lengths 8, 4 and 3 repeat a combination only after lcm(8, 4, 3) = 24 sisters.
MAX_SPECIES_PER_GENUS = 24
_COUNT_WORDS = ("one", "two", "three", "four")
_NOUNS = (
    "darter", "glider", "creeper", "hopper", "skipper", "warbler", "runner", "drifter", "burrower", "diver",
    "climber", "grazer", "crawler", "weaver", "piper", "dasher", "forager", "lurker", "prowler", "sifter",
    "rover", "nibbler", "spinner", "trotter", "wader", "ambler", "tumbler", "sprinter", "paddler", "borer",
    "gleaner", "scuttler", "dangler", "stalker", "roamer", "plodder", "sweeper", "thrasher", "tinker", "wanderer",
    "whirler", "wriggler", "clinger", "delver", "dweller", "fanner", "gaper", "hummer", "jumper", "leaper",
    "loper", "mumbler", "napper", "peeper", "rattler", "scraper", "shuffler", "slider", "snapper", "sparkler",
    "stomper", "strider", "swimmer", "tapper", "trundler", "twitcher", "vaulter", "whistler", "cap", "bell",
    "wort", "frond", "tuft", "puff", "bloom", "spire", "fan", "cup", "bristle", "button",
)
_NOUN_MODIFIERS = ("lesser", "greater", "northern", "southern", "eastern", "western", "mountain", "marsh",
                   "forest", "desert", "river", "island", "dwarf", "giant", "hidden", "painted")


def hsv(h: float, s: float, v: float) -> tuple[int, int, int]:
    """An RGB colour from hue (wrapped), saturation and value (clipped to [0, 1])."""
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, min(max(s, 0.0), 1.0), min(max(v, 0.0), 1.0))
    return round(r * 255), round(g * 255), round(b * 255)


def _sibling_option(seed: int, parent: tuple[int, ...], position: int, n_options: int, feature: int,
                    rotate: bool = False) -> int:
    """Option index of one feature for the child at ``position`` of ``parent``.

    Siblings are dealt options from a seeded permutation (or, with ``rotate``, a seeded starting point
    in the list's own order), so they get different options whenever there are enough of them.
    """
    rng = seeded_rng(SALT_LOOK, seed, feature, len(parent), *parent)
    if rotate:
        return (int(rng.integers(n_options)) + position) % n_options
    return int(rng.permutation(n_options)[position % n_options])


def appearance(seed: int, path: tuple[int, ...], n_kingdoms: int) -> Appearance:
    """The look of the species at ``path``, each feature decided by the node of its rank."""

    def node_rng(depth: int) -> np.random.Generator:
        return seeded_rng(SALT_LOOK, seed, 1000 + depth, *path[: depth + 1])

    def option(depth: int, n_options: int, feature: int, rotate: bool = False) -> int:
        return _sibling_option(seed, path[:depth], path[depth], n_options, feature, rotate)

    # Kingdoms spread evenly round the colour wheel so that distant clades are far apart in colour.
    hue = (seeded_rng(SALT_LOOK, seed).random() + path[0] / n_kingdoms) % 1.0
    hue += node_rng(1).uniform(-0.04, 0.04)
    saturation, value, mode = _PHYLUM_SCHEMES[option(Rank.PHYLUM, len(_PHYLUM_SCHEMES), 1)]
    body = hsv(hue, saturation, value)
    pattern = {
        "dark": hsv(hue, saturation, value * 0.28),
        "light": hsv(hue, 0.12, 0.97),
        "complement": hsv(hue + 0.5, 0.75, 0.85),
        "deep": hsv(hue + 0.06, 1.0, 0.30),
        "pale": hsv(hue - 0.05, 0.25, 0.95),
        "analog": hsv(hue + 0.17, 0.9, 0.5),
    }[mode]
    accent = hsv(hue - 0.03, 0.7, 0.25)
    lobes, lobe_depth, taper = _CLASS_SHAPES[option(Rank.CLASS, len(_CLASS_SHAPES), 2)]
    order_rng = node_rng(Rank.ORDER)
    genus_rng = node_rng(Rank.GENUS)
    return Appearance(
        body_rgb=body, pattern_rgb=pattern, accent_rgb=accent,
        lobes=lobes, lobe_depth=lobe_depth, taper=taper,
        aspect=_ORDER_ASPECTS[option(Rank.ORDER, len(_ORDER_ASPECTS), 3)],
        leg_pairs=_ORDER_LEGS[option(Rank.ORDER, len(_ORDER_LEGS), 4)],
        leg_length=float(order_rng.uniform(0.12, 0.3)),
        tail=float(order_rng.choice((0.0, 0.12, 0.25))),
        pattern=_FAMILY_PATTERNS[option(Rank.FAMILY, len(_FAMILY_PATTERNS), 5)],
        pattern_count=_GENUS_COUNTS[option(Rank.GENUS, len(_GENUS_COUNTS), 6, rotate=True)],
        pattern_width=_GENUS_WIDTHS[option(Rank.GENUS, len(_GENUS_WIDTHS), 7, rotate=True)],
        pattern_angle=float(genus_rng.uniform(-0.35, 0.35)),
        pattern_seed=int(genus_rng.integers(1 << 31)),
        eye_colour=list(_EYE_COLOURS)[option(Rank.SPECIES, len(_EYE_COLOURS), 8)],
        marks=_MARK_COUNTS[option(Rank.SPECIES, len(_MARK_COUNTS), 9)],
        mark_shape=list(_MARK_SHAPES)[option(Rank.SPECIES, len(_MARK_SHAPES), 10)],
        rim=float(node_rng(Rank.SPECIES).choice((0.0, 0.012, 0.022))),
    )


def common_names(seed: int, paths: Sequence[tuple[int, ...]], looks: Sequence[Appearance]) -> list[str]:
    """Readable common names that describe the species' marks, like "red-eyed two-spotted darter".

    The noun is shared within a genus and the adjectives name the species' own detail, as real common
    names often do; the detail combinations are distinct within a genus, so the names are unique.
    """
    genera = sorted({p[:6] for p in paths})
    noun_order = seeded_rng(SALT_TREE, seed, 7).permutation(len(_NOUNS))
    nouns: dict[tuple[int, ...], str] = {}
    for i, genus in enumerate(genera):
        words = [_NOUNS[noun_order[i % len(_NOUNS)]]]
        # Past the noun list, prefix modifiers ("lesser", "marsh lesser", ...): the genus count
        # written in base len(_NOUN_MODIFIERS), one modifier per digit.
        rest = i // len(_NOUNS)
        while rest:
            rest -= 1
            words.insert(0, _NOUN_MODIFIERS[rest % len(_NOUN_MODIFIERS)])
            rest //= len(_NOUN_MODIFIERS)
        nouns[genus] = " ".join(words)
    names = []
    for path, look in zip(paths, looks, strict=True):
        count = _COUNT_WORDS[look.marks - 1]
        names.append(f"{look.eye_colour}-eyed {count}-{_MARK_SHAPES[look.mark_shape]} {nouns[path[:6]]}")
    return names
