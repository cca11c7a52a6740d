"""Hugging Face transformers vision models as image encoders: ``save_pretrained`` folders and Hub repos.

The model is built with ``AutoModel`` and preprocessed by its own saved image processor (``AutoImageProcessor``,
recorded as plain values: mode ``transformers``). Which output is the embedding depends on the architecture family
(:data:`EMBEDDINGS`, by the config's ``model_type``):

- DINOv2 (``dinov2``, ``dinov2_with_registers``), ViT, DeiT: the CLS token of ``last_hidden_state`` (after the
  final layer norm), as DINOv2's linear-probe protocol reads it; ViT's ``pooler_output`` is a dense layer trained
  only for a classification head, often missing from a checkpoint, so it is not used.
- ConvNeXt (v1, v2), ResNet, SigLIP's and CLIP's vision towers alone: ``pooler_output`` (global pooling, or SigLIP's
  attention pooling head), flattened.
- SigLIP and CLIP checkpoints with both towers (``siglip``, ``clip``): ``get_image_features``, the image tower's
  embedding in the shared space.
- Any other family: ``pooler_output``; a model that has none is refused when built (exit 6), naming the family.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench.errors import CladebenchError
from cladebench.models import hub
from cladebench.models.backbones import checked_layout
from cladebench.models.failures import ModelLoadError
from cladebench.models.image_encoder import ImageEncoder, own_or_chosen
from cladebench.models.openclip import check_precision, files_digest, resolve_device
from cladebench.models.preprocessing import Preprocessing
from cladebench.models.spec import ModelSpec
from cladebench.models.timm_backbone import require_packages
from cladebench.models.tower import check_build_options

if TYPE_CHECKING:
    import torch

_CLS = "CLS token of last_hidden_state"
_POOLED = "pooler_output"
_IMAGE_FEATURES = "get_image_features (the image tower's embedding in the shared space)"

EMBEDDINGS: dict[str, str] = {
    "dinov2": _CLS, "dinov2_with_registers": _CLS, "vit": _CLS, "deit": _CLS,
    "convnext": _POOLED, "convnextv2": _POOLED, "resnet": _POOLED, "siglip_vision_model": _POOLED,
    "clip_vision_model": _POOLED, "siglip": _IMAGE_FEATURES, "clip": _IMAGE_FEATURES,
}
"""Config ``model_type`` -> which output is the embedding (see the module docstring); any other: pooler_output."""

_HUB_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


@contextlib.contextmanager
def _no_progress_bars() -> Iterator[None]:
    """transformers draws a bar for loading a few tensors; a command's output is cladebench's own."""
    from transformers.utils import logging

    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            logging.enable_progress_bar()


def _folder(spec: ModelSpec) -> tuple[Path, str | None]:
    """The local folder of the spec's model and image processor, and the revision loaded."""
    if spec.source == "hf-hub":
        repo = str(spec.hub_repo)
        config, commit = hub.fetch_file(repo, ("config.json",), spec.revision)
        for name in (("preprocessor_config.json",), _HUB_WEIGHTS):
            hub.fetch_file(repo, name, commit or spec.revision)
        return config.parent, commit
    folder = Path(spec.id.removeprefix("local-dir:"))
    layout = checked_layout(folder, f"model {spec.id}")
    files = [folder / layout.config, *(folder / name for name in layout.also),
             *(p for name in layout.weights for p in folder.glob(name))]
    return folder, spec.revision or files_digest(sorted(set(files)))


def _features(network: Any, model_type: str, embedding: str, spec: ModelSpec) -> Callable[[torch.Tensor],
                                                                                          torch.Tensor]:
    def features(pixels: torch.Tensor) -> torch.Tensor:
        if embedding == _IMAGE_FEATURES:
            out = network.get_image_features(pixel_values=pixels)
            return out if not hasattr(out, "pooler_output") else out.pooler_output
        out = network(pixel_values=pixels)
        if embedding == _CLS:
            return out.last_hidden_state[:, 0]
        pooled = getattr(out, "pooler_output", None)
        if pooled is None:
            raise ModelLoadError(f"model {spec.id}: a {model_type} model gives no pooler_output, and cladebench "
                                 f"knows no embedding for its family (known: {', '.join(sorted(EMBEDDINGS))})")
        return pooled

    return features


def load_hf_vision(spec: ModelSpec, *, preprocessing: str = "openclip", device: str = "auto",
                   precision: str = "fp32") -> ImageEncoder:
    """Make the spec's files local and build the model and its image processor as an :class:`ImageEncoder`."""
    check_build_options(preprocessing, precision)
    require_packages(spec, ("torch", "transformers"))
    folder, revision = _folder(spec)
    device = resolve_device(device)
    check_precision(precision, device)
    try:
        from transformers import AutoImageProcessor, AutoModel

        with _no_progress_bars():
            network = AutoModel.from_pretrained(str(folder)).to(device)
            processor = AutoImageProcessor.from_pretrained(str(folder))
    except ImportError as error:
        raise CladebenchError(f"model {spec.id} needs a package that is not installed: {error}") from error
    except Exception as error:  # transformers raises OSError/ValueError/KeyError on a folder it cannot read
        raise ModelLoadError(f"model {spec.id} (revision {revision}) could not be built by transformers: "
                             f"{type(error).__name__}: {error}") from error
    model_type = str(getattr(network.config, "model_type", ""))
    embedding = EMBEDDINGS.get(model_type, _POOLED)
    own = Preprocessing.from_model_config({"class": type(processor).__name__, **processor.to_dict()}, "transformers")
    return ImageEncoder(network, _features(network, model_type, embedding, spec), spec=spec, revision=revision,
                        preprocessing=own_or_chosen(own, preprocessing), device=device, precision=precision,
                        embedding=f"{model_type}: {embedding}", library="transformers")


__all__ = ["EMBEDDINGS", "load_hf_vision"]
