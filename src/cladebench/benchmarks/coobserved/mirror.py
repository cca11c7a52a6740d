"""iNat Co-Observed's mirror layout: ``data/coobserved.parquet`` with Co-Observed's columns (two organisms per photo,
the divergence rank) and the photo inside, written from the records a caller hands in (the synthetic world's,
:func:`cladebench.synthetic.mirrors.write_coobserved_mirror`).

Why it exists: the ``inat-coobserved`` benchmark builds its dataset from a mirror folder with the builder that reads
the published files, so a mirror's file must be in that layout; the family says what it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.benchmarks.coobserved.builder.published import ORGANISM_TYPE, PUBLISHED_SCHEMA
from cladebench.benchmarks.hub_layout import HF_IMAGE


def write_coobserved_file(folder: str | Path, records: Iterable[Mapping[str, object]]) -> Path:
    """Write ``data/coobserved.parquet``: the published columns and ``image`` (the photo's bytes in an HF image
    struct), one record per photo. Returns its path."""
    data = Path(folder) / "data"
    data.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([*PUBLISHED_SCHEMA, pa.field("image", HF_IMAGE)])
    path = data / "coobserved.parquet"
    pq.write_table(pa.Table.from_pylist(list(records), schema=schema), path)
    assert schema.field("organisms").type.value_type == ORGANISM_TYPE
    return path
