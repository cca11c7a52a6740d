"""What the demo model sees: the held-out split of the synthetic world, the captions, and each step's batch.

Why it exists: the split decides which photos and photographers training may never see, and the batch plan
decides which photos and captions each step sees; both are pure functions of the world and the config, so a
run is reproducible and the evaluation's photos are provably unseen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cladebench.demo.model.config import (
    DEFAULT_COARSE_RANK_WEIGHTS,
    HELD_OUT_DRAW_SEED,
    HELD_OUT_EVERY,
    DemoModelConfig,
    training_draw_seed,
)
from cladebench.errors import CladebenchError
from cladebench.taxonomy import RANKS, Lineage, Rank

if TYPE_CHECKING:
    import pyarrow as pa

    from cladebench.synthetic import Observation, World

_SALT_BATCH, _SALT_RANK = 7001, 7002


# --- the held-out split --------------------------------------------------------------------------


def held_out_observer_ids(world: World) -> frozenset[int]:
    """Ids of the observers whose photos are never used in training (every :data:`HELD_OUT_EVERY`-th)."""
    if len(world.observers) < 2:
        raise CladebenchError("the held-out split needs a world with at least 2 observers")
    positions = range(HELD_OUT_EVERY - 1, len(world.observers), HELD_OUT_EVERY)
    return frozenset(world.observers[i].id for i in positions) or frozenset({world.observers[-1].id})


def _select_observations(world: World, n: int, *, seed: int, held_out: bool) -> list[Observation]:
    """``n`` observations of balanced draw ``seed`` whose observer is (or is not) held out, in draw order,
    every species ``n // species`` times (the first ``n % species`` species once more).

    Observers are drawn independently of species, so dropping some observers' photos leaves gaps;
    per-species quotas close them, so even a small selection covers every species.
    """
    observers = held_out_observer_ids(world)
    n_species = len(world.species)
    quota = np.full(n_species, n // n_species)
    quota[: n % n_species] += 1
    chosen: list[Observation] = []
    start, chunk = 0, 512
    while len(chosen) < n:
        for observation in world.observations(chunk, seed=seed, start=start, balanced=True):
            species = observation.species.index
            if (observation.observer.id in observers) == held_out and quota[species] > 0:
                quota[species] -= 1
                chosen.append(observation)
                if len(chosen) == n:
                    break
        start += chunk
    return chosen


def training_observations(world: World, n: int, *, seed: int = 0) -> list[Observation]:
    """The ``n`` training photos of training ``seed``: its own balanced draw, held-out observers removed."""
    return _select_observations(world, n, seed=training_draw_seed(seed), held_out=False)


def held_out_observations(world: World, n: int, *, seed: int = HELD_OUT_DRAW_SEED) -> list[Observation]:
    """``n`` evaluation photos: balanced draw ``seed``, held-out observers only, species equally often."""
    return _select_observations(world, n, seed=seed, held_out=True)


def held_out_table(world: World, n: int, *, seed: int = HELD_OUT_DRAW_SEED, image_format: str = "webp") -> pa.Table:
    """:func:`held_out_observations` as a canonical table with full-size images, ready for the store."""
    return world.observations_table(held_out_observations(world, n, seed=seed), image_format=image_format)


# --- captions and batches ------------------------------------------------------------------------


def caption(lineage: Lineage, style: str, template: str) -> str:
    """One caption: the lineage's label in ``style`` put into ``template``."""
    from cladebench.templates import PLACEHOLDER

    return template.replace(PLACEHOLDER, lineage.label(style))


def taxa_at(world: World, rank: Rank) -> list[list[int]]:
    """Species indices of every taxon at ``rank``, taxa in lineage order."""
    groups: dict[tuple[str | None, ...], list[int]] = {}
    for species in world.species:
        groups.setdefault(species.lineage.key(rank), []).append(species.index)
    return list(groups.values())


@dataclass(frozen=True)
class Batch:
    rank: Rank
    pool_rows: np.ndarray
    captions: list[str]


class BatchPlan:
    """Which photos and captions each step sees; a pure function of (config, step), so it never depends
    on what ran before (a resumed or re-ordered run would see the same batches)."""

    def __init__(self, config: DemoModelConfig, world: World, pool_species: np.ndarray) -> None:
        self.config = config
        self.world = world
        n_species = len(world.species)
        if config.batch_size > n_species:
            raise CladebenchError(f"batch_size {config.batch_size} exceeds the world's {n_species} species: "
                                  "a contrastive batch must not show one species twice")
        self.rows_of_species = [np.flatnonzero(pool_species == s) for s in range(n_species)]
        missing = [s for s, rows in enumerate(self.rows_of_species) if not len(rows)]
        if missing:
            raise CladebenchError(f"{len(missing)} species have no training photo; raise training_images "
                                  f"(at least {n_species} are needed)")
        self.taxa = {rank: taxa_at(world, rank) for rank in RANKS}
        coarse = [r for r in RANKS[:-1] if len(self.taxa[r]) >= 2]
        weights = np.array([DEFAULT_COARSE_RANK_WEIGHTS[r] for r in coarse], dtype=float)
        self.coarse_ranks = coarse
        self.coarse_p = weights / weights.sum() if len(coarse) else weights
        self.template_p = np.array(config.template_weights) / sum(config.template_weights)

    def rank_of_step(self, step: int) -> Rank:
        rng = np.random.default_rng([self.config.seed, _SALT_RANK, step])
        if self.coarse_ranks and rng.random() < self.config.coarse_fraction:
            return self.coarse_ranks[int(rng.choice(len(self.coarse_ranks), p=self.coarse_p))]
        return Rank.SPECIES

    def batch(self, step: int) -> Batch:
        rank = self.rank_of_step(step)
        rng = np.random.default_rng([self.config.seed, _SALT_BATCH, step])
        taxa = self.taxa[rank]
        chosen = rng.permutation(len(taxa))[: self.config.batch_size]
        rows, captions = [], []
        for taxon in chosen:
            members = taxa[int(taxon)]
            species = members[int(rng.integers(len(members)))]
            candidates = self.rows_of_species[species]
            rows.append(int(candidates[int(rng.integers(len(candidates)))]))
            lineage = self.world.species[species].lineage
            if rank != Rank.SPECIES:
                lineage = lineage.truncate(rank)
            style = self.config.name_styles[int(rng.integers(len(self.config.name_styles)))]
            template = self.config.templates[int(rng.choice(len(self.config.templates), p=self.template_p))]
            captions.append(caption(lineage, style, template))
        return Batch(rank, np.array(rows, dtype=np.int64), captions)


