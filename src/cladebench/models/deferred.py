"""An image-text encoder built on first use of its weights.

Why: an evaluation on stored image vectors needs the model only for its text tower, and the text embeddings of a
label set are cached (:mod:`cladebench.models.text`). A run whose every label is cached, and whose logit scale is
known from an earlier build, needs no weights at all: building the model anyway imports torch and open_clip and
costs seconds and a gigabyte for nothing. :class:`DeferredEncoder` answers what the cache and the run record need
(id, revision, precision, the learned logit scale) from the spec and the model facts an earlier build left
(:func:`cladebench.models.text.model_facts`), and builds the model the first time anything else is asked of it.
"""

from __future__ import annotations

from typing import Any

from cladebench.models.spec import ModelSpec
from cladebench.models.text import model_facts, remember_model_facts

TEXT_PRECISION = "fp32"
"""The precision the text tower runs at when an evaluation builds it (the build's default)."""


class DeferredEncoder:
    """Stands for ``build_model(spec, device=device)`` until its weights are needed."""

    def __init__(self, spec: ModelSpec, device: str = "auto") -> None:
        self.spec = spec
        self.device = device
        self.model_id = spec.id
        self.revision = spec.revision
        self.precision = TEXT_PRECISION
        self._model: Any = None

    @property
    def built(self) -> bool:
        """Whether the weights were loaded (something besides cached facts was asked for)."""
        return self._model is not None

    def model(self) -> Any:
        """The built model (built now, once)."""
        if self._model is None:
            from cladebench.models.build import build_model

            self._model = build_model(self.spec, device=self.device, precision=self.precision)
        return self._model

    @property
    def logit_scale(self) -> float:
        """The model's learned logit scale: remembered from an earlier build, else read from the built model."""
        if self._model is None:
            known = model_facts(self.model_id, self.revision, self.precision).get("logit_scale")
            if known is not None:
                return float(known)
        model = self.model()
        remember_model_facts(model, self.precision, int(model.dim))  # the next run needs no build for it
        return float(model.logit_scale)

    @property
    def dim(self) -> int:
        """The embedding dimension: remembered from an earlier build, else read from the built model."""
        known = None if self._model is not None else model_facts(self.model_id, self.revision, self.precision).get(
            "dim")
        return int(known) if known is not None else int(self.model().dim)

    def describe(self) -> dict[str, object]:
        """The built model's provenance; before it is built, what the spec and the remembered facts say."""
        if self._model is not None:
            return self._model.describe()
        return {"model_id": self.model_id, "revision": self.revision, "alias": self.spec.alias,
                "source": self.spec.source, "precision": self.precision,
                **model_facts(self.model_id, self.revision, self.precision),
                "loaded": "no: text embeddings read from the cache, image vectors from the dataset"}

    def __getattr__(self, name: str) -> object:
        # Anything else (encode_texts, encode_images, dim, preprocess, ...) needs the weights.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.model(), name)
