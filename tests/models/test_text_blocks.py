"""A large label set is encoded into the text-embedding cache in blocks: the same vectors as one pass, a run
stopped part-way resumes with the blocks it lacks, and the entry can be read memory-mapped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cladebench.models.text import class_text_embeddings


class Counting:
    """A text tower that gives text t a vector from its characters, counts the texts it encodes and can fail
    after a number of calls (an interrupted run)."""

    model_id = "counting"
    revision = None

    def __init__(self, fail_after: int | None = None) -> None:
        self.texts: list[str] = []
        self.calls = 0
        self.fail_after = fail_after

    def encode_texts(self, texts: list[str], batch_size: int = 256) -> np.ndarray:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt
        self.calls += 1
        self.texts += texts
        return np.array([[len(t), sum(map(ord, t)) % 97 + 1, t.count("a") + 1] for t in texts], dtype=np.float32)


LABELS = [f"label {i} {'a' * (i % 5)}" for i in range(23)]


def test_blocks_give_the_vectors_of_one_pass(tmp_path: Path) -> None:
    whole = class_text_embeddings(Counting(), LABELS, "a photo of {c}.", cache_dir=tmp_path / "one")
    blocked = class_text_embeddings(Counting(), LABELS, "a photo of {c}.", cache_dir=tmp_path / "blocks",
                                    block_labels=5)
    np.testing.assert_array_equal(blocked, whole)
    assert not list((tmp_path / "blocks").rglob("*.parts")), "the joined blocks' folder is removed"
    again = Counting()
    cached = class_text_embeddings(again, LABELS, "a photo of {c}.", cache_dir=tmp_path / "blocks", mmap=True)
    assert again.calls == 0 and isinstance(cached, np.memmap)
    np.testing.assert_array_equal(cached, whole)


def test_an_interrupted_run_resumes_with_the_blocks_it_lacks(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        class_text_embeddings(Counting(fail_after=2), LABELS, "{c}", cache_dir=tmp_path, block_labels=5)
    assert not [p for p in tmp_path.rglob("*.npy") if p.parent.suffix != ".parts"], "no entry until it is whole"
    assert len(list(tmp_path.rglob("*.parts/*.npy"))) == 2  # the two blocks finished before the stop
    resumed = Counting()
    vectors = class_text_embeddings(resumed, LABELS, "{c}", cache_dir=tmp_path, block_labels=5)
    assert resumed.texts == LABELS[10:]  # only the labels of the missing blocks are encoded
    np.testing.assert_array_equal(vectors, class_text_embeddings(Counting(), LABELS, "{c}", cache_dir=tmp_path / "x"))
