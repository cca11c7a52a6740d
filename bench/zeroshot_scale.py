"""Zero-shot from cached embeddings at scale: ``classify`` + ``top_k_hits`` against a per-image loop.

The question this answers: with image and label embeddings already computed (10,000 images against
10,000 labels, 512 wide, BioCLIP's width), how much faster is the vectorised
:func:`cladebench.tasks.common.classify` followed by :func:`cladebench.metrics.top_k_hits` (top-1 and
top-5) than the straightforward per-image loop (normalise the image, dot it with the label matrix,
softmax, argsort), and what does the full (images x labels) probability matrix cost in memory?

``classify`` computes float32 logits and softmaxes them in place, so the full probability matrix is
float32 (10,000 x 10,000 is 381 MB) with no full-size temporaries beside it. ``top_k_hits`` does not
sort rows: it counts, per image, the labels scoring above the true one plus the tied ones at a lower
index (a stable descending sort's answer). Also timed on the library's probabilities: ``top_k_indices(probs, 5)``,
the argpartition + lexsort with which ``zero_shot`` picks each image's top-5 labels.

Beside them, one variant that is not in the library: a chunked pass that never holds more than one
block of images' probabilities, calling ``classify`` per block and scoring top-1 by argmax (the first
maximum, i.e. the same tie rule) and top-5 by ``top_k_hits`` on the block.

Every candidate's answers are checked against the reference on the measured data: the baseline's
top-5 label lists against the library's (``top_k_indices``), and the chunked variant's top-1/top-5 hits against
the library's. See bench/README.md for the figures measured here and how to run it.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
import tracemalloc

import numpy as np
from threadpoolctl import threadpool_limits

from _args import positive_int
from _timing import MB, timed
from _tolerance import probability_tolerance
from cladebench.metrics import top_k_hits
from cladebench.store.embeddings import normalise_rows
from cladebench.tasks.common import classify
from cladebench.tasks.streaming import top_k_indices

# The loop's float32 dot products sum the vectors' terms in another order than the matrix product does, and the
# library's softmax is float32 where the loop's is float64: probabilities are checked to float32's bound for that
# (bench/_tolerance.py: probability_tolerance(dim, scale, labels)).


def make_data(images: int, labels: int, dim: int, noise: float, seed: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaussian label vectors; each image is its label's vector plus isotropic noise (raw, not normalised).

    ``noise`` 6 at 10,000 labels gives top-1 about 0.5 at scale 100, so neither the winning label nor
    the true label's rank is trivial.
    """
    rng = np.random.default_rng(seed)
    label_vectors = rng.standard_normal((labels, dim), dtype=np.float32)
    targets = rng.integers(labels, size=images)
    image_vectors = label_vectors[targets] + noise * rng.standard_normal((images, dim), dtype=np.float32)
    return image_vectors, label_vectors, targets


def per_image_loop(image_vectors: np.ndarray, label_vectors: np.ndarray, scale: float, k: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The straightforward loop: per image, normalise, dot, softmax (float64), stable argsort.

    Label vectors are normalised once before the loop, as an evaluation script computes its text
    features once. Returns each image's top-``k`` label indices and their probabilities.
    """
    units = normalise_rows(label_vectors)
    top = np.empty((len(image_vectors), k), dtype=np.int64)
    top_probs = np.empty((len(image_vectors), k), dtype=np.float64)
    for i, vector in enumerate(image_vectors):
        unit = vector / max(float(np.linalg.norm(vector)), 1e-12)
        logits = scale * (units @ unit).astype(np.float64)
        exp = np.exp(logits - logits.max())
        probs = exp / exp.sum()
        order = np.argsort(-probs, kind="stable")[:k]
        top[i] = order
        top_probs[i] = probs[order]
    return top, top_probs


def library_path(image_vectors: np.ndarray, label_vectors: np.ndarray, scale: float, targets: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, tuple[float, float]]]:
    """``classify`` then ``top_k_hits`` at 1 and 5 (called with tracemalloc on).

    Returns probs, hits@1, hits@5 and, per part, its seconds and the peak MB it allocated on top of
    what was already live when it started (for top_k_hits: on top of the probability matrix).
    """
    parts: dict[str, tuple[float, float]] = {}
    start = time.perf_counter()
    probs = classify(image_vectors, label_vectors, scale)
    classified = time.perf_counter()
    parts["classify"] = (classified - start, tracemalloc.get_traced_memory()[1] / MB)
    live = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    hits1 = top_k_hits(probs, targets, 1)
    hits5 = top_k_hits(probs, targets, 5)
    parts["top_k_hits"] = (time.perf_counter() - classified, (tracemalloc.get_traced_memory()[1] - live) / MB)
    return probs, hits1, hits5, parts


def top5_lists(probs: np.ndarray) -> tuple[float, float, np.ndarray]:
    """``top_k_indices(probs, 5)``, zero_shot's top-5 label lists: seconds, peak MB beyond ``probs``, and the lists."""
    tracemalloc.start()
    start = time.perf_counter()
    order = top_k_indices(probs, 5)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / MB
    tracemalloc.stop()
    return seconds, peak, order


def chunked(image_vectors: np.ndarray, label_vectors: np.ndarray, scale: float, targets: np.ndarray,
            chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-1/top-5 hits, ``chunk`` images at a time: the full probability matrix never exists.

    Per block: ``classify``, top-1 by argmax (it returns the first maximum: the lower index on a tie, as
    ``top_k_hits`` counts it), top-5 by ``top_k_hits``.
    """
    units = normalise_rows(label_vectors)
    hits1 = np.empty(len(targets), dtype=bool)
    hits5 = np.empty(len(targets), dtype=bool)
    for start in range(0, len(targets), chunk):
        stop = start + chunk
        probs = classify(image_vectors[start:stop], units, scale)
        block_targets = targets[start:stop]
        hits1[start:stop] = (probs.argmax(axis=1) == block_targets) & (block_targets >= 0)
        hits5[start:stop] = top_k_hits(probs, block_targets, 5)
    return hits1, hits5


def row(label: str, seconds: float, images: int, peak_mb: float | None, baseline_seconds: float) -> str:
    peak = "-" if peak_mb is None else f"{peak_mb:,.0f}"
    return (f"{label:<82}{seconds:>9.2f}{images / seconds:>11,.0f}{peak:>10}"
            f"{baseline_seconds / seconds:>10.1f}")



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=positive_int, default=10_000, help="images (default 10000)")
    parser.add_argument("--labels", type=positive_int, default=10_000, help="labels (default 10000)")
    parser.add_argument("--dim", type=positive_int, default=512, help="embedding width (default 512, BioCLIP)")
    parser.add_argument("--baseline-images", type=positive_int, default=None,
                        help="images the per-image loop runs on (the first N); its time is scaled to --images "
                             "(default: all of them, about 40 s at the default size here)")
    parser.add_argument("--loop-blas-threads", type=int, default=1,
                        help="BLAS threads for the per-image loop; 0 leaves the library default (default 1)")
    parser.add_argument("--chunk", type=positive_int, default=1_024,
                        help="images per block of the chunked variant (default 1024)")
    parser.add_argument("--scale", type=float, default=100.0, help="logit scale (default 100, CLIP_benchmark's)")
    parser.add_argument("--noise", type=float, default=6.0, help="noise around each label vector (default 6)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (default 0)")
    parser.add_argument("--quick", action="store_true",
                        help="a small run: 1000 images x 1000 labels")
    args = parser.parse_args(argv)
    if args.quick:
        args.images, args.labels = 1_000, 1_000
    baseline_images = min(args.baseline_images or args.images, args.images)

    print(f"zeroshot_scale: python {platform.python_version()}, {os.cpu_count()} CPUs "
          f"(load average {os.getloadavg()[0]:.1f}), numpy {np.__version__}")
    started = time.perf_counter()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    image_vectors, label_vectors, targets = make_data(args.images, args.labels, args.dim, args.noise, args.seed)
    print(f"\n== {args.images:,} images x {args.labels:,} labels, dim {args.dim}, scale {args.scale:g}; "
          f"probability matrix {args.images * args.labels * 4 / MB:,.0f} MB (float32)")

    # The loop is timed untraced (tracemalloc slows many small allocations) and its memory traced on a slice.
    subset = slice(0, baseline_images)
    # One BLAS thread for the loop: a 2-thread OpenBLAS hand-off on every small product made the loop
    # 50x slower on this loaded 2-core machine, which would flatter the library (see bench/README.md).
    with threadpool_limits(args.loop_blas_threads or None, user_api="blas"):
        loop_s, _, (loop_top, loop_probs) = timed(per_image_loop, image_vectors[subset], label_vectors, args.scale,
                                                  5, trace=False)
        _, loop_peak, _ = timed(per_image_loop, image_vectors[:50], label_vectors, args.scale, 5)
    baseline_s = loop_s * args.images / baseline_images

    # Unmeasured: the first calls pay for lazy imports and BLAS start-up.
    top_k_hits(classify(image_vectors[:8], label_vectors[:16], args.scale), targets[:8] % 16, 5)
    lib_s, _, (probs, hits1, hits5, parts) = timed(library_path, image_vectors, label_vectors, args.scale, targets)
    (classify_s, classify_peak), (topk_s, topk_peak) = parts["classify"], parts["top_k_hits"]
    lib_peak = max(classify_peak, probs.nbytes / MB + topk_peak)  # top_k_hits runs while probs is live
    top_s, top_peak, lib_top = top5_lists(probs)
    chunk_s, chunk_peak, (chunk_hits1, chunk_hits5) = timed(
        chunked, image_vectors, label_vectors, args.scale, targets, args.chunk)

    scaled = "" if baseline_images == args.images else f", x{args.images / baseline_images:g} extrapolated"
    header = (f"{'method':<82}{'seconds':>9}{'images/s':>11}{'peak MB':>10}{'ratio':>10}")
    print(header)
    print("-" * len(header))
    print(row(f"per-image loop ({baseline_images:,} images{scaled})", baseline_s, args.images, loop_peak,
              baseline_s))
    print(row("classify + top_k_hits k=1, k=5   [library]", lib_s, args.images, lib_peak, baseline_s))
    print(row("  of which classify (float32, in-place softmax)", classify_s, args.images, classify_peak, baseline_s))
    print(row("  of which top_k_hits x2 (rank count, no sort; MB beyond probs)", topk_s, args.images,
              topk_peak, baseline_s))
    print(row("top_k_indices(probs, 5), zero_shot's top-5 lists (MB beyond probs)  [library]", top_s, args.images,
              top_peak, baseline_s))
    print(row(f"chunked, {args.chunk:,} images/block: classify, argmax, top_k_hits k=5  [not in library]",
              chunk_s, args.images, chunk_peak, baseline_s))
    print("ratio = baseline seconds / method seconds; peak MB = tracemalloc peak of the allocations made during "
          "the call (the loop's on 50 images)")

    tolerance = probability_tolerance(args.dim, args.scale, args.labels)
    same_top5 = np.array_equal(loop_top, lib_top[subset])
    prob_diff = float(np.abs(loop_probs - np.take_along_axis(probs[subset], lib_top[subset], axis=1)).max())
    top_same_as_sort = all(  # in blocks: a whole-matrix argsort would hold two more full-size matrices
        np.array_equal(lib_top[start:start + args.chunk],
                       np.argsort(-probs[start:start + args.chunk], axis=1, kind="stable")[:, :5])
        for start in range(0, args.images, args.chunk))
    print(f"\nsame answers, loop vs library on the {baseline_images:,} looped images: top-5 label lists identical "
          f"{same_top5}; largest |difference| of their probabilities {prob_diff:.1e} (tolerance {tolerance:.1e}, "
          "float32's bound)")
    print(f"same answers, top_k_indices vs a full stable argsort of the library's probabilities on all {args.images:,} "
          f"images: top-5 label lists identical {top_same_as_sort}")
    print(f"same answers, chunked vs library on all {args.images:,} images: top-1 hits identical "
          f"{np.array_equal(chunk_hits1, hits1)}, top-5 hits identical {np.array_equal(chunk_hits5, hits5)}")
    print(f"top-1 {hits1.mean():.3f}, top-5 {hits5.mean():.3f} (the data's difficulty, not a result)")
    assert same_top5 and prob_diff < tolerance, "the loop and the library disagree"
    assert top_same_as_sort, "top_k_indices differs from a stable descending sort"
    assert np.array_equal(chunk_hits1, hits1) and np.array_equal(chunk_hits5, hits5), "chunked variant disagrees"
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess max RSS {rss_after:,.0f} MB (grew by {rss_after - rss_before:,.0f} MB); "
          f"total {time.perf_counter() - started:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
