"""What every built image tower shares: preprocessed pixels in, raw float32 vectors out, under one precision.

The open_clip :class:`~cladebench.models.openclip.Encoder` (with a text tower beside) and the image-only
:class:`~cladebench.models.image_encoder.ImageEncoder` (timm, transformers) differ only in which of the network's
outputs is the embedding; batching, autocast, inference mode and the built transform are decided here once.
torch is imported inside functions, as everywhere in :mod:`cladebench.models`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from cladebench.errors import unknown_name
from cladebench.models.preprocessing import Preprocessing
from cladebench.models.spec import ModelSpec
from cladebench.provenance import software_versions

if TYPE_CHECKING:
    import torch
    from PIL import Image

AUTOCAST_DTYPES: dict[str, str | None] = {"fp32": None, "fp16": "float16", "bf16": "bfloat16"}
"""Precision name -> torch autocast dtype (``None``: plain float32). Weights stay float32 in all three."""


def check_build_options(preprocessing: str, precision: str) -> None:
    """Refuse an unknown preprocessing mode or precision before any package or weight is looked for."""
    from cladebench.models.preprocessing import get_preprocessing_mode

    get_preprocessing_mode(preprocessing)
    if precision not in AUTOCAST_DTYPES:
        raise unknown_name("precision", precision, AUTOCAST_DTYPES)


NetworkT = TypeVar("NetworkT")
"""The network a tower holds: a ``torch.nn.Module`` typed as its own kind (open_clip ships no types)."""


class ImageTower:
    """A built network's image side. A subclass sets the attributes below (through :meth:`_prepare`) and says in
    :meth:`_image_features` which output of its network is the embedding."""

    spec: ModelSpec
    """The resolved name the encoder was built from."""
    model_id: str
    revision: str | None
    preprocessing: Preprocessing
    device: str
    precision: str
    dim: int

    def _prepare(self, network: NetworkT, *, spec: ModelSpec, revision: str | None,
                 preprocessing: Preprocessing, device: str, precision: str) -> NetworkT:
        """Set what every tower records and return ``network`` frozen for inference (eval mode, no gradients)."""
        import torch

        module = cast("torch.nn.Module", network).eval()
        for parameter in module.parameters():
            parameter.requires_grad_(False)
        self.spec = spec
        self.model_id = spec.id
        self.revision = revision
        self.preprocessing = preprocessing
        self.device = device
        self.precision = precision
        dtype_name = AUTOCAST_DTYPES[precision]
        self._autocast_dtype = None if dtype_name is None else getattr(torch, dtype_name)
        self._transform: Callable[[Image.Image], torch.Tensor] | None = None
        return network

    software_packages: tuple[str, ...] = ()
    """Packages whose versions :meth:`describe` records besides the ones that can change any number."""

    def _image_features(self, pixels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _described_tower(self) -> dict[str, object]:
        """What a kind records of itself between the source and the width (none by default)."""
        return {}

    def _described_scores(self) -> dict[str, object]:
        """What a kind records of its scores after the device (none by default)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """Provenance of every embedding this tower makes: model, revision, what the tower is, preprocessing,
        precision, device, its scores and software versions, in this order (run records are compared as text)."""
        return {
            "model_id": self.model_id,
            "revision": self.revision,
            "alias": self.spec.alias,
            "source": self.spec.source,
            **self._described_tower(),
            "dim": self.dim,
            "preprocessing": self.preprocessing.to_dict(),
            "precision": self.precision,
            "device": self.device,
            **self._described_scores(),
            "software": software_versions(self.software_packages),
        }

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
            features = self._image_features(pixels)
        return features.float().reshape(features.shape[0], -1).cpu().numpy()

    def encode_pil(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Raw embeddings of PIL images, preprocessed here (convenient for a handful of images)."""
        import torch

        if not images:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.encode_images(torch.stack([self.transform(image) for image in images]))


__all__ = ["AUTOCAST_DTYPES", "ImageTower", "check_build_options"]
