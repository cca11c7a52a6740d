"""INQUIRE-Rerank's mirror layout: ``data/{test,validation}-00000-of-00001.parquet`` with the columns the Hub's
``datasets`` writes for it (the image a ``struct<bytes, path>``, the species folder in ``inat24_file_name``), written
from the rows a caller hands in (the synthetic world's,
:func:`cladebench.synthetic.mirrors.write_inquire_rerank_mirror`).

Why it exists: the ``inquire-rerank`` benchmark builds its dataset from a mirror folder with the builder that reads
the published files, so a mirror's files must be in that layout; the family says what it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.benchmarks.hub_layout import HF_IMAGE

INQUIRE_SCHEMA = pa.schema([
    ("image", HF_IMAGE), ("query", pa.string()), ("query_id", pa.int64()), ("relevant", pa.int64()),
    ("clip_score", pa.float64()), ("inat24_image_id", pa.int64()), ("inat24_file_name", pa.string()),
    ("supercategory", pa.string()), ("category", pa.string()), ("iconic_group", pa.string()),
    ("latitude", pa.float64()), ("longitude", pa.float64()), ("date", pa.string()), ("license", pa.string()),
    ("rights_holder", pa.string()),
])
"""The evendrow/INQUIRE-Rerank columns a shard must have."""


def _folder_word(name: str | None) -> str:
    """A name as one word of an iNat24 species folder (which separates ranks with underscores)."""
    return (name or "unknown").replace("_", "-").replace(" ", "-")


def inat24_file_name(species_index: int, ranks: Sequence[str | None], species: str | None, key: str) -> str:
    """The iNat24 file of a photo: ``train/<index>_<kingdom>_..._<genus>_<epithet>/<key>.jpg``, ``ranks`` the names
    from kingdom to genus and ``species`` the binomial."""
    words = [_folder_word(name) for name in ranks]
    epithet = _folder_word((species or "").split(" ")[-1])
    return f"train/{species_index:05d}_{'_'.join(words)}_{epithet}/{key}.jpg"


def write_inquire_rerank_shard(folder: str | Path, split: str, rows: Iterable[Mapping[str, object]]) -> Path:
    """Write one split's shard (``data/<split>-00000-of-00001.parquet``) of ``rows`` in :data:`INQUIRE_SCHEMA`;
    returns its path."""
    data = Path(folder) / "data"
    data.mkdir(parents=True, exist_ok=True)
    path = data / f"{split}-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(list(rows), schema=INQUIRE_SCHEMA), path)
    return path
