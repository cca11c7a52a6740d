"""Image-only backbones (timm, Hugging Face transformers vision models): which library a name or a folder means.

Why: the comparison the field runs most is an image-only backbone (DINOv2, a timm ViT or ConvNeXt) against a
BioCLIP-style model, by few-shot probing, retrieval and comparing embedding spaces. Such a model embeds images and
nothing else, so a task that needs a text tower must refuse it before anything loads; that is decided from the
spec's kind (:data:`~cladebench.models.spec.MODEL_KINDS`), and the kind from the name or the folder, here, with
no torch:

- ``timm:ARCH`` or ``timm:ARCH.TAG`` (``[@REVISION]`` of the weights' Hub repo): a timm architecture and its
  pretrained tag (the architecture's default tag when none is given);
- ``local-dir:PATH`` and ``hf-hub:ORG/NAME`` whose files are one of the layouts in :data:`LAYOUTS`: open_clip's
  (``open_clip_config.json``), timm's ``save_for_hf`` (``config.json`` naming an ``architecture``, and
  ``model.safetensors``) or transformers' ``save_pretrained`` (``config.json`` with a ``model_type``, the weights,
  and the image processor's ``preprocessor_config.json``).

A Hub repo's layout is read from the Hugging Face cache, or, online, from its small config files; offline with
nothing cached it stays an open_clip name, whose load then fails with the one line naming model and revision that
every uncached model gets. The builders are :mod:`.timm_backbone` and :mod:`.hf_vision`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cladebench.errors import SchemaError, UsageError
from cladebench.json_types import JsonObject
from cladebench.models.failures import ModelLoadError
from cladebench.models.spec import EMBEDS_IMAGES, KindTraits, ModelSpec, register_kind

TIMM_PREFIX = "timm:"

register_kind("timm", KindTraits(frozenset({EMBEDS_IMAGES}), ("torch", "timm"), "an image-only timm backbone",
                                 "vision"))
register_kind("hf-vision", KindTraits(frozenset({EMBEDS_IMAGES}), ("torch", "transformers"),
                                      "an image-only transformers vision model", "vision"))


class CheckpointLayoutError(SchemaError):
    """A model folder that is none of the layouts cladebench reads, or whose config names no weights (exit 4)."""


@dataclass(frozen=True)
class Layout:
    """One library's way of saving a model to a folder."""

    kind: str
    """The spec kind a folder of this layout resolves to."""
    config: str
    """The file that says a folder is of this layout."""
    recognises: Callable[[JsonObject], bool]
    """Whether the parsed :attr:`config` is this library's."""
    weights: tuple[str, ...]
    """Weight files, one of which the folder must hold (preferred first)."""
    also: tuple[str, ...]
    """Other files it must hold (a transformers model's image processor)."""
    expected: str
    """What a folder of this layout holds, for messages."""


LAYOUTS: dict[str, Layout] = {
    "open_clip": Layout("clip", "open_clip_config.json", lambda config: True,
                        ("open_clip_model.safetensors", "open_clip_pytorch_model.bin", "*.safetensors", "*.bin",
                         "*.pth"), (), "open_clip_config.json and its weights (open_clip)"),
    "timm": Layout("timm", "config.json", lambda config: isinstance(config.get("architecture"), str),
                   ("model.safetensors", "pytorch_model.bin"), (),
                   "config.json naming an architecture and model.safetensors (timm save_for_hf)"),
    "transformers": Layout("hf-vision", "config.json", lambda config: isinstance(config.get("model_type"), str),
                           ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json"),
                           ("preprocessor_config.json",),
                           "config.json with a model_type, model.safetensors and preprocessor_config.json "
                           "(transformers save_pretrained of the model and its image processor)"),
}
"""Library -> its folder layout, tried in this order (open_clip's config is the most specific)."""

EXPECTED = "; or ".join(layout.expected for layout in LAYOUTS.values())
"""Every layout's files, for a refusal of a folder that is none of them."""


def _read_config(path: Path) -> JsonObject | None:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def layout_of(folder: Path) -> str | None:
    """The library whose layout ``folder``'s config files are (None: no config file any library writes)."""
    for library, layout in LAYOUTS.items():
        config = _read_config(folder / layout.config) if (folder / layout.config).is_file() else None
        if config is not None and layout.recognises(config):
            return library
    return None


def checked_layout(folder: Path, what: str) -> Layout:
    """The layout of ``folder`` with its files all there; a folder that is none, or whose config names no weights,
    is a :class:`CheckpointLayoutError` naming the folder and what was expected."""
    if not folder.is_dir():
        raise ModelLoadError(f"{what}: no folder {folder}")
    library = layout_of(folder)
    if library is None:
        raise CheckpointLayoutError(f"{what}: {folder} is no model folder cladebench reads; expected {EXPECTED}")
    layout = LAYOUTS[library]
    if not any(next(folder.glob(name), None) is not None for name in layout.weights):
        raise CheckpointLayoutError(f"{what}: {folder / layout.config} names a {library} model but {folder} holds "
                                    f"no weights ({', '.join(layout.weights)})")
    for name in layout.also:
        if not (folder / name).is_file():
            raise CheckpointLayoutError(f"{what}: {folder} holds a {library} model but no {name}; expected "
                                        f"{layout.expected}")
    return layout


def folder_spec(path: str, revision: str | None) -> ModelSpec | None:
    """The spec of ``local-dir:PATH`` when the folder is a timm or transformers model; None otherwise (an open_clip
    folder, or one not there yet: the open_clip loader says what it lacks)."""
    library = layout_of(Path(path))
    if library is None or LAYOUTS[library].kind == "clip":
        return None
    return ModelSpec(id="local-dir:" + path, open_clip_name=None, pretrained=None, revision=revision,
                     source="local-dir", kind=LAYOUTS[library].kind)  # type: ignore[arg-type]


def hub_spec_of_backbone(repo: str, revision: str | None) -> ModelSpec | None:
    """The spec of ``hf-hub:ORG/NAME`` when the repo is a timm or transformers model (its config files read from
    the cache, or online from the Hub); None for an open_clip repo or one whose files cannot be read now."""
    from cladebench.models import hub

    folder = hub.config_files(repo, revision, tuple(dict.fromkeys(layout.config for layout in LAYOUTS.values())))
    library = None if folder is None else layout_of(folder)
    if library is None or LAYOUTS[library].kind == "clip":
        return None
    return ModelSpec(id="hf-hub:" + repo, open_clip_name=None, pretrained=None, revision=revision, source="hf-hub",
                     kind=LAYOUTS[library].kind)  # type: ignore[arg-type]


def timm_spec(name: str, revision: str | None) -> ModelSpec:
    """The spec of ``timm:ARCH[.TAG][@REVISION]``; whether timm knows the architecture is checked when it loads
    (timm needs torch)."""
    rest, _, in_name = name.removeprefix(TIMM_PREFIX).strip().partition("@")
    if in_name and revision and in_name != revision:
        raise ModelLoadError(f"model {name!r} names revision {in_name!r} but revision={revision!r} was passed")
    architecture = rest.strip()
    if not architecture or "/" in architecture or architecture.startswith("."):
        raise UsageError(f"model {name!r}: expected timm:ARCH or timm:ARCH.TAG (a timm architecture, as "
                          "timm.list_models() names it, and a pretrained tag), e.g. timm:vit_small_patch14_dinov2."
                          "lvd142m")
    return ModelSpec(id=TIMM_PREFIX + architecture, open_clip_name=None, pretrained=None,
                     revision=in_name or revision, source="timm", kind="timm")


__all__ = ["EXPECTED", "LAYOUTS", "TIMM_PREFIX", "CheckpointLayoutError", "Layout", "checked_layout", "folder_spec",
           "hub_spec_of_backbone", "layout_of", "timm_spec"]
