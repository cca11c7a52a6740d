"""CrypticBio mirrors from the synthetic world: a benchmark CSV in the published format and the cryptic-group
lookup, with the photos it links to returned for a test's photo host to serve.

Why it exists: the ``crypticbio-*`` benchmarks read a mirror folder (``CrypticBio-Benchmark/<file>.csv`` and
``cryptic_groups.tsv``) and fetch each row's photo from its URL through the downloader, as for the published
files; a test serves those photos from 127.0.0.1, so the mirror's URLs point at ``photo_base_url``.
"""

from __future__ import annotations

import csv
from pathlib import Path

from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS
from cladebench.synthetic.render import encode_image
from cladebench.synthetic.world import World
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Rank

FILES = {"crypticbio-common": "CrypticBio-Common.csv", "crypticbio-commonunseen": "CrypticBio-CommonUnseen.csv",
         "crypticbio-endangered": "CrypticBio-Endangered.csv", "crypticbio-invasive": "CrypticBio-Invasive.csv"}
"""Each benchmark's published file name."""


def write_crypticbio_mirror(folder: str | Path, world: World, benchmark: str, *, photo_base_url: str,
                            rows: int = 36, seed: int = 0) -> dict[str, bytes]:
    """Write ``benchmark``'s CSV (``rows`` observations of draw ``seed``, balanced over species) and the lookup
    (each species with the other species of its genus) into ``folder``; returns the photos by URL path
    (``/photos/<id>/original.jpg``), for a host at ``photo_base_url`` to serve."""
    folder = Path(folder)
    (folder / "CrypticBio-Benchmark").mkdir(parents=True, exist_ok=True)
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
    with open(folder / "CrypticBio-Benchmark" / FILES[benchmark], "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(lines)
    by_genus: dict[str, list[str]] = {}
    for species in world.species:
        by_genus.setdefault(species.lineage.names[Rank.GENUS] or "", []).append(species.lineage.scientific_name or "")
    with open(folder / "cryptic_groups.tsv", "w", encoding="utf-8") as handle:
        for members in by_genus.values():
            for anchor in members:
                handle.write(anchor + "\t" + ",".join(m for m in members if m != anchor) + "\n")
    return photos
