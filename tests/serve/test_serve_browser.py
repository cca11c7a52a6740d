"""The app in a real browser: Playwright driving the system's Chromium (``executable_path``) against a server
started for real on 127.0.0.1. Load the grid, filter by a rank, open an image and see its neighbours, search by
text, look at the runs; hostile strings in names and attributions show as text and run nothing. Each step saves a
screenshot at 1,400 px under /tmp/shots19/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from cladebench.serve.pages import STATIC_DIR
from helpers.playwright_page import chromium_page, eventually, no_overflow
from helpers.serve_data import HOSTILE_ATTRIBUTION, HOSTILE_NAME

WIDTH = 1400


@pytest.fixture(scope="module")
def page(served) -> Iterator[object]:
    with chromium_page(WIDTH) as page:
        yield page


@pytest.fixture(autouse=True)
def _fresh_problems(page) -> None:
    page.problems.clear()


def test_grid_then_a_rank_then_an_image_with_its_neighbours(served, page, shots: Path) -> None:
    url, _started = served
    page.goto(url)
    page.wait_for_selector("#grid .cell img")
    assert page.locator("#grid .cell").count() == 48
    assert eventually(page, "Array.from(document.querySelectorAll('#grid img')).every(i => i.complete "
                            "&& i.naturalWidth > 0)")  # every thumbnail in the window loaded
    no_overflow(page)
    page.screenshot(path=str(shots / "01-grid.png"), full_page=False)
    sources = page.eval_on_selector_all("script[src], link[rel=stylesheet]", "els => els.map(e => e.src || e.href)")
    assert sources and all(s.startswith(url.split("?")[0]) for s in sources)  # nothing from elsewhere: offline
    css = page.request.get(url.rstrip("/") + "/static/serve.css").text()
    assert css == (STATIC_DIR / "serve.css").read_text()

    page.click(".tree a:has-text('Animalia')") if page.locator(".tree a:has-text('Animalia')").count() else None
    page.wait_for_selector(".tree li.path")
    for _ in range(3):  # down three more ranks by the tree's first child
        child = page.locator(".tree li.child a").first
        name = child.inner_text()
        child.click()
        page.wait_for_selector(f".tree li.path a:has-text({name!r})")
    shown = page.locator("#grid .cell").count()
    assert 0 < shown < 48
    assert page.locator("#summary").inner_text().startswith(f"{shown} row")
    page.screenshot(path=str(shots / "02-rank.png"), full_page=False)

    page.locator("#grid .cell").first.click()
    page.wait_for_selector("section.neighbours .strip .cell img")
    assert page.locator("section.neighbours .strip .cell").count() == 12
    assert eventually(page, "document.querySelector('img.full').naturalWidth > 0")
    assert page.locator("h2:has-text('Runs')").count() == 1 and page.locator(".said").count() == 2
    no_overflow(page)
    page.screenshot(path=str(shots / "03-image.png"), full_page=True)
    page.click("text=more like this")
    page.wait_for_selector("#grid .cell")
    assert page.locator("#grid .cell").count() == 47
    assert page.problems == []


def test_search_by_text(served, page, shots: Path) -> None:
    url, _ = served
    page.goto(url.rstrip("/") + "/search")
    page.fill("input[name=text]", "a mouse at night on a camera trap")
    page.press("input[name=text]", "Enter")
    page.wait_for_selector("#grid .cell")
    assert page.locator("#grid .cell").count() == 48
    assert "nearest in" in page.locator("#summary").inner_text()
    page.screenshot(path=str(shots / "04-search.png"), full_page=False)
    assert page.problems == []


def test_hostile_strings_render_as_text_and_run_nothing(served, serve_data, page, shots: Path) -> None:
    url, _ = served
    page.goto(url.rstrip("/") + f"/image/{quote(serve_data.hostile_uuid, safe='')}")
    page.wait_for_selector("h1")
    assert HOSTILE_NAME in page.locator("h1").inner_text()
    assert HOSTILE_ATTRIBUTION in page.locator(".attribution").inner_text()
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("main script, img[src=x], h1 b, .attribution i").count() == 0
    assert page.locator("a[href^='javascript:']").count() == 0
    page.screenshot(path=str(shots / "05-hostile.png"), full_page=True)
    literal = "'" + HOSTILE_NAME.replace("'", "''") + "'"
    page.goto(url + f"?where={quote('scientific_name = ' + literal)}")
    page.screenshot(path=str(shots / "05b-hostile-filter.png"), full_page=False)
    page.wait_for_selector("#grid .cell")
    assert page.locator("#grid .cell").count() == 1
    assert page.evaluate("window.__pwned === undefined")
    page.goto(url)
    page.click(".side a:has-text('birds')")
    page.wait_for_selector(".chip")
    assert '"&\' <u>group</u>' in page.locator(".chips").inner_text()
    assert page.problems == []


def test_runs_errors_first_and_confusion_cells_open_images(served, page, shots: Path) -> None:
    url, _ = served
    page.goto(url.rstrip("/") + "/runs")
    page.wait_for_selector("#grid .cell")
    classes = page.eval_on_selector_all("#grid .cell", "cells => cells.map(c => c.className)")
    verdicts = ["wrong" in c for c in classes]
    assert verdicts == sorted(verdicts, reverse=True)
    no_overflow(page)
    page.screenshot(path=str(shots / "06-runs.png"), full_page=False)
    page.click("text=confusion by group")
    page.wait_for_selector("table.confusion")
    page.screenshot(path=str(shots / "07-confusion.png"), full_page=False)
    link = page.locator("table.confusion td a").first
    count = int(link.inner_text())
    link.click()
    page.wait_for_selector("#grid")
    assert page.locator("#grid .cell").count() == count
    assert page.problems == []


def test_a_bad_filter_is_shown_as_text(served, page, shots: Path) -> None:
    url, _ = served
    page.goto(url)
    page.fill("input[name=where]", "genus = 'unterminated")
    page.press("input[name=where]", "Enter")
    page.wait_for_selector(".error")
    assert "where" in page.locator(".error").inner_text()
    page.screenshot(path=str(shots / "08-bad-filter.png"), full_page=False)


def test_an_images_neighbours_sit_beside_it_with_its_species_marked(served, page) -> None:
    """At 1,400 px the first neighbour is level with the full image, to its right; the neighbours of the image's
    own species say so in words (and only they)."""
    url, started = served
    rows = started.state.dataset.to_table(columns=["uuid", "species"]).to_pylist()
    species = {r["uuid"]: r["species"] for r in rows}
    from cladebench.serve.image import STRIP
    from cladebench.serve.vectors import columns_of, like

    column = columns_of(started.state)[0]

    def has_kin(u: str) -> bool:
        found = like(started.state, column, u, k=STRIP)
        return found is not None and any(species[h["uuid"]] == species[u] for h in found.hits)

    uuid = next(u for u, s in species.items() if s and has_kin(u))
    page.goto(url + "image/" + quote(uuid, safe=""))
    page.wait_for_selector("section.neighbours .strip .cell img")
    assert eventually(page, "document.querySelector('img.full').naturalWidth > 0")
    image = page.locator("img.full").bounding_box()
    first = page.locator("section.neighbours .strip .cell").first.bounding_box()
    assert first["x"] >= image["x"] + image["width"] and first["y"] < image["y"] + image["height"]
    cells = page.eval_on_selector_all("section.neighbours .strip .cell", """cells => cells.map(c =>
        [decodeURIComponent(c.getAttribute('href').slice('/image/'.length)), c.classList.contains('same'),
         c.innerText.includes('same species')])""")
    assert cells and all(same == marked == (species[hit] == species[uuid]) for hit, same, marked in cells)
    assert any(same for _, same, _ in cells)
    no_overflow(page)
    assert page.problems == []
