"""The demo model's card: the checkpoint's README, which says what the model is and plainly what it is not.

Why it exists: a checkpoint travels without its code; the card, written from the training record, tells
whoever finds it that its numbers describe a synthetic world only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cladebench.demo.model.config import HELD_OUT_DRAW_SEED, DemoModelConfig, training_draw_seed

if TYPE_CHECKING:
    from cladebench.synthetic import World


def _describe_vision(config: DemoModelConfig) -> str:
    if config.vision_tower == "resnet":
        return f"ModifiedResNet, {config.vision_layers} block(s) per stage, width {config.vision_width}"
    return f"ViT, {config.vision_layers} layers x width {config.vision_width}, {config.patch_size} px patches"


def model_card(config: DemoModelConfig, world: World, record: dict[str, Any]) -> str:
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
        f"{config.warmup} warm-up steps and cosine decay, open_clip `ClipLoss`, seed {config.seed}."
        + ("" if config.stop_after is None else
           f" **An early checkpoint**: stopped after step {config.stop_after} of the {config.steps}."),
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


