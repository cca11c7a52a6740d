"""CrypticBio mirrors from the synthetic world: the rows of a benchmark CSV and the cryptic-group lookup, with the
photos they link to returned for a test's photo host to serve; the files are written in the family's layout
(:mod:`cladebench.benchmarks.crypticbio.mirror`).

Why it exists: a test serves the photos from 127.0.0.1, so the mirror's URLs point at ``photo_base_url``.
"""

from __future__ import annotations

from pathlib import Path

from cladebench.benchmarks.crypticbio.mirror import FILES, write_crypticbio_files
from cladebench.synthetic.render import encode_image
from cladebench.synthetic.world import World
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Rank

__all__ = ["FILES", "write_crypticbio_mirror"]


def write_crypticbio_mirror(folder: str | Path, world: World, benchmark: str, *, photo_base_url: str,
                            rows: int = 36, seed: int = 0) -> dict[str, bytes]:
    """Write ``benchmark``'s CSV (``rows`` observations of draw ``seed``, balanced over species) and the lookup
    (each species with the other species of its genus) into ``folder``; returns the photos by URL path
    (``/photos/<id>/original.jpg``), for a host at ``photo_base_url`` to serve."""
    observations = world.observations(rows, seed=seed, balanced=True)
    photos: dict[str, bytes] = {}
    lines = []
    for o in observations:
        lineage = o.species.lineage
        path = f"/photos/{o.photo_id}/original.jpg"
        photos[path] = encode_image(world.render(o.species, seed=o.image_seed), "jpeg")
        names = dict(zip(RANK_COLUMNS, (lineage.names[r] for r in RANKS), strict=True))
        lines.append({
            "scientificName": lineage.scientific_name, "year": f"{o.observed_on.year}.0",
            "month": f"{o.observed_on.month}.0", "day": f"{o.observed_on.day}.0",
            "decimalLatitude": repr(o.latitude), "decimalLongitude": repr(o.longitude),
            "url": photo_base_url.rstrip("/") + path,
            **{c: names[c] for c in ("kingdom", "phylum", "class", "order", "family", "genus")},
            "vernacularName": repr([lineage.common_name] if lineage.common_name else []),
        })
    by_genus: dict[str, list[str]] = {}
    for species in world.species:
        by_genus.setdefault(species.lineage.names[Rank.GENUS] or "", []).append(species.lineage.scientific_name or "")
    write_crypticbio_files(folder, benchmark, lines, by_genus.values())
    return photos
