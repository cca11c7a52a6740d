"""A text encoder that needs no model: query text ``q<i>`` encodes to the i-th of fixed vectors, so a test can
plant exactly which images each query should rank first."""

from __future__ import annotations

import numpy as np


class StandIn:
    """An encoder whose text tower maps query text ``q<i>`` to ``vectors[i]``, named ``model_id``."""

    revision = None

    def __init__(self, vectors: np.ndarray, model_id: str) -> None:
        self.vectors = vectors
        self.model_id = model_id

    def encode_texts(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
        return np.stack([self.vectors[int(t.removeprefix("q"))] for t in texts])

    def describe(self) -> dict[str, object]:
        return {"model_id": self.model_id, "revision": None}
