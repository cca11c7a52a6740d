"""Embedding columns that benchmarks publish without cladebench's field metadata.

Fine-Grained Challenges ships ``emb_bioclip``, ``emb_bioclip2`` and ``emb_bioclip2p5``: vectors made
by the Imageomics models, stored as plain lists with no record of the model on the field. Evaluating
them with the matching model saves encoding the images again, but only if the column is known to hold
that model's vectors; this registry says which, so a mismatch is still refused rather than guessed.
"""

from __future__ import annotations

from typing import Any

from cladebench.models.registry import resolve_model

PUBLISHED_EMBEDDING_COLUMNS: dict[str, str] = {}
"""Column name -> model alias (or id) of the model that made the published vectors."""


def register_published_column(column: str, model: str) -> None:
    """Declare that a published ``column`` holds embeddings of ``model`` (an alias or model id)."""
    PUBLISHED_EMBEDDING_COLUMNS[column] = model


for _column, _model in (("emb_bioclip", "bioclip"), ("emb_bioclip2", "bioclip-2"), ("emb_bioclip2p5", "bioclip-2.5")):
    register_published_column(_column, _model)


def published_metadata(column: str) -> dict[str, Any]:
    """Metadata for a published column, in the shape ``cladebench embed`` writes; empty when unknown.

    The revision is left out: the publisher does not record which weights they used beyond the model.
    """
    model = PUBLISHED_EMBEDDING_COLUMNS.get(column)
    if model is None:
        return {}
    return {"model": resolve_model(model).id, "source": "published with the dataset", "revision": None}
