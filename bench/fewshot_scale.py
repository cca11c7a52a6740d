"""SimpleShot at scale from cached embeddings: ``predict_splits`` against a per-query loop, on the same splits.

The question this answers: on 10,000 cached image embeddings (1,000 classes x 10 images, 512 wide, BioCLIP's
width), 5-shot, 5 repetitions, how much faster is :func:`cladebench.tasks.fewshot.predict_splits` with the
registered ``simpleshot`` method (vectorised: centroids by one scatter-add, nearest centroid by one matrix
product per block of queries) than the straightforward way to write SimpleShot: a Python loop over the
classes for the centroids and a Python loop over the query images, each query's Euclidean distance to every
centroid computed directly and the nearest taken?

Both run on the same splits from :func:`cladebench.tasks.fewshot.few_shot_splits` (built once and timed on
their own), and their predictions are compared query by query: they must be identical. Each image is its
own sampling group (no ``source_id``), as in a benchmark without observation ids.
See bench/README.md for the figures measured here and how to run it.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time

import numpy as np

from _args import positive_int
from _timing import timed
from cladebench.tasks.fewshot import METHODS, FewShotConfig, SplitPlan, few_shot_splits, predict_splits


def make_data(classes: int, per_class: int, dim: int, noise: float, seed: int
              ) -> tuple[np.ndarray, list[str], list[str], list[str]]:
    """Vectors (float32, raw), class labels, uuids and the label order.

    Each class is a Gaussian centre; each image its class's centre plus isotropic noise. ``noise`` 3.5
    at 512 dimensions gives SimpleShot a 5-shot accuracy of about 0.5 over 1,000 classes, so
    predictions are neither all right nor all wrong and a wrong nearest centroid would show.
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, dim), dtype=np.float32)
    class_of = np.repeat(np.arange(classes), per_class)
    vectors = centres[class_of] + noise * rng.standard_normal((len(class_of), dim), dtype=np.float32)
    names = [f"class_{c:05d}" for c in range(classes)]
    labels = [names[c] for c in class_of]
    uuids = [f"img-{i:07d}" for i in range(len(class_of))]
    return vectors, labels, uuids, names


def per_query_loop(vectors: np.ndarray, plan: SplitPlan, query_limit: int | None = None) -> list[np.ndarray]:
    """SimpleShot written plainly: per split, a loop over classes for the centroids, a loop over queries.

    The same definition as the library's (BioCLIP's protocol: L2-normalise every vector, subtract the
    support mean, L2-normalise, mean normalised support vector per class, nearest by Euclidean distance),
    in float64 as the library computes it. Returns the predicted class index of every query, split by split.
    """
    vectors = vectors.astype(np.float64)
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    predictions = []
    for split in plan.splits:
        support = vectors[split.support].astype(np.float64)
        targets = plan.targets[split.support]
        mean = support.mean(axis=0)
        centroids = np.empty((len(plan.classes), support.shape[1]))
        for c in range(len(plan.classes)):
            members = support[targets == c] - mean
            centroids[c] = (members / np.linalg.norm(members, axis=1, keepdims=True)).mean(axis=0)
        queries = split.query if query_limit is None else split.query[:query_limit]
        predicted = np.empty(len(queries), dtype=np.int64)
        for i, row in enumerate(queries):
            query = vectors[row].astype(np.float64) - mean
            query /= np.linalg.norm(query)
            predicted[i] = np.argmin(np.linalg.norm(centroids - query, axis=1))
        predictions.append(predicted)
    return predictions


def row(label: str, seconds: float, queries: int, peak_mb: float, baseline_seconds: float) -> str:
    return (f"{label:<58}{seconds:>9.2f}{queries / seconds:>11,.0f}{peak_mb:>10,.0f}"
            f"{baseline_seconds / seconds:>10.1f}")



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=positive_int, default=1_000, help="classes (default 1000)")
    parser.add_argument("--per-class", type=positive_int, default=10, help="images per class (default 10)")
    parser.add_argument("--dim", type=positive_int, default=512, help="embedding width (default 512, BioCLIP)")
    parser.add_argument("--shots", type=positive_int, default=5, help="support images per class (default 5)")
    parser.add_argument("--repetitions", type=positive_int, default=5, help="splits (default 5)")
    parser.add_argument("--noise", type=float, default=3.5, help="noise around each class centre (default 3.5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and the splits (default 0)")
    parser.add_argument("--quick", action="store_true", help="a small run: 100 classes x 10 images")
    args = parser.parse_args(argv)
    if args.quick:
        args.classes = 100
    if args.per_class <= args.shots:
        parser.error(f"--per-class ({args.per_class}) must exceed --shots ({args.shots}) to leave query images")

    print(f"fewshot_scale: python {platform.python_version()}, {os.cpu_count()} CPUs "
          f"(load average {os.getloadavg()[0]:.1f}), numpy {np.__version__}")
    started = time.perf_counter()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    vectors, labels, uuids, names = make_data(args.classes, args.per_class, args.dim, args.noise, args.seed)
    config = FewShotConfig(shots=(args.shots,), repetitions=args.repetitions, seed=args.seed,
                           methods=("simpleshot",))
    assert METHODS["simpleshot"].name == "simpleshot"

    def splits() -> SplitPlan:
        return few_shot_splits(labels, uuids, uuids, shots=config.shots, repetitions=config.repetitions,
                               seed=config.seed, classes=names)

    # Timed untraced (it is a Python loop over classes), its memory traced on a second, untimed call.
    split_s, _, plan = timed(splits, trace=False)
    _, split_peak, _ = timed(splits)
    queries = sum(len(split.query) for split in plan.splits)
    print(f"\n== {len(vectors):,} images ({args.classes:,} classes x {args.per_class}), dim {args.dim}; "
          f"{args.shots}-shot, {args.repetitions} repetitions: {len(plan.classes):,} classes evaluated, "
          f"{queries:,} query predictions in all")
    print(f"few_shot_splits (shared by both, not in the table): {split_s:.2f} s, peak {split_peak:,.1f} MB")

    # The loop is timed untraced (tracemalloc slows many small allocations) and its memory traced on
    # one split cut to 200 queries (its memory does not grow with the number of queries).
    one_split = SplitPlan(**{**plan.__dict__, "splits": plan.splits[:1]})
    _, loop_peak, _ = timed(per_query_loop, vectors, one_split, 200)
    loop_s, _, loop_predictions = timed(per_query_loop, vectors, plan, trace=False)
    predict_splits(vectors, one_split, uuids, config)  # unmeasured: the first call pays for lazy imports
    library_s, library_peak, (table, _) = timed(predict_splits, vectors, plan, uuids, config)

    header = f"{'method':<58}{'seconds':>9}{'queries/s':>11}{'peak MB':>10}{'ratio':>10}"
    print(header)
    print("-" * len(header))
    print(row("per-query loop (plain SimpleShot)", loop_s, queries, loop_peak, loop_s))
    print(row("predict_splits, METHODS['simpleshot']   [library]", library_s, queries, library_peak, loop_s))
    print("ratio = baseline seconds / method seconds; peak MB = tracemalloc peak of the allocations made during "
          "the call (the loop's on one split of 200 queries)")

    class_names = np.asarray(plan.classes, dtype=object)
    expected = np.concatenate([class_names[p] for p in loop_predictions])
    predicted = np.asarray(table.column("pred_label").to_pylist(), dtype=object)
    same = np.array_equal(expected, predicted)
    print(f"\nsame answers: {int((expected == predicted).sum()):,} of {queries:,} predictions identical ({same})")
    print(f"simpleshot accuracy {np.mean(table.column('correct').to_numpy(zero_copy_only=False)):.3f} "
          "(the data's difficulty, not a result)")
    assert same, "the loop and predict_splits disagree"
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess max RSS {rss_after:,.0f} MB (grew by {rss_after - rss_before:,.0f} MB); "
          f"total {time.perf_counter() - started:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
