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

The package's modules, one job each: :mod:`.config` (the config, the recipe's constants, the architecture
and the cache key), :mod:`.data` (the held-out split, captions and batches), :mod:`.photos` (drawing photos
in worker processes), :mod:`.training` (the training loop), :mod:`.checkpoint` (training into a checkpoint,
and the cache), :mod:`.card` (the model card) and :mod:`.evaluation` (held-out zero-shot through the
zero-shot task's code). This ``__init__`` presents their public API on purpose (``from
cladebench.demo.model import DemoModelConfig, demo_model_id``); the modules import each other directly.

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

from cladebench.demo.model.checkpoint import WRITER, demo_model_dir, demo_model_id, train_demo_model
from cladebench.demo.model.config import (
    DEFAULT_COARSE_RANK_WEIGHTS,
    DEFAULT_NAME_STYLES,
    DEFAULT_TEMPLATE_WEIGHTS,
    DEFAULT_TEMPLATES,
    EARLY_FRACTION,
    HELD_OUT_DRAW_SEED,
    HELD_OUT_EVERY,
    MODEL_CARD_NAME,
    RECIPE_VERSION,
    TRAINING_DRAW_OFFSET,
    TRAINING_RECORD_NAME,
    VISION_TOWERS,
    DemoModelConfig,
    architecture_name,
    cache_key,
    demo_world,
    early_config,
    model_configs,
    trained_steps,
    training_draw_seed,
    world_identity,
)
from cladebench.demo.model.data import (
    caption,
    held_out_observations,
    held_out_observer_ids,
    held_out_table,
    training_observations,
)
from cladebench.demo.model.evaluation import evaluate_zero_shot

__all__ = [
    "DEFAULT_COARSE_RANK_WEIGHTS",
    "DEFAULT_NAME_STYLES",
    "DEFAULT_TEMPLATES",
    "DEFAULT_TEMPLATE_WEIGHTS",
    "EARLY_FRACTION",
    "HELD_OUT_DRAW_SEED",
    "HELD_OUT_EVERY",
    "MODEL_CARD_NAME",
    "RECIPE_VERSION",
    "TRAINING_DRAW_OFFSET",
    "TRAINING_RECORD_NAME",
    "VISION_TOWERS",
    "WRITER",
    "DemoModelConfig",
    "architecture_name",
    "cache_key",
    "caption",
    "demo_model_dir",
    "demo_model_id",
    "demo_world",
    "early_config",
    "evaluate_zero_shot",
    "held_out_observations",
    "held_out_observer_ids",
    "held_out_table",
    "model_configs",
    "train_demo_model",
    "trained_steps",
    "training_draw_seed",
    "training_observations",
    "world_identity",
]
