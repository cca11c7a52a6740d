"""INQUIRE-Rerank shards for tests: the columns as the Hub's `datasets` writes them, a few real taxa and queries,
a candidate row to vary, and a writer of parquet shards with small row groups.

Shared by the source, Hub-layout and attack tests of INQUIRE.
"""

from __future__ import annotations

import io
import uuid as uuidlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

HF_SCHEMA = pa.schema([
    ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
    ("query", pa.string()), ("query_id", pa.int64()), ("relevant", pa.int64()), ("clip_score", pa.float64()),
    ("inat24_image_id", pa.int64()), ("inat24_file_name", pa.string()), ("supercategory", pa.string()),
    ("category", pa.string()), ("iconic_group", pa.string()), ("inat24_species_id", pa.int64()),
    ("inat24_species_name", pa.string()), ("latitude", pa.float64()), ("longitude", pa.float64()),
    ("location_uncertainty", pa.float64()), ("date", pa.string()), ("license", pa.string()),
    ("rights_holder", pa.string()),
])
"""The evendrow/INQUIRE-Rerank columns as `datasets` writes them (Image feature = struct<bytes, path>)."""

MONGOOSE = "train/04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo"
CONDOR = "train/03101_Animalia_Chordata_Aves_Accipitriformes_Cathartidae_Gymnogyps_californianus"
HERMIT = "train/01500_Animalia_Arthropoda_Malacostraca_Decapoda_Coenobitidae_Coenobita_clypeatus"
TAMANDUA = "train/04800_Animalia_Chordata_Mammalia_Pilosa_Myrmecophagidae_Tamandua_mexicana"
CONDOR_QUERY = "California condor tagged with a green “26”"
HERMIT_QUERY = "a hermit crab using plastic waste as a shell"
MONGOOSE_QUERY = "A mongoose standing upright alert"


def flat_jpeg(color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def candidate(query: str, query_id: int, image_id: int, image: bytes, folder: str, relevant: int,
              **overrides: Any) -> dict[str, Any]:
    row = {
        "image": {"bytes": image, "path": f"{image_id}.jpg"}, "query": query, "query_id": query_id,
        "relevant": relevant, "clip_score": 0.25 + image_id % 7 / 100, "inat24_image_id": image_id,
        "inat24_file_name": f"{folder}/{uuidlib.uuid5(uuidlib.NAMESPACE_OID, str(image_id))}.jpg",
        "supercategory": "Appearance", "category": "Tracking and Identification", "iconic_group": "Birds",
        "inat24_species_id": 3101, "inat24_species_name": "Gymnogyps californianus",
        "latitude": 34.5, "longitude": -118.75, "location_uncertainty": 12.0, "date": "2019-06-23 18:02:00+00:00",
        "license": "CC BY-NC 4.0", "rights_holder": "Jane Doe",
    }
    row.update(overrides)
    return row


def write_shard(path: Path, rows: list[dict[str, Any]], *, drop: tuple[str, ...] = ()) -> Path:
    schema = pa.schema([f for f in HF_SCHEMA if f.name not in drop])
    table = pa.Table.from_pylist([{k: v for k, v in r.items() if k not in drop} for r in rows], schema=schema)
    pq.write_table(table, path, row_group_size=2)  # small row groups: streaming crosses them
    return path
