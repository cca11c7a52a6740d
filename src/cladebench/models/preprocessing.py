"""Image preprocessing as plain values: what a run records, and what a DataLoader worker rebuilds.

The same checkpoint gives different embeddings under different preprocessing, and published numbers
differ on exactly this: open_clip resizes the shortest side and centre-crops, while BioCLIP's
TreeOfLife evaluation and pybioclip squash the whole image to a square (no crop, so nothing at the
border is lost). So preprocessing is part of an embedding's identity, recorded next to the model id.

:class:`Preprocessing` holds only numbers and strings, so it pickles into a worker process, goes into
JSON provenance unchanged, and :meth:`Preprocessing.build` makes the torch transform where it runs.
Modes live in :data:`PREPROCESSING_MODES`; each knows how to derive its settings from the model's
own open_clip preprocess config and how to build the transform. An image-only backbone's own preprocessing is
its library's transform rebuilt from plain values (:attr:`Preprocessing.config`): ``timm`` (the data config of
``timm.data.resolve_data_config``) and ``transformers`` (the saved image processor's settings).

Example:
    >>> cfg = {"size": (224, 224), "mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5),
    ...        "interpolation": "bicubic", "resize_mode": "shortest"}
    >>> Preprocessing.from_model_config(cfg, "tol").to_dict()["resize_mode"]
    'squash'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cladebench.registry import Registry

if TYPE_CHECKING:
    import torch
    from PIL import Image

    ImageTransform = Callable[[Image.Image], torch.Tensor]


@dataclass(frozen=True)
class Preprocessing:
    """How an RGB image becomes the model's input tensor; plain values only (picklable, JSON-ready)."""

    mode: str
    """A registered mode (see :data:`PREPROCESSING_MODES`): ``openclip`` or ``tol``."""
    size: tuple[int, int]
    """Output height and width in pixels."""
    mean: tuple[float, float, float]
    """Per-channel mean subtracted after scaling pixels to [0, 1]."""
    std: tuple[float, float, float]
    """Per-channel standard deviation divided by after subtracting the mean."""
    interpolation: str = "bicubic"
    """Resampling filter of the resize: ``bicubic`` or ``bilinear``."""
    resize_mode: str = "shortest"
    """open_clip's resize modes: ``shortest`` (resize shortest side, centre crop), ``longest`` (fit, pad),
    ``squash`` (resize both sides, aspect ratio not kept)."""
    fill_color: int = 0
    """Padding value for ``longest``."""
    config: Mapping[str, Any] | None = field(default=None, hash=False)
    """The library's own settings, JSON values, for the modes that rebuild a library's transform (``timm``:
    its data config; ``transformers``: the image processor's class and settings); None for the others."""

    def __post_init__(self) -> None:
        get_preprocessing_mode(self.mode)  # an unknown mode fails here, not later in a worker
        size = (self.size, self.size) if isinstance(self.size, int) else tuple(int(s) for s in self.size)
        if len(size) != 2 or min(size) <= 0:
            raise ValueError(f"preprocessing size must be (height, width) > 0, got {self.size!r}")
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "mean", tuple(float(m) for m in self.mean))
        object.__setattr__(self, "std", tuple(float(s) for s in self.std))

    @classmethod
    def from_model_config(cls, config: Mapping[str, object], mode: str = "openclip") -> Preprocessing:
        """The given mode's preprocessing for a model whose open_clip preprocess config is ``config``."""
        return get_preprocessing_mode(mode).from_model_config(config)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (tuples become lists); ``config`` only when there is one, so the preprocessing an
        open_clip column recorded before it existed reads the same."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
                if not (k == "config" and v is None)}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Preprocessing:
        """Inverse of :meth:`to_dict`, for reading provenance back."""
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
                                  if k in names and k != "config"}
        config = data.get("config")
        return cls(**values, config=config if isinstance(config, Mapping) else None)

    def build(self) -> ImageTransform:
        """The transform PIL image -> float tensor (3, height, width); imports torchvision here, not above."""
        return get_preprocessing_mode(self.mode).build(self)


@dataclass(frozen=True)
class PreprocessingMode:
    """A registered way to preprocess: how to derive settings from a model, and how to build the transform."""

    name: str
    """Registry key, recorded in :attr:`Preprocessing.mode`."""
    description: str
    """One line for ``--help`` and reports."""
    from_model_config: Callable[[Mapping[str, object]], Preprocessing]
    """Settings of this mode for a model, from the model's open_clip preprocess config."""
    build: Callable[[Preprocessing], ImageTransform]
    """The transform for given settings."""


PREPROCESSING_MODES: Registry[PreprocessingMode] = Registry("preprocessing mode")
"""Registry of preprocessing modes: name -> :class:`PreprocessingMode`."""


def preprocessing_mode(name: str, description: str, build: Callable[[Preprocessing], ImageTransform]
                       ) -> Callable[[Callable[[Mapping[str, object]], Preprocessing]],
                                     Callable[[Mapping[str, Any]], Preprocessing]]:
    """Register a mode: decorate the function that derives its settings from a model's preprocess config."""

    def register(from_model: Callable[[Mapping[str, object]], Preprocessing]
                 ) -> Callable[[Mapping[str, object]], Preprocessing]:
        PREPROCESSING_MODES.add(name, PreprocessingMode(name, description, from_model, build))
        return from_model

    return register


def get_preprocessing_mode(name: str) -> PreprocessingMode:
    """Look up a mode; an unknown name lists the known ones and the closest."""
    return PREPROCESSING_MODES.get_named(name)


def _size(config: Mapping[str, Any]) -> tuple[int, int]:
    size = config.get("size", 224)
    return (int(size), int(size)) if isinstance(size, int) else (int(size[0]), int(size[1]))


_OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
_OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def _to_rgb(image: Image.Image) -> Image.Image:
    """Grayscale, CMYK and palette images arrive too; the models expect three channels."""
    return image if image.mode == "RGB" else image.convert("RGB")


def _build_openclip(p: Preprocessing) -> ImageTransform:
    from open_clip.transform import image_transform
    from torchvision.transforms import Compose

    # open_clip's own eval transform, so embeddings match what open_clip users get.
    transform = image_transform(
        p.size, is_train=False, mean=p.mean, std=p.std, resize_mode=p.resize_mode,
        interpolation=p.interpolation, fill_color=p.fill_color,
    )
    return Compose([_to_rgb, transform])


def _build_tol(p: Preprocessing) -> ImageTransform:
    from torchvision.transforms import Compose, InterpolationMode, Normalize, Resize, ToTensor

    interpolation = {"bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC}
    # pybioclip's order: to tensor first, then an antialiased resize of the tensor to the square.
    return Compose([
        _to_rgb,
        ToTensor(),
        Resize(p.size, interpolation=interpolation[p.interpolation], antialias=True),
        Normalize(mean=p.mean, std=p.std),
    ])


@preprocessing_mode("openclip", "the model's own open_clip transform: resize the shortest side, centre crop",
                    _build_openclip)
def _openclip_from_model(config: Mapping[str, Any]) -> Preprocessing:
    return Preprocessing(
        mode="openclip", size=_size(config), mean=tuple(config.get("mean", _OPENAI_MEAN)),
        std=tuple(config.get("std", _OPENAI_STD)), interpolation=config.get("interpolation", "bicubic"),
        resize_mode=config.get("resize_mode", "shortest"), fill_color=int(config.get("fill_color", 0)),
    )


@preprocessing_mode("tol", "TreeOfLife / pybioclip: resize the whole image to a square, no crop",
                    _build_tol)
def _tol_from_model(config: Mapping[str, Any]) -> Preprocessing:
    # pybioclip: ToTensor -> Resize((224, 224), antialias=True) (bilinear) -> Normalize; the model's
    # own size, mean and std stand in for pybioclip's constants, which are BioCLIP's.
    return Preprocessing(
        mode="tol", size=_size(config), mean=tuple(config.get("mean", _OPENAI_MEAN)),
        std=tuple(config.get("std", _OPENAI_STD)), interpolation="bilinear", resize_mode="squash",
    )


def _json_values(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` as JSON reads it back (tuples as lists), so a recorded preprocessing equals a described one."""
    import json

    return json.loads(json.dumps(dict(config), default=str))


def _build_timm(p: Preprocessing) -> ImageTransform:
    from timm.data import create_transform
    from torchvision.transforms import Compose

    # timm's own eval transform from the model's data config: resize by crop_pct, centre crop, normalise.
    return Compose([_to_rgb, create_transform(**dict(p.config or {}), is_training=False)])


@preprocessing_mode("timm", "the timm model's own eval transform, from its data config (resize, crop_pct, crop)",
                    _build_timm)
def _timm_from_model(config: Mapping[str, Any]) -> Preprocessing:
    data = _json_values(config)
    size = data.get("input_size", [3, 224, 224])[-2:]
    return Preprocessing(mode="timm", size=(int(size[0]), int(size[1])), mean=tuple(data.get("mean", _OPENAI_MEAN)),
                         std=tuple(data.get("std", _OPENAI_STD)), interpolation=str(data.get("interpolation",
                                                                                              "bicubic")),
                         resize_mode="shortest", config=data)


class _ProcessorTransform:
    """A transformers image processor as a PIL -> tensor transform (its pixel values of one image)."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        import transformers

        settings = dict(settings)
        self.processor = getattr(transformers, str(settings.pop("class"))).from_dict(settings)

    def __call__(self, image: Image.Image) -> torch.Tensor:
        import torch

        pixels = self.processor(images=_to_rgb(image), return_tensors="np")["pixel_values"][0]
        return torch.from_numpy(pixels.astype("float32", copy=False))


def _build_transformers(p: Preprocessing) -> ImageTransform:
    return _ProcessorTransform(p.config or {})


@preprocessing_mode("transformers", "the transformers model's own saved image processor", _build_transformers)
def _transformers_from_model(config: Mapping[str, Any]) -> Preprocessing:
    data = _json_values(config)
    crop = data.get("crop_size") if data.get("do_center_crop") else None
    size = crop or data.get("size") or {}
    side = size.get("shortest_edge") or size.get("height") or 224
    height, width = (size.get("height", side), size.get("width", side)) if isinstance(size, dict) else (side, side)
    return Preprocessing(mode="transformers", size=(int(height), int(width)),
                         mean=tuple(data.get("image_mean") or _OPENAI_MEAN), std=tuple(data.get("image_std")
                                                                                       or _OPENAI_STD),
                         interpolation="bicubic" if data.get("resample") == 3 else "bilinear",
                         resize_mode="shortest" if crop else "squash", config=data)
