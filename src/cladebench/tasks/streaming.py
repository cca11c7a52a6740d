"""Zero-shot scores streamed in blocks of labels: each image's top-k labels and its rolled-up probability at every
rank, without an images x labels matrix.

Why a module of its own: against a tree-of-life label set (the 1.1M species of the iNaturalist taxonomy) the
dense path (:func:`cladebench.tasks.common.classify`, one images x labels softmax) cannot run: 10,000 images
would need 44 GB for the probabilities alone. Here the labels are read once, ``label_block`` at a time, and
each block is scored against every image, ``image_block`` images per task. A task is one fused pass over its
scores while they are in cache: the matrix product (the logits, computed as the dense path computes them), the
top-k kept by logit (the softmax is monotone; ties to the lower label index, as a stable descending sort
gives), the softmax's denominator as a streaming sum of ``exp(logit - reference)`` in float64, and the roll-up.

The roll-up needs no taxa x images sums: labels are in lineage order
(:class:`~cladebench.taxonomy.LineageRuns`), so every taxon of every rank is a contiguous run of labels and its
sum is complete as soon as the stream passes its last label. Each block's runs, cut at its edges (pieces), are
summed with one segmented sum per rank (the narrowest rank's from the labels, each broader one's from the pieces
below); each rank keeps per image only the sum of its open run (carried into the next block), its best taxon so
far and that taxon's sum.

The reference of an image is its highest logit in the first label block, not its running maximum, so nothing
summed is rescaled when a later block scores higher; only a logit more than :data:`RESCALE_ABOVE` above the
reference (where ``exp`` would leave float32's range) moves the reference and rescales that image's sums.

The tasks of one label block run on a pool of threads, one per BLAS thread (each task's product single-threaded,
so the exponentials and sums run on every core, not only the product), while the next label block is read and
normalised. Given a torch ``device`` (a CUDA GPU), the same steps run there instead, on large blocks
(:func:`_stream_on_device`; ``bench/gpu_embed.py`` measures it). Answers equal the dense path's where both run
(``tests/tasks/test_streaming.py``): the same float32 logits, probabilities within 1e-6. :func:`peak_bytes`
states the memory it needs, which does not grow with the number of labels; the label vectors themselves are read
block by block, so a memory-mapped cache file (:func:`cladebench.models.text.class_text_embeddings` with
``mmap=True``) counts as page cache, not as the process's memory. ``bench/zeroshot_tree_of_life.py`` measures
time (against the bare matrix products of the same shapes) and memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cladebench.store.embeddings import normalise_rows
from cladebench.tasks.configs import IMAGE_BLOCK, LABEL_BLOCK
from cladebench.taxonomy import LineageRuns, Rank

if TYPE_CHECKING:
    from cladebench.taxonomy.rollup import RankRuns

RESCALE_ABOVE = 60.0
"""Logits above an image's reference by more than this rescale its sums: ``exp(60)`` is far inside float32's
range (``exp(88.7)`` is not), and anything within 87 below the reference is still a normal float32."""


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of each row's ``k`` highest scores, best first, ties toward the lower index (as a stable
    descending sort would give), without sorting whole rows."""
    k = min(k, scores.shape[1])
    if k == scores.shape[1]:
        return np.argsort(-scores, axis=1, kind="stable")
    picked = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    values = np.take_along_axis(scores, picked, axis=1)
    out = np.take_along_axis(picked, np.lexsort((picked, -values), axis=1), axis=1)
    # Where the k-th value is tied with labels left outside, the partition chose among them arbitrarily:
    # those rows (rare with real scores, common with masked candidates) are redone exactly.
    kth = values.min(axis=1, keepdims=True)
    for i in np.flatnonzero(np.count_nonzero(scores >= kth, axis=1) > k):
        candidates = np.flatnonzero(scores[i] >= kth[i])
        out[i] = candidates[np.argsort(-scores[i, candidates], kind="stable")[:k]]
    return out


@dataclass(frozen=True)
class StreamedScores:
    """What :func:`stream_scores` keeps per image: enough for every zero-shot column, nothing images x labels."""

    top_labels: np.ndarray
    """int64 (images x k): the k most probable labels, best first."""
    top_probs: np.ndarray
    """float64 (images x k): their probabilities (softmax over all labels)."""
    true_probs: np.ndarray
    """float64 (images,): the probability of each image's target label; NaN where it has none."""
    rolled: dict[Rank, tuple[np.ndarray, np.ndarray]]
    """Per rank above the labels: each image's most probable taxon (a column of the runs' taxa; a tie to the
    lower column) and its rolled-up probability."""


def peak_bytes(n_images: int, dim: int, *, k: int = 5, ranks: int = 6, image_block: int = IMAGE_BLOCK,
               label_block: int = LABEL_BLOCK, workers: int = 1) -> int:
    """The memory :func:`stream_scores` allocates at most, in bytes: per worker a task's logits (float32), the
    narrowest rank's sums (float32, then float64: at most one piece a label) and, in the first block, the top-k
    of every row (a negated copy and an int64 partition): 36 bytes an entry; two label blocks (the one scored
    and the next, read as float32 and normalised with a squared copy: 12 bytes an entry, and 4 for the older);
    and the answers, per image 2k entries and 3 per rank, 8 bytes each."""
    task = image_block * label_block * (4 + 12 + 4 + 8 + 8)
    return workers * task + 16 * label_block * dim + n_images * (2 * k + 4 + 3 * ranks) * 8


def stream_workers() -> int:
    """Threads to score with: as many as BLAS would use (which follows ``OPENBLAS_NUM_THREADS``,
    ``OMP_NUM_THREADS`` and the cores), so a process told to use one core uses one."""
    from threadpoolctl import threadpool_info  # a dependency of scikit-learn, which few-shot needs

    threads = [info["num_threads"] for info in threadpool_info() if info.get("user_api") == "blas"]
    return max(threads, default=1)


@dataclass
class _Level:
    """One rank's running roll-up, per image."""

    carry: np.ndarray
    """float64: the sum so far of the run still open at the end of the last block."""
    mass: np.ndarray
    """float64: the largest sum of a completed named run (-1 before the first)."""
    taxon: np.ndarray
    """int64: that run's taxon column."""


@dataclass
class _State:
    """Everything kept per image between label blocks; each task writes its own images' rows."""

    units: np.ndarray
    targets: np.ndarray
    scale: np.float32
    k: int
    reference: np.ndarray
    total: np.ndarray
    best_values: np.ndarray
    best_labels: np.ndarray
    true_logit: np.ndarray
    levels: list[_Level]


@dataclass(frozen=True)
class _Piece:
    """One rolled-up rank in one block of labels: its runs cut at the block's edges (pieces)."""

    starts: np.ndarray
    """Where each piece starts, among the pieces of the narrower rank (for the narrowest, among the labels)."""
    at: np.ndarray
    """Where each piece starts among the block's labels."""
    closes: bool
    """Whether the last piece's run ends with the block (else it goes on into the next)."""
    taxa: np.ndarray
    """The taxon column of each run completed in the block (-1: a run without a name at the rank)."""
    unnamed: np.ndarray
    """Positions of the -1s in :attr:`taxa`."""


@dataclass(frozen=True)
class _Block:
    """One block of labels and its pieces of runs at each rolled-up rank, narrowest first."""

    start: int
    stop: int
    units: np.ndarray
    """The block's label vectors, normalised (as read, for a device that normalises them itself)."""
    levels: list[_Piece]


def _blocks(read: Callable[[int, int], np.ndarray], n_labels: int, label_block: int,
            ranks: list[tuple[RankRuns, np.ndarray]], normalise: bool = True) -> Iterator[_Block]:
    """The label blocks in order, each read once, with where the runs of every rank are cut in it."""
    for start in range(0, n_labels, label_block):
        stop = min(start + label_block, n_labels)
        vectors = np.asarray(read(start, stop), dtype=np.float32)
        levels = []
        below = None  # the narrower rank's piece starts, among the labels
        for rank_runs, species_ends in ranks:
            first_run = int(np.searchsorted(species_ends, start, side="right"))  # the run holding ``start``
            last_run = int(np.searchsorted(species_ends, stop, side="left"))  # ... and ``stop - 1``
            starts = np.append(0, species_ends[first_run:last_run] - start)
            closes = bool(species_ends[last_run] == stop)
            taxa = rank_runs.taxon_of_run[first_run:last_run + closes]
            levels.append(_Piece(starts=starts if below is None else np.searchsorted(below, starts), at=starts,
                                 closes=closes, taxa=taxa, unnamed=np.flatnonzero(taxa < 0)))
            below = starts
        yield _Block(start=start, stop=stop, units=normalise_rows(vectors) if normalise else vectors,
                     levels=levels)


_scratch = threading.local()


def _buffer(name: str, size: int, dtype: object) -> np.ndarray:
    """A thread's reusable buffer of at least ``size`` entries: a fresh array per task would be page-faulted in
    again each time, which at these sizes costs a few percent of the task."""
    buffer = getattr(_scratch, name, None)
    if buffer is None or buffer.size < size:
        buffer = np.empty(size, dtype=dtype)
        setattr(_scratch, name, buffer)
    return buffer[:size]


def _merge_top(values: np.ndarray, indices: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of each row of (values, indices), by value then lower index."""
    order = np.lexsort((indices, -values), axis=1)[:, :k]
    return np.take_along_axis(values, order, axis=1), np.take_along_axis(indices, order, axis=1)


def _keep_top(state: _State, logits: np.ndarray, highest: np.ndarray, first: int, start: int) -> None:
    """Merge a task's labels into its images' top-k: only images with a label above their k-th best so far (after
    the first blocks, few), and of those only the labels above it; a tie with the k-th goes to the lower index,
    already kept."""
    kth = state.best_values[first:first + len(logits), -1]
    improved = np.flatnonzero(highest > kth)
    if not improved.size:
        return
    full = np.isfinite(kth[improved])
    if not full.all():  # images without k labels yet (the first block): the block's own top-k
        _merge_block_top(state, logits, first + improved[~full], improved[~full], start)
        improved = improved[full]
        if not improved.size:
            return
    rows = first + improved
    k = state.k
    part = logits[improved]
    row, column = np.divmod(np.flatnonzero(part > kth[improved][:, None]), part.shape[1])  # by image, then label
    group = np.concatenate((np.repeat(np.arange(len(rows)), k), row))
    values = np.concatenate((state.best_values[rows].ravel(), part[row, column]))
    labels = np.concatenate((state.best_labels[rows].ravel(), column + start))
    order = np.lexsort((labels, -values, group))
    counts = k + np.bincount(row, minlength=len(rows))
    kept = order[((np.cumsum(counts) - counts)[:, None] + np.arange(k)).ravel()]
    state.best_values[rows] = values[kept].reshape(-1, k)
    state.best_labels[rows] = labels[kept].reshape(-1, k)


def _merge_block_top(state: _State, logits: np.ndarray, rows: np.ndarray, local: np.ndarray, start: int) -> None:
    """The top-k of images' rows of ``logits`` merged into theirs."""
    part = logits if len(local) == len(logits) else logits[local]
    picked = top_k_indices(part, state.k)
    values = np.concatenate((state.best_values[rows], np.take_along_axis(part, picked, axis=1)), axis=1)
    labels = np.concatenate((state.best_labels[rows], picked + start), axis=1)
    state.best_values[rows], state.best_labels[rows] = _merge_top(values, labels, state.k)


def _rescale(state: _State, rows: np.ndarray, reference: np.ndarray) -> None:
    """Move images' reference up to ``reference``: what was summed against the old one shrinks with it."""
    factor = np.exp(state.reference[rows] - reference)
    state.total[rows] *= factor
    for level in state.levels:
        level.carry[rows] *= factor
        level.mass[rows] = np.where(level.mass[rows] < 0, -1.0, level.mass[rows] * factor)
    state.reference[rows] = reference


def _score(state: _State, block: _Block, first: int, last: int) -> None:
    """One task: images ``first..last`` against one label block, every per-image answer updated in place."""
    n, m = last - first, block.stop - block.start
    logits = _buffer("logits", n * m, np.float32).reshape(n, m)
    np.matmul(state.units[first:last], block.units.T, out=logits)  # images x labels, as classify computes it
    logits *= state.scale
    targets = state.targets[first:last]
    inside = np.flatnonzero((targets >= block.start) & (targets < block.stop))
    if inside.size:
        state.true_logit[first + inside] = logits[inside, targets[inside] - block.start]
    highest = logits.max(axis=1)
    _keep_top(state, logits, highest, first, block.start)
    reference = state.reference[first:last]
    if block.start == 0:
        reference[:] = highest
    else:
        grown = np.flatnonzero(highest > reference + RESCALE_ABOVE)
        if grown.size:
            _rescale(state, first + grown, highest[grown].astype(np.float64))
    logits -= reference.astype(np.float32)[:, None]
    probs = np.exp(logits, out=logits)  # times exp(reference - the log of the softmax's denominator)
    if not state.levels:
        state.total[first:last] += probs.sum(axis=1, dtype=np.float64)
        return
    # Each rank's pieces summed: the narrowest rank's from the labels (float32: numpy sums a contiguous run
    # pairwise, within 1e-7 of float64 even at 50,000 labels, and a third faster), then in float64, each broader
    # rank's from the pieces of the rank below (every boundary of a broader run is one of a narrower run).
    sums = probs
    level_sums: list[np.ndarray] = []
    for piece in block.levels:
        out = _buffer(f"sums{len(level_sums)}", n * len(piece.starts), np.float64).reshape(n, len(piece.starts))
        if level_sums:
            sums = np.add.reduceat(sums, piece.starts, axis=1, out=out)
        else:
            out[:] = np.add.reduceat(sums, piece.starts, axis=1)
            sums = out
        level_sums.append(sums)
    state.total[first:last] += sums.sum(axis=1)
    for level, piece, sums in zip(state.levels, block.levels, level_sums, strict=True):
        carry = level.carry[first:last]
        sums[:, 0] += carry  # the part of the first run before this block
        if piece.closes:
            carry[:] = 0.0
        else:
            carry[:] = sums[:, -1]
            sums = sums[:, :-1]
            if not sums.shape[1]:
                continue
        if piece.unnamed.size:
            sums[:, piece.unnamed] = -1.0  # a run without a name at the rank is no taxon
        best = sums.argmax(axis=1)  # a tie to the lower column; across blocks, only a strictly larger sum wins
        mass = sums[np.arange(n), best]
        better = np.flatnonzero(mass > level.mass[first:last])
        level.mass[first + better] = mass[better]
        level.taxon[first + better] = piece.taxa[best[better]]


def stream_scores(image_vectors: np.ndarray, label_vectors: Callable[[int, int], np.ndarray] | np.ndarray,
                  n_labels: int, scale: float, *, k: int = 5, targets: np.ndarray | None = None,
                  runs: LineageRuns | None = None, image_block: int = IMAGE_BLOCK, label_block: int = LABEL_BLOCK,
                  workers: int | None = None, device: str | None = None) -> StreamedScores:
    """Softmax of ``scale`` x cosine between every image and every label, streamed; see the module docstring.

    ``label_vectors`` is an array (labels x d, memory-mapped or not) or a function ``(start, stop) ->`` the raw
    vectors of labels ``start..stop``, called once per block, in order, from this thread; either is normalised
    block by block. ``targets`` gives each image's label index (-1 for none), ``runs`` the lineage-ordered runs
    of the labels (None: no roll-up). ``workers`` is the number of scoring threads (default
    :func:`stream_workers`; with more than one, BLAS runs one thread per call in this process until the call
    returns). ``device`` (a torch device, e.g. ``cuda``) scores there instead, with torch
    (:func:`_stream_on_device`; blocks at least :data:`DEVICE_IMAGE_BLOCK` x :data:`DEVICE_LABEL_BLOCK`).
    """
    if callable(label_vectors):
        read = label_vectors
    else:
        array = label_vectors
        def read(start: int, stop: int) -> np.ndarray:
            return np.asarray(array[start:stop])
    n_images = len(image_vectors)
    k = min(k, n_labels)
    targets = np.full(n_images, -1, dtype=np.int64) if targets is None else np.asarray(targets, dtype=np.int64)
    ranks = [] if runs is None else [(r, ends) for r, ends in zip(runs.ranks, runs.species_ends(), strict=True)
                                     if r.taxa]  # a rank no label names has nothing to roll up to
    state = _State(units=normalise_rows(image_vectors), targets=targets, scale=np.float32(scale), k=k,
                   reference=np.zeros(n_images), total=np.zeros(n_images),
                   best_values=np.full((n_images, k), -np.inf, dtype=np.float32),
                   best_labels=np.full((n_images, k), np.iinfo(np.int64).max, dtype=np.int64),
                   true_logit=np.full(n_images, np.nan),
                   levels=[_Level(carry=np.zeros(n_images), mass=np.full(n_images, -1.0),
                                  taxon=np.zeros(n_images, dtype=np.int64)) for _ in ranks])

    if device is not None:
        _stream_on_device(state, read, n_labels, ranks, max(image_block, DEVICE_IMAGE_BLOCK),
                          max(label_block, DEVICE_LABEL_BLOCK), device)
        return _answers(state, ranks, runs)
    workers = stream_workers() if workers is None else workers
    width = max(1, min(image_block, -(-n_images // max(1, workers))))  # every worker gets images
    tasks = [(a, min(a + width, n_images)) for a in range(0, n_images, width)]
    workers = max(1, min(workers, len(tasks)))
    if workers == 1:
        for block in _blocks(read, n_labels, label_block, ranks):
            for first, last in tasks:
                _score(state, block, first, last)
        _scratch.__dict__.clear()  # this thread's buffers go with the call, as a pool's go with its threads
    else:
        from threadpoolctl import threadpool_limits

        # Each task's product on one BLAS thread, the tasks on all cores; the next block is read meanwhile.
        with threadpool_limits(1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            pending: list[Future] = []
            for block in _blocks(read, n_labels, label_block, ranks):
                for future in pending:
                    future.result()
                pending = [pool.submit(_score, state, block, first, last) for first, last in tasks]
            for future in pending:
                future.result()
    return _answers(state, ranks, runs)


def _answers(state: _State, ranks: list[tuple[RankRuns, np.ndarray]], runs: LineageRuns | None) -> StreamedScores:
    """Probabilities from the logits and sums kept, each over its image's softmax denominator."""
    n_images = len(state.total)
    total = state.total
    top_probs = np.exp(state.best_values.astype(np.float64) - state.reference[:, None]) / total[:, None]
    true_probs = np.exp(state.true_logit - state.reference) / total
    rolled = {r.rank: (np.zeros(n_images, dtype=np.int64), np.zeros(n_images)) for r in runs.ranks} if runs else {}
    for (rank_runs, _), level in zip(ranks, state.levels, strict=True):
        rolled[rank_runs.rank] = (level.taxon, np.maximum(level.mass, 0.0) / total)
    return StreamedScores(top_labels=state.best_labels, top_probs=top_probs, true_probs=true_probs, rolled=rolled)


DEVICE_IMAGE_BLOCK = 8192
"""Images scored at once on a device: with ``DEVICE_LABEL_BLOCK`` 1 GB of logits and 2 GB of their float64
copy, which a GPU of 8 GB holds, and large enough that the products run at the device's speed."""
DEVICE_LABEL_BLOCK = 32_768
"""Labels copied to the device and scored at once."""


def _stream_on_device(state: _State, read: Callable[[int, int], np.ndarray], n_labels: int,
                      ranks: list[tuple[RankRuns, np.ndarray]], image_block: int, label_block: int,
                      device: str) -> None:
    """:func:`_score` in torch on ``device``, blocks of images at once, the answers copied back into ``state``.

    The same steps and the same decisions (the reference and its rescaling, top-k by logit, runs summed as they
    complete, ties to the lower index) as the threads' path; what differs is the device's arithmetic (it
    normalises and multiplies in another order, so logits differ in float32's last place, which the scale
    magnifies: probabilities agree within about 1e-7 x the scale, and a tie that the k-th place cuts may go
    either way) and the roll-up's segmented sums, ``index_add_`` in float64 (atomic adds on a GPU).
    """
    import torch

    dev = torch.device(device)
    as_tensor = lambda array: torch.from_numpy(np.ascontiguousarray(array)).to(dev)  # noqa: E731
    units, targets = as_tensor(state.units), as_tensor(state.targets)
    reference, total = as_tensor(state.reference), as_tensor(state.total)
    best_values, best_labels = as_tensor(state.best_values), as_tensor(state.best_labels)
    true_logit = as_tensor(state.true_logit)
    levels = [(as_tensor(level.carry), as_tensor(level.mass), as_tensor(level.taxon)) for level in state.levels]
    k, n = state.k, len(state.total)
    for block in _blocks(read, n_labels, label_block, ranks, normalise=False):
        vectors = as_tensor(block.units)
        vectors = vectors / vectors.norm(dim=1, keepdim=True).clamp_min(1e-12)  # as normalise_rows does
        m = block.stop - block.start
        # Each label's piece at the narrowest rank, each piece's at the next broader rank, and so on.
        pieces, below = [], m
        for piece in block.levels:
            positions = np.repeat(np.arange(len(piece.starts)), np.diff(np.append(piece.starts, below)))
            pieces.append((torch.from_numpy(positions).to(dev), piece))
            below = len(piece.starts)
        for first in range(0, n, image_block):
            last = min(first + image_block, n)
            logits = units[first:last] @ vectors.T
            logits *= float(state.scale)
            target = targets[first:last]
            inside = ((target >= block.start) & (target < block.stop)).nonzero().squeeze(1)
            true_logit[first + inside] = logits[inside, target[inside] - block.start].double()
            highest = logits.amax(dim=1)
            values, labels = torch.topk(logits, min(k, m), dim=1)
            values = torch.cat((best_values[first:last], values), dim=1)
            labels = torch.cat((best_labels[first:last], labels + block.start), dim=1)
            order = torch.sort(labels, dim=1, stable=True).indices  # lower label first among equal values
            order = order.gather(1, torch.sort(values.gather(1, order), dim=1, descending=True, stable=True).indices)
            best_values[first:last] = values.gather(1, order[:, :k])
            best_labels[first:last] = labels.gather(1, order[:, :k])
            ref = reference[first:last]
            if block.start == 0:
                ref.copy_(highest.double())
            else:
                grown = (highest.double() > ref + RESCALE_ABOVE).nonzero().squeeze(1)
                if grown.numel():
                    rows = first + grown
                    new = highest[grown].double()
                    factor = torch.exp(reference[rows] - new)
                    total[rows] *= factor
                    for carry, mass, _ in levels:
                        carry[rows] *= factor
                        mass[rows] = torch.where(mass[rows] < 0, -1.0, mass[rows] * factor)
                    reference[rows] = new
            probs = torch.exp(logits - ref.float()[:, None])
            del logits
            if not levels:
                total[first:last] += probs.sum(dim=1, dtype=torch.float64)
                continue
            # Each rank's pieces summed in float64 from the rank below (index_add_: no running sum, whose
            # differences would lose a taxon's mass far below the image's largest).
            sums = probs.double()
            del probs
            level_sums = []
            for index, piece in pieces:
                sums = torch.zeros((last - first, len(piece.starts)), dtype=torch.float64,
                                   device=dev).index_add_(1, index, sums)
                level_sums.append(sums)
            total[first:last] += sums.sum(dim=1)
            rows = torch.arange(last - first, device=dev)
            for (carry_all, mass_all, taxon_all), (_, piece), sums in zip(levels, pieces, level_sums, strict=True):
                carry = carry_all[first:last]
                sums[:, 0] += carry
                if piece.closes:
                    carry.zero_()
                else:
                    carry.copy_(sums[:, -1])
                    sums = sums[:, :-1]
                    if not sums.shape[1]:
                        continue
                if piece.unnamed.size:
                    sums[:, torch.from_numpy(piece.unnamed).to(dev)] = -1.0
                best = sums.argmax(dim=1)  # the first of equal sums
                mass = sums[rows, best]
                better = (mass > mass_all[first:last]).nonzero().squeeze(1)
                mass_all[first + better] = mass[better]
                taxon_all[first + better] = torch.from_numpy(piece.taxa).to(dev)[best[better]]
            del sums, level_sums
    state.reference[:], state.total[:] = reference.cpu().numpy(), total.cpu().numpy()
    state.best_values[:], state.best_labels[:] = best_values.cpu().numpy(), best_labels.cpu().numpy()
    state.true_logit[:] = true_logit.cpu().numpy()
    for level, (carry, mass, taxon) in zip(state.levels, levels, strict=True):
        level.carry[:], level.mass[:], level.taxon[:] = carry.cpu().numpy(), mass.cpu().numpy(), taxon.cpu().numpy()
