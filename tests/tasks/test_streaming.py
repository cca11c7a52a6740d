"""Zero-shot that streams (blocks of labels scored against every image, softmax, top-k and roll-up fused) gives the
dense path's answers: top-k lists, probabilities and rolled-up probabilities at every rank to 1e-6; also when a
later label scores far above an image's first block (its sums rescaled), on any number of threads, and on a torch
device (here the CPU) to float32's rounding of the logits."""

from __future__ import annotations

import numpy as np
import pytest

from cladebench.tasks.common import classify
from cladebench.tasks.streaming import stream_scores, top_k_indices
from cladebench.taxonomy import Lineage, lineage_order, lineage_runs, top_taxa


def _labels(rng: np.random.Generator, n: int) -> list[Lineage]:
    out = {}
    while len(out) < n:
        names = [f"{'KPCOFG'[r]}{rng.integers(2 + r)}" for r in range(6)]
        if rng.random() < 0.1:
            names[int(rng.integers(1, 6))] = None  # a rank missing: that label's mass is in no taxon there
        lineage = Lineage((*names, f"e{rng.integers(50)}"))
        out[lineage.names] = lineage
    species = list(out.values())
    return [species[i] for i in lineage_order(species)]


@pytest.mark.parametrize(("seed", "image_block", "label_block"), [(0, 7, 13), (1, 64, 1000), (2, 1, 1)])
def test_streamed_scores_equal_the_dense_path(seed: int, image_block: int, label_block: int) -> None:
    rng = np.random.default_rng(seed)
    species = _labels(rng, 120)
    runs = lineage_runs(species)
    label_vectors = rng.standard_normal((len(species), 16)).astype(np.float32)
    label_vectors[5] = label_vectors[3]  # two labels tied everywhere: the lower index goes first on both paths
    targets = rng.integers(-1, len(species), size=40)
    image_vectors = label_vectors[np.maximum(targets, 0)] + rng.standard_normal((40, 16)).astype(np.float32)
    image_vectors[:4] = label_vectors[3]  # images whose best labels are the tied pair
    scale = 20.0

    streamed = stream_scores(image_vectors, label_vectors, len(species), scale, k=5, targets=targets, runs=runs,
                             image_block=image_block, label_block=label_block)
    probs = classify(image_vectors, label_vectors, scale)
    order = top_k_indices(probs, 5)
    assert streamed.top_labels.tolist() == order.tolist()
    assert streamed.top_labels[0, :2].tolist() == [3, 5]
    np.testing.assert_allclose(streamed.top_probs, np.take_along_axis(probs, order, axis=1), atol=1e-6)
    has_target = targets >= 0
    np.testing.assert_allclose(streamed.true_probs[has_target], probs[np.flatnonzero(has_target),
                                                                      targets[has_target]], atol=1e-6)
    assert np.isnan(streamed.true_probs[~has_target]).all()
    for rank, rolled in runs.roll_up(probs).items():
        best, mass = top_taxa(rolled)
        picked = streamed.rolled[rank][0]
        # The same taxon, except where two taxa tie (the planted twin labels sit in different taxa at some rank):
        # there float32 and float64 sums may round either way, and the taxon picked has the same mass to 1e-6.
        differ = np.flatnonzero(picked != best)
        assert differ.size <= 8, rank
        np.testing.assert_allclose(rolled[differ, picked[differ]], mass[differ], atol=1e-6)
        np.testing.assert_allclose(streamed.rolled[rank][1], mass, atol=1e-6)


def test_a_callable_gives_the_label_blocks() -> None:
    rng = np.random.default_rng(3)
    label_vectors = rng.standard_normal((50, 8)).astype(np.float32)
    images = rng.standard_normal((9, 8)).astype(np.float32)
    asked: list[tuple[int, int]] = []

    def read(start: int, stop: int) -> np.ndarray:
        asked.append((start, stop))
        return label_vectors[start:stop]

    streamed = stream_scores(images, read, 50, 10.0, k=3, image_block=4, label_block=20)
    assert asked[:3] == [(0, 20), (20, 40), (40, 50)]
    assert streamed.top_labels.tolist() == top_k_indices(classify(images, label_vectors, 10.0), 3).tolist()


def test_a_label_far_above_the_first_block_rescales_the_sums() -> None:
    # Each image's first label scores -scale, its own label +scale: far past the reference the first block set.
    rng = np.random.default_rng(4)
    species = _labels(rng, 60)
    runs = lineage_runs(species)
    label_vectors = rng.standard_normal((len(species), 16)).astype(np.float32)
    targets = rng.integers(1, len(species), size=12)
    image_vectors = label_vectors[targets].copy()
    label_vectors[0] = -image_vectors.sum(axis=0)
    scale = 200.0
    streamed = stream_scores(image_vectors, label_vectors, len(species), scale, k=5, targets=targets, runs=runs,
                             image_block=5, label_block=1)
    probs = classify(image_vectors, label_vectors, scale)
    order = top_k_indices(probs, 5)
    assert streamed.top_labels[:, 0].tolist() == targets.tolist()
    np.testing.assert_allclose(streamed.top_probs, np.take_along_axis(probs, order, axis=1), atol=1e-6)
    np.testing.assert_allclose(streamed.true_probs, probs[np.arange(len(targets)), targets], atol=1e-6)
    for rank, (best, mass) in runs.top(probs).items():
        np.testing.assert_allclose(streamed.rolled[rank][1], mass, atol=1e-6)
        assert (streamed.rolled[rank][0] == best).all(), rank


def test_threads_give_the_answers_of_one_thread() -> None:
    rng = np.random.default_rng(5)
    species = _labels(rng, 200)
    runs = lineage_runs(species)
    label_vectors = rng.standard_normal((len(species), 32)).astype(np.float32)
    images = rng.standard_normal((50, 32)).astype(np.float32)
    alone, threaded = (stream_scores(images, label_vectors, len(species), 30.0, runs=runs, image_block=8,
                                     label_block=17, workers=workers) for workers in (1, 3))
    assert alone.top_labels.tolist() == threaded.top_labels.tolist()
    np.testing.assert_allclose(alone.top_probs, threaded.top_probs, rtol=1e-12)
    for rank, (taxa, mass) in alone.rolled.items():
        assert taxa.tolist() == threaded.rolled[rank][0].tolist()
        np.testing.assert_allclose(mass, threaded.rolled[rank][1], rtol=1e-12)


@pytest.mark.parametrize("scale", [30.0, 200.0])  # 200: logits far above the first block's, rescaled
def test_the_device_path_gives_the_threads_answers(scale: float) -> None:
    pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    species = _labels(rng, 300)
    runs = lineage_runs(species)
    label_vectors = rng.standard_normal((len(species), 32)).astype(np.float32)
    targets = rng.integers(-1, len(species), size=70)
    images = label_vectors[np.maximum(targets, 0)] + rng.standard_normal((70, 32)).astype(np.float32)
    threads = stream_scores(images, label_vectors, len(species), scale, targets=targets, runs=runs, image_block=16,
                            label_block=40)
    # On the CPU, with the device's blocks made small enough that runs are cut by their edges.
    import cladebench.tasks.streaming as streaming

    state_blocks = (streaming.DEVICE_IMAGE_BLOCK, streaming.DEVICE_LABEL_BLOCK)
    streaming.DEVICE_IMAGE_BLOCK, streaming.DEVICE_LABEL_BLOCK = 16, 40
    try:
        device = stream_scores(images, label_vectors, len(species), scale, targets=targets, runs=runs,
                               image_block=1, label_block=1, device="cpu")
    finally:
        streaming.DEVICE_IMAGE_BLOCK, streaming.DEVICE_LABEL_BLOCK = state_blocks
    # torch normalises and multiplies in its own order: logits differ in float32's last place, which the scale
    # magnifies in the probabilities.
    tolerance = 1e-7 * scale
    assert device.top_labels.tolist() == threads.top_labels.tolist()
    np.testing.assert_allclose(device.top_probs, threads.top_probs, atol=tolerance)
    has_target = targets >= 0
    np.testing.assert_allclose(device.true_probs[has_target], threads.true_probs[has_target], atol=tolerance)
    for rank, (taxa, mass) in threads.rolled.items():
        assert device.rolled[rank][0].tolist() == taxa.tolist(), rank
        np.testing.assert_allclose(device.rolled[rank][1], mass, atol=tolerance)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hits_read_off_the_top_labels_are_top_k_hits(seed: int) -> None:
    """Zero-shot reads its top-1/top-5 hits off the top labels on both paths: on scores full of ties (and masked
    candidates' zeros) they are the hits ``top_k_hits`` counts from whole rows."""
    from cladebench.metrics import top_k_hits

    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=(300, 12)).astype(np.float64)  # four values over twelve labels: ties everywhere
    scores[rng.random(scores.shape) < 0.3] = 0.0
    targets = rng.integers(-1, 12, size=300)
    order = top_k_indices(scores, 5)
    for k in (1, 5):
        read_off = (order[:, :k] == targets[:, None]).any(axis=1) & (targets >= 0)
        assert read_off.tolist() == top_k_hits(scores, targets, k).tolist()
