"""Seeded support/query splits by class, whole sampling groups on one side (see :mod:`cladebench.tasks.fewshot`).

Why a module of its own: a draw is a function of the seed, repetition, class label, group values and uuids
only, so every embedding column of a dataset is scored on identical splits; that contract is tested on its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# --- splits ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FewShotSplit:
    """One draw: which rows are support and which are query, for one shot count and repetition."""

    shots: int
    repetition: int
    support: np.ndarray
    """Row indices of the support images: class by class in class order, each class in draw order."""
    query: np.ndarray
    """Row indices of the query images, ascending."""


@dataclass(frozen=True)
class SplitPlan:
    """Every draw of a run, the classes they cover and the classes left out (with why)."""

    splits: tuple[FewShotSplit, ...]
    """One split per (shots, repetition), shots ascending then repetition."""
    classes: tuple[str, ...]
    """The evaluated classes, in label order; class index i is ``classes[i]``."""
    targets: np.ndarray
    """Class index of every row; -1 for rows without a label or of a skipped class."""
    skipped: tuple[dict[str, Any], ...]
    """Classes not evaluated: label, images, groups, largest group and the reason."""
    seed: int
    repetitions: int
    shots: tuple[int, ...]
    min_test_per_class: int
    fingerprint: str
    """SHA-256 over every split's support and query row ids: equal fingerprints mean identical splits."""
    shots_skipped: tuple[dict[str, Any], ...] = ()
    """Shot counts asked for that the data does not allow (too few classes with enough images), with why."""

    def provenance(self) -> dict[str, object]:
        """The split's description for a run record (without the sampling unit, which the caller knows)."""
        return {
            "kind": "few-shot: per class, k support images from whole groups in seeded random order; the query is "
                    "the class's images in groups with no support image",
            "seed": self.seed,
            "repetitions": self.repetitions,
            "shots": list(self.shots),
            "min_test_per_class": self.min_test_per_class,
            "classes": len(self.classes),
            "skipped_count": len(self.skipped),
            "skipped_classes": list(self.skipped),
            "fingerprint": self.fingerprint,
        }


def _stable_int(text: str) -> int:
    """64 bits of SHA-256: a seed part that depends on the text alone (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _draw_sequence(rows: np.ndarray, groups: Sequence[str], row_ids: Sequence[str],
                   rng: np.random.Generator) -> list[tuple[int, str]]:
    """A class's images as (row, group) in draw order: groups shuffled, then each group's images shuffled.

    Groups are sorted by value and images by row id before shuffling, so the order depends on the
    values only, never on where the rows sit in the dataset.
    """
    members: dict[str, list[int]] = {}
    for row in rows:
        members.setdefault(groups[row], []).append(int(row))
    names = sorted(members)
    sequence: list[tuple[int, str]] = []
    for g in rng.permutation(len(names)):
        group = names[g]
        images = sorted(members[group], key=lambda r: row_ids[r])
        sequence.extend((images[i], group) for i in rng.permutation(len(images)))
    return sequence


def _skip_reason(images: int, groups: int, largest: int, shots: int, min_test: int) -> str | None:
    # Support closes at most (shots - 1) images of whole groups plus one more group, the largest at worst.
    guaranteed_query = images - largest - (shots - 1)
    if guaranteed_query >= min_test:
        return None
    return (f"{images} images in {groups} groups (largest {largest}): a draw of {shots} support images can leave "
            f"fewer than {min_test} query images in untouched groups")


def few_shot_splits(labels: Sequence[str | None], groups: Sequence[str], row_ids: Sequence[str], *,
                    shots: Sequence[int], repetitions: int, seed: int, min_test_per_class: int = 1,
                    classes: Sequence[str] | None = None,
                    shots_skipped: Sequence[dict[str, Any]] = ()) -> SplitPlan:
    """Seeded support/query splits over rows, by class, with whole groups on one side (see the module docstring).

    ``labels`` are the rows' class labels (``None``: not evaluated), ``groups`` their sampling units and
    ``row_ids`` stable ids (uuids) that fix the order inside a group. ``classes`` orders the labels
    (default: sorted). Supports are nested across ``shots`` within a repetition. ``shots_skipped``: the counts
    asked for and left out before (:func:`~cladebench.tasks.fewshot.task.plan_splits`), kept in the plan.
    """
    n = len(labels)
    if len(groups) != n or len(row_ids) != n:
        raise ValueError(f"labels, groups and row_ids differ in length: {n}, {len(groups)}, {len(row_ids)}")
    shots = tuple(sorted(int(k) for k in shots))
    if not shots or shots[0] < 1:
        raise ValueError(f"shots must be positive, got {shots}")
    rows_of: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        if label is not None:
            rows_of.setdefault(label, []).append(i)
    order = [c for c in classes if c in rows_of] if classes is not None else sorted(rows_of)
    kept: list[str] = []
    skipped: list[dict[str, object]] = []
    for label in order:
        sizes: dict[str, int] = {}
        for row in rows_of[label]:
            sizes[groups[row]] = sizes.get(groups[row], 0) + 1
        reason = _skip_reason(len(rows_of[label]), len(sizes), max(sizes.values()), shots[-1], min_test_per_class)
        if reason is None:
            kept.append(label)
        else:
            skipped.append({"label": label, "images": len(rows_of[label]), "groups": len(sizes),
                            "largest_group": max(sizes.values()), "reason": reason})
    targets = np.full(n, -1, dtype=np.int64)
    for index, label in enumerate(kept):
        targets[rows_of[label]] = index

    per_split: dict[tuple[int, int], tuple[list[int], list[int]]] = {(k, r): ([], []) for k in shots
                                                                       for r in range(repetitions)}
    for r in range(repetitions):
        for label in kept:
            rng = np.random.default_rng([seed, r, _stable_int(label)])
            sequence = _draw_sequence(np.asarray(rows_of[label]), groups, row_ids, rng)
            for k in shots:
                closed = {group for _, group in sequence[:k]}
                support, query = per_split[(k, r)]
                support.extend(row for row, _ in sequence[:k])
                query.extend(row for row, group in sequence if group not in closed)
    splits = tuple(
        FewShotSplit(shots=k, repetition=r, support=np.asarray(per_split[(k, r)][0], dtype=np.int64),
                     query=np.sort(np.asarray(per_split[(k, r)][1], dtype=np.int64)))
        for k in shots for r in range(repetitions)
    )
    return SplitPlan(splits=splits, classes=tuple(kept), targets=targets, skipped=tuple(skipped), seed=seed,
                     repetitions=repetitions, shots=shots, min_test_per_class=min_test_per_class,
                     fingerprint=_splits_fingerprint(splits, row_ids), shots_skipped=tuple(shots_skipped))


def _splits_fingerprint(splits: Sequence[FewShotSplit], row_ids: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for split in splits:
        for role, rows in (("support", split.support), ("query", split.query)):
            for row_id in sorted(row_ids[i] for i in rows):
                digest.update(f"{split.shots}\t{split.repetition}\t{role}\t{row_id}\n".encode())
    return digest.hexdigest()
