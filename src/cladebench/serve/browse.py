"""The grid: a page of thumbnails of the rows that pass the filters, the taxonomy tree and the facets beside it.

Pages of :data:`~cladebench.serve.filters.PAGE_SIZE`. A page reads only its 100 rows' small columns from Lance
(``offset``/``limit`` pushed down with the filter), makes the thumbnails it lacks in one take of their images,
and links each cell to its image page. The counts beside the grid (the tree's children, groups, licenses,
sources) come from one scan of those few columns per filter, kept for the server's life: the dataset does not
change under a running server.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response

from cladebench.errors import UsageError
from cladebench.serve.areas import AREAS, Area
from cladebench.serve.filters import PAGE_SIZE, Filters, filter_errors, group_columns_of, list_columns_of, view_link
from cladebench.serve.pages import STATIC_DIR, render
from cladebench.serve.runs_data import CORRECTNESS, PredictionFilter, verdict_and_tag
from cladebench.serve.state import AppState, ServeState
from cladebench.serve.thumbs import ensure, path_of, thumbnail_file
from cladebench.taxonomy import RANK_COLUMNS

router = APIRouter()

GRID_COLUMNS = ("uuid", "scientific_name", "species", "genus", "common_name")
"""What a cell shows: the name (the deepest known) and, on hover, the common name."""
FACET_COLUMNS = ("license_name", "source_dataset")
"""Columns counted beside the grid (with every ``*_group`` column and the next rank of the tree)."""
FACET_VALUES = 60
"""Most values listed per facet (the commonest first); the rest are reachable with the where box."""
OVERLAY = ("run", "correct", "conf_min", "conf_max", "predicted", "true")
"""Query parameters of a run overlaid on the grid (:class:`~cladebench.serve.runs_data.PredictionFilter`)."""


def checked_filter(state: ServeState, filters: Filters) -> str | None:
    """The SQL of ``filters``, planned by Lance on this dataset before any row is read (errors as one line)."""
    from cladebench.evaluate.checks import check_filter_on_schema

    sql = filters.sql(state.columns, list_columns_of(state.dataset))
    if filters.where is not None:
        check_filter_on_schema(state.dataset, filters.where, option="where")
    return sql


def count(state: ServeState, sql: str | None) -> int:
    """Rows passing ``sql`` (kept per filter)."""
    return state.remembered(("count", sql), lambda: state.dataset.count_rows(filter=sql))


def facet_counts(state: ServeState, sql: str | None, columns: tuple[str, ...]) -> dict[str, list[tuple[object, int]]]:
    """Column -> (value, rows) commonest first, over the rows passing ``sql`` (one scan, kept per filter); a list
    column (CrypticBio's ``cryptic_group``) counts each row under every element of its list."""
    present = tuple(c for c in columns if c in state.columns)

    def scan() -> dict[str, list[tuple[object, int]]]:
        table = state.dataset.to_table(columns=list(present), filter=sql) if present else pa.table({})
        result = {}
        for column in present:
            values = table.column(column)
            if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
                values = pc.list_flatten(values)  # a list column is a facet by its elements: a row in each
            counts = values.value_counts()
            pairs = [(v["values"].as_py(), v["counts"].as_py()) for v in counts]
            result[column] = sorted(pairs, key=lambda p: (-p[1], "" if p[0] is None else str(p[0])))
        return result

    return state.remembered(("facets", sql, present), scan)


def next_rank(filters: Filters) -> str | None:
    """The rank whose names the tree lists: the one below the deepest chosen (kingdom when none is)."""
    chosen = [RANK_COLUMNS.index(r) for r, _ in filters.ranks]
    at = max(chosen) + 1 if chosen else 0
    return RANK_COLUMNS[at] if at < len(RANK_COLUMNS) else None


def view_uuids(state: ServeState, sql: str | None) -> list[str]:
    """uuids of the rows passing ``sql``, in dataset order (one scan of the uuid column, kept per filter)."""
    return state.remembered(("uuids", sql), lambda: state.dataset.to_table(columns=["uuid"], filter=sql)
                            .column("uuid").to_pylist())


def rows_of(state: ServeState, uuids: list[str]) -> pa.Table:
    """The grid's columns of ``uuids``, in that order, with their Lance row ids."""
    from cladebench.store import sql_literal

    shown = [c for c in GRID_COLUMNS if c in state.columns]
    if not uuids:
        return pa.table({c: pa.array([], pa.string()) for c in shown})
    table = state.dataset.to_table(columns=shown, filter=f"uuid IN ({', '.join(sql_literal(u) for u in uuids)})",
                                   with_row_id=True)
    order = {u: i for i, u in enumerate(uuids)}
    return table.take(sorted(range(table.num_rows), key=lambda i: order[table.column("uuid")[i].as_py()]))


def page_rows(state: ServeState, sql: str | None, page: int) -> pa.Table:
    """The rows of page ``page`` (from 1) with their Lance row ids."""
    shown = [c for c in GRID_COLUMNS if c in state.columns]
    return state.dataset.to_table(columns=shown, filter=sql, offset=(page - 1) * PAGE_SIZE, limit=PAGE_SIZE,
                                  with_row_id=True)


def display_name(row: dict[str, object]) -> str:
    """The deepest name a row has: its scientific name, its species, or its genus."""
    for column in ("scientific_name", "species", "genus"):
        if row.get(column):
            return str(row[column])
    return "(no name)"


def cells(state: ServeState, table: pa.Table, run: int | None = None) -> list[dict[str, object]]:
    """One dict per row for the grid template, thumbnails made for those that lack one; with ``run``, each row
    that run predicted carries its verdict and a tag (prediction and confidence)."""
    rows = table.to_pylist()
    uuids = [r["uuid"] for r in rows]
    have = ensure(state, uuids, [r["_rowid"] for r in rows])
    out = []
    for r in rows:
        cell = {"uuid": r["uuid"], "name": display_name(r), "common": r.get("common_name") or "",
                "thumb": r["uuid"] in have}
        overlay = verdict_and_tag(state, run, r["uuid"]) if run is not None else None
        if overlay is not None:
            cell["verdict"], cell["tag"] = overlay
        out.append(cell)
    return out


def page_number(value: str | None) -> int:
    try:
        page = int(value or 1)
    except ValueError:
        raise UsageError(f"page must be a whole number, got {value!r}") from None
    if page < 1:
        raise UsageError(f"page must be at least 1, got {page}")
    return page


@router.get("/")
def grid(request: Request, state: AppState) -> Response:
    """The grid of the rows passing the filters in the query."""
    query = dict(request.query_params)
    filters = Filters.from_query(query, state.columns, keep=OVERLAY)
    page = page_number(query.get("page"))
    error, rows, facets, total = None, [], {}, 0
    rank = next_rank(filters)
    overlay = PredictionFilter.from_query(query, state)
    try:
        sql = checked_filter(state, filters)
        with filter_errors(filters.where):
            if overlay is not None and overlay.narrows:
                chosen = overlay.select(state, view_uuids(state, sql))
                total = len(chosen)
                rows = cells(state, rows_of(state, chosen[(page - 1) * PAGE_SIZE:page * PAGE_SIZE]), overlay.run)
            else:
                total = count(state, sql)
                if page <= -(-total // PAGE_SIZE):
                    rows = cells(state, page_rows(state, sql, page), overlay.run if overlay else None)
            facets = facet_counts(state, sql, (*group_columns_of(state.dataset), *FACET_COLUMNS,
                                               *((rank,) if rank else ())))
    except UsageError as exc:  # a where that does not plan, or fails on a row: said as text above an empty grid
        error, rows, facets, total = str(exc), [], {}, 0
    pages = max(1, -(-total // PAGE_SIZE))
    return render(request, "browse/grid.html", filters=filters, rows=rows, total=total, page=page, pages=pages,
                  error=error, rank=rank, tree=facets.get(rank, [])[:FACET_VALUES] if rank else [],
                  groups={c: facets.get(c, [])[:FACET_VALUES] for c in group_columns_of(state.dataset)},
                  licenses=facets.get("license_name", [])[:FACET_VALUES],
                  sources=facets.get("source_dataset", [])[:FACET_VALUES], ranks=RANK_COLUMNS,
                  has_seen="seen_in_training" in state.columns, overlay=overlay, correctness=CORRECTNESS,
                  view=view_link("", filters.params(page=page if page > 1 else None), "browse"),
                  runs_labels=[run.label for run in state.runs])


@router.get("/thumb/{uuid:path}")
async def thumb(uuid: str, state: AppState) -> Response:
    """A row's thumbnail (made on first request), or the placeholder when its image does not decode.

    A cached one (a few kB, in the page cache after the grid made it) is read here on the event loop: a hop to a
    worker thread and back costs more than the read, and a page asks for 100 of them at once."""
    path = path_of(state, uuid)
    made = path if path.exists() else await run_in_threadpool(thumbnail_file, state, uuid)
    if made is None:
        return FileResponse(STATIC_DIR / "no-image.svg", media_type="image/svg+xml")
    return Response(made.read_bytes(), media_type="image/jpeg", headers={"Cache-Control": "private, max-age=86400"})


AREAS.add("browse", Area(router=router, title="Browse", path="/", order=10))
