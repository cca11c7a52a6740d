"""The demo model's training loop: open_clip's ``CLIP`` and ``ClipLoss`` on rendered photos, deterministic.

Why it exists: the loop (AdamW with open_clip's decay rule, warm-up and cosine decay, gradient clipping,
the temperature clamp) and the two speed-ups it needs on a CPU (captions tokenized once, each caption's
text run only as long as it is) in one place, apart from where its weights are saved.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from cladebench.demo.model.config import DemoModelConfig, trained_steps
from cladebench.demo.model.data import BatchPlan
from cladebench.errors import CladebenchError

if TYPE_CHECKING:
    from collections.abc import Callable

    import open_clip
    import torch

    from cladebench.synthetic import World


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


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, object]]:
    """open_clip's training recipe: no decay on gains, biases, the logit scale or 1-d parameters."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
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


def encode_text_trimmed(model: open_clip.CLIP, tokens: torch.Tensor, groups: int = 2) -> torch.Tensor:
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


def check_captions_fit(tokenizer: Callable[[list[str]], torch.Tensor], world: World, config: DemoModelConfig) -> None:
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


def _tokens(tokenizer: Callable[[list[str]], torch.Tensor], captions: list[str],
            cache: dict[str, torch.Tensor]) -> torch.Tensor:
    """Token rows of the captions, each caption tokenized once per training (CLIP's tokenizer cleans text
    with ftfy first, which took about a tenth of each training step)."""
    import torch

    new = sorted(set(captions) - cache.keys())
    if new:
        cache.update(zip(new, tokenizer(new), strict=True))
    return torch.stack([cache[text] for text in captions])


def train_weights(config: DemoModelConfig, world: World, pool: np.ndarray, pool_species: np.ndarray,
                   model_cfg: dict[str, object], preprocess_cfg: dict[str, object],
                   tokenizer: Callable[[list[str]], torch.Tensor],
                   progress: bool) -> tuple[dict[str, torch.Tensor], list[float]]:
    import open_clip
    import torch

    from cladebench.progress import progress_bar

    plan = BatchPlan(config, world, pool_species)
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
        # An early checkpoint stops here; the schedule (_lr_at) is still the full training's.
        bar = progress_bar(range(trained_steps(config)), desc="training demo model", unit="step",
                           enabled=progress)
        for step in bar:
            batch = plan.batch(step)
            for group in optimizer.param_groups:
                group["lr"] = _lr_at(step, config)
            images = pixels[torch.from_numpy(batch.pool_rows)].permute(0, 3, 1, 2).float().div_(255.0)
            images = ((images - mean) / std).contiguous(memory_format=torch.channels_last)
            tokens = _tokens(tokenizer, batch.captions, token_rows)
            image_features = model.encode_image(images, normalize=True)
            text_features = encode_text_trimmed(model, tokens)
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


