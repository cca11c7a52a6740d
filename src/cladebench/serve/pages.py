"""The one jinja2 environment of the app, and :func:`render`, which every page goes through.

Autoescape is on for every template: species names, attributions, notes and filters come from data that anyone
may have written, and each is shown as text. Templates live in ``serve/templates`` (one folder per area), static
files in ``serve/static``; both ship inside the package, so the app works offline.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

from cladebench.serve.areas import nav_links

TEMPLATES_DIR = Path(__file__).with_name("templates")
STATIC_DIR = Path(__file__).with_name("static")


def _static(name: str) -> str:
    """The URL of a file of ``serve/static``, with its modification time so a new version is fetched."""
    path = STATIC_DIR / name
    stamp = int(path.stat().st_mtime) if path.exists() else 0
    return f"/static/{name}?v={stamp}"


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES_DIR), autoescape=True,
                                     undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    environment.globals.update(static=_static)
    environment.filters.update(count=lambda n: f"{int(n):,}",
                               percent=lambda p: "" if p is None else f"{100 * float(p):.1f}%",
                               q=lambda text: quote(str(text), safe=""))  # a uuid as one path segment
    return environment


ENVIRONMENT = _environment()
"""Shared by every area: add filters or globals here, not per area."""


def render(request: Request, template: str, *, status_code: int = 200, **context: object) -> HTMLResponse:
    """``template`` rendered with ``context`` and what the base template needs (the top bar, the request, the
    user, the CSRF value), as an HTML response."""
    state = request.app.state.serve
    page = ENVIRONMENT.get_template(template).render(
        request=request, nav=nav_links(), user=getattr(request.state, "user", None),
        csrf=request.app.state.csrf, dataset_uri=state.uri, dataset_version=state.version,
        loaded_runs=state.runs, **context)
    return HTMLResponse(page, status_code=status_code)
