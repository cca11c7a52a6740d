"""The loaded runs over the dataset: their rows sorted by confidence, errors first, where two runs disagree, the
mistakes that meet the truth at one rank of the tree (``lca=family``: the cross-genus, same-family ones), and a
confusion matrix per challenge group whose cells open the images behind them.

Every view reads the runs' predictions (:mod:`cladebench.serve.runs_data`) and keeps the grid's filters: the rows
shown are those the run evaluated that also pass the filters.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from cladebench.errors import CladebenchError, UsageError
from cladebench.escaping import spreadsheet_cell
from cladebench.metrics.hierarchy import HEIGHT_COLUMN, lca_rank, lca_ranks
from cladebench.serve.areas import AREAS, Area
from cladebench.serve.browse import checked_filter, display_name, page_number, view_uuids
from cladebench.serve.filters import PAGE_SIZE, Filters, filter_errors, view_link
from cladebench.serve.pages import render
from cladebench.serve.runs_data import by_uuid, run_index, run_pair, said, short_name, usable, verdict_and_tag
from cladebench.serve.state import AppState, ServeState
from cladebench.serve.thumbs import ensure
from cladebench.store import sql_literal

router = APIRouter()

SORTS = {
    "errors": "errors first (the most confident first)",
    "least-confident": "least confident first",
    "most-confident": "most confident first",
    "disagree": "where two runs disagree",
    "taxon": "by true taxon (A to Z)",
    "severity": "the worst mistakes first (furthest from the truth on the tree)",
}
"""Orders of the runs' grid, as ``sort=`` takes them."""
CONFUSION_LABELS = 30
"""Most true labels (the commonest) a confusion matrix shows; the rest are counted in one row."""
KEEP = ("run", "other", "sort", "truth", "pred", "group_of_run", "lca")


def lca_places(state: ServeState, index: int) -> list[tuple[str, str]]:
    """Where run ``index``'s mistakes can meet the truth, as ``lca=`` takes them and as the page names them
    (``family``: same family ... ``root``: different kingdoms); none for predictions without LCA heights."""
    run = state.runs[index - 1]
    if run.predictions is None or HEIGHT_COLUMN not in run.predictions.column_names:
        return []
    rank = str((run.record.provenance.get("task") or {}).get("rank") or "species")
    return [(place, "different kingdoms" if place == "root" else f"same {place}") for place in lca_ranks(rank)]


def _meets_at(state: ServeState, index: int, lca: str) -> Callable[[dict[str, Any]], bool]:
    """Whether a predictions row of run ``index`` is a mistake whose LCA with the truth is ``lca``."""
    places = [place for place, _ in lca_places(state, index)]
    if lca not in places:
        raise UsageError(f"lca must be one of {', '.join(places)} for run [{index}], got {lca!r}" if places
                         else f"run [{index}] has no LCA heights in its predictions (written before they were, or "
                              "its labels have no lineage), so it cannot be filtered by where its mistakes land")
    rank = str((state.runs[index - 1].record.provenance.get("task") or {}).get("rank") or "species")
    return lambda row: row.get(HEIGHT_COLUMN) is not None and lca_rank(int(row[HEIGHT_COLUMN]), rank) == lca


def _passing(state: ServeState, sql: str | None) -> set[str] | None:
    """uuids passing ``sql`` (None: no filter, every row passes)."""
    if sql is None:
        return None
    return state.remembered(("uuid set", sql), lambda: set(view_uuids(state, sql)))


def ordered(state: ServeState, index: int, sort: str, other: int | None, sql: str | None,
            truth: str | None = None, pred: str | None = None, group: str | None = None,
            lca: str | None = None) -> list[str]:
    """uuids of run ``index`` that pass the filters (``lca``: only the mistakes meeting the truth at that rank, as
    :func:`lca_places` names it), in the order ``sort`` asks for."""
    if sort not in SORTS:
        raise UsageError(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    passing = _passing(state, sql)
    meets = None if lca is None else _meets_at(state, index, lca)
    pairs = [(uuid, said(state, index, row)) for uuid, row in by_uuid(state, index).items()
             if (passing is None or uuid in passing) and (meets is None or meets(row))]
    if truth is not None:
        pairs = [(u, s) for u, s in pairs if s.truth == truth]
    if pred is not None:
        pairs = [(u, s) for u, s in pairs if s.predicted == pred]
    if group is not None:
        pairs = [(u, s) for u, s in pairs if s.group == group]
    confidence = {u: (s.confidence if s.confidence is not None else 0.0) for u, s in pairs}
    if sort == "disagree":
        if other is None or other == index:
            raise UsageError("sort=disagree needs other= a second run's number")
        theirs = by_uuid(state, other)
        pairs = [(u, s) for u, s in pairs if u in theirs and theirs[u].get("pred_label") != s.predicted]
        pairs.sort(key=lambda p: -confidence[p[0]])
    elif sort == "errors":
        pairs.sort(key=lambda p: (p[1].right is not False, -confidence[p[0]]))
    elif sort == "taxon":
        pairs.sort(key=lambda p: (p[1].truth_name is None, str(p[1].truth_name or "").casefold(), -confidence[p[0]]))
    elif sort == "severity":  # the LCA height of a mistake (metrics.hierarchy): the higher, the further apart
        rows = by_uuid(state, index)
        height = {u: (rows[u].get(HEIGHT_COLUMN) if s.right is False else None) for u, s in pairs}
        pairs.sort(key=lambda p: (height[p[0]] is None, -(height[p[0]] or 0), -confidence[p[0]]))
    elif sort == "least-confident":
        pairs.sort(key=lambda p: confidence[p[0]])
    else:
        pairs.sort(key=lambda p: -confidence[p[0]])
    return [u for u, _ in pairs]


def grid_cells(state: ServeState, index: int, uuids: list[str], other: int | None) -> list[dict[str, object]]:
    """The cells of ``uuids`` (in that order): name, thumbnail, verdict and what the run(s) predicted."""
    if not uuids:
        return []
    shown: list[str] = [c for c in ("uuid", "scientific_name", "species", "genus", "common_name") if c in state.columns]
    listed = ", ".join(sql_literal(u) for u in uuids)
    table = state.dataset.to_table(columns=shown, filter=f"uuid IN ({listed})", with_row_id=True)
    rows = {r["uuid"]: r for r in table.to_pylist()}
    have = ensure(state, [u for u in uuids if u in rows], [rows[u]["_rowid"] for u in uuids if u in rows])
    theirs = by_uuid(state, other) if other else {}
    cells = []
    for uuid in uuids:
        row = rows.get(uuid, {"uuid": uuid})
        verdict = verdict_and_tag(state, index, uuid)
        assert verdict is not None  # the run predicted every uuid here
        right, tag = verdict
        cell = {"uuid": uuid, "name": display_name(row), "common": row.get("common_name") or "",
                "thumb": uuid in have, "verdict": right, "tag": tag, "other_tag": None}
        if other and uuid in theirs:  # both runs' predictions, the active run's first and marked
            cell["tag"] = f"[{index}] {tag}"
            cell["other_tag"] = f"[{other}] {verdict_and_tag(state, other, uuid)[1]}"  # type: ignore[index]
        cells.append(cell)
    return cells


CSV_COLUMNS = ("uuid", "true_label", "pred_label", "confidence", "right", HEIGHT_COLUMN)
"""Columns of a selection exported as CSV: what the grid shows of each row, in the grid's order."""


@router.get("/runs.csv")
def runs_csv(request: Request, state: AppState) -> Response:
    """The rows the runs grid selects (every page, in its order) as CSV, to take a set of mistakes elsewhere."""
    if not state.runs:
        raise UsageError("no run is loaded: there is nothing to export")
    query = dict(request.query_params)
    filters = Filters.from_query(query, state.columns, keep=KEEP)
    index, other = run_pair(state, query)
    sort = query.get("sort") or "errors"
    if not usable(state.runs[index - 1]):
        raise UsageError(f"run [{index}] has no predictions to export")
    with filter_errors(filters.where):
        uuids = ordered(state, index, sort, other if sort == "disagree" else None, checked_filter(state, filters),
                        truth=query.get("truth"), pred=query.get("pred"), group=query.get("group_of_run"),
                        lca=query.get("lca") or None)
    rows = by_uuid(state, index)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for uuid in uuids:
        s = said(state, index, rows[uuid])
        confidence = "" if s.confidence is None else f"{s.confidence:.6g}"
        writer.writerow([*map(spreadsheet_cell, (uuid, s.truth, s.predicted)), confidence,
                         "" if s.right is None else str(s.right).lower(), rows[uuid].get(HEIGHT_COLUMN)])
    name = f"run{index}-{sort}.csv"
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.get("/runs")
def runs_page(request: Request, state: AppState) -> Response:
    """The loaded runs, and the grid of one of them in the order asked for."""
    if not state.runs:
        return render(request, "runs/none.html")
    query = dict(request.query_params)
    filters = Filters.from_query(query, state.columns, keep=KEEP)
    index, other = run_pair(state, query)
    sort = query.get("sort") or "errors"
    if sort not in SORTS:  # before the page is drawn: its tabs name the sort
        raise UsageError(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    page = page_number(query.get("page"))
    error, cells, total = None, [], 0
    if not usable(state.runs[index - 1]):
        why = state.runs[index - 1].predictions_note or "no uuid and pred_label columns"
        error = f"run [{index}] has no predictions to show ({why})"
    else:
        try:
            with filter_errors(filters.where):
                uuids = ordered(state, index, sort, other if sort == "disagree" else None,
                                checked_filter(state, filters), truth=query.get("truth"), pred=query.get("pred"),
                                group=query.get("group_of_run"), lca=query.get("lca") or None)
            total = len(uuids)
            cells = grid_cells(state, index, uuids[(page - 1) * PAGE_SIZE:page * PAGE_SIZE],
                               other if sort == "disagree" else None)
        except CladebenchError as exc:
            error = str(exc)
    return render(request, "runs/grid.html", filters=filters, index=index, other=other, sort=sort, sorts=SORTS,
                  rows=cells, total=total, page=page, pages=max(1, -(-total // PAGE_SIZE)), error=error,
                  truth=query.get("truth"), pred=query.get("pred"), group=query.get("group_of_run"),
                  groups=groups_of(state, index), lca=query.get("lca") or None, lca_places=lca_places(state, index),
                  view=view_link("", [*filters.params(), ("run", str(index)), ("sort", sort),
                                      *((("other", str(other)),) if other else ())], "runs"))


def groups_of(state: ServeState, index: int) -> list[str]:
    """The challenge groups run ``index`` evaluated (from its predictions' ``group``), or [] when it has none."""
    return sorted({g for r in by_uuid(state, index).values() if (g := r.get("group")) is not None})


@router.get("/runs/confusion")
def confusion_page(request: Request, state: AppState) -> Response:
    """Truth x prediction counts of one run in one group; a cell links to its images."""
    if not state.runs:
        return render(request, "runs/none.html")
    query = dict(request.query_params)
    index = run_index(state, query.get("run"))
    groups = groups_of(state, index)
    group = query.get("group") or (groups[0] if groups else None)
    if groups and group not in groups:
        raise UsageError(f"run [{index}] has no group {group!r}; it has {', '.join(groups)}")
    rows = [said(state, index, r) for r in by_uuid(state, index).values() if group is None or r.get("group") == group]
    rows = [s for s in rows if s.truth is not None]
    counts = Counter((s.truth, s.predicted) for s in rows)
    truths = [t for t, _ in Counter(s.truth for s in rows).most_common(CONFUSION_LABELS)]
    preds = list(dict.fromkeys([*truths, *(p for _, p in sorted(counts, key=lambda k: -counts[k]))]))[:CONFUSION_LABELS]
    matrix = [(t, short_name(state, index, t), [(p, counts.get((t, p), 0)) for p in preds]) for t in truths]
    named = [(p, short_name(state, index, p)) for p in preds]
    return render(request, "runs/confusion.html", index=index, groups=groups, group=group, preds=named,
                  matrix=matrix, scored=len(rows), right=sum(1 for s in rows if s.right))


AREAS.add("runs", Area(router=router, title="Runs", path="/runs", order=40))
