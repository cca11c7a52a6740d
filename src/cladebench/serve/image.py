"""One image: the full picture, its lineage, where it came from and under what license, its nearest neighbours in
every embedding column, and what each loaded run predicted for it.

The full image is sent as stored only when its bytes are a format browsers show as a picture (JPEG, PNG, WebP,
GIF); anything else is decoded and sent as PNG, so a stored SVG or HTML file can never run as a page of this
server. Links to a source or a license are links only when they are ``http(s)``: a ``javascript:`` URL in the
data stays text.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response

from cladebench.errors import CladebenchError
from cladebench.images import ImageDecodeError, decode_image, sniff_format
from cladebench.serve.areas import AREAS, Area
from cladebench.serve.browse import OVERLAY, checked_filter, display_name, view_uuids
from cladebench.serve.filters import PAGE_SIZE, Filters, filter_errors, view_link
from cladebench.serve.pages import STATIC_DIR, render
from cladebench.serve.runs import KEEP as RUNS_KEEP
from cladebench.serve.runs import ordered
from cladebench.serve.runs_data import PredictionFilter, run_pair, said_about
from cladebench.serve.state import AppState, ServeState
from cladebench.serve.thumbs import ensure
from cladebench.serve.vectors import columns_of, like
from cladebench.store import sql_literal
from cladebench.taxonomy import RANK_COLUMNS

router = APIRouter()

STRIP = 12
"""Neighbours shown per embedding column."""
SHOWN_AS_IS = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp", "gif": "image/gif"}
"""Formats sent as stored, by their sniffed signature."""
FACTS = ("scientific_name", "common_name", "taxon_id", "observed_on", "latitude", "longitude", "source_dataset",
         "source_id", "source_url", "license_name", "license_link", "attribution", "seen_in_training",
         "image_format")
"""The facts of the side table, in this order (then any other column of the dataset)."""


def safe_link(value: object) -> str | None:
    """``value`` when it is an http(s) URL (a link), else None (shown as text)."""
    text = str(value or "").strip()
    return text if text.lower().startswith(("http://", "https://")) else None


class Row(dict):
    """A dataset row for the pages: a column the dataset lacks reads as None, as a null value does.

    Every column but ``uuid`` and ``image`` is optional (``subset --columns`` keeps any few), so a template that
    shows ``row.common_name`` must get "unknown", not an error, from a dataset without that column."""

    def __missing__(self, key: str) -> None:
        return None


def read_row(state: ServeState, uuid: str, columns: list[str]) -> Row:
    """The row ``uuid`` (``columns`` of it, any other reading as None); a 404 page when no row has that uuid."""
    table = state.dataset.to_table(columns=columns, filter=f"uuid = {sql_literal(uuid)}", limit=1)
    if table.num_rows == 0:
        raise CladebenchError(f"uuid {uuid!r} is not in the dataset")
    return Row(table.to_pylist()[0])


def lineage(row: dict[str, object]) -> list[tuple[str, str, str]]:
    """(rank, name, link to the grid at that node) from kingdom down, for the ranks the row names."""
    chosen: dict[str, str] = {}
    found = []
    for rank in RANK_COLUMNS:
        name = row.get(rank)
        if not name:
            continue
        chosen[rank] = str(name)
        found.append((rank, str(name), Filters(ranks=tuple(chosen.items())).link()))
    return found


def facts(state: ServeState, row: dict[str, object]) -> list[tuple[str, object, str | None]]:
    """(column, value, link or None) of the side table: the canonical facts first, then the rest."""
    skip = {"uuid", "image", *RANK_COLUMNS, *columns_of(state)}
    order = [c for c in FACTS if c in row] + [c for c in row if c not in FACTS and c not in skip]
    shown = []
    for column in order:
        value = row[column]
        if value is None or value == []:
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        link = safe_link(value) if column in ("source_url", "license_link") else None
        shown.append((column, value, link))
    return shown


VIEWS = ("browse", "runs")
"""The grids an image page can step through (``view=``): the browse grid and the runs' grid."""


def view_order(state: ServeState, query: dict[str, str]) -> list[str] | None:
    """The uuids of the grid the query names (``view=``), in its order; None when the page was not opened from one."""
    view = query.get("view")
    if view not in VIEWS:
        return None
    if view == "runs":
        filters = Filters.from_query(query, state.columns, keep=RUNS_KEEP)
        index, other = run_pair(state, query)
        sort = query.get("sort") or "errors"
        with filter_errors(filters.where):
            return ordered(state, index, sort, other if sort == "disagree" else None, checked_filter(state, filters),
                           truth=query.get("truth"), pred=query.get("pred"), group=query.get("group_of_run"))
    filters = Filters.from_query(query, state.columns, keep=OVERLAY)
    overlay = PredictionFilter.from_query(query, state)
    with filter_errors(filters.where):
        uuids = view_uuids(state, checked_filter(state, filters))
    return overlay.select(state, uuids) if overlay is not None and overlay.narrows else uuids


def steps(state: ServeState, uuid: str, query: dict[str, str]) -> dict[str, object] | None:
    """Previous and next image in the grid the page was opened from, and where this one is in it."""
    uuids = view_order(state, query)
    if not uuids or uuid not in uuids:
        return None
    at = uuids.index(uuid)
    keep = [(k, v) for k, v in query.items() if k not in ("page", "view")]

    def link(other: str) -> str:
        return view_link("/image/" + quote(other, safe=""), keep, query["view"])

    back = "/" if query["view"] == "browse" else "/runs"
    page = at // PAGE_SIZE + 1
    return {"position": at + 1, "total": len(uuids), "previous": link(uuids[at - 1]) if at > 0 else None,
            "next": link(uuids[at + 1]) if at + 1 < len(uuids) else None,
            "grid": back + "?" + urlencode([*keep, *((("page", str(page)),) if page > 1 else ())])}


def same_species(row: Row | Mapping[str, object], hit: Mapping[str, object]) -> bool:
    """Whether a neighbour is of the image's own species (both name one, the same): the neighbours a reader
    checks a label against, marked on the page."""
    mine, theirs = row.get("species"), hit.get("species")
    return bool(mine) and bool(theirs) and str(mine).casefold() == str(theirs).casefold()


@router.get("/image/{uuid:path}")
def image_page(uuid: str, request: Request, state: AppState) -> Response:
    """The page of row ``uuid``."""
    columns = [c for c in state.columns if c != "image" and c not in columns_of(state)]
    row = read_row(state, uuid, columns)
    strips = []
    for column in columns_of(state):
        found = like(state, column, uuid, k=STRIP)
        if found is not None:
            have = ensure(state, [h["uuid"] for h in found.hits])
            hits = [{**h, "name": display_name(h), "thumb": h["uuid"] in have, "same": same_species(row, h)}
                    for h in found.hits]
            strips.append({"column": column, "hits": hits, "indexed": found.indexed})
        else:
            strips.append({"column": column, "hits": [], "indexed": False})
    return render(request, "image/page.html", uuid=uuid, row=row, name=display_name(row), lineage=lineage(row),
                  steps=steps(state, uuid, dict(request.query_params)),
                  facts=facts(state, row), strips=strips, said=said_about(state, uuid),
                  attribution=row.get("attribution"), source=safe_link(row.get("source_url")),
                  license_link=safe_link(row.get("license_link")))


@router.get("/full/{uuid:path}")
def full_image(uuid: str, state: AppState) -> Response:
    """Row ``uuid``'s image: as stored when browsers show that format, else decoded and sent as PNG."""
    data = read_row(state, uuid, ["uuid", "image"]).get("image")
    kind = sniff_format(data) if data else None
    if data and kind in SHOWN_AS_IS:
        return Response(bytes(data), media_type=SHOWN_AS_IS[kind], headers={"Cache-Control": "private, max-age=3600"})
    try:
        picture = decode_image(data)
    except ImageDecodeError:
        return FileResponse(STATIC_DIR / "no-image.svg", media_type="image/svg+xml")
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return Response(out.getvalue(), media_type="image/png")


AREAS.add("image", Area(router=router, order=20))
