"""What a model name means (:class:`ModelSpec`) and what a built model can do (:class:`Model`).

A model name is resolved once, by :func:`cladebench.models.registry.resolve_model`, into a :class:`ModelSpec`;
everything downstream reads that spec rather than the name: the loader (which source fetches the weights,
whether torch is needed), the default embedding column (``emb_<key>``), the lookup of a column by the model it
holds, and the provenance of a run record. Parsing a name again elsewhere would let the places disagree (an
alias pinned in one, unpinned in another; a column named after one spelling and looked up by another).

A spec's ``kind`` says how the model is built; what it can do (:data:`EMBEDS_IMAGES`, :data:`EMBEDS_TEXTS`,
:data:`ANSWERS`) and what it needs are the kind's :class:`KindTraits` in :data:`MODEL_KINDS`, and a task asks
those (:attr:`ModelSpec.capabilities`, :func:`missing_for`), never the kind's name:

- ``clip``: an image-text encoder loaded with open_clip (needs torch); it embeds images and texts.
- ``vlm``: a generative model behind an OpenAI-compatible endpoint, asked questions over HTTP.
- image-only backbones (``timm``, ``hf-vision``; :mod:`.backbones`): they embed images, nothing else.

This module imports neither torch nor open_clip: it is plain values and protocols.

Example:
    >>> column_key("bioclip-2.5"), column_key("hf-hub:org/My-Model"), column_key("ViT-B-16/openai")
    ('bioclip2p5', 'mymodel', 'vit_b_16_openai')
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from cladebench.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

ModelKind = Literal["clip", "vlm", "timm", "hf-vision"]
"""How a model is built: ``clip`` (open_clip), ``vlm`` (an endpoint), ``timm`` and ``hf-vision`` (transformers)
image-only backbones. What each can do is in :data:`MODEL_KINDS`."""

EMBEDS_IMAGES = "embeds images"
"""Capability: the model turns images into vectors (``embed``, few-shot, retrieval, comparing columns)."""
EMBEDS_TEXTS = "embeds texts"
"""Capability: the model turns texts into vectors in its images' space (zero-shot, text search, rerank)."""
ANSWERS = "answers over an endpoint"
"""Capability: the model answers questions about images over HTTP (rerank by P(Yes), lineage)."""

CAPABILITY_NAMES: dict[str, str] = {EMBEDS_IMAGES: "an image tower", EMBEDS_TEXTS: "a text tower",
                                    ANSWERS: "an endpoint that answers questions"}
"""What a missing capability is called in a refusal: a task that needs texts embedded "needs a text tower"."""


@dataclass(frozen=True)
class KindTraits:
    """What models of one kind can do and what building them needs; asked by tasks and plans, never by name."""

    can: frozenset[str]
    """Its capabilities (:data:`EMBEDS_IMAGES`, :data:`EMBEDS_TEXTS`, :data:`ANSWERS`)."""
    needs: tuple[str, ...]
    """What building it needs: Python packages (``torch``, ``open_clip``) or ``a server``."""
    described: str
    """The kind in a few words, for messages: ``an image-only timm backbone``."""
    extra: str | None = None
    """The cladebench extra that installs :attr:`needs` (``clip``, ``vision``), None when nothing is installed."""


MODEL_KINDS: dict[str, KindTraits] = {
    "clip": KindTraits(frozenset({EMBEDS_IMAGES, EMBEDS_TEXTS}), ("torch", "open_clip"),
                       "an image-text encoder (open_clip)", "clip"),
    "vlm": KindTraits(frozenset({ANSWERS}), ("a server",), "a VLM behind an endpoint, asked over HTTP"),
}
"""Kind -> its traits. The image-only kinds are added by :mod:`cladebench.models.backbones`, which the resolver
imports, so every spec that exists has its kind here."""


def register_kind(name: str, traits: KindTraits) -> KindTraits:
    """Add a model kind's traits (once: a second registration would change what recorded specs can do)."""
    if name in MODEL_KINDS:
        raise ValueError(f"model kind {name!r} registered twice")
    MODEL_KINDS[name] = traits
    return traits


def missing_for(needs: Sequence[frozenset[str]], can: frozenset[str]) -> frozenset[str] | None:
    """What a model that can do ``can`` lacks for a task whose ``needs`` are alternatives (any one suffices):
    None when one alternative is met, else the smallest set missing from one of them (the first of equal size:
    alternatives come in the order a task prefers them)."""
    if not needs:
        return None
    gaps = [need - can for need in needs]
    if any(not gap for gap in gaps):
        return None
    return min(gaps, key=len)


def lacking(missing: frozenset[str]) -> str:
    """A missing set in words: ``a text tower``, ``an image tower and a text tower``."""
    return " and ".join(CAPABILITY_NAMES.get(name, name) for name in sorted(missing))

EMBEDDING_COLUMN_PREFIX = "emb_"
"""Every embedding column's name starts with it (the store's ``EMBEDDING_PREFIX``; models sit below the store)."""

_NAME_PREFIXES = ("hf-hub:", "local-dir:", "timm:")


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
    ``None`` for a model behind an endpoint and for an image-only backbone (timm, transformers)."""
    pretrained: str | None
    """open_clip ``pretrained``: a tag (``openai``) or an absolute file path; ``None`` for hf-hub, local-dir and
    endpoints."""
    revision: str | None
    """Hub commit or branch to load; ``None`` means the source has no revision or it was not pinned."""
    source: str
    """Where the weights come from: ``hf-hub``, ``local-dir``, ``open_clip``, ``timm`` (a timm pretrained tag) or
    ``openai-compatible`` (see :data:`cladebench.models.registry.MODEL_NAME_FORMS`)."""
    alias: str | None = None
    """The registered alias this spec was resolved from, if any; not part of the identity of the weights."""
    kind: ModelKind = "clip"
    """How the model is built, whose :data:`MODEL_KINDS` traits say what it can do (:attr:`capabilities`)."""
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
    def traits(self) -> KindTraits:
        """What the model's kind can do and needs."""
        return MODEL_KINDS[self.kind]

    @property
    def capabilities(self) -> frozenset[str]:
        """What the model can do (:data:`EMBEDS_IMAGES`, :data:`EMBEDS_TEXTS`, :data:`ANSWERS`)."""
        return self.traits.can

    def can(self, capability: str) -> bool:
        """Whether the model can do ``capability``."""
        return capability in self.traits.can

    @property
    def needs_torch(self) -> bool:
        """Whether building the model imports torch (an encoder does; an endpoint is asked over HTTP)."""
        return "torch" in self.traits.needs

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
    """How a built model was built, from its spec: a :class:`Model` says so through ``spec.kind``; anything else
    passed as a model (an encoder double without a spec) is an image-text encoder."""
    return model.spec.kind if isinstance(model, Model) else "clip"


def model_capabilities(model: Model | ImageTextEncoder) -> frozenset[str]:
    """What a built model can do, from its spec (a double without a spec is an image-text encoder)."""
    return MODEL_KINDS[model_kind(model)].can


def first_fitting(task: str, ways: Mapping[str, frozenset[str]], model: Model | ImageTextEncoder) -> str:
    """The first of a task's ways to use a model (name -> what it needs) whose needs the model meets; a model that
    meets none is refused naming what the first way lacks (the plan refuses it before it loads)."""
    can = model_capabilities(model)
    found = next((name for name, needs in ways.items() if needs <= can), None)
    if found is None:
        first = next(iter(ways.values()))
        raise UsageError(f"{task} needs an image-text encoder or openai-compatible:NAME@URL; "
                         f"{getattr(model, 'model_id', model)} has {lacking(first - can)} missing")
    return found


__all__ = ["ANSWERS", "CAPABILITY_NAMES", "EMBEDDING_COLUMN_PREFIX", "EMBEDS_IMAGES", "EMBEDS_TEXTS", "MODEL_KINDS",
           "ImageTextEncoder", "KindTraits", "Model", "ModelKind", "ModelSpec", "column_key", "first_fitting",
           "lacking", "missing_for", "model_capabilities", "model_kind", "register_kind"]
