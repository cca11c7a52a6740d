"""What a model name means (:class:`ModelSpec`) and what a built model can do (:class:`Model`).

A model name is resolved once, by :func:`cladebench.models.registry.resolve_model`, into a :class:`ModelSpec`;
everything downstream reads that spec rather than the name: the loader (which source fetches the weights,
whether torch is needed), the default embedding column (``emb_<key>``), the lookup of a column by the model it
holds, and the provenance of a run record. Parsing a name again elsewhere would let the places disagree (an
alias pinned in one, unpinned in another; a column named after one spelling and looked up by another).

Two kinds of model exist, and a task asks which one it got through the spec, not by probing attributes:

- ``clip``: an image-text encoder loaded with open_clip (needs torch); it embeds images and texts.
- ``vlm``: a generative model behind an OpenAI-compatible endpoint, asked questions over HTTP.

This module imports neither torch nor open_clip: it is plain values and protocols.

Example:
    >>> column_key("bioclip-2.5"), column_key("hf-hub:org/My-Model"), column_key("ViT-B-16/openai")
    ('bioclip2p5', 'mymodel', 'vit_b_16_openai')
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

ModelKind = Literal["clip", "vlm"]
"""``clip``: an image-text encoder (embeds images and texts); ``vlm``: a generative model behind an endpoint."""

EMBEDDING_COLUMN_PREFIX = "emb_"
"""Every embedding column's name starts with it (the store's ``EMBEDDING_PREFIX``; models sit below the store)."""

_NAME_PREFIXES = ("hf-hub:", "local-dir:")


def column_key(name: str) -> str:
    """The key of a model's default embedding column, from the name as typed: ``bioclip-2.5`` -> ``bioclip2p5``,
    ``hf-hub:org/My-Model`` -> ``mymodel``, ``local-dir:/models/tiny-clip`` -> ``tinyclip``.

    Short dashed names lose their dashes (``bioclip-2`` -> ``bioclip2``, as the published Fine-Grained
    Challenges columns are named); architecture names keep them as underscores (``vit_b_16``).
    """
    key = name.strip()
    for prefix in _NAME_PREFIXES:
        if key.startswith(prefix):
            key = key[len(prefix):].rstrip("/").rsplit("/", 1)[-1]
    key = key.lower().replace(".", "p")
    if re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", key) and not key.startswith("vit"):
        key = key.replace("-", "")
    return re.sub(r"[^a-z0-9]+", "_", key).strip("_") or "model"


@dataclass(frozen=True)
class ModelSpec:
    """What a model name means, decided before any weights are read or any request is sent.

    Equality is the identity of the weights (``id``, ``revision``, how they load, and the alias): the name as
    typed and the column key derived from it are carried along but not compared, so ``bioclip`` and
    ``hf-hub:imageomics/bioclip`` differ only by their alias.
    """

    id: str
    """Canonical id recorded in provenance and cache keys: ``hf-hub:ORG/NAME``, ``local-dir:/abs/path``,
    ``NAME/PRETRAINED`` or ``openai-compatible:NAME@URL``. Two names for the same weights share it."""
    open_clip_name: str | None
    """First argument to ``open_clip.create_model``: an architecture (``ViT-B-16``) or ``hf-hub:``/``local-dir:``;
    ``None`` for a model behind an endpoint."""
    pretrained: str | None
    """open_clip ``pretrained``: a tag (``openai``) or an absolute file path; ``None`` for hf-hub, local-dir and
    endpoints."""
    revision: str | None
    """Hub commit or branch to load; ``None`` means the source has no revision or it was not pinned."""
    source: str
    """Where the weights come from: ``hf-hub``, ``local-dir``, ``open_clip`` or ``openai-compatible`` (see
    :data:`cladebench.models.registry.MODEL_NAME_FORMS`)."""
    alias: str | None = None
    """The registered alias this spec was resolved from, if any; not part of the identity of the weights."""
    kind: ModelKind = "clip"
    """What the built model can do: ``clip`` embeds images and texts, ``vlm`` answers questions over HTTP."""
    name: str = field(default="", compare=False)
    """The name as typed (stripped), for messages; not part of the identity."""
    column_key: str | None = field(default=None, compare=False)
    """Key of the default embedding column ``emb_<key>``, derived from the name as typed (so ``embed --model
    bioclip-2.5`` writes ``emb_bioclip2p5``); ``None`` for a model that makes no embeddings."""

    @property
    def hub_repo(self) -> str | None:
        """``ORG/NAME`` for a Hub model, else ``None``."""
        return self.id.removeprefix("hf-hub:") if self.source == "hf-hub" else None

    @property
    def needs_torch(self) -> bool:
        """Whether building the model imports torch (an encoder does; an endpoint is asked over HTTP)."""
        return self.kind == "clip"

    @property
    def column(self) -> str | None:
        """The default embedding column of the model (``emb_<column_key>``), ``None`` when it makes none."""
        return None if self.column_key is None else EMBEDDING_COLUMN_PREFIX + self.column_key

    def replace(self, **changes: Any) -> ModelSpec:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields, for provenance."""
        return dataclasses.asdict(self)


@runtime_checkable
class Model(Protocol):
    """What every built model offers: the spec it was built from, its id and revision, and its provenance."""

    @property
    def spec(self) -> ModelSpec:
        """The resolved name the model was built from; its ``kind`` says what the model can do."""
        ...

    @property
    def model_id(self) -> str:
        """The spec's id, as provenance and embedding-column metadata record it."""
        ...

    def describe(self) -> dict[str, object]:
        """Provenance of what the model produces (``model_id``, ``revision``, ...)."""
        ...


class ImageTextEncoder(Protocol):
    """What a task on images and texts needs from an image-text encoder (``kind`` ``clip``): the model's id and
    revision (to find and check the embedding column) and text embeddings in the images' space. The open_clip
    encoder (:class:`cladebench.models.openclip.Encoder`) is one; small test doubles are others."""

    model_id: str
    revision: str | None

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Raw text embeddings, float32 (len(texts), dim)."""
        ...


def model_kind(model: Model | ImageTextEncoder) -> ModelKind:
    """What a built model can do, from its spec: a :class:`Model` says so through ``spec.kind``; anything else
    passed as a model (an encoder double without a spec) is an image-text encoder."""
    return model.spec.kind if isinstance(model, Model) else "clip"


__all__ = ["EMBEDDING_COLUMN_PREFIX", "ImageTextEncoder", "Model", "ModelKind", "ModelSpec", "column_key", "model_kind"]
