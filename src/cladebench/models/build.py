"""From a resolved :class:`~cladebench.models.spec.ModelSpec` to a model a task can use: the lazy second step.

Resolving a name (:func:`cladebench.models.registry.resolve_model`) is cheap and checks everything a string can
say; building is where weights are read (an encoder: torch and open_clip, imported only then) or where an
endpoint stand-in is made (nothing is asked until a task asks). Which builder runs is decided by the spec's
``kind``, through :data:`MODEL_BUILDERS`, not by looking at the name again.
"""

from __future__ import annotations

from collections.abc import Callable

from cladebench.models.endpoint import EndpointModel
from cladebench.models.openclip import load_open_clip
from cladebench.models.spec import Model, ModelSpec
from cladebench.registry import Registry

ModelBuilder = Callable[..., Model]

MODEL_BUILDERS: Registry[ModelBuilder] = Registry("model kind")
"""Registry: model kind (``clip``, ``vlm``) -> function of the spec and build options that makes the model."""


@MODEL_BUILDERS.register("clip")
def _build_encoder(spec: ModelSpec, *, device: str = "auto", precision: str = "fp32",
                   preprocessing: str = "openclip") -> Model:
    return load_open_clip(spec, preprocessing=preprocessing, device=device, precision=precision)


@MODEL_BUILDERS.register("vlm")
def _build_endpoint(spec: ModelSpec, **_options: object) -> Model:
    # Device, precision and preprocessing are the server's business; nothing here loads or asks.
    return EndpointModel(spec)


def build_model(spec: ModelSpec, *, device: str = "auto", precision: str = "fp32",
                preprocessing: str = "openclip") -> Model:
    """The model a spec means, ready to use: an open_clip encoder (``clip``) or an endpoint stand-in (``vlm``)."""
    return MODEL_BUILDERS.get_named(spec.kind)(spec, device=device, precision=precision, preprocessing=preprocessing)


__all__ = ["MODEL_BUILDERS", "build_model"]
