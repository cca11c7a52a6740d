"""Encoders: which model a name means, how it is loaded, and what it turns images and texts into.

- :mod:`.registry` (no torch): aliases and string forms -> :class:`ModelSpec`, pinned revisions.
- :mod:`.preprocessing` (no torch to import): :class:`Preprocessing` as plain values, ``openclip``/``tol``.
- :mod:`.openclip`: :class:`Encoder` and :func:`load_encoder` (torch and open_clip imported when loading).
- :mod:`.hub`: Hub snapshots at an exact revision, cache first, fast offline failure.
- :mod:`.text`: zero-shot class embeddings from templates, cached on disk.
- :mod:`.tiny`: a tiny random-weight open_clip checkpoint for tests and the demo.

Example:
    >>> from cladebench.models import resolve_model
    >>> resolve_model("bioclip-2").revision
    '2957b322090f9cb17ae72c71981c7218a28d81e0'
"""

from __future__ import annotations

from cladebench.models.openclip import Encoder, load_encoder
from cladebench.models.preprocessing import PREPROCESSING_MODES, Preprocessing, get_preprocessing_mode
from cladebench.models.registry import (
    MODELS,
    PINNED_REVISIONS,
    ModelLoadError,
    ModelSpec,
    ModelUnavailableError,
    list_models,
    register_model,
    resolve_model,
)
from cladebench.models.text import class_text_embeddings, text_cache_key

__all__ = [
    "MODELS",
    "PINNED_REVISIONS",
    "PREPROCESSING_MODES",
    "Encoder",
    "ModelLoadError",
    "ModelSpec",
    "ModelUnavailableError",
    "Preprocessing",
    "class_text_embeddings",
    "get_preprocessing_mode",
    "list_models",
    "load_encoder",
    "register_model",
    "resolve_model",
    "text_cache_key",
]
