"""An image-only backbone, built: preprocessed pixels in, raw float32 vectors out, with its provenance.

What ``embed`` and every task on image vectors need of an encoder is small (``encode_images``, ``preprocessing``,
``dim``, ``device``, ``describe``), and the open_clip :class:`~cladebench.models.openclip.Encoder` offers it with a
text tower besides. :class:`ImageEncoder` offers the same for a network that has only an image tower; each library's
builder (:mod:`.timm_backbone`, :mod:`.hf_vision`) hands it the network and the one function that says which of the
network's outputs is the embedding (timm's pooled pre-logits feature, DINOv2's CLS token, ...), and that choice is
recorded in :meth:`ImageEncoder.describe`, beside the preprocessing, as every embedding column's provenance.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cladebench.models.openclip import AUTOCAST_DTYPES
from cladebench.models.preprocessing import Preprocessing
from cladebench.models.spec import ModelSpec
from cladebench.provenance import software_versions

if TYPE_CHECKING:
    import torch
    from PIL import Image


class ImageEncoder:
    """A loaded image-only model: images in, raw float32 embeddings out (no text tower)."""

    def __init__(self, network: torch.nn.Module, features: Callable[[torch.Tensor], torch.Tensor], *,
                 spec: ModelSpec, revision: str | None, preprocessing: Preprocessing, device: str, precision: str,
                 embedding: str, library: str) -> None:
        import torch

        self.network = network.eval()
        for parameter in self.network.parameters():
            parameter.requires_grad_(False)
        self._features = features
        self.spec: ModelSpec = spec
        """The resolved name the encoder was built from (an image-only kind)."""
        self.model_id: str = spec.id
        self.revision: str | None = revision
        self.preprocessing: Preprocessing = preprocessing
        self.device: str = device
        self.precision: str = precision
        self.embedding: str = embedding
        """Which output of the network is the embedding, in words (recorded)."""
        self.library: str = library
        dtype_name = AUTOCAST_DTYPES[precision]
        self._autocast_dtype = None if dtype_name is None else getattr(torch, dtype_name)
        self._transform: Callable[[Image.Image], torch.Tensor] | None = None
        height, width = preprocessing.size
        self.dim: int = int(self.encode_images(torch.zeros(1, 3, height, width)).shape[1])

    def __repr__(self) -> str:
        revision = f"@{self.revision[:12]}" if self.revision else ""
        return f"ImageEncoder({self.model_id}{revision}, dim={self.dim}, {self.library}, {self.device})"

    @contextlib.contextmanager
    def _inference(self) -> Iterator[None]:
        import torch

        device_type = self.device.split(":", 1)[0]
        autocast = (torch.autocast(device_type=device_type, dtype=self._autocast_dtype)
                    if self._autocast_dtype is not None else contextlib.nullcontext())
        with torch.inference_mode(), autocast:
            yield

    @property
    def transform(self) -> Callable[[Image.Image], torch.Tensor]:
        """``preprocessing.build()``, built once; for encoding images in this process."""
        if self._transform is None:
            self._transform = self.preprocessing.build()
        return self._transform

    def encode_images(self, pixels: torch.Tensor) -> np.ndarray:
        """Raw image embeddings, float32 (N, dim), of a batch of preprocessed pixels (N, 3, H, W)."""
        import torch

        if pixels.ndim != 4:
            raise ValueError(f"encode_images takes a batch (N, 3, H, W); got shape {tuple(pixels.shape)}")
        pixels = pixels.to(self.device, dtype=torch.float32, non_blocking=True)
        with self._inference():
            features = self._features(pixels)
        return features.float().reshape(features.shape[0], -1).cpu().numpy()

    def encode_pil(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Raw embeddings of PIL images, preprocessed here (convenient for a handful of images)."""
        import torch

        if not images:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_images(torch.stack([self.transform(image) for image in images]))

    def describe(self) -> dict[str, Any]:
        """Provenance of every embedding this encoder makes: model, revision, which output, preprocessing."""
        return {
            "model_id": self.model_id,
            "revision": self.revision,
            "alias": self.spec.alias,
            "source": self.spec.source,
            "kind": self.spec.kind,
            "library": self.library,
            "embedding": self.embedding,
            "dim": self.dim,
            "preprocessing": self.preprocessing.to_dict(),
            "precision": self.precision,
            "device": self.device,
            "software": software_versions((self.library,)),
        }


def own_or_chosen(own: Preprocessing, mode: str) -> Preprocessing:
    """The model's own preprocessing for the default mode (``openclip``: "the model's own"), else the chosen
    mode's (``tol``: a square without crop) at the model's own size, mean and std."""
    if mode == "openclip":
        return own
    return Preprocessing.from_model_config({"size": own.size, "mean": own.mean, "std": own.std}, mode)


__all__ = ["ImageEncoder", "own_or_chosen"]
