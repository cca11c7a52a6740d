"""Which runs can be compared at all: runs whose evaluated examples share nothing are refused, before any number.

``compare`` of a run on the demo's 392 images against one on a person's own 15 photos, or a report of both, used
to pair nothing and still name a winner on every metric. Such runs answer different questions, so ``compare`` and
``report`` refuse them (exit 2, one line naming both datasets and their fingerprints); runs that share some of
their examples are compared, and how many they share is said (:func:`example_overlap`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import UsageError
from cladebench.evaluate.record import RunRecord

FINGERPRINT_SHOWN = 12
"""Hex digits of a dataset's fingerprint named in the refusal: enough to tell two datasets apart."""


def dataset_words(record: RunRecord, path: Path) -> str:
    """``demo.lance (fingerprint 3f2a9c01b7e4)``: a run's dataset as its record names it (the run's path where the
    record names none)."""
    data: dict[str, object] = record.provenance.get("dataset") or {}
    name = data.get("benchmark") or data.get("uri") or str(path)
    fingerprint = str(data.get("fingerprint") or data.get("evaluated_fingerprint") or "unknown")
    return f"{name} (fingerprint {fingerprint[:FINGERPRINT_SHOWN]})"


def _uuids(table: pa.Table) -> pa.Array:
    return pc.unique(table.column("uuid")) if "uuid" in table.column_names else pa.array([], pa.string())


def example_overlap(tables: Sequence[pa.Table]) -> list[tuple[int, int]]:
    """Per run, (examples it shares with the first run, examples it evaluated): a run's rows counted once each (a
    few-shot run predicts an image once per draw)."""
    distinct = [_uuids(table) for table in tables]
    reference = distinct[0]
    return [(int(pc.sum(pc.is_in(uuids, value_set=reference)).as_py() or 0), len(uuids)) for uuids in distinct]


def refuse_unrelated(paths: Sequence[Path], records: Sequence[RunRecord], tables: Sequence[pa.Table],
                     numbers: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """:func:`example_overlap` of runs of one task, refused (:class:`~cladebench.errors.UsageError`, one line) when
    a run shares no example with the first. ``numbers``: how the runs are called (``[1]``, ``[2]``...)."""
    numbers = list(numbers) if numbers is not None else list(range(1, len(paths) + 1))
    overlap = example_overlap(tables)
    for i, (shared, own) in enumerate(overlap[1:], start=1):
        if shared == 0 and own:
            raise UsageError(
                f"[{numbers[0]}] {paths[0]} and [{numbers[i]}] {paths[i]} share no evaluated example: "
                f"{dataset_words(records[0], paths[0])} and {dataset_words(records[i], paths[i])}; runs on "
                "different datasets cannot be compared (report them one at a time)")
    return overlap


def overlap_words(overlap: Sequence[tuple[int, int]], numbers: Sequence[int]) -> list[str]:
    """``[2] shares 15 of its 20 examples with [1] (of 392)`` for each run whose examples are not the first's."""
    reference = overlap[0][1]
    return [f"[{numbers[i]}] shares {shared:,} of its {own:,} examples with [{numbers[0]}] (of {reference:,})"
            for i, (shared, own) in enumerate(overlap) if i and (shared != own or own != reference)]
