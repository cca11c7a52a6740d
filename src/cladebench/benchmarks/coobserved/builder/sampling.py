"""Which eligible co-observed photos a build keeps: per divergence rank, capped, in a seeded order.

**Sampling.** Eligible photos are grouped by divergence rank (the broadest rank at which the two
lineages' taxon ids differ). Ranks are filled broadest first (cross-kingdom pairs are the rarest), each
up to ``per_rank`` photos, round-robin over kingdom pairs (in name order) and, within a kingdom pair,
over class pairs (in seeded order); within a class pair photos come in seeded order
(MD5 of ``"<seed>:<photo_id>"``). A photo whose species (either one) already has ``max_per_species``
photos, or whose observer has ``max_per_observer``, is skipped (``species_cap``, ``observer_cap``);
eligible photos left when a rank is full are ``rank_quota``. Every ordering is explicit, so the same
export and config give the same rows in the same order (the same fingerprint), whatever the threads.

Why a module: the sampling is plain Python over the eligible photos (a small fraction of an export), tested
on its own; the seeded key is shared with the SQL that orders photos (:func:`sample_key`).

Example:
    >>> sample_key(0, 35927) == sample_key(0, 35927) != sample_key(1, 35927)
    True
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cladebench.benchmarks.coobserved.builder.config import CoObservedBuildConfig


def sample_key(seed: int, value: int | str) -> str:
    """The seeded order of photos (by id) and of class pairs (by name): MD5 of ``"<seed>:<value>"`` in hex,
    the same in DuckDB and here, on any machine (Python's ``hash`` is salted per process)."""
    return hashlib.md5(f"{seed}:{value}".encode()).hexdigest()



@dataclass
class _Caps:
    max_per_species: int
    max_per_observer: int
    species: Counter[int] = field(default_factory=Counter)
    observers: Counter[int] = field(default_factory=Counter)

    def refusal(self, species: tuple[int, int], observer: int) -> str | None:
        if any(self.species[s] >= self.max_per_species for s in species):
            return "species_cap"
        if self.observers[observer] >= self.max_per_observer:
            return "observer_cap"
        return None

    def take(self, species: tuple[int, int], observer: int) -> None:
        for s in set(species):
            self.species[s] += 1
        self.observers[observer] += 1


def sample(eligible: Sequence[tuple[Any, ...]], config: CoObservedBuildConfig) -> tuple[list[int], dict[int, str]]:
    """The photos kept, in dataset order, and the reason each other eligible photo was not.

    ``eligible`` rows are ``(photo_id, rank_index, kingdom_pair, class_pair, species_a, species_b,
    observer_id, key)`` sorted by rank, kingdom pair, class pair and key. Ranks are filled broadest
    first; within a rank, kingdom pairs take turns (name order) and within each the class pairs take
    turns (seeded order); a turn takes the next photo of its class pair that the caps allow.
    """
    caps = _Caps(config.max_per_species, config.max_per_observer)
    kept: list[int] = []
    refused: dict[int, str] = {}
    by_rank: dict[int, dict[str, dict[str, list[tuple[Any, ...]]]]] = {}
    for row in eligible:
        by_rank.setdefault(row[1], {}).setdefault(row[2], {}).setdefault(row[3], []).append(row)
    for rank in sorted(by_rank):
        kingdoms = by_rank[rank]
        queues = {kp: [list(reversed(kingdoms[kp][cp]))
                       for cp in sorted(kingdoms[kp], key=lambda cp: (sample_key(config.seed, cp), cp))]
                  for kp in sorted(kingdoms)}
        taken = 0
        turn = {kp: 0 for kp in queues}
        while taken < config.per_rank and queues:
            for kp in list(queues):
                if taken >= config.per_rank:
                    break
                photo = _next_photo(queues[kp], turn, kp, caps, refused)
                if photo is None:
                    del queues[kp]
                    continue
                kept.append(photo[0])
                caps.take((photo[4], photo[5]), photo[6])
                taken += 1
        for class_queues in queues.values():
            for queue in class_queues:
                for row in queue:
                    refused[row[0]] = "rank_quota"
    return kept, refused


def _next_photo(class_queues: list[list[tuple[Any, ...]]], turn: dict[str, int], kingdom_pair: str, caps: _Caps,
                refused: dict[int, str]) -> tuple[Any, ...] | None:
    """The next photo the caps allow from the kingdom pair's class pairs, taking turns; None when none is left."""
    while class_queues:
        index = turn[kingdom_pair] % len(class_queues)
        queue = class_queues[index]
        while queue:
            row = queue.pop()
            reason = caps.refusal((row[4], row[5]), row[6])
            if reason is None:
                if queue:
                    turn[kingdom_pair] = index + 1
                else:
                    class_queues.pop(index)
                    turn[kingdom_pair] = index
                return row
            refused[row[0]] = reason
        class_queues.pop(index)
        turn[kingdom_pair] = index
    return None



__all__ = ["sample", "sample_key"]
