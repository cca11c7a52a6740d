"""Models: which model a name means, how it is built, and what it turns images and texts into.

This ``__init__`` presents the package's public API on purpose (``from cladebench.models import ...``); the
submodules import each other directly.

- :mod:`.spec` (no torch): :class:`ModelSpec` (what a name means), the :class:`Model` protocol and
  :func:`model_kind` (what a built model can do), the default embedding column's key.
- :mod:`.registry` (no torch): aliases and string forms -> :class:`ModelSpec`, pinned revisions;
  :func:`resolve_model` is the one place a name is resolved.
- :mod:`.endpoint` (no torch): ``openai-compatible:NAME@URL`` parsed, :class:`EndpointModel`.
- :mod:`.build`: :func:`build_model`, the lazy step from a spec to a model.
- :mod:`.preprocessing` (no torch to import): :class:`Preprocessing` as plain values, ``openclip``/``tol``.
- :mod:`.openclip`: :class:`Encoder` and :func:`load_encoder` (torch and open_clip imported when loading).
- :mod:`.hub`: Hub snapshots at an exact revision, cache first, fast offline failure.
- :mod:`.text`: zero-shot class embeddings from templates, cached on disk.
- :mod:`.tiny`: a tiny random-weight open_clip checkpoint for tests and the demo.
- :mod:`.vlm`: the client that asks a VLM behind an endpoint.

Example:
    >>> from cladebench.models import resolve_model
    >>> resolve_model("bioclip-2").revision
    '2957b322090f9cb17ae72c71981c7218a28d81e0'
    >>> resolve_model("bioclip-2").column
    'emb_bioclip2'
    >>> resolve_model("openai-compatible:qwen@http://127.0.0.1:8000/v1").kind
    'vlm'
"""

from __future__ import annotations

from cladebench.models.build import build_model
from cladebench.models.endpoint import EndpointModel
from cladebench.models.openclip import Encoder, load_encoder
from cladebench.models.preprocessing import PREPROCESSING_MODES, Preprocessing, get_preprocessing_mode
from cladebench.models.registry import (
    MODELS,
    PINNED_REVISIONS,
    ModelLoadError,
    ModelUnavailableError,
    list_models,
    register_model,
    resolve_encoder,
    resolve_model,
)
from cladebench.models.spec import ImageTextEncoder, Model, ModelKind, ModelSpec, model_kind
from cladebench.models.text import class_text_embeddings, text_cache_key

__all__ = [
    "MODELS",
    "PINNED_REVISIONS",
    "PREPROCESSING_MODES",
    "Encoder",
    "EndpointModel",
    "ImageTextEncoder",
    "Model",
    "ModelKind",
    "ModelLoadError",
    "ModelSpec",
    "ModelUnavailableError",
    "Preprocessing",
    "build_model",
    "class_text_embeddings",
    "get_preprocessing_mode",
    "list_models",
    "load_encoder",
    "model_kind",
    "register_model",
    "resolve_encoder",
    "resolve_model",
    "text_cache_key",
]
