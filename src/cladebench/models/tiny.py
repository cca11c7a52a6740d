"""A tiny open_clip CLIP with seeded random weights, saved as a real checkpoint, for tests and the demo.

Real weights cannot be downloaded in tests, and building a model in memory would skip the code that
matters (reading a checkpoint folder, the tokenizer from its config, the preprocess config). So the
tiny model is written to disk in open_clip's own ``local-dir:`` layout and loaded back the way BioCLIP
is:

``<dir>/open_clip_config.json``
    ``{"model_cfg": ..., "preprocess_cfg": ...}``, as on the Hub.
``<dir>/open_clip_model.safetensors``
    The weights, under the first name open_clip's local-dir loader looks for.
``<dir>/<architecture>.json``
    The bare model config, so ``<architecture>/<dir>/open_clip_model.safetensors`` also loads (the
    ``NAME/PRETRAINED`` form registers a config found beside the weights).

About 3.5M parameters (most in the 49,408-token embedding); encodes ~1000 images/s on 2 CPU cores.
The same seed gives byte-identical weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from cladebench.paths import staged_folder

TINY_WEIGHTS_NAME = "open_clip_model.safetensors"
TINY_CONFIG_NAME = "open_clip_config.json"


def tiny_model_config(*, image_size: int = 64, patch_size: int = 8, width: int = 64, layers: int = 2,
                      embed_dim: int = 32, context_length: int = 32) -> dict[str, object]:
    """open_clip ``model_cfg`` of the tiny CLIP: ViT and text transformer of ``layers`` x ``width``."""
    return {
        "embed_dim": embed_dim,
        "vision_cfg": {"image_size": image_size, "layers": layers, "width": width, "patch_size": patch_size,
                       "head_width": 32},
        "text_cfg": {"context_length": context_length, "vocab_size": 49408, "width": width, "heads": width // 16,
                     "layers": layers},
    }


def tiny_architecture_name(model_cfg: dict[str, object]) -> str:
    """A name open_clip can register the config under, unique per config (so two sizes can coexist)."""
    digest = hashlib.sha256(json.dumps(model_cfg, sort_keys=True).encode()).hexdigest()[:8]
    return f"cladebench-tiny-{digest}"


def write_tiny_model(model_dir: str | Path, *, seed: int = 0, image_size: int = 64, patch_size: int = 8,
                     width: int = 64, layers: int = 2, embed_dim: int = 32, context_length: int = 32) -> Path:
    """Write a tiny open_clip checkpoint with seeded random weights into ``model_dir``; returns the folder.

    Load it with ``load_encoder(f"local-dir:{path}")``. Needs torch, open_clip and safetensors.
    """
    import open_clip
    import torch
    from safetensors.torch import save_file

    model_cfg = tiny_model_config(image_size=image_size, patch_size=patch_size, width=width, layers=layers,
                                  embed_dim=embed_dim, context_length=context_length)
    preprocess_cfg = {"size": image_size, "mean": list(open_clip.OPENAI_DATASET_MEAN),
                      "std": list(open_clip.OPENAI_DATASET_STD), "interpolation": "bicubic",
                      "resize_mode": "shortest"}
    with torch.random.fork_rng(devices=[]):  # seed locally; the caller's random stream is untouched
        torch.manual_seed(seed)
        model = open_clip.CLIP(**model_cfg)
    # Contiguous float32 copies: safetensors refuses views that share storage.
    state = {name: tensor.detach().to(torch.float32).contiguous().clone()
             for name, tensor in model.state_dict().items()}

    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    # One metadata key only: safetensors writes a map in hash order, and the file's bytes must not vary
    # (its SHA-256 is the revision recorded for a local checkpoint). The seed is in the JSON config.
    save_file(state, str(model_dir / TINY_WEIGHTS_NAME), metadata={"format": "pt"})
    config = {"model_cfg": model_cfg, "preprocess_cfg": preprocess_cfg,
              "cladebench": {"tiny": True, "seed": seed}}
    (model_dir / TINY_CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n")
    (model_dir / f"{tiny_architecture_name(model_cfg)}.json").write_text(json.dumps(model_cfg, indent=2) + "\n")
    return model_dir


def tiny_pretrained_id(model_dir: str | Path) -> str:
    """The ``NAME/PRETRAINED`` form of a tiny checkpoint written by :func:`write_tiny_model`."""
    model_dir = Path(model_dir).resolve()
    model_cfg = json.loads((model_dir / TINY_CONFIG_NAME).read_text())["model_cfg"]
    return f"{tiny_architecture_name(model_cfg)}/{model_dir / TINY_WEIGHTS_NAME}"


def tiny_model_id(cache_dir: str | Path | None = None, *, seed: int = 0, image_size: int = 64) -> str:
    """``local-dir:...`` of the tiny model, written once into the cache (``$CLADEBENCH_CACHE_DIR/models``).

    Written into a temporary folder and renamed into place, so concurrent test workers never see a
    half-written checkpoint.
    """
    if cache_dir is None:
        from cladebench.cache import cache_dir as default_cache_dir

        root = default_cache_dir("models")
    else:
        root = Path(cache_dir)
        root.mkdir(parents=True, exist_ok=True)
    target = root / f"tiny-clip-s{seed}-{image_size}px"
    if not (target / TINY_WEIGHTS_NAME).is_file():
        try:
            with staged_folder(target, tag="building") as staging:
                write_tiny_model(staging, seed=seed, image_size=image_size)
        except OSError:
            if not (target / TINY_WEIGHTS_NAME).is_file():  # not a lost race with another writer
                raise
    return f"local-dir:{target.resolve()}"
