"""Paired bootstrap of many pairs at once (``paired_bootstraps``) against one ``paired_bootstrap`` call per pair.

The question this answers: ``cladebench compare`` (and the report's leaderboard, which calls it) tests every other
run against a reference on every metric; with retrieval's ten per-query metrics, few-shot's per-image shares or
rerank's per-query AP, those are continuous values, whose resamples are drawn by index. How much does drawing each
block of resamples once for every pair of the same size save, next to drawing it afresh per pair, as one call per
pair does?

Both sides get the same seeded data: ``--runs`` runs against one reference on ``--metrics`` metrics, each a
per-query value in [0, 1] on ``--units`` queries, correlated with the reference (two models on the same queries).
Check: every result of the batch equals the per-pair call's exactly (same draws, same arithmetic).
See bench/README.md for the figures measured here and how to run it.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from _args import positive_int
from _timing import timed
from cladebench.metrics import paired_bootstrap, paired_bootstraps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=positive_int, default=8, help="runs compared with the reference")
    parser.add_argument("--metrics", type=positive_int, default=10, help="metrics per run (retrieval has 10)")
    parser.add_argument("--units", type=positive_int, default=2000, help="queries per metric")
    parser.add_argument("--resamples", type=positive_int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    print(f"paired_bootstraps: python {platform.python_version()}, {os.cpu_count()} CPUs, numpy {np.__version__}")
    rng = np.random.default_rng(args.seed)
    pairs = []
    for _ in range(args.metrics):
        reference = rng.random(args.units)
        for run in range(args.runs):
            noise = rng.normal(0.0, 0.2, args.units)
            pairs.append((np.clip(reference + 0.01 * run + noise, 0.0, 1.0), reference))
    print(f"{len(pairs)} pairs ({args.runs} runs x {args.metrics} metrics) of {args.units:,} queries, "
          f"{args.resamples:,} resamples each")
    single_s, single_mb, single = timed(
        lambda: [paired_bootstrap(a, b, n_resamples=args.resamples, seed=args.seed) for a, b in pairs])
    batch_s, batch_mb, batch = timed(lambda: paired_bootstraps(pairs, n_resamples=args.resamples, seed=args.seed))
    if batch != single:
        print("MISMATCH: the batch differs from the per-pair calls", file=sys.stderr)
        return 1
    print(f"{'':28} {'seconds':>8} {'peak MB':>8}")
    print(f"{'one call per pair':28} {single_s:8.2f} {single_mb:8.1f}")
    print(f"{'paired_bootstraps':28} {batch_s:8.2f} {batch_mb:8.1f}")
    print(f"ratio per-pair / batch: {single_s / batch_s:.2f}x; results equal: yes")
    print(f"total {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
