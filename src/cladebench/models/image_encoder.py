"""An image-only backbone, built: preprocessed pixels in, raw float32 vectors out, with its provenance.

What ``embed`` and every task on image vectors need of an encoder is small (``encode_images``, ``preprocessing``,
``dim``, ``device``, ``describe``), and the open_clip :class:`~cladebench.models.openclip.Encoder` offers it with a
text tower besides. :class:`ImageEncoder` offers the same for a network that has only an image tower; each library's
builder (:mod:`.timm_backbone`, :mod:`.hf_vision`) hands it the network and the one function that says which of the
network's outputs is the embedding (timm's pooled pre-logits feature, DINOv2's CLS token, ...), and that choice is
recorded in :meth:`ImageEncoder.describe`, beside the preprocessing, as every embedding column's provenance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cladebench.models.preprocessing import Preprocessing
from cladebench.models.spec import ModelSpec
from cladebench.models.tower import ImageTower
from cladebench.provenance import software_versions

if TYPE_CHECKING:
    import torch


class ImageEncoder(ImageTower):
    """A loaded image-only model: images in, raw float32 embeddings out (no text tower)."""

    def __init__(self, network: torch.nn.Module, features: Callable[[torch.Tensor], torch.Tensor], *,
                 spec: ModelSpec, revision: str | None, preprocessing: Preprocessing, device: str, precision: str,
                 embedding: str, library: str) -> None:
        import torch

        self.network = self._prepare(network, spec=spec, revision=revision, preprocessing=preprocessing,
                                     device=device, precision=precision)
        self._features = features
        self.embedding: str = embedding
        """Which output of the network is the embedding, in words (recorded)."""
        self.library: str = library
        height, width = preprocessing.size
        self.dim: int = int(self.encode_images(torch.zeros(1, 3, height, width)).shape[1])

    def __repr__(self) -> str:
        revision = f"@{self.revision[:12]}" if self.revision else ""
        return f"ImageEncoder({self.model_id}{revision}, dim={self.dim}, {self.library}, {self.device})"

    def _image_features(self, pixels: torch.Tensor) -> torch.Tensor:
        return self._features(pixels)

    def describe(self) -> dict[str, object]:
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
