"""The review area: an expert names the taxon of one row after another, by keyboard, with the runs' suggestions.

``/review`` lists the queue (genus-only rows first, least certain first: :mod:`~cladebench.serve.review_queue`)
with each row's state (yours, agreed, disputed) and the rows where reviewers disagree. ``/review/{uuid}`` shows
one row: its image, what the dataset says, every loaded run's top-5, the reviews already made, and the form:
type a taxon (completed from the dataset's taxa and the iNat taxonomy, any rank, or "not identifiable"), an
optional note and confidence, and save; the next row you have not reviewed opens. Each suggestion is marked inside
or outside the row's labelled genus. In blind mode (``?blind=1``, kept in every link) the dataset's label, the
runs' suggestions and the other reviews stay off the page until you have answered, so the label is yours alone;
the row then shows them beside your answer. The queue states how far reviewers agree (percent agreement and
Cohen's kappa per pair: :func:`cladebench.store.reviews.reviewer_agreement`). A save is one append to the
reviews table (:mod:`cladebench.store.reviews`), and the page is told it was saved only once that append has
committed, so a server killed afterwards has lost nothing. The reviewer is the person the request belongs to
(the token's owner), never a name sent with the form.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from cladebench.errors import CladebenchError, UsageError
from cladebench.serve.areas import AREAS, Area
from cladebench.serve.image import read_row
from cladebench.serve.pages import render
from cladebench.serve.review_queue import (
    QUEUE_PAGE,
    genus_mark,
    next_unreviewed,
    picked_taxon,
    queue,
    queue_position,
    reviews_of,
    reviews_table,
    status,
    suggestions,
    taxon_index,
    warm_taxon_index,
)
from cladebench.serve.state import AppState, ServeState
from cladebench.store.reviews import (
    CONFIDENCES,
    Review,
    append_review,
    label_text,
    review_summary,
    reviewer_agreement,
    reviews_path,
)
from cladebench.taxonomy import RANK_COLUMNS

router = APIRouter()

NOTE_LIMIT = 2000
"""Characters kept of a note (a longer one is refused, not cut)."""


def _user(request: Request) -> str:
    return str(getattr(request.state, "user", None) or "local")


def _path(uuid: str, blind: bool = False) -> str:
    return "/review/" + quote(uuid, safe="") + ("?blind=1" if blind else "")


def _blind(request: Request) -> bool:
    """Whether the page is in blind mode (``?blind=1``)."""
    return request.query_params.get("blind") == "1"


def _row(state: ServeState, uuid: str) -> dict[str, Any]:
    columns = [c for c in ("uuid", *RANK_COLUMNS, "scientific_name", "common_name", "challenge_group")
               if c in state.columns]
    return read_row(state, uuid, columns)


@router.get("/review")
def review_queue(request: Request, state: AppState) -> Response:
    """The queue, a page at a time, with each row's review state and the disputed rows."""
    warm_taxon_index(state)
    try:
        page = max(1, int(request.query_params.get("page") or 1))
    except ValueError:
        raise UsageError("page must be a whole number") from None
    rows = queue(state)
    table = reviews_table(state)
    states = status(table)
    mine = {u for u, r in zip(table.column("uuid").to_pylist(), table.column("reviewer").to_pylist(), strict=True)
            if r == _user(request)}
    summary = review_summary(table)
    blind = _blind(request)
    disputed = [{"uuid": uuid, "path": _path(uuid, blind),
                 "labels": [(reviewer, label_text(row), row["note"]) for reviewer, row in sorted(by.items())]}
                for uuid, by in summary.disagreements.items()]
    first = next_unreviewed(state, _user(request), table=table)
    pages = max(1, -(-len(rows) // QUEUE_PAGE))
    shown = rows[(page - 1) * QUEUE_PAGE: page * QUEUE_PAGE]
    return render(request, "review/queue.html", rows=shown, page=page, pages=pages, states=states, mine=mine,
                  disputed=disputed, start=None if first is None else _path(first.uuid, blind),
                  genus_only=sum(r.genus_only for r in rows), total=len(rows), reviews=summary.reviews,
                  reviewed=len(summary.current), path=lambda uuid: _path(uuid, blind), blind=blind,
                  marks={r.uuid: r.mark(state) for r in shown},
                  reviewers={u: len(by) for u, by in summary.current.items()},
                  agreement=reviewer_agreement(summary), table_path=str(reviews_path(state.uri)))


@router.get("/review/taxa")
def taxa(request: Request, state: AppState) -> JSONResponse:
    """Taxa completing ``q`` (``rank`` to keep one rank), as JSON for the form's list."""
    text = request.query_params.get("q", "")[:100]
    rank = request.query_params.get("rank") or None
    found = taxon_index(state).complete(text, limit=12, rank=rank)
    return JSONResponse([m.to_dict() for m in found])


@router.get("/review/next")
def next_row(request: Request, state: AppState) -> Response:
    """The next row you have not reviewed after ``after`` (the queue when none is left)."""
    found = next_unreviewed(state, _user(request), after=request.query_params.get("after") or None)
    blind = _blind(request)
    return RedirectResponse(_path(found.uuid, blind) if found else "/review" + ("?blind=1" if blind else ""),
                            status_code=303)


@router.get("/review/{uuid:path}")
def review_row(uuid: str, request: Request, state: AppState) -> Response:
    """One row to review."""
    warm_taxon_index(state)
    row = _row(state, uuid)
    table = reviews_table(state)
    position = queue_position(state, uuid)
    rows = queue(state)
    previous = rows[position - 2].uuid if position and position > 1 else None
    following = rows[position].uuid if position and position < len(rows) else None
    said = suggestions(state, uuid)
    lineage = [(rank, row[rank]) for rank in RANK_COLUMNS if row.get(rank)]
    reviews = reviews_of(table, uuid)
    blind = _blind(request)
    answered = any(r["reviewer"] == _user(request) for r in reviews)
    return render(request, "review/row.html", row=row, uuid=uuid, lineage=lineage, said=said, reviews=reviews,
                  position=position, total=len(rows), blind=blind, hidden=blind and not answered,
                  answered=answered, state_of_row=status(table).get(uuid),
                  previous=None if previous is None else _path(previous, blind),
                  following=None if following is None else _path(following, blind),
                  next_unreviewed=f"/review/next?after={quote(uuid, safe='')}" + ("&blind=1" if blind else ""),
                  toggle=_path(uuid, not blind), queue="/review" + ("?blind=1" if blind else ""),
                  image="/full/" + quote(uuid, safe=""), image_page="/image/" + quote(uuid, safe=""),
                  confidences=CONFIDENCES, save=_path(uuid), label_text=label_text,
                  mark=lambda name: genus_mark(state, row.get("genus"), name))


@router.post("/review/{uuid:path}")
async def save_review(uuid: str, request: Request, state: AppState) -> JSONResponse:
    """Append one review; answers only after the append has committed (a refusal is one line, nothing written)."""
    from starlette.concurrency import run_in_threadpool

    try:
        try:
            body = await request.json()
        except ValueError:
            raise UsageError("a review is sent as JSON") from None
        if not isinstance(body, dict):
            raise UsageError("a review is sent as a JSON object")
        return await run_in_threadpool(_save, uuid, body, _user(request), state)
    except CladebenchError as exc:
        return JSONResponse({"saved": False, "error": str(exc)}, status_code=400)


def _save(uuid: str, body: dict[str, object], user: str, state: ServeState) -> JSONResponse:
    _row(state, uuid)  # a uuid the dataset does not hold is refused
    match = picked_taxon(state, body)
    note = body.get("note") or None
    if note is not None and (not isinstance(note, str) or len(note) > NOTE_LIMIT):
        raise UsageError(f"a note is text of at most {NOTE_LIMIT} characters")
    confidence = body.get("confidence") or None
    said = [] if body.get("blind") is True else suggestions(state, uuid)  # blind: nothing was on the screen
    shown = said[0] if said else None
    review = Review(uuid=uuid, lineage=None if match is None else match.lineage,
                    rank=None if match is None else match.rank, reviewer=user, note=note,
                    confidence=confidence if isinstance(confidence, str) or confidence is None else str(confidence),
                    run="; ".join(s.label for s in said) or None,
                    model="; ".join(state.runs[s.run - 1].model_id for s in said) or None,
                    suggestions=tuple(label for label, _ in shown.top5) if shown else (),
                    dataset_uri=str(state.uri), dataset_version=state.version)
    version = append_review(reviews_path(state.uri), review)
    found = next_unreviewed(state, user, after=uuid)
    return JSONResponse({"saved": True, "review_id": review.review_id, "reviews_version": version,
                         "label": label_text(review.row()), "next": _path(found.uuid) if found else "/review"})


AREAS.add("review", Area(router=router, title="Review", path="/review", order=40))
