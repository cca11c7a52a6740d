"""Seeded random streams of the synthetic world, one per purpose, and the draws every part shares.

Why it exists: every part of the world (tree, looks, places, observers, observations, photos) draws from
its own stream, keyed by a salt, so that a change in one part never shifts the draws of another; the
streams and the two helpers that draw from them are kept in one place so every part keys them alike.
"""

from __future__ import annotations

import hashlib

import numpy as np

# Salts keep the random streams of different purposes apart, so that (for instance) adding a draw
# to the renderer never shifts which species an observation is of.
SALT_TREE, SALT_LOOK, SALT_GEO, SALT_OBSERVERS, SALT_OBS, SALT_RENDER, SALT_PAIRS, SALT_NOISE = range(
    101, 109
)


def seeded_rng(*parts: int) -> np.random.Generator:
    """A generator seeded by a tuple of integers (negative ones folded into 64 bits)."""
    return np.random.default_rng([int(p) % (1 << 64) for p in parts])


def cdf_table(p: np.ndarray) -> np.ndarray:
    """The table ``Generator.choice(n, p=p)`` searches, built the way numpy builds it."""
    cdf = p.cumsum()
    cdf /= cdf[-1]
    return cdf


def choose(rng: np.random.Generator, cdf: np.ndarray) -> int:
    """``int(rng.choice(len(cdf), p=p))`` for ``cdf = cdf_table(p)``: the same draw from the same stream (one
    double, searched the way numpy searches it) without re-checking ``p`` on every call, which made up
    a quarter of drawing an observation. Training the demo model draws about 20,000."""
    return int(cdf.searchsorted(rng.random(), side="right"))


def stable_int(text: str, bits: int = 63) -> int:
    """A ``bits``-bit integer from the SHA-256 of ``text``: the same in every process, unlike ``hash``."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> (64 - bits)
