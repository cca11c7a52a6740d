"""Fine-Grained Challenges' mirror layout: ``data/challenges.lance`` and its sidecar, in the published layout, with
planted BioCLIP-family embeddings, made from the canonical rows a caller hands in (the synthetic world's,
:func:`cladebench.synthetic.mirrors.write_finegrained_mirror`).

Why it exists: the named benchmarks ``fine-grained-challenges`` and ``test-fine-grained-challenges`` read a mirror
folder exactly as they read the published repository, so tests (and anyone offline) need a folder in that layout:
the published columns (``species`` the binomial, null on genus-only camera-trap rows; ``challenge_group``;
``seen_in_training`` naming models; license and provenance columns), WebP images, and ``emb_bioclip``,
``emb_bioclip2``, ``emb_bioclip2p5`` as plain ``list<float16>`` whose Arrow field metadata and
``data/challenges.embedding_models.json`` record the model and its revision (the pinned ones unless ``revisions``
says otherwise, which is how a test makes a release the pins refuse).

The vectors are planted, not encoded: each is its genus's direction plus its species' plus noise, so few-shot and
retrieval find the species (and genus-only rows sit near their genus) without any model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from cladebench.models.registry import HF_HUB_PREFIX, resolve_model
from cladebench.store.embeddings import PUBLISHED_EMBEDDING_COLUMNS, PUBLISHED_SIDECAR_SUFFIX
from cladebench.taxonomy import RANK_COLUMNS, Rank

DATA_PATH = "data/challenges.lance"
SIDECAR_PATH = DATA_PATH.removesuffix(".lance") + PUBLISHED_SIDECAR_SUFFIX
DIMS = {"emb_bioclip": 512, "emb_bioclip2": 768, "emb_bioclip2p5": 1024}
"""Width of each published column (the models' embedding widths)."""
SEEN_PATTERN: tuple[tuple[str, ...], ...] = ((), ("bioclip-2", "bioclip-2.5"), ("bioclip",))
"""``seen_in_training`` of row i is entry i mod 3: a third unseen by every listed model."""


def _unit(key: str, dim: int, salt: str) -> np.ndarray:
    """A fixed random unit vector for ``key`` (seeded by its hash, so it is the same in every run)."""
    seed = int.from_bytes(hashlib.sha256(f"{salt}\0{key}".encode()).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(dim)
    return vector / np.linalg.norm(vector)


def planted_vectors(genera: Sequence[str], species: Sequence[str | None], dim: int, *, salt: str,
                    noise: float = 0.9) -> np.ndarray:
    """One vector per row: its genus's direction, plus its species' (none for a genus-only row), plus noise."""
    rows = []
    for i, (genus, binomial) in enumerate(zip(genera, species, strict=True)):
        vector = _unit(genus, dim, salt) + (0.9 * _unit(binomial, dim, salt) if binomial else 0)
        rows.append(vector + noise * _unit(f"row {i}", dim, salt))
    return np.asarray(rows, dtype=np.float16)


def _embedding_field(column: str, revision: str | None) -> tuple[pa.Field, dict[str, object]]:
    """The published field (list<float16> with the publisher's metadata) and its sidecar entry."""
    spec = resolve_model(PUBLISHED_EMBEDDING_COLUMNS[column])
    entry: dict[str, object] = {"column": column, "model": spec.id.removeprefix(HF_HUB_PREFIX),
                                "revision": revision, "dim": DIMS[column], "dtype": "float16",
                                "normalized": False, "source": "published with the dataset"}
    metadata = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in entry.items() if v is not None}
    return pa.field(column, pa.list_(pa.float16()), metadata=metadata), entry


def write_finegrained_files(folder: str | Path, table: pa.Table, *, genus_only: int = 6,
                            columns: Sequence[str] = tuple(DIMS), revisions: Mapping[str, str] | None = None) -> Path:
    """Write a Fine-Grained Challenges mirror into ``folder`` (created; must not hold one yet); returns the table's
    path. The canonical rows of ``table`` (WebP images) become rows; ``challenge_group`` is their class; the first
    ``genus_only`` rows of the first group lose their species (camera-trap rows labelled to genus). ``revisions``
    replaces the recorded revision of the named columns (field metadata and sidecar alike)."""
    import lance

    folder = Path(folder)
    path = folder / DATA_PATH
    groups = table.column("challenge_group").to_pylist()
    first = sorted(set(groups))[0]
    genus_only_rows = {i for i in [j for j, g in enumerate(groups) if g == first][:genus_only]}
    genera = table.column(Rank.GENUS.column).to_pylist()
    species = [None if i in genus_only_rows else s for i, s in enumerate(table.column("species").to_pylist())]
    scientific = [f"{genera[i]} Gloger, 1841" if i in genus_only_rows else f"{s} (Wagner, 1845)"
                  for i, s in enumerate(species)]
    n = table.num_rows
    fields: list[tuple[pa.Field, pa.Array]] = [
        (pa.field("uuid", pa.string()), table.column("uuid").combine_chunks()),
        (pa.field("challenge_group", pa.string()), pa.array(groups, pa.string())),
        (pa.field("seen_in_training", pa.list_(pa.string())),
         pa.array([list(SEEN_PATTERN[i % 3]) for i in range(n)], pa.list_(pa.string()))),
        (pa.field("species", pa.string()), pa.array(species, pa.string())),
        (pa.field("source_dataset", pa.string()), pa.array(["gbif"] * n, pa.string())),
        (pa.field("source_id", pa.string()), table.column("source_id").combine_chunks()),
        *((pa.field(c, pa.string()), table.column(c).combine_chunks()) for c in RANK_COLUMNS[:-1]),
        (pa.field("scientific_name", pa.string()), pa.array(scientific, pa.string())),
        (pa.field("common_name", pa.string()),
         pa.array([None if i in genus_only_rows else c for i, c in enumerate(table.column("common_name").to_pylist())],
                  pa.string())),
        (pa.field("img_type", pa.string()),
         pa.array(["Camera-trap" if i in genus_only_rows else "Citizen Science" for i in range(n)], pa.string())),
        (pa.field("source_url", pa.string()), table.column("source_url").combine_chunks()),
        (pa.field("license_name", pa.string()), table.column("license_name").combine_chunks()),
        (pa.field("license_link", pa.string()), table.column("license_link").combine_chunks()),
    ]
    sidecar: dict[str, dict[str, object]] = {}
    pins = {c: resolve_model(PUBLISHED_EMBEDDING_COLUMNS[c]).revision for c in columns}
    for column in columns:
        revision = (revisions or {}).get(column, pins[column])
        field, sidecar[column] = _embedding_field(column, revision)
        vectors = planted_vectors(genera, species, DIMS[column], salt=column)
        fields.append((field, pa.array(list(vectors), pa.list_(pa.float16()))))
    fields.append((pa.field("image", pa.large_binary()), table.column("image").combine_chunks()))
    schema = pa.schema([f for f, _ in fields])
    lance.write_dataset(pa.Table.from_arrays([a for _, a in fields], schema=schema), path)
    (folder / SIDECAR_PATH).write_text(json.dumps(sidecar, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (folder / "README.md").write_text(
        "# Fine-Grained Challenges (synthetic mirror)\n\nA mirror in the published layout, made from cladebench's "
        "synthetic world for offline tests: its numbers say nothing about real organisms.\n", encoding="utf-8")
    return path
