"""timm backbones as image encoders: ``timm:ARCH[.TAG]``, and timm's ``save_for_hf`` folders and Hub repos.

The embedding is the model's pooled pre-logits feature, ``forward_head(forward_features(x), pre_logits=True)``:
what timm's own feature extraction gives (``num_classes=0``), the pooled token or average the classifier would read,
before the classifier. Preprocessing is the model's own eval transform from ``timm.data.resolve_data_config``
(size, interpolation, crop_pct, mean, std), recorded as plain values (mode ``timm``).

Weights are read from files already local: a folder is loaded as timm loads ``local-dir:``; a pretrained tag's
weights are fetched from its Hub repo at the revision asked (cache first, failing at once offline with the line
naming model and revision, :mod:`.hub`) and handed to timm as a file, so timm itself never downloads.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from cladebench.errors import CladebenchError, UnknownNameError, unknown_name
from cladebench.models import hub
from cladebench.models.backbones import LAYOUTS, TIMM_PREFIX, checked_layout
from cladebench.models.failures import ModelLoadError, ModelUnavailableError
from cladebench.models.image_encoder import ImageEncoder, own_or_chosen
from cladebench.models.openclip import check_precision, files_digest, resolve_device
from cladebench.models.preprocessing import Preprocessing
from cladebench.models.spec import ModelSpec
from cladebench.models.tower import check_build_options

if TYPE_CHECKING:
    import torch


class _TimmNetwork(Protocol):
    """What the embedding takes of a timm model (``forward_head`` with ``pre_logits``: the pooled features)."""

    def forward_features(self, x: torch.Tensor) -> torch.Tensor: ...

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor: ...

EMBEDDING = "pooled pre-logits feature: forward_head(forward_features(x), pre_logits=True)"
_HUB_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def require_packages(spec: ModelSpec, packages: tuple[str, ...]) -> None:
    """Fail before any download when a package the kind needs is missing (find_spec imports nothing)."""
    missing = [name for name in packages if importlib.util.find_spec(name) is None]
    if missing:
        raise CladebenchError(f"loading {spec.id} needs {' and '.join(missing)}; install them with: "
                              f"pip install 'cladebench[{spec.traits.extra or 'vision'}]'")


def _folder(spec: ModelSpec) -> tuple[Path, str | None]:
    """The local folder of a folder or Hub spec, and the revision loaded (a Hub commit, or a digest of the files)."""
    if spec.source == "hf-hub":
        repo = str(spec.hub_repo)
        config, commit = hub.fetch_file(repo, ("config.json",), spec.revision)
        hub.fetch_file(repo, _HUB_WEIGHTS, commit or spec.revision)  # into the same snapshot folder
        return config.parent, commit
    folder = Path(spec.id.removeprefix("local-dir:"))
    layout = checked_layout(folder, f"model {spec.id}")
    files = [folder / layout.config, *(p for name in layout.weights for p in folder.glob(name))]
    return folder, spec.revision or files_digest(sorted(set(files)))


def _tag_weights(spec: ModelSpec, name: str) -> tuple[dict[str, Any], str | None]:
    """``create_model`` keywords that load a pretrained tag from a local file, and the revision loaded."""
    import timm
    from timm.models import get_pretrained_cfg, split_model_name_tag

    architecture, tag = split_model_name_tag(name)
    if not timm.is_model(architecture):
        raise unknown_architecture(spec, architecture)
    tags = timm.list_pretrained(f"{architecture}.*")
    if not tags:
        raise ModelLoadError(f"model {spec.id}: timm has no pretrained weights for {architecture}; save a model with "
                             "timm.models.save_for_hf and name its folder as local-dir:PATH")
    if tag and f"{architecture}.{tag}" not in tags:
        raise unknown_name(f"pretrained tag of {architecture}", tag, [t.split(".", 1)[1] for t in tags])
    config = get_pretrained_cfg(name)
    if config is None or not config.hf_hub_id:
        raise ModelLoadError(f"model {spec.id}: timm's tag has no Hugging Face Hub weights to fetch at a revision; "
                             "download them and load them as local-dir:PATH")
    filenames = (config.hf_hub_filename,) if config.hf_hub_filename else _HUB_WEIGHTS
    try:
        path, commit = hub.fetch_file(config.hf_hub_id.split("@")[0], filenames, spec.revision)
    except ModelUnavailableError as error:
        raise ModelUnavailableError(f"{spec.id}: weights from {error}") from error
    return {"pretrained": True, "pretrained_cfg_overlay": {"file": str(path)}}, commit or spec.revision


def load_timm(spec: ModelSpec, *, preprocessing: str = "openclip", device: str = "auto",
              precision: str = "fp32") -> ImageEncoder:
    """Make the spec's weights local and build the timm model as an :class:`ImageEncoder` (pre-logits feature)."""
    check_build_options(preprocessing, precision)
    require_packages(spec, ("torch", "timm"))
    name = spec.id.removeprefix(TIMM_PREFIX)
    if spec.source == "timm":
        options, revision = _tag_weights(spec, name)
        model_name = name
    else:
        folder, revision = _folder(spec)
        model_name, options = "local-dir:" + str(folder), {"pretrained": True}
    import timm

    device = resolve_device(device)
    check_precision(precision, device)
    try:
        network = timm.create_model(model_name, **options)
    except Exception as error:  # timm raises bare RuntimeError/KeyError/ValueError on a bad folder or weights
        raise _build_error(spec, revision, error) from error
    network = network.to(device)
    data_config = timm.data.resolve_data_config({}, model=network)
    own = Preprocessing.from_model_config(data_config, "timm")
    timm_network = cast(_TimmNetwork, network)
    return ImageEncoder(network, lambda x: timm_network.forward_head(timm_network.forward_features(x),
                                                                     pre_logits=True),
                        spec=spec, revision=revision, preprocessing=own_or_chosen(own, preprocessing),
                        device=device, precision=precision, embedding=EMBEDDING, library="timm")


def unknown_architecture(spec: ModelSpec, architecture: str, where: str = "") -> UnknownNameError:
    """An architecture timm does not know, with the closest it does (its 1,300 names are not listed)."""
    import timm

    close = difflib.get_close_matches(architecture, timm.list_models(), n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else "; see timm.list_models()"
    return UnknownNameError(f"model {spec.id}: unknown timm architecture {architecture!r}{where} (timm "
                            f"{timm.__version__}){hint}")


def _build_error(spec: ModelSpec, revision: str | None, error: Exception) -> CladebenchError:
    if "Unknown model" in str(error) or "Invalid model name" in str(error):
        folder = Path(spec.id.removeprefix("local-dir:"))
        config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
        architecture = str(config.get("architecture") or spec.id)
        return unknown_architecture(spec, architecture, f" named by {folder / 'config.json'}" if config else "")
    return ModelLoadError(f"model {spec.id} (revision {revision}) could not be built by timm: "
                          f"{type(error).__name__}: {error}; a folder must hold {LAYOUTS['timm'].expected}")


__all__ = ["EMBEDDING", "load_timm", "require_packages"]
