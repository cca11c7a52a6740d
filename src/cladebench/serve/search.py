"""Search: images by text through a model's column, and "more like this" from any image.

A text is encoded by the text tower of the column's model (``--model`` or the model its metadata names); a row's
own vector is the query of "more like this". Either way the hits are the nearest rows by cosine, through the
column's vector index when it has one, among the rows that pass the grid's filters (``where`` and the rest).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from cladebench.errors import CladebenchError
from cladebench.serve.areas import AREAS, Area
from cladebench.serve.browse import checked_filter, display_name
from cladebench.serve.filters import Filters, filter_errors
from cladebench.serve.pages import render
from cladebench.serve.state import AppState
from cladebench.serve.thumbs import ensure
from cladebench.serve.vectors import check_column, columns_of, like, search, text_vector

router = APIRouter()

HITS = 100
"""Hits of a search: one page of the grid."""


@router.get("/search")
def search_page(request: Request, state: AppState) -> Response:
    """The search form, and the hits of the text or the row (``like``) in the query."""
    query = dict(request.query_params)
    filters = Filters.from_query(query, state.columns, keep=("text", "column", "like"))
    text = (query.get("text") or "").strip()
    like_uuid = query.get("like") or None
    error, rows, how, column = None, [], None, query.get("column") or None
    if columns_of(state) and (text or like_uuid):
        try:
            column = check_column(state, column)
            where = checked_filter(state, filters)
            vector = None if like_uuid is not None else text_vector(state, column, text)
            with filter_errors(filters.where):
                if like_uuid is not None:
                    found = like(state, column, like_uuid, k=HITS, where=where)
                    if found is None:
                        raise CladebenchError(f"row {like_uuid!r} has no vector in {column}")
                else:
                    assert vector is not None  # a text search
                    found = search(state, column, vector, k=HITS, where=where)
            have = ensure(state, [h["uuid"] for h in found.hits])
            rows = [{"uuid": h["uuid"], "name": display_name(h), "common": "", "thumb": h["uuid"] in have,
                     "tag": f"cos {h['cosine_similarity']:.3f}"} for h in found.hits]
            how = "vector index" if found.indexed else "exact scan"
        except CladebenchError as exc:  # a bad filter, an unknown column, a model that cannot load: as text
            error = str(exc)
    return render(request, "search/page.html", filters=filters, text=text, like=like_uuid, column=column,
                  columns=columns_of(state), rows=rows, how=how, error=error)


AREAS.add("search", Area(router=router, title="Search", path="/search", order=30))
