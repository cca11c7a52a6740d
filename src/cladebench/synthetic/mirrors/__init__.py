"""Mirrors of the published benchmarks, made from the synthetic world, in each benchmark's published layout.

Why it exists: every named benchmark (``cladebench benchmarks``) resolves from a local mirror folder when given
one (``--data DIR``, or ``$CLADEBENCH_MIRROR/<name>``), which is how tests, demos and offline machines run them
without the network. :func:`write_mirrors` writes one folder per benchmark under a root, so that root can be
``$CLADEBENCH_MIRROR``; the modules draw the content of one family each from the world, and the family's
``mirror`` module (:mod:`cladebench.benchmarks`) writes it in its layout: :mod:`.finegrained` (the FGC Lance layout
with ``challenges.embedding_models.json``), :mod:`.crypticbio` (the benchmark CSVs and the cryptic-group lookup),
and :mod:`.hub` (the INQUIRE-Rerank and Co-Observed Parquet files).

This ``__init__`` presents the package's API on purpose; the modules never import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cladebench.synthetic.mirrors.crypticbio import FILES as CRYPTICBIO_FILES
from cladebench.synthetic.mirrors.crypticbio import write_crypticbio_mirror
from cladebench.synthetic.mirrors.finegrained import write_finegrained_mirror
from cladebench.synthetic.mirrors.hub import write_coobserved_mirror, write_inquire_rerank_mirror
from cladebench.synthetic.world import World, WorldConfig, make_world

MIRROR_WORLD = WorldConfig(seed=3, names="generated", branching=(1, 1, 3, 1, 2, 1, 3), image_size=64)
"""The default world of the mirrors: three classes (three challenge groups), 18 species, small photos."""
FINEGRAINED_MIRRORS: dict[str, tuple[int, tuple[str, ...]]] = {
    "fine-grained-challenges": (180, ("emb_bioclip", "emb_bioclip2", "emb_bioclip2p5")),
    "test-fine-grained-challenges": (126, ("emb_bioclip2",)),
}
"""Each Fine-Grained Challenges mirror: its rows and its published embedding columns (the test copy is smaller and
publishes one)."""


@dataclass(frozen=True)
class Mirrors:
    """What :func:`write_mirrors` wrote."""

    root: Path
    """The folder holding one mirror folder per benchmark (what ``CLADEBENCH_MIRROR`` names)."""
    folders: dict[str, Path]
    """Benchmark name -> its mirror folder."""
    photos: dict[str, bytes] = field(default_factory=dict)
    """The CrypticBio photos by URL path, for a host at the ``photo_base_url`` given to serve."""


def write_mirrors(root: str | Path, *, world: World | None = None, photo_base_url: str | None = None,
                  seed: int = 0) -> Mirrors:
    """Write a mirror of every benchmark under ``root``, one folder each named like the benchmark. The CrypticBio
    mirrors link their photos under ``photo_base_url`` and are written only when it is given."""
    root = Path(root)
    world = world or make_world(MIRROR_WORLD)
    folders: dict[str, Path] = {}
    for name, (rows, columns) in FINEGRAINED_MIRRORS.items():
        folders[name] = root / name
        write_finegrained_mirror(root / name, world, seed=seed, rows=rows, columns=columns)
    photos: dict[str, bytes] = {}
    if photo_base_url is not None:
        for offset, name in enumerate(CRYPTICBIO_FILES):
            folders[name] = root / name
            photos.update(write_crypticbio_mirror(root / name, world, name, photo_base_url=photo_base_url,
                                                  seed=seed + 10 + offset))
    folders["inquire-rerank"] = root / "inquire-rerank"
    write_inquire_rerank_mirror(root / "inquire-rerank", world, seed=seed)
    folders["inat-coobserved"] = root / "inat-coobserved"
    write_coobserved_mirror(root / "inat-coobserved", world, seed=seed)
    return Mirrors(root=root, folders=folders, photos=photos)


__all__ = ["MIRROR_WORLD", "Mirrors", "write_coobserved_mirror", "write_crypticbio_mirror",
           "write_finegrained_mirror", "write_inquire_rerank_mirror", "write_mirrors"]
