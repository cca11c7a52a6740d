"""From a resolved :class:`~cladebench.models.spec.ModelSpec` to a model a task can use: the lazy second step.

Resolving a name (:func:`cladebench.models.registry.resolve_model`) is cheap and checks everything a string can
say; building is where weights are read (an encoder: torch and open_clip, timm or transformers, imported only
then) or where an endpoint stand-in is made (nothing is asked until a task asks). Which builder runs is decided by
the spec's ``kind``, through :data:`MODEL_BUILDERS`, not by looking at the name again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cladebench.models.endpoint import EndpointModel
from cladebench.models.hf_vision import load_hf_vision
from cladebench.models.openclip import load_open_clip
from cladebench.models.registry import require_texts, resolve_encoder
from cladebench.models.spec import Model, ModelSpec
from cladebench.models.timm_backbone import load_timm
from cladebench.registry import Registry

ModelBuilder = Callable[..., Model]

MODEL_BUILDERS: Registry[ModelBuilder] = Registry("model kind")
"""Registry: model kind (``clip``, ``vlm``, ``timm``, ``hf-vision``) -> function of the spec and build options
that makes the model."""


@MODEL_BUILDERS.register("clip")
def _build_encoder(spec: ModelSpec, *, device: str = "auto", precision: str = "fp32",
                   preprocessing: str = "openclip") -> Model:
    return load_open_clip(spec, preprocessing=preprocessing, device=device, precision=precision)


@MODEL_BUILDERS.register("timm")
def _build_timm(spec: ModelSpec, *, device: str = "auto", precision: str = "fp32",
                preprocessing: str = "openclip") -> Model:
    return load_timm(spec, preprocessing=preprocessing, device=device, precision=precision)


@MODEL_BUILDERS.register("hf-vision")
def _build_hf_vision(spec: ModelSpec, *, device: str = "auto", precision: str = "fp32",
                     preprocessing: str = "openclip") -> Model:
    return load_hf_vision(spec, preprocessing=preprocessing, device=device, precision=precision)


@MODEL_BUILDERS.register("vlm")
def _build_endpoint(spec: ModelSpec, **_options: object) -> Model:
    # Device, precision and preprocessing are the server's business; nothing here loads or asks.
    return EndpointModel(spec)


def build_model(spec: ModelSpec, *, device: str = "auto", precision: str = "fp32",
                preprocessing: str = "openclip") -> Model:
    """The model a spec means, ready to use: an open_clip encoder (``clip``), an image-only backbone (``timm``,
    ``hf-vision``) or an endpoint stand-in (``vlm``)."""
    return MODEL_BUILDERS.get_named(spec.kind)(spec, device=device, precision=precision, preprocessing=preprocessing)


def load_encoder(name: str, *, revision: str | None = None, preprocessing: str = "openclip",
                 device: str = "auto", precision: str = "fp32", texts: str | None = None) -> Any:
    """Resolve a model name that embeds images (alias, ``hf-hub:``, ``local-dir:``, ``timm:``, ``NAME/PRETRAINED``)
    and build it: an open_clip :class:`~cladebench.models.openclip.Encoder` or an image-only
    :class:`~cladebench.models.image_encoder.ImageEncoder`.

    ``revision`` overrides the alias's pin; ``preprocessing`` is ``openclip`` (the model's own) or ``tol``;
    ``device`` ``auto`` picks cuda, then mps, then cpu; ``precision`` is ``fp32``, ``fp16`` (GPU only) or ``bf16``.
    ``texts``: what the caller will embed texts for (``text search``), when it will: a model without a text tower
    is then refused before it loads (:func:`~cladebench.models.registry.require_texts`).
    """
    spec = resolve_encoder(name, revision)
    if texts is not None:
        require_texts(spec, texts)
    return build_model(spec, device=device, precision=precision, preprocessing=preprocessing)


__all__ = ["MODEL_BUILDERS", "build_model", "load_encoder"]
