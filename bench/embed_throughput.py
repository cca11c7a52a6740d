"""Images/s of ``cladebench embed`` against two baselines measured in the same run, on the same images.

(a) **pure forward**: the same model's ``encode_images`` on pixels decoded and preprocessed beforehand
    (the ceiling: what the model alone can do);
(b) **straightforward loop**: PIL open, preprocess, batch, ``encode_image`` in one process, as the
    INQUIRE and pybioclip evaluation scripts do.

Targets (issue "Encoders and the encode-once embedding cache"): ViT-B-16 at >= 0.95 of pure forward
(the pipeline hides decoding behind the model); the tiny model, which is decode-bound, at >= 1.5x the
straightforward loop on 2 cores (decoding runs in parallel workers).

Model weights are random (no downloads here); throughput does not depend on weight values.

    .venv/bin/python bench/embed_throughput.py [--images 2000] [--vit-images 256] [--models tiny vit-b-16]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from _setup import add_seed_and_workdir, build_dataset, environment, work_folder
from cladebench import store
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.images import decode_image


def write_random_model(directory: Path, architecture: str, seed: int = 0) -> str:
    """An open_clip architecture with seeded random weights saved as ``local-dir:`` (throughput only)."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    model = open_clip.create_model(architecture, pretrained=None)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, str(directory / "open_clip_model.safetensors"))
    config = open_clip.get_model_config(architecture)
    size = config["vision_cfg"]["image_size"]
    (directory / "open_clip_config.json").write_text(json.dumps({
        "model_cfg": config,
        "preprocess_cfg": {"size": size, "mean": list(open_clip.OPENAI_DATASET_MEAN),
                           "std": list(open_clip.OPENAI_DATASET_STD), "interpolation": "bicubic",
                           "resize_mode": "shortest"},
    }))
    return f"local-dir:{directory}"


def measure_pure_forward(encoder, images: list[bytes], batch_size: int) -> float:
    import torch

    transform = encoder.preprocessing.build()
    pixels = torch.stack([transform(decode_image(b)) for b in images])
    encoder.encode_images(pixels[:batch_size])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(pixels), batch_size):
        encoder.encode_images(pixels[i:i + batch_size])
    return len(pixels) / (time.perf_counter() - started)


def measure_straightforward(encoder, images: list[bytes], batch_size: int) -> float:
    import io

    import torch
    from PIL import Image

    transform = encoder.preprocessing.build()
    started = time.perf_counter()
    for i in range(0, len(images), batch_size):
        batch = [transform(Image.open(io.BytesIO(b)).convert("RGB")) for b in images[i:i + batch_size]]
        encoder.encode_images(torch.stack(batch))
    return len(images) / (time.perf_counter() - started)


def measure_embed(encoder, model_id: str, source: Path, work: Path, rows: int, batch_size: int,
                  workers: int | None) -> float:
    target = work / f"embed-{time.time_ns()}.lance"
    store.write_dataset(store.read(store.open_dataset(source), limit=rows), target)
    config = EmbedConfig(dataset=str(target), model=model_id, column="emb_bench", batch_size=batch_size,
                         workers=workers, device="cpu", progress=False)
    started = time.perf_counter()
    summary = embed_dataset(config, encoder=encoder)
    seconds = time.perf_counter() - started
    assert summary.valid == rows, summary
    shutil.rmtree(target, ignore_errors=True)
    return rows / seconds


def median_of(repeats: int, fn, *args) -> float:
    return statistics.median(fn(*args) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000, help="images for the tiny model")
    parser.add_argument("--vit-images", type=int, default=256, help="images for ViT-B-16 (about 6/s on 2 CPUs)")
    parser.add_argument("--models", nargs="+", default=["tiny", "vit-b-16"], choices=["tiny", "vit-b-16"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=None, help="embed's decoding workers (default: its own)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each measurement; the median is shown")
    add_seed_and_workdir(parser)
    args = parser.parse_args()

    from cladebench.models import load_encoder
    from cladebench.models.tiny import tiny_model_id

    print(environment("embed_throughput", ("torch", "open_clip_torch", "pylance", "pillow")))
    started = time.perf_counter()
    with work_folder(args.workdir) as work:
        source = work / "images.lance"
        n = max(args.images, args.vit_images)
        if not source.exists():
            t = time.perf_counter()
            build_dataset(source, n, args.seed)
            print(f"dataset: {n} synthetic 500 px images (half JPEG, half WebP) in {time.perf_counter() - t:.1f} s")
        all_images = store.read(store.open_dataset(source), columns=["image"]).column(0).to_pylist()

        models = {"tiny": (tiny_model_id(work / "models"), args.images)}
        if "vit-b-16" in args.models:
            models["vit-b-16"] = (write_random_model(work / "models" / "vit-b-16", "ViT-B-16"), args.vit_images)
        rows = []
        for name in args.models:
            model_id, count = models[name]
            encoder = load_encoder(model_id, device="cpu")
            images = all_images[:count]

            forward = median_of(args.repeats, measure_pure_forward, encoder, images, args.batch_size)
            loop = median_of(args.repeats, measure_straightforward, encoder, images, args.batch_size)
            embed = median_of(args.repeats, measure_embed, encoder, model_id, source, work, count,
                              args.batch_size, args.workers)
            rows.append((name, count, forward, loop, embed))
            print(f"{name:<9} {count:>5} images  pure forward {forward:8.1f}/s  straightforward loop "
                  f"{loop:8.1f}/s  embed {embed:8.1f}/s  embed/forward {embed / forward:5.2f}  "
                  f"embed/loop {embed / loop:5.2f}", flush=True)
        print()
        print("| model | images | pure forward img/s | straightforward loop img/s | embed img/s | embed / forward "
              "| embed / loop |")
        print("|---|---|---|---|---|---|---|")
        for name, count, forward, loop, embed in rows:
            print(f"| {name} | {count} | {forward:.1f} | {loop:.1f} | {embed:.1f} | {embed / forward:.2f} "
                  f"| {embed / loop:.2f} |")
    print(f"total {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
