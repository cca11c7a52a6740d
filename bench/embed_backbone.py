"""Images/s of ``cladebench embed`` with a timm ViT (an image-only backbone) against its pure forward pass.

Measured in one run, on the same images: **pure forward**, the encoder's ``encode_images`` (timm's
``forward_head(forward_features(x), pre_logits=True)``) on pixels decoded and preprocessed beforehand by the model's
own timm transform, the ceiling; and **embed**, the whole ``embed_dataset`` run on a fresh copy of the dataset
(reading from Lance, decoding in worker processes, staging, committing the column). The ratio embed / forward is
the figure to read (target >= 0.95: decoding hidden behind the model).

The model is a timm architecture with seeded random weights saved by ``timm.models.save_for_hf`` and loaded as
``local-dir:`` (nothing can be downloaded here; throughput does not depend on weight values).

    .venv/bin/python bench/embed_backbone.py [--arch vit_small_patch16_224] [--images 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from _args import positive_int
from _setup import add_seed_and_workdir, build_dataset, environment, work_folder
from cladebench import store
from embed_throughput import measure_embed, measure_pure_forward


def write_timm_model(directory: Path, architecture: str, seed: int = 0) -> str:
    """A timm architecture with seeded random weights, saved as timm saves it for the Hub, as ``local-dir:``."""
    import timm
    import torch
    from timm.models import save_for_hf

    torch.manual_seed(seed)
    model = timm.create_model(architecture, pretrained=False, num_classes=0)
    save_for_hf(model, str(directory), safe_serialization=True)
    return f"local-dir:{directory}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="vit_small_patch16_224", help="timm architecture (random weights)")
    parser.add_argument("--images", type=positive_int, default=128)
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--workers", type=int, default=None, help="embed's decoding workers (default: its own)")
    parser.add_argument("--repeats", type=positive_int, default=3, help="runs of each measurement; the median")
    add_seed_and_workdir(parser)
    args = parser.parse_args()

    from cladebench.models import load_encoder

    print(environment("embed_backbone", ("torch", "timm", "pylance", "pillow")))
    started = time.perf_counter()
    with work_folder(args.workdir) as work:
        source = work / "images.lance"
        if not source.exists():
            build_dataset(source, args.images, args.seed)
        images = store.read(store.open_dataset(source), columns=["image"]).column(0).to_pylist()[:args.images]
        model = write_timm_model(work / "models" / args.arch, args.arch, args.seed)
        encoder = load_encoder(model, device="cpu")
        print(f"model: {encoder!r}, preprocessing {encoder.preprocessing.mode} {encoder.preprocessing.size}")
        # Interleaved (forward, embed, forward, embed, ...): on a shared machine a burst of load then slows both.
        forwards, embeds = [], []
        for _ in range(args.repeats):
            forwards.append(measure_pure_forward(encoder, images, args.batch_size))
            embeds.append(measure_embed(encoder, model, source, work, len(images), args.batch_size, args.workers))
            print(f"  pure forward {forwards[-1]:.1f} img/s, embed {embeds[-1]:.1f} img/s "
                  f"(load average {os.getloadavg()[0]:.1f})", flush=True)
        forward, embed = statistics.median(forwards), statistics.median(embeds)
        print()
        print("| model | images | pure forward img/s | embed img/s | embed / forward |")
        print("|---|---|---|---|---|")
        print(f"| timm {args.arch} | {len(images)} | {forward:.1f} | {embed:.1f} | {embed / forward:.2f} |")
    print(f"total {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
