"""Tiny image-only backbones with random weights, saved as their libraries save them, and the libraries' own
vectors of a few images: what tests of timm and transformers models compare ``cladebench embed`` against."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

TIMM_ARCH = "vit_tiny_patch16_224"
"""A timm architecture made tiny by its arguments (2 blocks, width 48, 32 px, 8 px patches)."""


def write_tiny_timm(folder: Path, seed: int = 0) -> Path:
    """A random-weight timm ViT saved with ``timm.models.save_for_hf`` (config.json + model.safetensors)."""
    import timm
    import torch
    from timm.models import save_for_hf

    torch.manual_seed(seed)
    model = timm.create_model(TIMM_ARCH, pretrained=False, num_classes=0, img_size=32, patch_size=8, depth=2,
                              embed_dim=48, num_heads=2)
    save_for_hf(model, str(folder), safe_serialization=True)
    return folder


def write_tiny_dinov2(folder: Path, seed: int = 0) -> Path:
    """A random-weight DINOv2 saved with ``save_pretrained``, with a BitImageProcessor beside it (resize to 64,
    crop 56)."""
    import torch
    from transformers import BitImageProcessor, Dinov2Config, Dinov2Model

    torch.manual_seed(seed)
    model = Dinov2Model(Dinov2Config(hidden_size=48, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=96, image_size=56, patch_size=14))
    model.save_pretrained(str(folder))
    BitImageProcessor(size={"shortest_edge": 64}, crop_size={"height": 56, "width": 56}).save_pretrained(str(folder))
    return folder


def _pil(images: dict[str, bytes]) -> dict[str, object]:
    from PIL import Image

    return {key: Image.open(io.BytesIO(data)).convert("RGB") for key, data in images.items()}


def timm_vectors(folder: Path, images: dict[str, bytes]) -> dict[str, np.ndarray]:
    """timm's own pre-logits features of ``images``, preprocessed by timm's own eval transform."""
    import timm
    import torch

    model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=model))
    pil = _pil(images)
    with torch.no_grad():
        batch = torch.stack([transform(image) for image in pil.values()])
        features = model.forward_head(model.forward_features(batch), pre_logits=True).numpy()
    return dict(zip(pil, features, strict=True))


def dinov2_vectors(folder: Path, images: dict[str, bytes]) -> dict[str, np.ndarray]:
    """transformers' own CLS token of the last hidden state, the images preprocessed by the saved processor."""
    import torch
    from transformers import AutoImageProcessor, AutoModel

    model = AutoModel.from_pretrained(str(folder)).eval()
    processor = AutoImageProcessor.from_pretrained(str(folder))
    pil = _pil(images)
    with torch.no_grad():
        out = model(**processor(images=list(pil.values()), return_tensors="pt"))
    return dict(zip(pil, out.last_hidden_state[:, 0].numpy(), strict=True))


def cosines(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> list[float]:
    """The cosine of each key's two vectors."""
    return [float(np.dot(got[k], want[k]) / (np.linalg.norm(got[k]) * np.linalg.norm(want[k]))) for k in want]
