"""The verb ``reviews``: export the expert reviews of a dataset (``cladebench serve``'s review area writes them).

Every review ever made (changes of mind included, in the order they were committed), the rows every reviewer
agrees on, or the rows where reviewers disagree, as CSV (to stdout by default) or Parquet. A file is written
whole or not at all. The reviews table is read, never written.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cladebench.cli.verbs import verb
from cladebench.errors import UsageError
from cladebench.paths import WRONG_KIND, write_refusal

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class ReviewsConfig:
    """Export the expert reviews of a dataset (made in `cladebench serve`): every review, the agreed labels, or the
    disagreements, as CSV or Parquet. In CSV a text cell starting with = + - @ tab or CR is written with a leading '
    so that a spreadsheet shows it as text, not a formula; Parquet keeps every value as stored."""

    dataset: str
    """Path or URI of the Lance dataset whose reviews are exported (they are kept in DATASET/_cladebench)."""
    format: Literal["csv", "parquet"] = "csv"
    """csv (to stdout unless --out-file) or parquet (needs --out-file)."""
    out_file: Path | None = None
    """File to write; CSV goes to stdout when omitted."""
    view: Literal["all", "agreed", "disagreements"] = "all"
    """all: every review in commit order (changes of mind included); agreed: one row per row whose reviewers
    agree (the latest review); disagreements: each reviewer's current label on every disputed row."""

    def __post_init__(self) -> None:
        if self.format == "parquet" and self.out_file is None:
            raise UsageError("--format parquet needs --out-file FILE (Parquet is not written to a terminal)")
        if self.out_file is not None and write_refusal(self.out_file, folder=False) == WRONG_KIND:
            raise UsageError(f"--out-file {self.out_file} is a folder; give a file name")


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP's CSV-injection list): a note
``=HYPERLINK(...)`` typed into the review form must open as text, not as a link or a command."""


def as_text_cell(value: str | None) -> str | None:
    """``value`` with a leading ``'`` when it starts with one of :data:`FORMULA_STARTS` (OWASP's escape: a
    spreadsheet shows the rest as text), else unchanged."""
    return "'" + value if value is not None and value.startswith(FORMULA_STARTS) else value


def _csv_ready(table: pa.Table) -> pa.Table:
    """The table as CSV cells: the suggestions list as JSON text (CSV has no lists), and every text cell a
    spreadsheet would run as a formula escaped (:func:`as_text_cell`). Parquet is written as stored."""
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    if "suggestions" in table.column_names:
        text = pa.array([None if s is None else json.dumps(s, ensure_ascii=False)
                         for s in table.column("suggestions").to_pylist()], pa.string())
        table = table.set_column(table.column_names.index("suggestions"), "suggestions", text)
    for i, field in enumerate(table.schema):
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            cells = pa.array([as_text_cell(v) for v in table.column(i).to_pylist()], field.type)
            table = table.set_column(i, field, cells)
    return table


@verb("reviews", ReviewsConfig, "export the expert reviews of a dataset (all, agreed, or disagreements) as CSV or "
                                "Parquet")
def _reviews(config: ReviewsConfig) -> int:
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    from cladebench import store
    from cladebench.paths import atomic_write, atomic_write_parquet
    from cladebench.store.reviews import read_reviews, review_summary, reviews_path

    store.open_dataset(config.dataset)  # no dataset there: exit 3, not an empty export
    table = read_reviews(reviews_path(config.dataset))
    summary = review_summary(table)
    if config.view == "agreed":
        table = pa.Table.from_pylist(list(summary.agreed.values()), schema=table.schema)
    elif config.view == "disagreements":
        rows = [row for by_reviewer in summary.disagreements.values() for _, row in sorted(by_reviewer.items())]
        table = pa.Table.from_pylist(rows, schema=table.schema)
    note = (f"{summary.reviews} reviews of {len(summary.current)} rows by "
            f"{len({r for by in summary.current.values() for r in by})} reviewers; {len(summary.agreed)} rows agreed, "
            f"{len(summary.disagreements)} disputed")
    if config.format == "parquet":
        assert config.out_file is not None
        atomic_write_parquet(config.out_file, table)
    else:
        buffer = io.BytesIO()
        pacsv.write_csv(_csv_ready(table), buffer)
        if config.out_file is None:
            sys.stdout.write(buffer.getvalue().decode("utf-8"))
            sys.stdout.flush()
            print(f"reviews: {note}", file=sys.stderr)
            return 0
        atomic_write(config.out_file, buffer.getvalue())
    print(f"reviews: {note}; {table.num_rows} rows ({config.view}) written to {config.out_file}")
    return 0
