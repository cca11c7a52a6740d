"""What every build writes last into its staging folder: the one left-out record, the card that shows it, and
the summary record (``build.json``).

Why a module: the left-out record (:mod:`cladebench.store.left_out`) and the card's lines on it are written in
one step, so no builder writes one without the other or words the counts its own way; a builder supplies its
left-out rows, its card text and its summary.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.store.left_out import LEFT_OUT_FILE, left_out_counts, left_out_lines, read_left_out, write_left_out

if TYPE_CHECKING:
    import pyarrow as pa

CARD_FILE = "README.md"
"""The card's file name in every build's output."""


def left_out_section(folder: str | Path) -> list[str]:
    """The card's lines on the build's ``left_out.parquet``, its counts shown as ``cladebench info`` shows them
    (:func:`cladebench.store.left_out.left_out_lines`), so a card and ``info`` never word one record two ways."""
    lines = left_out_lines(left_out_counts(read_left_out(folder)), LEFT_OUT_FILE)
    return [f"Each record left out is a row of `{LEFT_OUT_FILE}` (`key`, `stage`, `reason`, `detail` first, as "
            "every builder writes it); by stage and reason:", "", "```", *(lines or ["left out: nothing"]), "```", ""]


def write_reports(staging: Path, left_out: pa.Table | None, card: Callable[[Sequence[str]], str],
                  record: Mapping[str, object], record_name: str = "build.json") -> None:
    """Write ``left_out`` (:func:`cladebench.store.left_out.left_out_table`'s; None: already written), then the
    card, given :func:`left_out_section` to show, then ``record`` as JSON, all in ``staging``."""
    if left_out is not None:
        write_left_out(staging, left_out)
    (staging / CARD_FILE).write_text(card(left_out_section(staging)), encoding="utf-8")
    (staging / record_name).write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")


__all__ = ["CARD_FILE", "left_out_section", "write_reports"]
