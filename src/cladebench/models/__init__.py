"""Models: which model a name means, how it is built, and what it turns images and texts into.

This ``__init__`` presents the package's public API on purpose (``from cladebench.models import ...``), each name
imported from its module on first use (a name resolved needs none of open_clip's wrapper); the submodules import
each other directly.

- :mod:`.spec` (no torch): :class:`ModelSpec` (what a name means), the :class:`Model` protocol and
  :func:`model_kind` (what a built model can do), the default embedding column's key.
- :mod:`.registry` (no torch): aliases and string forms -> :class:`ModelSpec`, pinned revisions;
  :func:`resolve_model` is the one place a name is resolved.
- :mod:`.endpoint` (no torch): ``openai-compatible:NAME@URL`` parsed, :class:`EndpointModel`.
- :mod:`.build`: :func:`build_model`, the lazy step from a spec to a model; :func:`load_encoder`, a name to a
  model that embeds images.
- :mod:`.backbones` (no torch): image-only backbones' names and folder layouts (timm, transformers);
  :mod:`.timm_backbone`, :mod:`.hf_vision` build them as an :class:`~.image_encoder.ImageEncoder`.
- :mod:`.preprocessing` (no torch to import): :class:`Preprocessing` as plain values, ``openclip``/``tol``.
- :mod:`.openclip`: :class:`Encoder` (torch and open_clip imported when loading).
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

from typing import TYPE_CHECKING

from cladebench.lazy import present_lazily

if TYPE_CHECKING:  # what present_lazily presents, as the type checker sees it (nothing imported at run time)
    from cladebench.models.build import build_model, load_encoder  # noqa: F401
    from cladebench.models.endpoint import EndpointModel  # noqa: F401
    from cladebench.models.openclip import Encoder  # noqa: F401
    from cladebench.models.preprocessing import PREPROCESSING_MODES, Preprocessing, get_preprocessing_mode  # noqa: F401
    from cladebench.models.registry import (  # noqa: F401
        MODELS,
        PINNED_REVISIONS,
        ModelLoadError,
        ModelUnavailableError,
        list_models,
        register_model,
        resolve_encoder,
        resolve_model,
    )
    from cladebench.models.spec import (  # noqa: F401
        ImageTextEncoder,
        Model,
        ModelKind,
        ModelSpec,
        model_capabilities,
        model_kind,
    )
    from cladebench.models.text import class_text_embeddings, text_cache_key  # noqa: F401

__all__ = present_lazily(__name__, {
    "build": ("build_model", "load_encoder"),
    "endpoint": ("EndpointModel",),
    "openclip": ("Encoder",),
    "preprocessing": ("PREPROCESSING_MODES", "Preprocessing", "get_preprocessing_mode"),
    "registry": ("MODELS", "PINNED_REVISIONS", "ModelLoadError", "ModelUnavailableError", "list_models",
                 "register_model", "resolve_encoder", "resolve_model"),
    "spec": ("ImageTextEncoder", "Model", "ModelKind", "ModelSpec", "model_capabilities", "model_kind"),
    "text": ("class_text_embeddings", "text_cache_key"),
})
