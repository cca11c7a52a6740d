"""The registry of the app's areas, so adding a page never means editing the app itself.

An area is a FastAPI router and, when it has a page of its own to reach from anywhere, a link in the top bar.
The app (:mod:`cladebench.serve.app`) mounts every registered area and the base template draws the bar from the
same registry, so the two can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter

from cladebench.registry import Registry


@dataclass(frozen=True)
class Area:
    """One area of the app: its routes and its place in the top bar."""

    router: APIRouter
    """The area's routes (paths are absolute: ``/image/{uuid}``)."""
    title: str | None = None
    """Its link in the top bar; None for an area reached only from other pages."""
    path: str = "/"
    """Where the top bar's link goes."""
    order: int = 100
    """Position in the top bar, lowest first."""


AREAS: Registry[Area] = Registry("area")
"""Area name -> :class:`Area`; filled by the area modules when :mod:`cladebench.serve.app` imports them."""


def nav_links() -> list[tuple[str, str]]:
    """(title, path) of each area with a link, in bar order."""
    return [(area.title, area.path) for area in sorted(AREAS.values(), key=lambda a: (a.order, a.title or ""))
            if area.title]
