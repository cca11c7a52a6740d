"""The app: every registered area mounted, the static files, errors as pages, and the guard in front of it all.

The list of areas is the import line below: an area module registers itself in
:data:`~cladebench.serve.areas.AREAS` when imported (see the package docstring for how to add one).
"""

from __future__ import annotations

import secrets

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from cladebench.errors import CladebenchError
from cladebench.serve import browse, embedding_map, image, review, runs, search  # noqa: F401  (each area registers itself)
from cladebench.serve.areas import AREAS
from cladebench.serve.pages import STATIC_DIR, render
from cladebench.serve.security import Access, Guard
from cladebench.serve.state import ServeState


def create_app(state: ServeState, access: Access | None = None) -> FastAPI:
    """The app over ``state``; ``access`` says who may use it (default: this machine only, no token)."""
    app = FastAPI(title="cladebench", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serve = state
    app.state.csrf = secrets.token_urlsafe(24)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    for area in sorted(AREAS.values(), key=lambda a: a.order):
        app.include_router(area.router)

    @app.exception_handler(CladebenchError)
    def _user_error(request: Request, exc: CladebenchError) -> HTMLResponse:
        # A filter that does not parse, an unknown column, a uuid not in the dataset: one line, shown as text.
        status = 404 if "not in the dataset" in str(exc) else 400
        return render(request, "error.html", status_code=status, message=str(exc))

    @app.exception_handler(StarletteHTTPException)
    def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return render(request, "error.html", status_code=404, message=f"no page at {request.url.path}")
        return PlainTextResponse(f"{exc.detail}\n", status_code=exc.status_code)

    @app.get("/healthz", include_in_schema=False)
    def _health() -> PlainTextResponse:
        return PlainTextResponse("ok\n")

    app.add_middleware(Guard, access=access or Access(), csrf=app.state.csrf)
    return app
