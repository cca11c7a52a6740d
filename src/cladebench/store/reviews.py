"""Expert reviews of a dataset's rows: a Lance table beside the dataset that is only ever appended to.

A camera-trap image labelled only to genus needs a person to name its species; a model's guess is not a label.
Each review is one row: the row's uuid, the taxon picked (its lineage down to the rank picked) or "not
identifiable", who reviewed, when, an optional note and confidence, the run and model whose suggestions were on
the screen, and the dataset version reviewed. Reviews live in ``<dataset>/_cladebench/reviews.lance`` (the folder
where cladebench keeps what belongs to a dataset but is not a column: :func:`~cladebench.store.embeddings.state_dir`;
for a remote dataset, this machine's cache), so they travel with a local dataset and never touch its columns.

Nothing is overwritten: every review is a Lance append (a new version), a reviewer who changes their mind adds a
later row, and a second reviewer's label sits beside the first. :func:`review_summary` reads the table into each
reviewer's current label per row (their last), the rows every reviewer agrees on, and the rows where they
disagree. Writers on several threads or processes all land: appends do not conflict in Lance, and the one write
that could (creating the table) is done under a file lock. A review is acknowledged only after its append has
committed, so a server killed at any moment loses no review it acknowledged.
"""

from __future__ import annotations

import contextlib
import uuid as uuid_module
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from cladebench.errors import CladebenchError, UsageError
from cladebench.paths import held_lock
from cladebench.store.checks import uuid_problem
from cladebench.store.embeddings import state_dir
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank

REVIEWS_TABLE = "reviews.lance"
"""The reviews table's name inside the dataset's state folder."""
NOT_IDENTIFIABLE = "not identifiable"
"""The verdict of a reviewer who cannot name any taxon from the image; stored with no taxon and no rank."""
CONFIDENCES = ("low", "medium", "high")
"""How sure a reviewer says they are (optional)."""
APPEND_ATTEMPTS = 8
"""Appends retried on a commit conflict before giving up (Lance retries inside each attempt as well)."""

REVIEW_SCHEMA = pa.schema([
    pa.field("review_id", pa.string(), nullable=False),
    pa.field("uuid", pa.string(), nullable=False),
    pa.field("taxon", pa.string()),
    pa.field("rank", pa.string()),
    *(pa.field(column, pa.string()) for column in RANK_COLUMNS),
    pa.field("not_identifiable", pa.bool_(), nullable=False),
    pa.field("reviewer", pa.string(), nullable=False),
    pa.field("reviewed_at", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("note", pa.string()),
    pa.field("confidence", pa.string()),
    pa.field("run", pa.string()),
    pa.field("model", pa.string()),
    pa.field("suggestions", pa.list_(pa.string())),
    pa.field("dataset_uri", pa.string()),
    pa.field("dataset_version", pa.int64()),
])
"""One row per review. ``taxon`` is the name at ``rank`` (the binomial at species), the rank columns hold its
lineage down to ``rank`` (narrower ranks null); a "not identifiable" review has ``not_identifiable`` true and no
taxon, rank or lineage. ``suggestions`` are the labels the reviewer was shown, best first."""


@dataclass(frozen=True)
class Review:
    """One reviewer's verdict on one row, as it is appended."""

    uuid: str
    """The reviewed row's uuid."""
    lineage: Lineage | None
    """The taxon picked, as its lineage down to ``rank``; None for "not identifiable"."""
    rank: Rank | None
    """The rank the reviewer named (species, genus, ... any rank); None for "not identifiable"."""
    reviewer: str
    """Who reviewed: the token's owner when the server requires a token, else the name given."""
    note: str | None = None
    """Free text: why, what else could it be."""
    confidence: str | None = None
    """One of :data:`CONFIDENCES`, or None when not given."""
    run: str | None = None
    """The run whose suggestions were shown (its label or path), if any."""
    model: str | None = None
    """The model of that run, if any."""
    suggestions: tuple[str, ...] = ()
    """The labels shown to the reviewer, best first."""
    dataset_uri: str | None = None
    """The dataset reviewed, as it was opened."""
    dataset_version: int | None = None
    """The dataset version on the screen when the review was made."""
    reviewed_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When the review was made (UTC)."""
    review_id: str = field(default_factory=lambda: uuid_module.uuid4().hex)
    """Identifies this review: a retried append that did land is read back once."""

    def __post_init__(self) -> None:
        if uuid_problem(self.uuid) is not None:
            raise UsageError(f"a review needs the row's uuid, got {self.uuid!r} (it {uuid_problem(self.uuid)})")
        if not isinstance(self.reviewer, str) or not self.reviewer.strip():
            raise UsageError("a review needs a reviewer name")
        if (self.lineage is None) != (self.rank is None):
            raise UsageError("a review names a taxon with its rank, or neither (not identifiable)")
        if self.lineage is not None and self.rank is not None and self.lineage.names[self.rank] is None:
            raise UsageError(f"the taxon picked has no name at rank {self.rank.column}")
        if self.confidence is not None and self.confidence not in CONFIDENCES:
            raise UsageError(f"confidence must be one of {', '.join(CONFIDENCES)}, got {self.confidence!r}")

    @property
    def taxon(self) -> str | None:
        """The name at the rank picked (the binomial at species)."""
        return None if self.lineage is None or self.rank is None else self.lineage.names[self.rank]

    def row(self) -> dict[str, object]:
        """The review as a row of :data:`REVIEW_SCHEMA`."""
        names = (self.lineage.truncate(self.rank).names if self.lineage is not None and self.rank is not None
                 else (None,) * len(RANK_COLUMNS))
        return {
            "review_id": self.review_id, "uuid": self.uuid, "taxon": self.taxon,
            "rank": None if self.rank is None else self.rank.column,
            **dict(zip(RANK_COLUMNS, names, strict=True)),
            "not_identifiable": self.lineage is None, "reviewer": self.reviewer.strip(),
            "reviewed_at": self.reviewed_at, "note": (self.note or "").strip() or None,
            "confidence": self.confidence, "run": self.run, "model": self.model,
            "suggestions": list(self.suggestions), "dataset_uri": self.dataset_uri,
            "dataset_version": self.dataset_version,
        }


def reviews_path(dataset_uri: str) -> Path:
    """Where the reviews of ``dataset_uri`` are kept: ``<dataset>/_cladebench/reviews.lance`` for a local dataset."""
    return state_dir(str(dataset_uri)) / REVIEWS_TABLE


@contextlib.contextmanager
def _create_lock(path: Path) -> Iterator[None]:
    """An exclusive lock beside the table while it may be created: two first reviews at once would each create
    a version 1, and one would be lost."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with held_lock(path.parent / f"{path.name}.lock"):
        yield


def _exists(path: Path) -> bool:
    return (path / "_versions").is_dir()


def ensure_reviews_table(path: str | Path) -> None:
    """Create the empty reviews table at ``path`` unless it exists (safe when several processes race)."""
    import lance

    path = Path(path)
    if _exists(path):
        return
    try:
        with _create_lock(path):
            if not _exists(path):
                lance.write_dataset(REVIEW_SCHEMA.empty_table(), str(path), mode="create")
    except OSError as exc:
        raise CladebenchError(f"cannot create the reviews table {path}: {exc}") from None


def append_review(path: str | Path, review: Review) -> int:
    """Append one review to the table at ``path`` (created when missing); returns the version it committed.

    Returns only after the commit: the caller may acknowledge the review then. A commit conflict (another writer
    committed first) is retried; appends never conflict in their data, so every review lands.
    """
    import lance

    path = Path(path)
    ensure_reviews_table(path)
    table = pa.Table.from_pylist([review.row()], schema=REVIEW_SCHEMA)
    last: Exception | None = None
    for _ in range(APPEND_ATTEMPTS):
        try:
            return lance.write_dataset(table, str(path), mode="append").version
        except OSError as exc:
            if "onflict" not in str(exc) and "etry" not in str(exc):
                raise CladebenchError(f"cannot append to the reviews table {path}: {exc}") from None
            last = exc
    raise CladebenchError(f"cannot append to the reviews table {path} after {APPEND_ATTEMPTS} tries: {last}")


def read_reviews(path: str | Path) -> pa.Table:
    """Every review at ``path`` in the order they were committed (an empty table when there is none yet); a review
    whose append was retried after it had landed is read once."""
    import lance

    path = Path(path)
    if not _exists(path):
        return REVIEW_SCHEMA.empty_table()
    table = lance.dataset(str(path)).to_table(scan_in_order=True)
    ids = table.column("review_id").to_pylist()
    first = {rid: i for i, rid in reversed(list(enumerate(ids)))}
    if len(first) < len(ids):
        table = table.take(pa.array(sorted(first.values()), pa.int64()))
    return table.select(REVIEW_SCHEMA.names)


def label_key(row: dict[str, object]) -> tuple[object, ...]:
    """What two reviews must share to agree: both "not identifiable", or the same lineage down to the same rank."""
    if row["not_identifiable"]:
        return (NOT_IDENTIFIABLE,)
    return (row["rank"], *(row[c] for c in RANK_COLUMNS))


def label_text(row: dict[str, object]) -> str:
    """A review's verdict in words: ``Peromyscus maniculatus (species)`` or ``not identifiable``."""
    return NOT_IDENTIFIABLE if row["not_identifiable"] else f"{row['taxon']} ({row['rank']})"


@dataclass(frozen=True)
class ReviewSummary:
    """The reviews of a dataset read as labels: each reviewer's current label per row, agreement, disagreement."""

    current: dict[str, dict[str, dict[str, object]]]
    """uuid -> reviewer -> that reviewer's last review of the row (earlier ones stay in the table)."""
    agreed: dict[str, dict[str, Any]]
    """uuid -> the latest review of a row whose reviewers' current labels are all the same."""
    disagreements: dict[str, dict[str, dict[str, object]]]
    """uuid -> reviewer -> current review, for rows whose reviewers' current labels differ."""
    reviews: int
    """Reviews in the table, every one counted (changes of mind included)."""

    def disagreement_rows(self) -> list[dict[str, object]]:
        """One row per reviewer per disputed row: uuid, reviewer, label, reviewed_at, note."""
        return [{"uuid": uuid, "reviewer": reviewer, "label": label_text(row),
                 "reviewed_at": row["reviewed_at"], "note": row["note"]}
                for uuid, by_reviewer in self.disagreements.items() for reviewer, row in sorted(by_reviewer.items())]


def review_summary(table: pa.Table) -> ReviewSummary:
    """Read a reviews table (as :func:`read_reviews` returns it) into labels; later commits supersede earlier ones
    of the same reviewer on the same row (commit order, not the reviewers' clocks)."""
    current: dict[str, dict[str, dict[str, object]]] = {}
    latest: dict[str, dict[str, object]] = {}
    for row in table.to_pylist():
        current.setdefault(row["uuid"], {})[row["reviewer"]] = row
        latest[row["uuid"]] = row
    agreed, disagreements = {}, {}
    for uuid, by_reviewer in current.items():
        if len({label_key(r) for r in by_reviewer.values()}) == 1:
            agreed[uuid] = latest[uuid]
        else:
            disagreements[uuid] = by_reviewer
    return ReviewSummary(current=current, agreed=agreed, disagreements=disagreements, reviews=table.num_rows)


@dataclass(frozen=True)
class PairAgreement:
    """Two reviewers compared over the rows both of them reviewed."""

    first: str
    second: str
    rows: int
    """Rows both reviewed."""
    agreeing: int
    """Of those, rows where their current labels are the same."""
    kappa: float | None
    """Cohen's kappa of their labels over those rows (each distinct label a category); None when it is undefined
    (agreement expected by chance is 1: both gave one same label throughout)."""


@dataclass(frozen=True)
class Agreement:
    """How far reviewers agree, stated as two statistics: percent agreement over the rows two or more reviewed (all
    their current labels the same), and Cohen's kappa for each pair of reviewers (chance-corrected)."""

    rows: int
    """Rows with current labels from two or more reviewers."""
    agreeing: int
    """Of those, rows whose reviewers all give the same label."""
    pairs: tuple[PairAgreement, ...]
    """Every pair of reviewers with a row in common, by name."""

    @property
    def percent(self) -> float | None:
        """``agreeing / rows`` (a fraction); None when no row has two reviewers."""
        return self.agreeing / self.rows if self.rows else None


def cohens_kappa(first: Sequence[Hashable], second: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels of the same items: (p_o - p_e) / (1 - p_e), p_e from each rater's own
    label frequencies (as scikit-learn's ``cohen_kappa_score``); None when p_e is 1 (the statistic is undefined)."""
    n = len(first)
    if n == 0 or n != len(second):
        return None
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    categories = set(first) | set(second)
    expected = sum((first.count(c) / n) * (second.count(c) / n) for c in categories)
    return None if expected >= 1.0 else (observed - expected) / (1.0 - expected)


def reviewer_agreement(summary: ReviewSummary) -> Agreement:
    """The reviewers' agreement in ``summary`` (their current labels, :func:`label_key` deciding sameness)."""
    shared = {uuid: by for uuid, by in summary.current.items() if len(by) > 1}
    agreeing = sum(1 for uuid in shared if uuid in summary.agreed)
    reviewers = sorted({r for by in shared.values() for r in by})
    pairs = []
    for i, first in enumerate(reviewers):
        for second in reviewers[i + 1:]:
            both = [by for by in shared.values() if first in by and second in by]
            if not both:
                continue
            a = [label_key(by[first]) for by in both]
            b = [label_key(by[second]) for by in both]
            same = sum(x == y for x, y in zip(a, b, strict=True))
            pairs.append(PairAgreement(first=first, second=second, rows=len(both), agreeing=same,
                                       kappa=cohens_kappa(a, b)))
    return Agreement(rows=len(shared), agreeing=agreeing, pairs=tuple(pairs))
