"""A twelve-row dataset with a 4-d embedding column (``emb_toy``) for command-line tests that need a real
dataset but no model: two challenge groups, three species of one genus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from cladebench import store


def write_toy_dataset(path: Path, *, with_latitude: bool = False) -> Path:
    """Write the toy dataset to ``path``; ``with_latitude`` adds a ``latitude`` column (a location for geo)."""
    n = 12
    vectors = np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32)
    columns = {
        "uuid": [f"u{i:02d}" for i in range(n)],
        "image": pa.array([bytes([i]) for i in range(n)], pa.large_binary()),
        "genus": ["Genus"] * n,
        "species": [f"sp{i % 3}" for i in range(n)],
        "scientific_name": [f"Genus sp{i % 3}" for i in range(n)],
        "challenge_group": ["birds" if i % 2 else "mammals" for i in range(n)],
    }
    if with_latitude:
        columns["latitude"] = [10.0 + i for i in range(n)]
    table = pa.table(columns)
    field = store.embedding_field("toy", 4, {"model": "toy-model"})
    table = table.append_column(field, pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4))
    store.write_dataset(table, path)
    return path
