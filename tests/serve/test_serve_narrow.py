"""Every page of the app (each area of the top bar, and the pages behind them) at a phone's width (390 px) and a
laptop's (1,400 px), in Chromium driven by Playwright:
nothing is laid out wider than the window (a wide table scrolls inside its own box, never the page). Screenshots
of each page at both widths go to /tmp/shots30 for a person to look at."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from cladebench.serve.areas import nav_links
from helpers.playwright_page import PHONE_WIDTH, chromium_page, eventually, scroll_width

SHOTS = Path("/tmp/shots30")


def _pages(served, serve_data) -> dict[str, str]:
    _, started = served
    uuid = quote(started.state.dataset.to_table(columns=["uuid"], limit=1, filter="species IS NOT NULL")
                 .column(0)[0].as_py(), safe="")
    areas = {title.lower(): path for title, path in nav_links()}  # every area of the top bar, and the rest
    return {**areas, "grid": "/", "image": f"/image/{uuid}",
            "hostile": f"/image/{quote(serve_data.hostile_uuid, safe='')}",
            "search": f"/search?like={uuid}", "runs": "/runs", "disagree": "/runs?sort=disagree",
            "confusion": "/runs/confusion", "review-queue": "/review", "review-row": f"/review/{uuid}",
            "bad-filter": "/?where=" + quote("genus = 'unterminated"), "overlay": "/?run=1&conf_max=40",
            "image-in-view": f"/image/{uuid}?run=1&view=browse"}


@pytest.mark.parametrize("width", [PHONE_WIDTH, 1400])
def test_no_page_is_wider_than_the_window(served, serve_data, width: int) -> None:
    url, _ = served
    SHOTS.mkdir(parents=True, exist_ok=True)
    wide = {}
    with chromium_page(width, 844 if width == PHONE_WIDTH else 900) as page:
        for name, path in _pages(served, serve_data).items():
            page.goto(url.rstrip("/") + path)
            eventually(page, "document.readyState === 'complete' && Array.from(document.images)"
                             ".filter(i => i.loading !== 'lazy').every(i => i.complete)")
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"))
            if scroll_width(page) > width:
                wide[name] = scroll_width(page)
        assert page.problems == []
    assert wide == {}, f"pages wider than {width} px: {wide}"
