"""A Fine-Grained Challenges mirror from the synthetic world: its rows drawn here, written in the family's layout
(:mod:`cladebench.benchmarks.finegrained.mirror`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from cladebench.benchmarks.finegrained.mirror import DIMS, write_finegrained_files
from cladebench.synthetic.world import World


def write_finegrained_mirror(folder: str | Path, world: World, *, rows: int = 180, seed: int = 0,
                             genus_only: int = 6, columns: Sequence[str] = tuple(DIMS),
                             revisions: Mapping[str, str] | None = None) -> Path:
    """Write a Fine-Grained Challenges mirror into ``folder`` (created; must not hold one yet); returns the table's
    path. ``rows`` observations of the world (balanced over species) become rows
    (:func:`~cladebench.benchmarks.finegrained.mirror.write_finegrained_files` says the rest)."""
    table = world.to_table(rows, seed=seed, image_format="webp", balanced=True)
    return write_finegrained_files(folder, table, genus_only=genus_only, columns=columns, revisions=revisions)
