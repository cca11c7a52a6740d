"""The one record of what a build left out: ``left_out.parquet``, the same four columns first for every builder.

A researcher who reads two builders' outputs side by side joins them on what they left out, so every builder
writes it to the same file name, :data:`LEFT_OUT_FILE`, beside its table, with the columns of :data:`CORE` first:

- ``key``: the row's id, or where the record is in the source when it never became a row (``meta.csv:13``);
- ``stage``: the stage that left it out (``read``, ``check``, ``sample``, ``fetch``, ``screen``, ``write``);
- ``reason``: a short code from the builder's documented list of reasons (the card explains each);
- ``detail``: what a person needs to see why (an HTTP status, the value that failed), or null.

A builder may add columns of its own after these (the URL, the source file and row); :func:`read_left_out` reads
the four, whatever builder wrote the file, and :func:`left_out_lines` is how ``cladebench info`` and every card
show them, so the two never word the same record differently.

Why in the store: ``info`` (the store's) shows the record beside the dataset, and the store sits below curation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.errors import SchemaError, reading
from cladebench.paths import atomic_write_parquet

if TYPE_CHECKING:
    import pyarrow as pa

LEFT_OUT_FILE = "left_out.parquet"
"""The file name every builder writes its left-out records to."""
CORE = ("key", "stage", "reason", "detail")
"""The columns every left-out record has, in this order, first (all text)."""
STAGES = ("read", "resolve", "check", "sample", "fetch", "screen", "write")
"""The stages a record can be left out at, in the order a build runs them."""


@dataclass(frozen=True)
class LeftOut:
    """One record a build left out."""

    key: str | None
    stage: str
    reason: str
    detail: str | None = None


def left_out_table(table: pa.Table, *, key: str | Sequence[str | None], stage: str | Sequence[str],
                   reason: str = "reason", detail: str | None = "detail") -> pa.Table:
    """``table`` (a builder's own left-out rows) with the :data:`CORE` columns in front.

    ``key`` names the column holding each row's key, or gives the keys; ``stage`` is one stage for every row or
    one per row; ``reason`` and ``detail`` name the builder's columns for them (``detail`` None: there is none).
    The builder's columns stay after the four, under their own names (a column named like a core one is replaced).
    """
    import pyarrow as pa

    n = table.num_rows

    def text(values: pa.ChunkedArray | pa.Array | Sequence[str | None]) -> pa.Array | pa.ChunkedArray:
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            return values.cast(pa.string())
        return pa.array(list(values), pa.string())

    stages = [stage] * n if isinstance(stage, str) else list(stage)
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        raise ValueError(f"left-out stage(s) {unknown} are not among {STAGES}")
    core = {
        "key": text(table.column(key) if isinstance(key, str) else key),
        "stage": pa.array(stages, pa.string()),
        "reason": text(table.column(reason)),
        "detail": text(table.column(detail)) if detail is not None else pa.nulls(n, pa.string()),
    }
    own = {name: table.column(name) for name in table.column_names if name not in CORE}
    return pa.table({**core, **own})


def write_left_out(folder: str | Path, table: pa.Table) -> Path:
    """Write :func:`left_out_table`'s result as ``folder/left_out.parquet`` (whole or not at all)."""
    if tuple(table.column_names[:len(CORE)]) != CORE:
        raise ValueError(f"a left-out table starts with the columns {CORE}, got {table.column_names[:len(CORE)]}")
    return atomic_write_parquet(Path(folder) / LEFT_OUT_FILE, table)


def read_left_out(path: str | Path) -> list[LeftOut]:
    """The records of a ``left_out.parquet`` (or of the one in the folder ``path``), whichever builder wrote it."""
    import pyarrow.parquet as pq

    path = Path(path)
    if path.is_dir():
        path = path / LEFT_OUT_FILE
    with reading(path):
        table = pq.read_table(path)
    missing = [c for c in CORE if c not in table.column_names]
    if missing:
        raise SchemaError(f"{path}: a left-out record needs the column(s) {missing}")
    return [LeftOut(r["key"], r["stage"], r["reason"], r["detail"]) for r in table.select(list(CORE)).to_pylist()]


def find_left_out(dataset: str | Path) -> Path | None:
    """The ``left_out.parquet`` of a local dataset: in its folder, or in the build's output folder above it
    (``OUT/data/challenges.lance``); None when there is none (a remote dataset, or not made by a builder)."""
    text = str(dataset)
    if "://" in text:
        return None
    here = Path(text)
    for folder in (here, here.parent, here.parent.parent):
        if (folder / LEFT_OUT_FILE).is_file():
            return folder / LEFT_OUT_FILE
    return None


def left_out_counts(records: Iterable[LeftOut]) -> dict[str, int]:
    """``stage: reason`` -> how many records, stages in build order, then the most common reason first."""
    counts = Counter((r.stage, r.reason) for r in records)
    order = {stage: i for i, stage in enumerate(STAGES)}
    ranked = sorted(counts.items(), key=lambda item: (order.get(item[0][0], len(STAGES)), -item[1], item[0][1]))
    return {f"{stage}: {reason}": n for (stage, reason), n in ranked}


def left_out_lines(counts: Mapping[str, int], path: str | Path | None = None) -> list[str]:
    """How a left-out record is shown (by ``info`` and by every card): the total, then one line per stage and
    reason; empty when nothing was left out."""
    if not counts:
        return []
    where = f" ({path})" if path is not None else ""
    total = sum(counts.values())
    return [f"left out: {total:,} record{'s' if total != 1 else ''}{where}",
            *(f"  {what}: {n:,}" for what, n in counts.items())]


__all__ = ["CORE", "LEFT_OUT_FILE", "STAGES", "LeftOut", "find_left_out", "left_out_counts", "left_out_lines",
           "left_out_table", "read_left_out", "write_left_out"]
