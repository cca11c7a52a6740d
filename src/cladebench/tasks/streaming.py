"""Zero-shot scores streamed in blocks of images and labels: each image's top-k labels and its rolled-up
probability at every rank, without an images x labels matrix.

Why a module of its own: against a tree-of-life label set (the 1.1M species of the iNaturalist taxonomy) the
dense path (:func:`cladebench.tasks.common.classify`, one images x labels softmax) cannot run: 10,000 images
would need 44 GB for the probabilities alone. Here the images are taken ``image_block`` at a time, and for each
such block the labels ``label_block`` at a time. The softmax over ALL labels is a streaming log-sum-exp: a
running maximum logit and a running sum of ``exp(logit - max)`` per image, rescaled when the maximum grows.
The top-k labels are kept by logit (the softmax is monotone), ties to the lower label index as a stable
descending sort gives. Species probabilities are rolled up as they stream: labels are in lineage order
(:class:`~cladebench.taxonomy.LineageRuns`), so each label block adds one segmented sum per image into the
runs of the rank just above the labels, rescaled with the running sum; the broader ranks are sums of those
runs at the end. Answers equal the dense path's where both run (``tests/tasks/test_streaming.py``).

Peak memory, with B = ``image_block``, M = ``label_block``, d the embedding width, R the runs of the rank
just above the labels (129,303 genera and a few hundred unnamed runs for the iNaturalist taxonomy), k the
top-k and n the images:

    24 x B x M bytes (the scores, float32, logits then probabilities in place; when images' top-k changes, a
    copy of their columns, its negation and an int64 partition of it; the scores read as float64 by the
    roll-up) + 12 x M x d (one block of label vectors: as read, squared for the norms, normalised)
    + 10 x B x R (the roll-up sums, float64, and at most a quarter of them copied when their images' maximum
    grows) + n x (2k + 2 x ranks) x 8 (the answers)

and nothing that grows with the number of labels except R. With the defaults (B 256, M 16,384, d 512) and the
iNaturalist taxonomy that is 96 + 96 + 331 MB, plus the answers (2 MB at 10,000 images). The label vectors
themselves are read block by block, so a memory-mapped cache file
(:func:`cladebench.models.text.class_text_embeddings` with ``mmap=True``) counts as page cache, not as the
process's memory. ``bench/zeroshot_tree_of_life.py`` measures it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cladebench.store.embeddings import normalise_rows
from cladebench.taxonomy import LineageRuns, Rank

IMAGE_BLOCK = 256
"""Images scored together: the roll-up sums are R x this many float64 (265 MB at the iNat genera)."""
ARGMAX_IMAGES = 16
"""Images whose top taxon is taken at once from the roll-up sums (numpy's argmax along the runs copies them)."""
LABEL_BLOCK = 16_384
"""Labels scored together: the score block is IMAGE_BLOCK x this float32 (16 MB at the defaults)."""


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


def _merge_top(values: np.ndarray, indices: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of each row of (values, indices), by value then lower index."""
    order = np.lexsort((indices, -values), axis=1)[:, :k]
    return np.take_along_axis(values, order, axis=1), np.take_along_axis(indices, order, axis=1)


def _block_runs(runs: LineageRuns, first: int, last: int, start: int, stop: int) -> Any:
    """The run matrix of labels ``start..stop`` (runs ``first..last`` of the narrowest rank): each run's labels
    in the block, so a run cut by the block's edges gets its part here and the rest from the next block."""
    import scipy.sparse

    starts = np.clip(runs.ranks[0].starts[first:last + 1] - start, 0, None)
    indptr = np.append(starts, stop - start)
    # float64, so each run's part is summed in float64 (a genus of a thousand species summed in float32 drifts by
    # more than 1e-6); the product then reads the float32 scores as float64, one block at a time.
    return scipy.sparse.csr_matrix((np.ones(stop - start), np.arange(stop - start), indptr),
                                   shape=(last - first + 1, stop - start))


def stream_scores(image_vectors: np.ndarray, label_vectors: Callable[[int, int], np.ndarray] | np.ndarray,
                  n_labels: int, scale: float, *, k: int = 5, targets: np.ndarray | None = None,
                  runs: LineageRuns | None = None, image_block: int = IMAGE_BLOCK, label_block: int = LABEL_BLOCK,
                  progress: Callable[[int], Any] | None = None) -> StreamedScores:
    """Softmax of ``scale`` x cosine between every image and every label, streamed; see the module docstring.

    ``label_vectors`` is an array (labels x d, memory-mapped or not) or a function ``(start, stop) ->`` the raw
    vectors of labels ``start..stop``; either is normalised block by block. ``targets`` gives each image's label
    index (-1 for none), ``runs`` the lineage-ordered runs of the labels (None: no roll-up). ``progress`` is
    called with the number of images finished after each image block.
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
    top_labels = np.zeros((n_images, k), dtype=np.int64)
    top_probs = np.zeros((n_images, k), dtype=np.float64)
    true_probs = np.full(n_images, np.nan)
    if runs is not None and not runs.ranks:  # labels at kingdom: nothing to roll up to
        runs = None
    ranks = [] if runs is None else list(runs.ranks)
    rolled = {r.rank: (np.zeros(n_images, dtype=np.int64), np.zeros(n_images)) for r in ranks}
    units = normalise_rows(image_vectors)
    scale32 = np.float32(scale)
    for a in range(0, n_images, image_block):
        b = min(a + image_block, n_images)
        block_images = units[a:b]
        width = b - a
        columns = np.arange(width)
        maximum = np.full(width, -np.inf)
        total = np.zeros(width)
        best_values = np.full((width, k), -np.inf, dtype=np.float32)
        best_labels = np.full((width, k), np.iinfo(np.int64).max, dtype=np.int64)
        true_logit = np.full(width, np.nan)
        # Species-major (runs x images): the roll-up is then a product with a run matrix, at memory speed.
        sums = None if runs is None else np.zeros((len(runs.ranks[0].taxon_of_run), width))
        block_targets = targets[a:b]
        for c in range(0, n_labels, label_block):
            e = min(c + label_block, n_labels)
            # Labels x images, so each label's row of scores is contiguous for the roll-up.
            scores = normalise_rows(np.asarray(read(c, e), dtype=np.float32)) @ block_images.T
            scores *= scale32
            inside = np.flatnonzero((block_targets >= c) & (block_targets < e))
            true_logit[inside] = scores[block_targets[inside] - c, inside]
            block_max = scores.max(axis=0)
            # Top-k by logit: only images with a label above their k-th best so far are merged (after the first
            # blocks, fewer); a tie with the k-th goes to the lower index, already kept.
            improved = np.flatnonzero(block_max > best_values[:, -1])
            if improved.size:
                part = np.ascontiguousarray(scores[:, improved].T)
                picked = top_k_indices(part, k)
                values = np.concatenate((best_values[improved], np.take_along_axis(part, picked, axis=1)), axis=1)
                labels = np.concatenate((best_labels[improved], picked + c), axis=1)
                best_values[improved], best_labels[improved] = _merge_top(values, labels, k)
            # Streaming log-sum-exp: rescale what was summed when an image's maximum grows.
            block_max = block_max.astype(np.float64)
            grown = np.flatnonzero(block_max > maximum)
            if grown.size:
                factor = np.exp(maximum[grown] - block_max[grown])
                total[grown] *= factor
                if sums is not None and grown.size * 4 > width:
                    sums *= np.exp(np.where(block_max > maximum, maximum - block_max, 0.0))  # in place, no copy
                elif sums is not None:
                    sums[:, grown] *= factor  # a copy of the few images' columns
                maximum[grown] = block_max[grown]
            scores -= maximum.astype(np.float32)
            np.exp(scores, out=scores)
            total += scores.sum(axis=0, dtype=np.float64)
            if sums is not None and runs is not None:
                first, last = int(runs.run_of_species[c]), int(runs.run_of_species[e - 1])
                sums[first:last + 1] += _block_runs(runs, first, last, c, e) @ scores
        top_labels[a:b] = best_labels
        top_probs[a:b] = np.exp(best_values.astype(np.float64) - maximum[:, None]) / total[:, None]
        true_probs[a:b] = np.exp(true_logit - maximum) / total
        if sums is not None and runs is not None:
            sums /= total
            level_sums = sums
            for level, rank_runs in enumerate(ranks):
                # The broader rank's sums first, then this rank's unnamed runs are put out of the running in place
                # (no copy of the named ones: at the genus rank that would be the sums' size again).
                broader = ranks[level + 1].matrix @ level_sums if level + 1 < len(ranks) else None
                if rank_runs.taxa:
                    level_sums[rank_runs.taxon_of_run < 0] = -1.0
                    # argmax down the runs copies what it reads into rows: a few images at a time, not all of them.
                    best = np.concatenate([level_sums[:, i:i + ARGMAX_IMAGES].argmax(axis=0)
                                           for i in range(0, width, ARGMAX_IMAGES)])
                    rolled[rank_runs.rank][0][a:b] = rank_runs.taxon_of_run[best]
                    rolled[rank_runs.rank][1][a:b] = level_sums[best, columns]
                level_sums = broader
            del sums, level_sums  # before the next block's sums are made: never two of them at once
        if progress is not None:
            progress(width)
    return StreamedScores(top_labels=top_labels, top_probs=top_probs, true_probs=true_probs, rolled=rolled)
