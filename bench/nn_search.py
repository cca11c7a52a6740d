"""Filtered nearest-neighbour search: Lance's IVF_FLAT cosine index against exact numpy brute force.

The question this answers: on embeddings shaped like a benchmark's (rows fall in clusters, clusters belong
to one of ~20 challenge groups), how much faster is :func:`cladebench.store.search.nearest` through the index
than :func:`cladebench.store.search.brute_force_nearest`, and how much recall does it give up, when the search
is restricted to one group (a filter applied before the top-k, served by a BITMAP index)?

Both sides are measured in the same run on the same dataset, one query at a time, so the printed ratio
(brute / indexed) does not depend on how fast the machine is. Recall@k is against brute force's top-k.
See bench/README.md for the figures measured here and how to run it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

# Index statistics (read once, for the partition count) would otherwise print a warning about centroids.
os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")

import numpy as np
import pyarrow as pa

from _args import positive_int
from cladebench.store import (
    create_scalar_index,
    create_vector_index,
    embedding_field,
    write_dataset,
)
from cladebench.store.search import brute_force_nearest, nearest, vector_index_partitions

T = TypeVar("T")
COLUMN = "emb_bench"
GROUP_COLUMN = "challenge_group"
NUM_GROUPS = 20
CLUSTERS_PER_GROUP = 50
CHUNK_ROWS = 65536


class World:
    """A mixture of Gaussians shaped like image embeddings of a benchmark.

    Every vector shares a common direction (embeddings of one model are not centred), its group's
    direction (a challenge group of confusable species), its cluster's direction (a species) and
    isotropic noise of about the same norm as the rest, so a query's nearest neighbours have cosine
    similarities around 0.5 and clusters overlap: IVF has to probe several partitions to find them.
    Uniform noise would be the wrong test (every partition equally near); well-separated blobs the
    wrong one too (one probe would always be enough).
    """

    def __init__(self, dim: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.dim = dim
        common = _unit(rng.normal(size=dim))
        group_directions = _unit(rng.normal(size=(NUM_GROUPS, dim)))
        cluster_directions = _unit(rng.normal(size=(NUM_GROUPS, CLUSTERS_PER_GROUP, dim)))
        centres = 0.5 * common + 0.6 * group_directions[:, None, :] + 0.4 * cluster_directions
        self.cluster_centres = centres.reshape(-1, dim).astype(np.float32)
        self.cluster_group = np.repeat(np.arange(NUM_GROUPS), CLUSTERS_PER_GROUP)
        # Clusters differ in size, as species do in a benchmark (a Zipf-like spread of weights).
        weights = 1.0 / np.arange(1, len(self.cluster_centres) + 1) ** 0.5
        self.cluster_weights = rng.permutation(weights / weights.sum())
        self.spread = np.float32(1.0 / np.sqrt(dim))  # noise of norm about 1

    def sample(self, rng: np.random.Generator, n: int, clusters: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """``n`` vectors (float32) and the cluster each came from."""
        if clusters is None:
            clusters = rng.choice(len(self.cluster_centres), size=n, p=self.cluster_weights)
        noise = rng.standard_normal(size=(n, self.dim), dtype=np.float32) * self.spread
        return self.cluster_centres[clusters] + noise, clusters


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def tables(world: World, rows: int, seed: int) -> Iterator[pa.Table]:
    """The dataset in chunks of CHUNK_ROWS rows, so 1M rows never sit in memory as Python objects."""
    rng = np.random.default_rng(seed + 1)
    field = embedding_field(COLUMN, world.dim, {"model": "synthetic-mixture", "revision": str(seed)})
    schema = pa.schema([
        pa.field("uuid", pa.string(), nullable=False),
        pa.field("image", pa.large_binary(), nullable=False),
        pa.field(GROUP_COLUMN, pa.string()),
        field,
    ])
    group_names = np.array([f"group_{g:02d}" for g in range(NUM_GROUPS)], dtype=object)
    for start in range(0, rows, CHUNK_ROWS):
        n = min(CHUNK_ROWS, rows - start)
        vectors, clusters = world.sample(rng, n)
        yield pa.Table.from_arrays(
            [
                pa.array([f"row-{i:08d}" for i in range(start, start + n)], pa.string()),
                pa.array([b""] * n, pa.large_binary()),
                pa.array(group_names[world.cluster_group[clusters]], pa.string()),
                pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), world.dim),
            ],
            schema=schema,
        )


def timed(fn: Callable[..., T], *args: object, **kwargs: object) -> tuple[float, T]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def latencies(search: Callable[..., pa.Table], queries: np.ndarray, **kwargs: object
              ) -> tuple[np.ndarray, list[set[str]]]:
    """Seconds per query (one call per query vector) and each query's hit uuids."""
    seconds, hits = [], []
    for query in queries:
        elapsed, table = timed(search, query, **kwargs)
        seconds.append(elapsed)
        hits.append(set(table.column("uuid").to_pylist()))
    return np.array(seconds), hits


def ms(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q) * 1000)


def run_size(rows: int, args: argparse.Namespace, workdir: Path) -> None:
    world = World(args.dim, args.seed)
    path = workdir / f"nn_{rows}.lance"
    if path.exists():  # this script's own output from an earlier run with the same --workdir
        shutil.rmtree(path)
    write_s, dataset = timed(write_dataset, tables(world, rows, args.seed), path)
    bitmap_s, _ = timed(create_scalar_index, dataset, GROUP_COLUMN, "BITMAP")
    index_s, dataset = timed(create_vector_index, dataset, COLUMN)
    partitions = vector_index_partitions(dataset, COLUMN)

    # Queries: fresh draws from the clusters of one group, searched within that group.
    rng = np.random.default_rng(args.seed + 2)
    group = int(rng.integers(NUM_GROUPS))
    group_clusters = np.flatnonzero(world.cluster_group == group)
    queries, _ = world.sample(rng, args.queries, clusters=rng.choice(group_clusters, size=args.queries))
    where = f"{GROUP_COLUMN} = 'group_{group:02d}'"
    group_rows = dataset.count_rows(filter=where)

    common = {"k": args.k, "where": where}
    # One unmeasured query each, so the first measured one does not pay for opening the index or files.
    nearest(dataset, COLUMN, queries[0], nprobes=args.nprobes[0], **common)
    brute_force_nearest(dataset, COLUMN, queries[0], **common)

    brute_s, truth = latencies(lambda q, **kw: brute_force_nearest(dataset, COLUMN, q, **kw), queries, **common)
    print(f"\n== {rows:,} rows, dim {args.dim}, {NUM_GROUPS} groups; filter {where!r} keeps {group_rows:,} rows "
          f"({group_rows / rows:.1%}); {args.queries} queries, k={args.k}")
    print(f"write {write_s:.1f} s | BITMAP index on {GROUP_COLUMN} {bitmap_s:.1f} s | "
          f"IVF_FLAT cosine index ({partitions} partitions) {index_s:.1f} s")
    header = f"{'search':<28}{'median ms':>10}{'p95 ms':>10}{'brute/indexed':>15}{'recall@' + str(args.k):>11}"
    print(header)
    print("-" * len(header))
    print(f"{'numpy brute force (exact)':<28}{ms(brute_s, 50):>10.2f}{ms(brute_s, 95):>10.2f}{1.0:>15.1f}{1.0:>11.3f}")
    for nprobes in args.nprobes:
        seconds, found = latencies(
            lambda q, nprobes=nprobes, **kw: nearest(dataset, COLUMN, q, nprobes=nprobes, **kw), queries, **common
        )
        recall = np.mean([len(f & t) / max(1, len(t)) for f, t in zip(found, truth, strict=True)])
        ratio = np.median(brute_s) / np.median(seconds)
        label = f"lance IVF_FLAT nprobes={nprobes}"
        print(f"{label:<28}{ms(seconds, 50):>10.2f}{ms(seconds, 95):>10.2f}{ratio:>15.1f}{recall:>11.3f}")
    sys.stdout.flush()



def parse_nprobes(text: str) -> int | str:
    return text if text == "all" else positive_int(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[100_000, 1_000_000],
                        help="dataset sizes in rows, one run each (default 100000 1000000)")
    parser.add_argument("--dim", type=positive_int, default=256,
                        help="embedding dimension (default 256; see bench/README.md for why)")
    parser.add_argument("--queries", type=positive_int, default=100,
                        help="timed queries per size and search (default 100)")
    parser.add_argument("--k", type=positive_int, default=10, help="hits per query (default 10)")
    parser.add_argument("--nprobes", type=parse_nprobes, nargs="+", default=[4, 16, 64, "all"],
                        help="IVF partitions to probe, one run each; 'all' is exhaustive (default 4 16 64 all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data and queries (default 0)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the datasets are written (default: a temporary directory, removed after)")
    args = parser.parse_args(argv)

    print(f"nn_search: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"pylance {__import__('lance').__version__}, numpy {np.__version__}")
    started = time.perf_counter()
    own_workdir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="cladebench-nn-")) if own_workdir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        for rows in args.sizes:
            run_size(rows, args, workdir)
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
