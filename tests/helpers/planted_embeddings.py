"""Planted embeddings: datasets whose stored vectors are chosen, not computed by a model, so a test knows which
classes are separable and by how much.

Shared by the few-shot tests and the tests of ``eval`` on a stored embedding column (retrieval, compare of
columns, option checks, attacks), which need a dataset with an embedding column and no model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cladebench import store

DIM = 24
"""Dimension of the planted vectors."""


def spread_norm_problem(seed: int, log_norm_sd: float) -> tuple[dict[str, Any], np.ndarray]:
    """Ten classes around a shared offset (as real embeddings share a mean direction), each vector scaled by
    exp(N(0, log_norm_sd)): raw embeddings stored unnormalised. Returns the data and the unscaled vectors."""
    rng = np.random.default_rng(seed)
    n_classes, dim, per_class = 10, 32, 24
    means = rng.normal(size=(n_classes, dim))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    offset = rng.normal(size=dim)
    offset *= 2.0 / np.linalg.norm(offset)
    labels, groups, uuids, clean = [], [], [], []
    for c in range(n_classes):
        for i in range(per_class):
            labels.append(f"class-{c:02d}")
            groups.append(f"obs-{c}-{i}")
            uuids.append(f"u-{c}-{i}")
            clean.append(offset + means[c] + 0.27 * rng.normal(size=dim))
    clean_vectors = np.asarray(clean)
    scaled = clean_vectors * np.exp(log_norm_sd * rng.normal(size=(len(clean), 1)))
    return {"labels": labels, "groups": groups, "uuids": uuids, "vectors": scaled}, clean_vectors


RANKS = ("kingdom", "phylum", "class", "order", "family", "genus", "species")


def taxon(c: int) -> tuple[str, ...]:
    return ("Animalia", "Chordata", "Aves", "Passeriformes", f"Fam{c // 3}", f"Genus{c}", f"sp{c}")


def write_planted_dataset(path: Path, *, seed: int = 0, n_classes: int = 6) -> pa.Table:
    """Rows of ``n_classes`` species (plus one seen in a single observation), 1-3 photos per observation."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(n_classes + 1, DIM))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    rows: list[dict[str, Any]] = []
    vectors = []
    for c in range(n_classes + 1):
        observations = 1 if c == n_classes else 7
        for g in range(observations):
            for i in range(4 if c == n_classes else int(rng.integers(1, 4))):
                rows.append({"uuid": f"{c}-{g}-{i}", "source_id": f"obs-{c}-{g}",
                             **dict(zip(RANKS, taxon(c), strict=True))})
                vectors.append(5.0 * (means[c] + 0.08 * rng.normal(size=DIM)) + 1.0)
    table = pa.table({
        "uuid": [r["uuid"] for r in rows],
        "image": pa.array([b"not decoded here"] * len(rows), pa.large_binary()),
        **{rank: [r[rank] for r in rows] for rank in RANKS},
        "source_id": [r["source_id"] for r in rows],
    })
    field = store.embedding_field("planted", DIM, {"model": "planted-model", "revision": "r1"})
    values = pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(vectors, dtype=np.float32).ravel()), DIM)
    table = table.append_column(field, values)
    store.write_dataset(table, path)
    return table
