"""A stored column checked against a fresh forward pass of the model it is said to hold.

Why: a run on stored vectors scores them under the model the column's metadata names. The checksum in the
sidecar (:mod:`cladebench.store.sidecar`) finds vectors changed since cladebench wrote them, but not a column that
another tool wrote with the wrong metadata, nor a dataset without a sidecar. When the run has loaded the model's
weights anyway (its text tower, say), encoding a few of the column's images again costs a fraction of a second,
and vectors of another model differ at once (cosine near 0 where the same model gives about 1).
"""

from __future__ import annotations

import json
from typing import Any

from cladebench.errors import SchemaError
from cladebench.store.sql import sql_identifier

SPOT_ROWS = 4
"""Rows encoded again: enough that one undecodable photo does not leave the check without a row."""

MIN_COSINE = 0.98
"""The least cosine between a stored and a fresh vector of one image by one model: the same weights at another
precision (fp16 on a GPU against fp32 here) or on another device agree to better than 0.999; another model's
vectors, even of the same architecture, to far less."""


def _preprocessing(metadata: dict[str, object], encoder: Any) -> Any:
    """The preprocessing the column was embedded with (as its metadata records it), else the encoder's own."""
    from cladebench.models.preprocessing import Preprocessing

    recorded = metadata.get("preprocessing")
    if isinstance(recorded, str):
        try:
            recorded = json.loads(recorded)
        except ValueError:
            recorded = None
    if isinstance(recorded, dict) and recorded.get("mode"):
        try:
            return Preprocessing.from_dict(recorded)
        except (TypeError, ValueError):
            pass
    return encoder.preprocessing


def spot_check_column(dataset: Any, column: str, encoder: Any, metadata: dict[str, object],
                      rows: int = SPOT_ROWS) -> dict[str, object]:
    """Encode up to ``rows`` of the column's images again with ``encoder`` and compare with the stored vectors;
    a :class:`SchemaError` (exit 4) when one differs, naming the row. Returns what was checked (for the record);
    rows whose image does not decode are skipped, as embed skipped them."""
    import numpy as np
    import torch

    from cladebench.images import ImageDecodeError, decode_image
    from cladebench.store.embeddings import normalise_rows

    if "image" not in dataset.schema.names:
        return {"rows": 0, "skipped": "the dataset has no image column"}
    table = dataset.to_table(columns=["uuid", "image", column], filter=f"{sql_identifier(column)} IS NOT NULL",
                             limit=rows * 4)
    transform = _preprocessing(metadata, encoder).build()
    uuids, pixels, stored = [], [], []
    for uuid, data, vector in zip(*(table.column(c).to_pylist() for c in ("uuid", "image", column)), strict=True):
        try:
            pixels.append(transform(decode_image(data)))
        except (ImageDecodeError, OSError, ValueError):
            continue
        uuids.append(str(uuid))
        stored.append(np.asarray(vector, dtype=np.float32))
        if len(uuids) == rows:
            break
    if not uuids:
        return {"rows": 0, "skipped": "no image of the column's rows decodes"}
    fresh = np.asarray(encoder.encode_images(torch.stack(pixels)), dtype=np.float32)
    if fresh.shape[1] != stored[0].shape[0]:
        raise SchemaError(f"{dataset.uri}: column {column!r} holds vectors of width {stored[0].shape[0]}, but "
                          f"{encoder.model_id} makes vectors of width {fresh.shape[1]}: not its vectors; re-embed "
                          f"the column (cladebench embed --model {encoder.model_id} --column {column} --overwrite)")
    cosines = (normalise_rows(np.stack(stored)) * normalise_rows(fresh)).sum(axis=1)
    worst = int(np.argmin(cosines))
    if cosines[worst] < MIN_COSINE:
        raise SchemaError(f"{dataset.uri}: column {column!r} does not hold {encoder.model_id}'s vectors: encoding "
                          f"row uuid={uuids[worst]} again gives cosine {cosines[worst]:.3f} with the stored vector "
                          f"(at least {MIN_COSINE} for the same model); re-embed the column (cladebench embed "
                          f"--model {encoder.model_id} --column {column} --overwrite) or evaluate it without --model")
    return {"rows": len(uuids), "uuids": uuids, "min_cosine": round(float(cosines.min()), 6)}
