"""INQUIRE-Rerank and iNat Co-Observed mirrors from the synthetic world: Parquet files in the published layouts,
photos inside.

Why it exists: the ``inquire-rerank`` and ``inat-coobserved`` benchmarks build their datasets from a mirror folder
with the same builders that read the published files, so tests need folders in those layouts:
``data/{test,validation}-00000-of-00001.parquet`` with the columns the Hub's ``datasets`` writes for
INQUIRE-Rerank (the image a ``struct<bytes, path>``, the species folder in ``inat24_file_name``), and
``data/coobserved.parquet`` with Co-Observed's (two organisms per photo, the divergence rank).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.benchmarks.coobserved.builder.published import ORGANISM_TYPE, PUBLISHED_SCHEMA
from cladebench.synthetic.render import encode_image
from cladebench.synthetic.world import World
from cladebench.taxonomy import RANK_COLUMNS, RANKS, Rank

HF_IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""An image as the Hub's ``datasets`` stores it."""
INQUIRE_SCHEMA = pa.schema([
    ("image", HF_IMAGE), ("query", pa.string()), ("query_id", pa.int64()), ("relevant", pa.int64()),
    ("clip_score", pa.float64()), ("inat24_image_id", pa.int64()), ("inat24_file_name", pa.string()),
    ("supercategory", pa.string()), ("category", pa.string()), ("iconic_group", pa.string()),
    ("latitude", pa.float64()), ("longitude", pa.float64()), ("date", pa.string()), ("license", pa.string()),
    ("rights_holder", pa.string()),
])
"""The evendrow/INQUIRE-Rerank columns a shard must have."""
SUPERCATEGORIES = ("Appearance", "Behavior", "Context", "Species")


def _folder_word(name: str | None) -> str:
    """A name as one word of an iNat24 species folder (which separates ranks with underscores)."""
    return (name or "unknown").replace("_", "-").replace(" ", "-")


def write_inquire_rerank_mirror(folder: str | Path, world: World, *, queries: int = 4, candidates: int = 8,
                                seed: int = 0) -> list[Path]:
    """Write a test and a validation shard: ``queries`` queries each (one species each, asked by its common name)
    over ``candidates`` photos, the query's species relevant. Returns the shard paths."""
    folder = Path(folder) / "data"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for split_index, split in enumerate(("test", "validation")):
        observations = world.observations(queries * candidates, seed=seed + split_index, balanced=True)
        species = sorted({o.species.lineage.scientific_name or "" for o in observations})[:queries]
        rows = []
        for i, o in enumerate(observations):
            lineage = o.species.lineage
            query = species[i // candidates % len(species)]
            ranks = [_folder_word(lineage.names[r]) for r in RANKS[:-1]]
            epithet = _folder_word((lineage.names[Rank.SPECIES] or "").split(" ")[-1])
            file_name = f"train/{o.species.index:05d}_{'_'.join(ranks)}_{epithet}/{o.uuid}.jpg"
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
        path = folder / f"{split}-00000-of-00001.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=INQUIRE_SCHEMA), path)
        paths.append(path)
    return paths


def write_coobserved_mirror(folder: str | Path, world: World, *, rows: int = 12, seed: int = 0) -> Path:
    """Write ``data/coobserved.parquet``: ``rows`` two-organism photos of draw ``seed`` in the published layout,
    with the photo bytes in ``image``. Returns its path."""
    folder = Path(folder) / "data"
    folder.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([*PUBLISHED_SCHEMA, pa.field("image", HF_IMAGE)])
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
    path = folder / "coobserved.parquet"
    pq.write_table(pa.Table.from_pylist(records, schema=schema), path)
    assert schema.field("organisms").type.value_type == ORGANISM_TYPE
    return path
