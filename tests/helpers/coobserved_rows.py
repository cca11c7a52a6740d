"""iNat Co-Observed rows for tests: the published parquet layout (and an older one with other column names),
real lineages, a row builder and a writer.

Shared by the source and Hub-layout tests of iNat Co-Observed.
"""

from __future__ import annotations

import datetime
import hashlib
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from cladebench.taxonomy import RANK_COLUMNS

HF_IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
PUBLISHED_ORGANISM = pa.struct([
    ("observation_uuid", pa.string()), ("observation_url", pa.string()), ("taxon_id", pa.int64()),
    ("taxon_url", pa.string()), *((c, pa.string()) for c in RANK_COLUMNS), ("scientific_name", pa.string()),
    ("quality_grade", pa.string()), ("species_in_tol200m", pa.bool_()),
])
PUBLISHED_SCHEMA = pa.schema([
    ("photo_id", pa.int64()), ("photo_uuid", pa.string()), ("image", HF_IMAGE), ("image_url", pa.string()),
    ("image_url_medium", pa.string()), ("photo_page_url", pa.string()), ("width", pa.int32()),
    ("height", pa.int32()), ("image_format", pa.string()), ("image_sha256", pa.string()), ("license", pa.string()),
    ("license_url", pa.string()), ("attribution", pa.string()), ("observer_id", pa.int64()),
    ("observer_login", pa.string()), ("observer_name", pa.string()), ("observed_on", pa.date32()),
    ("latitude", pa.float64()), ("longitude", pa.float64()), ("positional_accuracy_m", pa.float64()),
    ("divergence_rank", pa.string()), ("kingdom_pair", pa.string()), ("class_pair", pa.string()),
    ("n_photos_sharing_observation_pair", pa.int16()), ("organisms", pa.list_(PUBLISHED_ORGANISM)),
    ("in_tol200m", pa.bool_()), ("source", pa.string()),
])

ANEMONE = ("Animalia", "Cnidaria", "Anthozoa", "Actiniaria", "Actiniidae", "Anthopleura", "elegantissima")
PERIWINKLE = ("Animalia", "Mollusca", "Gastropoda", "Littorinimorpha", "Littorinidae", "Littorina", "scutulata")
ROBIN = ("Animalia", "Chordata", "Aves", "Passeriformes", "Turdidae", "Turdus", "migratorius")
STARLING = ("Animalia", "Chordata", "Aves", "Passeriformes", "Sturnidae", "Sturnus", "vulgaris")
OAK = ("Plantae", "Tracheophyta", "Magnoliopsida", "Fagales", "Fagaceae", "Quercus", "agrifolia")
CHANTERELLE = ("Fungi", "Basidiomycota", "Agaricomycetes", "Cantharellales", "Cantharellaceae", "Cantharellus",
               "californicus")
MALLARD = ("Animalia", "Chordata", "Aves", "Anseriformes", "Anatidae", "Anas", "platyrhynchos")
WIGEON = ("Animalia", "Chordata", "Aves", "Anseriformes", "Anatidae", "Mareca", "americana")


def jpeg(seed: int, size: tuple[int, int] = (40, 28)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (seed * 37 % 256, 120, 200 - seed % 100)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def organism(names: tuple[str, ...], observation: int, *, species: str | None = None,
             scientific_name: str | None = None, **fields: Any) -> dict[str, Any]:
    uuid = f"00000000-0000-4000-8000-{observation:012d}"
    values = dict(zip(RANK_COLUMNS, names, strict=True))
    if species is not None:
        values["species"] = species
    return {
        "observation_uuid": uuid, "observation_url": f"https://www.inaturalist.org/observations/{uuid}",
        "taxon_id": 1000 + observation, "taxon_url": f"https://www.inaturalist.org/taxa/{1000 + observation}",
        **values, "scientific_name": scientific_name or f"{names[5]} {names[6]}", "quality_grade": "research",
        "species_in_tol200m": True, **fields,
    }


def published_row(photo_id: int, first: dict[str, Any], second: dict[str, Any], rank: str, **fields: Any
                  ) -> dict[str, Any]:
    body = jpeg(photo_id)
    base = f"https://inaturalist-open-data.s3.amazonaws.com/photos/{photo_id}"
    return {
        "photo_id": photo_id, "photo_uuid": f"10000000-0000-4000-8000-{photo_id:012d}",
        "image": {"bytes": body, "path": f"{photo_id}.jpg"}, "image_url": f"{base}/original.jpg",
        "image_url_medium": f"{base}/medium.jpg", "photo_page_url": f"https://www.inaturalist.org/photos/{photo_id}",
        "width": 1429, "height": 952, "image_format": "jpg", "image_sha256": hashlib.sha256(body).hexdigest(),
        "license": "CC-BY", "license_url": "https://creativecommons.org/licenses/by/4.0/",
        "attribution": f"(c) Ken-ichi Ueda, CC-BY, via iNaturalist photo {photo_id}", "observer_id": 1,
        "observer_login": "kueda", "observer_name": "Ken-ichi Ueda", "observed_on": datetime.date(2009, 6, 14),
        "latitude": 36.641014, "longitude": -121.930046, "positional_accuracy_m": None, "divergence_rank": rank,
        "kingdom_pair": f"{first['kingdom']} + {second['kingdom']}",
        "class_pair": f"{first['class']} + {second['class']}", "n_photos_sharing_observation_pair": 1,
        "organisms": [first, second], "in_tol200m": True, "source": "inaturalist", **fields,
    }


def published_rows() -> list[dict[str, Any]]:
    return [
        # The periwinkle's species is written as a binomial; the two diverge at phylum.
        published_row(4047, organism(ANEMONE, 1), organism(PERIWINKLE, 2, species="Littorina scutulata"), "phylum"),
        # Published as "Order" though the lineages part at family: counted, kept, recomputed beside it.
        published_row(5000, organism(ROBIN, 3), organism(STARLING, 4), "Order", image_sha256="0" * 64),
        # No attribution: built from the license and the observer; no coordinates (NaN and null).
        published_row(6001, organism(OAK, 5), organism(CHANTERELLE, 6), "kingdom", license="CC0",
                      license_url=None, attribution=None, observer_name="Jane Doe", latitude=float("nan"),
                      longitude=None),
    ]


def write_published(path: Path, rows: list[dict[str, Any]], schema: pa.Schema = PUBLISHED_SCHEMA) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path
ALIAS_ORGANISM = pa.struct([
    ("uuid", pa.string()), ("taxon_id", pa.int64()), ("kingdom", pa.string()), ("phylum", pa.string()),
    ("cls", pa.string()), ("order", pa.string()), ("family", pa.string()), ("genus", pa.string()),
    ("species", pa.string()), ("scientific_name", pa.string()),
])
ALIAS_SCHEMA = pa.schema([
    ("inat_photo_id", pa.int64()), ("image", pa.binary()), ("photo_url", pa.string()), ("license", pa.string()),
    ("observer", pa.string()), ("date", pa.string()), ("lat", pa.float64()), ("lon", pa.float64()),
    ("divergence_rank", pa.string()), ("organisms", pa.list_(ALIAS_ORGANISM)),
])


def alias_rows() -> list[dict[str, Any]]:
    def alias_organism(names: tuple[str, ...], observation: int) -> dict[str, Any]:
        values = dict(zip(RANK_COLUMNS, names, strict=True))
        values["cls"] = values.pop("class")
        return {"uuid": f"obs-{observation}", "taxon_id": observation, **values,
                "scientific_name": f"{names[5]} {names[6]}"}

    return [{
        "inat_photo_id": 7000, "image": jpeg(7000), "photo_url": "https://example.org/7000.jpg",
        "license": "cc-by-nc", "observer": "A. Observer", "date": "2020-05-01 10:30:00+02:00", "lat": -33.9,
        "lon": 18.4, "divergence_rank": "GENUS",
        "organisms": [alias_organism(MALLARD, 7), alias_organism(WIGEON, 8)],
    }]
