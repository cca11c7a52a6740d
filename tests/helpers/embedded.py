"""A table written as a dataset and embedded with a (tiny) model into ``emb_tiny``: the fixture many task tests
start from, in one process on the CPU."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from cladebench import store
from cladebench.embed import EmbedConfig, embed_dataset


def write_embedded(table: pa.Table, path: Path, model: str) -> Path:
    """``table`` written at ``path`` and every image encoded by ``model`` into the column ``emb_tiny``."""
    store.write_dataset(table, path)
    embed_dataset(EmbedConfig(dataset=str(path), model=model, column="emb_tiny", workers=0, device="cpu",
                              progress=False))
    return path
