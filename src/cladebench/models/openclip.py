"""Contrastive encoders through open_clip: BioCLIP 1/2/2.5, OpenAI CLIP, BioTrove-CLIP, SigLIP, any checkpoint.

An :class:`Encoder` turns preprocessed pixels and strings into **raw** float32 vectors (normalise in
use, not in storage: norms carry information and a stored unit vector cannot be un-normalised). It
carries what provenance needs: model id, the revision actually loaded, preprocessing, precision,
device, the learned logit scale, and software versions (``describe``).

Loading differs from a plain ``open_clip.create_model_and_transforms`` call where that call is wrong
or slow for benchmarking:

- ``hf-hub:`` models are fetched at their pinned revision and loaded as ``local-dir:`` (open_clip's
  hub loader cannot take a revision), cache first, failing fast offline (see :mod:`.hub`).
- open_clip 3 loads OpenAI weights into ``ViT-B-16``/``ViT-L-14`` with nn.GELU and only warns that the
  weights were trained with QuickGELU; the embeddings come out subtly wrong. The pretrained tag's
  ``quick_gelu`` flag is honoured here.
- The revision recorded for a local checkpoint is a SHA-256 of its files, so a cache entry or a
  result never silently refers to a different checkpoint at the same path.

torch and open_clip are imported inside functions: importing :mod:`cladebench.models` stays cheap and
works without them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Self

import numpy as np

from cladebench.errors import CladebenchError, unknown_name
from cladebench.models import hub
from cladebench.models.backbones import EXPECTED, CheckpointLayoutError
from cladebench.models.preprocessing import Preprocessing
from cladebench.models.registry import ModelLoadError, ModelUnavailableError
from cladebench.models.spec import ModelSpec
from cladebench.models.tower import AUTOCAST_DTYPES, ImageTower
from cladebench.registry import Registry

if TYPE_CHECKING:
    import torch


class ClipModule(Protocol):
    """What an :class:`Encoder` uses of an open_clip model (a ``torch.nn.Module``; open_clip ships no types)."""

    logit_scale: torch.Tensor

    def eval(self) -> Self: ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...

    def encode_image(self, image: torch.Tensor) -> torch.Tensor: ...

    def encode_text(self, text: torch.Tensor) -> torch.Tensor: ...


_LOCAL_WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.pth")  # what open_clip's local-dir loader looks for


# --- devices and precision -----------------------------------------------------------------------


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _mps_available() -> bool:
    import torch

    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


DEVICE_PROBES: dict[str, Callable[[], bool]] = {"cuda": _cuda_available, "mps": _mps_available, "cpu": lambda: True}
"""Device types in the order ``auto`` tries them, each with a check that it is usable here."""

_FP16_DEVICES = ("cuda", "mps")  # CPU autocast has no float16 kernels worth using


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> cuda, then mps, then cpu; an explicit device must be available."""
    if device == "auto":
        return next(name for name, available in DEVICE_PROBES.items() if available())
    kind = device.split(":", 1)[0]
    if kind not in DEVICE_PROBES:
        raise unknown_name("device", device, [*DEVICE_PROBES, "auto"])
    if not DEVICE_PROBES[kind]():
        raise CladebenchError(f"device {device!r} is not available on this machine; use --device auto or cpu")
    return device


def check_precision(precision: str, device: str) -> None:
    """Refuse a precision the device cannot run (fp16 on CPU)."""
    if precision not in AUTOCAST_DTYPES:
        raise unknown_name("precision", precision, AUTOCAST_DTYPES)
    if precision == "fp16" and device.split(":", 1)[0] not in _FP16_DEVICES:
        raise CladebenchError(f"precision fp16 needs a GPU ({' or '.join(_FP16_DEVICES)}), not {device!r}; "
                              "use fp32 or bf16 on CPU")


# --- the encoder ---------------------------------------------------------------------------------


class Encoder(ImageTower):
    """A loaded contrastive model: images and texts in, raw float32 embeddings out.

    Build it with :func:`load_encoder`. ``encode_images`` takes pixels already transformed by
    ``preprocessing.build()`` (typically in DataLoader workers); ``encode_texts`` takes strings.
    """

    def __init__(self, model: ClipModule, tokenizer: Callable[[list[str]], torch.Tensor], *,
                 spec: ModelSpec, revision: str | None, preprocessing: Preprocessing, device: str,
                 precision: str) -> None:
        self.model = self._prepare(model, spec=spec, revision=revision, preprocessing=preprocessing, device=device,
                                   precision=precision)
        self.tokenizer = tokenizer
        self.logit_scale: float = float(model.logit_scale.detach().float().exp().item())
        bias = getattr(model, "logit_bias", None)
        self.logit_bias: float | None = None if bias is None else float(bias.detach().float().item())
        """SigLIP's learned bias (sigmoid loss); ``None`` for softmax-trained CLIP models."""
        self.dim: int = self._output_dim()

    def _output_dim(self) -> int:
        visual_dim = getattr(getattr(self.model, "visual", None), "output_dim", None)
        if isinstance(visual_dim, int) and visual_dim > 0:
            return visual_dim
        return int(self.encode_texts([""]).shape[1])  # towers without the attribute: ask the model

    def __repr__(self) -> str:
        revision = f"@{self.revision[:12]}" if self.revision else ""
        return (f"Encoder({self.model_id}{revision}, dim={self.dim}, {self.preprocessing.mode}, "
                f"{self.precision}, {self.device})")

    def _image_features(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model.encode_image(pixels)

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """Raw text embeddings, float32 (len(texts), dim), encoded ``batch_size`` strings at a time."""
        if isinstance(texts, str):
            raise TypeError("encode_texts takes a sequence of strings, not one string")
        texts = list(texts)
        batches = []
        for start in range(0, len(texts), batch_size):
            tokens = self.tokenizer(texts[start:start + batch_size]).to(self.device)
            with self._inference():
                batches.append(self.model.encode_text(tokens).float().cpu().numpy())
        if not batches:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        return np.concatenate(batches).astype(np.float32, copy=False)

    def _described_scores(self) -> dict[str, object]:
        """A contrastive model records its learned logit scale and bias (scores of images against texts)."""
        return {"logit_scale": self.logit_scale, "logit_bias": self.logit_bias}


# --- from spec to open_clip arguments ------------------------------------------------------------


@dataclass(frozen=True)
class OpenClipLoad:
    """The arguments ``open_clip.create_model`` gets for one spec, once files are local."""

    model_name: str
    """Architecture name, or ``local-dir:PATH``."""
    pretrained: str | None
    """Local weights file or an open_clip tag; ``None`` for ``local-dir:``."""
    revision: str | None
    """What was actually loaded: a Hub commit, or ``sha256:...`` of local files."""
    options: dict[str, object] = field(default_factory=dict)
    """Extra ``create_model`` keywords (``force_quick_gelu``, ``force_preprocess_cfg``)."""


Fetcher = Callable[[ModelSpec], OpenClipLoad]

FETCHERS: Registry[Fetcher] = Registry("model source")
"""Registry: spec source (``hf-hub``, ``local-dir``, ``open_clip``) -> how to make its files local."""


def fetcher(source: str) -> Callable[[Fetcher], Fetcher]:
    """Register how specs of one source are made loadable."""
    return FETCHERS.register(source)


def files_digest(paths: Sequence[Path]) -> str:
    """``sha256:<hex>`` over the names and bytes of files: the revision of a checkpoint with no commit."""
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.name):
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 22):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()


@fetcher("hf-hub")
def _fetch_hf_hub(spec: ModelSpec) -> OpenClipLoad:
    folder, commit = hub.fetch_snapshot(str(spec.hub_repo), spec.revision)
    return OpenClipLoad(model_name=f"local-dir:{folder}", pretrained=None, revision=commit)


@fetcher("local-dir")
def _fetch_local_dir(spec: ModelSpec) -> OpenClipLoad:
    assert spec.open_clip_name is not None  # the fetcher is chosen by the name's form
    folder = Path(spec.open_clip_name.removeprefix("local-dir:"))
    if folder.is_dir() and not (folder / hub.CONFIG_NAME).is_file():  # a folder, but no library's that we read
        raise CheckpointLayoutError(f"model {spec.id}: {folder} is no model folder cladebench reads; expected "
                                    f"{EXPECTED}")
    if not (folder / hub.CONFIG_NAME).is_file():
        raise ModelLoadError(f"model {spec.id}: no {hub.CONFIG_NAME} in {folder} (is it an open_clip checkpoint?)")
    weights = sorted({p for pattern in _LOCAL_WEIGHT_GLOBS for p in folder.glob(pattern)})
    if not weights:
        raise ModelLoadError(f"model {spec.id}: no weights file ({', '.join(_LOCAL_WEIGHT_GLOBS)}) in {folder}")
    revision = spec.revision or files_digest([folder / hub.CONFIG_NAME, *weights])
    return OpenClipLoad(model_name=spec.open_clip_name, pretrained=None, revision=revision)


def _ensure_architecture(architecture: str, pretrained: str | None) -> None:
    """Make an architecture known to open_clip, registering a ``<architecture>.json`` beside the weights."""
    import open_clip

    if architecture in open_clip.list_models():
        return
    if pretrained is not None:
        beside = Path(pretrained).with_name(f"{architecture}.json")
        if beside.is_file():
            open_clip.add_model_config(beside)
            if architecture in open_clip.list_models():
                return
    raise unknown_name("open_clip architecture", architecture, open_clip.list_models())


def _tag_preprocess(tag_config: dict[str, object]) -> dict[str, object]:
    keys = ("mean", "std", "interpolation", "resize_mode")
    return {k: tag_config[k] for k in keys if tag_config.get(k) is not None}


@fetcher("open_clip")
def _fetch_open_clip(spec: ModelSpec) -> OpenClipLoad:
    import open_clip
    from open_clip.pretrained import get_pretrained_cfg

    architecture, pretrained = spec.open_clip_name, str(spec.pretrained)
    assert architecture is not None  # the fetcher is chosen by the name's form
    if Path(pretrained).is_absolute():
        if not Path(pretrained).is_file():
            raise ModelLoadError(f"model {spec.id}: weights file {pretrained} does not exist")
        _ensure_architecture(architecture, pretrained)
        return OpenClipLoad(architecture, pretrained, spec.revision or files_digest([Path(pretrained)]))

    _ensure_architecture(architecture, None)
    tag_config = get_pretrained_cfg(architecture, pretrained)
    if not tag_config:
        raise unknown_name(f"pretrained tag of {architecture}", pretrained,
                           open_clip.list_pretrained_tags_by_model(architecture))
    options: dict[str, object] = {
        # open_clip 3 only warns when a QuickGELU-trained tag (OpenAI's) meets a GELU config; fix it.
        "force_quick_gelu": bool(tag_config.get("quick_gelu", False)),
        "force_preprocess_cfg": _tag_preprocess(tag_config),
    }
    hub_path = tag_config.get("hf_hub", "")
    if not hub_path:  # URL-only tags: open_clip downloads and checks them itself
        return OpenClipLoad(architecture, pretrained, spec.revision, options)
    repo, filename = hub_path.rstrip("/"), None
    if not hub_path.endswith("/"):
        repo, filename = hub_path.rsplit("/", 1)
    candidates = (filename,) if filename else hub.WEIGHT_NAMES
    try:
        path, commit = hub.fetch_file(repo, candidates, spec.revision)
    except ModelUnavailableError as error:
        raise ModelUnavailableError(f"{spec.id}: weights from {error}") from error
    return OpenClipLoad(architecture, str(path), commit or spec.revision, options)


def _require_torch(spec: ModelSpec) -> None:
    """Fail before any download when torch or open_clip is missing (find_spec costs no import)."""
    import importlib.util

    missing = [name for name in ("torch", "open_clip") if importlib.util.find_spec(name) is None]
    if missing:
        raise CladebenchError(f"loading {spec.id} needs {' and '.join(missing)}; "
                              "install them with: pip install 'cladebench[clip]'")


def load_open_clip(spec: ModelSpec, *, preprocessing: str = "openclip", device: str = "auto",
                   precision: str = "fp32") -> Encoder:
    """Make the spec's files local, build the model with open_clip, and wrap it as an :class:`Encoder`.

    Cheap checks and the file fetch come before the torch import, so a bad name or a missing
    offline checkpoint fails in well under a second.
    """
    from cladebench.models.preprocessing import get_preprocessing_mode

    mode = get_preprocessing_mode(preprocessing)
    if precision not in AUTOCAST_DTYPES:
        raise unknown_name("precision", precision, AUTOCAST_DTYPES)
    if spec.kind != "clip":
        raise ModelLoadError(f"model {spec.id} is of kind {spec.kind!r}: open_clip builds image-text encoders only")
    _require_torch(spec)
    load = FETCHERS.get_named(spec.source)(spec)

    import open_clip

    device = resolve_device(device)
    check_precision(precision, device)
    try:
        model = open_clip.create_model(load.model_name, pretrained=load.pretrained, device=device,
                                       precision="fp32", require_pretrained=True, **load.options)
        tokenizer = open_clip.get_tokenizer(load.model_name)
    except ImportError as error:
        raise CladebenchError(f"model {spec.id} needs a package that is not installed: {error}") from error
    except Exception as error:  # open_clip raises bare RuntimeError/ValueError/FileNotFoundError
        raise ModelLoadError(f"model {spec.id} (revision {load.revision}) could not be built by open_clip: "
                             f"{type(error).__name__}: {error}") from error
    model_preprocess = open_clip.get_model_preprocess_cfg(model)  # config, tag and overrides merged
    return Encoder(model, tokenizer, spec=spec, revision=load.revision,
                   preprocessing=mode.from_model_config(model_preprocess), device=device, precision=precision)
