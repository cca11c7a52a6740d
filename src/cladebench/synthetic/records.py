"""What the synthetic world is made of and what it draws: species, observers, observations, co-observations.

Why it exists: these frozen records are shared by the world that draws them
(:mod:`cladebench.synthetic.world`) and the tables that write them (:mod:`cladebench.synthetic.dataset`);
keeping them apart from both lets each import them without importing the other.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cladebench.synthetic.geography import GeoRange, Season
from cladebench.synthetic.licenses import License
from cladebench.synthetic.looks import Appearance
from cladebench.taxonomy import Lineage, Rank


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


def unresolvable_url(observation_id: int) -> str:
    """A record's source URL that names it but can never resolve (``.invalid`` is reserved, RFC 2606): the
    synthetic world's photos link somewhere, as real rows do, without pointing at anyone's server."""
    return f"https://synthetic.cladebench.invalid/observations/{observation_id}"


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
        return unresolvable_url(self.observation_id)


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
        return unresolvable_url(self.observation_id)
