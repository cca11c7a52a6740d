"""INQUIRE-Rerank and iNat Co-Observed mirrors from the synthetic world: their rows drawn here, photos inside,
written in each family's layout (:mod:`cladebench.benchmarks.inquire.mirror`,
:mod:`cladebench.benchmarks.coobserved.mirror`).
"""

from __future__ import annotations

from pathlib import Path

from cladebench.benchmarks.coobserved.mirror import write_coobserved_file
from cladebench.benchmarks.inquire.mirror import inat24_file_name, write_inquire_rerank_shard
from cladebench.synthetic.render import encode_image
from cladebench.synthetic.world import World
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Rank

SUPERCATEGORIES = ("Appearance", "Behavior", "Context", "Species")


def write_inquire_rerank_mirror(folder: str | Path, world: World, *, queries: int = 4, candidates: int = 8,
                                seed: int = 0) -> list[Path]:
    """Write a test and a validation shard: ``queries`` queries each (one species each, asked by its common name)
    over ``candidates`` photos, the query's species relevant. Returns the shard paths."""
    paths = []
    for split_index, split in enumerate(("test", "validation")):
        observations = world.observations(queries * candidates, seed=seed + split_index, balanced=True)
        species = sorted({o.species.lineage.scientific_name or "" for o in observations})[:queries]
        rows = []
        for i, o in enumerate(observations):
            lineage = o.species.lineage
            query = species[i // candidates % len(species)]
            file_name = inat24_file_name(o.species.index, [lineage.names[r] for r in RANKS[:-1]],
                                         lineage.names[Rank.SPECIES], str(o.uuid))
            rows.append({
                "image": {"bytes": encode_image(world.render(o.species, seed=o.image_seed), "jpeg"),
                          "path": f"{o.uuid}.jpg"},
                "query": f"a photo of {query}", "query_id": 100 * (split_index + 1) + species.index(query),
                "relevant": int(lineage.scientific_name == query), "clip_score": 0.0,
                "inat24_image_id": o.photo_id, "inat24_file_name": file_name,
                "supercategory": SUPERCATEGORIES[species.index(query) % len(SUPERCATEGORIES)],
                "category": f"category {species.index(query) % 2}", "iconic_group": lineage.names[Rank.CLASS],
                "latitude": o.latitude, "longitude": o.longitude, "date": o.observed_on.isoformat(),
                "license": o.license.code, "rights_holder": o.observer.attribution_name,
            })
        paths.append(write_inquire_rerank_shard(folder, split, rows))
    return paths


def write_coobserved_mirror(folder: str | Path, world: World, *, rows: int = 12, seed: int = 0) -> Path:
    """Write ``data/coobserved.parquet``: ``rows`` two-organism photos of draw ``seed`` in the published layout,
    with the photo bytes in ``image``. Returns its path."""
    records = []
    for pair in world.co_observations(rows, seed=seed):
        body = encode_image(world.render_pair(pair.organisms[0], pair.organisms[1], seed=pair.image_seed), "jpeg")
        organisms = []
        for number, (species, uuid) in enumerate(zip(pair.organisms, pair.organism_uuids, strict=True)):
            lineage = species.lineage
            organisms.append({
                "observation_uuid": uuid, "observation_url": f"https://www.inaturalist.org/observations/{uuid}",
                "taxon_id": lineage.taxon_id, "taxon_url": f"https://www.inaturalist.org/taxa/{lineage.taxon_id}",
                **dict(zip(RANK_COLUMNS, (lineage.names[r] for r in RANKS), strict=True)),
                "scientific_name": lineage.scientific_name, "quality_grade": "research",
                "species_in_tol200m": number == 0,
            })
        url = f"https://inaturalist-open-data.s3.amazonaws.com/photos/{pair.photo_id}/original.jpg"
        records.append({
            "photo_id": pair.photo_id, "photo_uuid": pair.uuid, "image_url": url, "image_url_medium": url,
            "photo_page_url": f"https://www.inaturalist.org/photos/{pair.photo_id}", "width": None, "height": None,
            "license": pair.license.code, "license_url": pair.license.link,
            "attribution": pair.license.attribution(pair.observer.attribution_name),
            "observer_id": pair.observer.id, "observer_login": pair.observer.login,
            "observer_name": pair.observer.attribution_name, "observed_on": pair.observed_on,
            "latitude": pair.latitude, "longitude": pair.longitude, "positional_accuracy_m": None,
            "divergence_rank": pair.divergence_rank.column,
            "kingdom_pair": " / ".join(s.lineage.names[Rank.KINGDOM] or "" for s in pair.organisms),
            "class_pair": " / ".join(s.lineage.names[Rank.CLASS] or "" for s in pair.organisms),
            "n_photos_sharing_observation_pair": 1,
            "organisms": organisms, "in_tol200m": None, "source": "synthetic", "image": {"bytes": body,
                                                                                        "path": f"{pair.photo_id}.jpg"},
        })
    return write_coobserved_file(folder, records)
