"""Images/s of ``cladebench embed`` on a CUDA device in bf16 against the model's pure forward pass, same batch size.

What it measures, in one run on the same images and the same loaded model:

(a) **pure forward**: ``Encoder.encode_images`` on pixels decoded and preprocessed beforehand and held in pinned
    (page-locked) host memory, ``--batch-size`` at a time, bf16 autocast: the ceiling, what the model alone does,
    host-to-device copy and the features' way back included;
(b) **embed**: the whole :func:`cladebench.embed.embed_dataset` run (``device="cuda"``, ``precision="bf16"``, the
    same batch size) on a fresh copy of the dataset: reading Lance, decoding in worker processes (embed sizes
    them to the GPU: every core, at most 8, unless ``--workers``), staging and the final commit of the column.

It prints both, the ratio embed / forward, and the peak GPU memory of each. The images are synthetic 500 px
photos, half JPEG and half WebP (as iNat's "medium" size); the model is built offline: by default ViT-B-16 with
seeded random weights saved as a ``local-dir:`` checkpoint (throughput does not depend on weight values), or
``--model tiny``, or any model id that loads without a network (``local-dir:PATH``, or an alias already in the
Hugging Face cache with ``HF_HUB_OFFLINE=1``). With the defaults it runs in about a minute on one H100/H200-class
GPU and within 5 minutes on any recent one.

Without a CUDA device it prints one line, ``gpu_embed: no CUDA device ...``, and exits with status 1 (an
environment failure, as ``cladebench`` exits): nothing is measured and nothing is written. ``--device cpu``
runs the same steps on the CPU, to check the script itself; its figures are not the GPU figure.

    .venv/bin/python bench/gpu_embed.py [--model vit-b-16] [--images 4096] [--batch-size 256] [--workers N]
                                        [--repeats 2] [--workdir DIR] [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

NO_CUDA = "gpu_embed: no CUDA device (torch.cuda.is_available() is False); nothing measured"


def cuda_available() -> bool:
    """Whether torch sees a CUDA device; False when torch itself is missing."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="vit-b-16",
                        help="vit-b-16 (random weights, built here), tiny, or a model id that loads offline")
    parser.add_argument("--images", type=int, default=4096, help="images encoded by each measurement")
    parser.add_argument("--batch-size", type=int, default=256, help="images per forward pass, in both measurements")
    parser.add_argument("--workers", type=int, default=None,
                        help="embed's decoding workers (default: embed's own choice, every core up to 8 on a GPU)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each measurement; the median is shown")
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu only checks the script (its figures are not the GPU figure)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the dataset and model here")
    return parser.parse_args(argv)


def build_model(name: str, work: Path, seed: int) -> str:
    """A model id that loads without a network."""
    from cladebench.models.tiny import tiny_model_id
    from embed_throughput import write_random_model

    if name == "vit-b-16":
        target = work / "models" / "vit-b-16"
        if (target / "open_clip_model.safetensors").is_file():
            return f"local-dir:{target}"
        return write_random_model(target, "ViT-B-16", seed)
    if name == "tiny":
        return tiny_model_id(work / "models", seed=seed)
    return name


def _synchronize(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _reset_peak(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def _peak_mb(device: str) -> float:
    import torch

    return torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else float("nan")


def measure_forward(encoder: Any, pixels: Any, batch_size: int) -> float:
    """Images/s of ``encode_images`` on pinned, preprocessed pixels (features come back to the host each batch)."""
    encoder.encode_images(pixels[:batch_size])  # warm-up: kernels chosen, memory pool filled
    _synchronize(encoder.device)
    started = time.perf_counter()
    for i in range(0, len(pixels), batch_size):
        encoder.encode_images(pixels[i:i + batch_size])
    _synchronize(encoder.device)
    return len(pixels) / (time.perf_counter() - started)


def measure_embed(encoder: Any, model_id: str, source: Path, work: Path, rows: int, args: argparse.Namespace
                  ) -> float:
    from cladebench import store
    from cladebench.embed import EmbedConfig, embed_dataset

    target = work / f"embed-{time.time_ns()}.lance"
    store.write_dataset(store.read(store.open_dataset(source), limit=rows), target)
    config = EmbedConfig(dataset=str(target), model=model_id, column="emb_gpu_bench", batch_size=args.batch_size,
                         workers=args.workers, device=args.device, precision=args.precision, progress=False)
    try:
        _synchronize(encoder.device)
        started = time.perf_counter()
        summary = embed_dataset(config, encoder=encoder)
        seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(target, ignore_errors=True)
    if summary.valid != rows:
        raise SystemExit(f"gpu_embed: embed encoded {summary.valid} of {rows} images")
    return rows / seconds


def run(args: argparse.Namespace) -> int:
    import torch

    from cladebench import store
    from cladebench.images import decode_image
    from cladebench.models import load_encoder
    from embed_throughput import build_dataset

    versions = {p: metadata.version(p) for p in ("torch", "open_clip_torch", "pylance", "pillow")}
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "none (--device cpu: checks the script only)"
    print(f"gpu_embed: python {platform.python_version()}, {os.cpu_count()} CPUs, GPU {gpu}, "
          + ", ".join(f"{k} {v}" for k, v in versions.items()), flush=True)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="cladebench-gpu-embed-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        source = work / f"images-{args.images}.lance"
        if not source.exists():
            t = time.perf_counter()
            build_dataset(source, args.images, args.seed)
            print(f"dataset: {args.images} synthetic 500 px images (half JPEG, half WebP) in "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
        model_id = build_model(args.model, work, args.seed)
        encoder = load_encoder(model_id, device=args.device, precision=args.precision)
        print(f"model: {encoder!r}", flush=True)

        t = time.perf_counter()
        images = store.read(store.open_dataset(source), columns=["image"]).column(0).to_pylist()
        transform = encoder.preprocessing.build()
        pixels = torch.stack([transform(decode_image(b)) for b in images])
        if args.device == "cuda":
            pixels = pixels.pin_memory()
        print(f"pixels: {tuple(pixels.shape)} preprocessed {'into pinned memory ' if pixels.is_pinned() else ''}"
              f"in {time.perf_counter() - t:.1f} s (not timed)", flush=True)

        _reset_peak(encoder.device)
        forward = statistics.median(measure_forward(encoder, pixels, args.batch_size) for _ in range(args.repeats))
        forward_peak = _peak_mb(encoder.device)
        del pixels
        _reset_peak(encoder.device)
        embed = statistics.median(measure_embed(encoder, model_id, source, work, args.images, args)
                                  for _ in range(args.repeats))
        embed_peak = _peak_mb(encoder.device)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print("| model | precision | batch | images | pure forward img/s | embed img/s | embed / forward "
          "| GPU peak MB forward / embed |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.model} | {args.precision} | {args.batch_size} | {args.images} | {forward:.1f} | {embed:.1f} "
          f"| {embed / forward:.2f} | {forward_peak:.0f} / {embed_peak:.0f} |")
    print(f"embed / forward = {embed / forward:.2f} ({args.repeats} runs each, medians); "
          f"total {time.perf_counter() - started:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not cuda_available():
        print(NO_CUDA, file=sys.stderr)
        return 1
    if args.device == "cpu" and args.precision == "fp16":
        print("gpu_embed: fp16 needs a GPU; use --precision bf16 or fp32 with --device cpu", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # embed_throughput's dataset and model builders
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
