"""The whole review queue worked through by keyboard only, in Chromium driven by Playwright: no click, no focus set
by the test. The shortcuts work from the moment a row opens, Esc leaves the taxon box, ← → move between rows, the
genus-only rows are listed and worked first (the review tests' own dataset, and the demo's fine-grained one), and
blind mode keeps the label and the suggestions away until the answer is saved. Screenshots go to /tmp/shots30."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from cladebench.serve.review_queue import queue
from cladebench.store.reviews import read_reviews, reviews_path
from helpers.playwright_page import chromium_page, eventually
from helpers.serve_data import running

SHOTS = Path("/tmp/shots30")


def _focused(page) -> str:
    return page.evaluate("(document.activeElement || document.body).id || document.activeElement.tagName")


def _row_ready(page, previous: str | None = None) -> str:
    """The path of the row page once it has loaded (another than ``previous``)."""
    return eventually(page, "location.pathname.startsWith('/review/') && document.readyState === 'complete' && "
                            f"location.pathname !== {json.dumps(previous)} && location.pathname")


@pytest.mark.slow
@pytest.mark.parametrize("data", ["review_data", "demo_review_data"])
def test_the_whole_queue_is_worked_by_keyboard_alone(data, request, tmp_path) -> None:
    review_data = request.getfixturevalue(data)
    prefix = "" if data == "review_data" else "demo-"
    SHOTS.mkdir(parents=True, exist_ok=True)
    reviews = reviews_path(str(review_data.dataset))
    genus_only = set(review_data.genus_only)
    assert genus_only
    with running(review_data, thumbnails=tmp_path / "thumbs") as (url, started), chromium_page() as page:
        total = len(queue(started.state))  # every row of the dataset is in the queue
        assert total == started.state.dataset.count_rows()
        page.goto(url + "review")
        # The rows labelled only to genus are listed first, each said to be so, with the runs' top suggestion.
        listed = page.eval_on_selector_all("#queue tr td.uuid", "cells => cells.map(c => c.textContent)")
        marked = page.eval_on_selector_all("#queue tr.genus-only td.uuid", "cells => cells.map(c => c.textContent)")
        assert len(listed) == total and set(listed[:len(genus_only)]) == genus_only == set(marked)
        assert page.locator("#queue tr.genus-only >> text=(genus only)").count() == len(genus_only)
        assert f"{len(genus_only)} of {total} rows are labelled only to genus" in page.inner_text("main")
        page.screenshot(path=str(SHOTS / f"{prefix}queue-1400.png"))
        assert _focused(page) == "start"  # Enter opens the first row to review
        page.keyboard.press("Enter")
        path = _row_ready(page)
        assert _focused(page) == "BODY"  # nothing has the focus: a digit is a shortcut, not text in a box
        page.screenshot(path=str(SHOTS / f"{prefix}row-arrival-1400.png"))

        # 1: the first suggestion by its key, saved with Enter
        page.keyboard.press("1")
        eventually(page, "document.getElementById('picked').textContent.startsWith('Picked: ')")
        assert page.evaluate("document.getElementById('taxon').value") != "1"
        page.keyboard.press("Enter")
        done = [path]
        path = _row_ready(page, path)

        # 2: / enters the box, a taxon is typed and picked, Esc leaves the box, Enter saves
        page.keyboard.press("/")
        assert _focused(page) == "taxon"
        page.keyboard.type("not")
        eventually(page, "!document.getElementById('taxa').hidden")
        page.keyboard.press("Enter")
        page.keyboard.press("Escape")
        assert _focused(page) == "BODY" and page.evaluate("document.getElementById('taxa').hidden")
        page.keyboard.press("Enter")
        done.append(path)
        path = _row_ready(page, path)

        # 3: → and ← move between rows without saving anything
        page.keyboard.press("ArrowRight")
        moved = _row_ready(page, path)
        page.keyboard.press("ArrowLeft")
        assert _row_ready(page, moved) == path

        # the rest: 0 (not identifiable) or 1 (the first suggestion), then Enter, until the queue says it is done
        while len(done) < total:
            page.keyboard.press("0" if len(done) % 2 else "1")
            eventually(page, "document.getElementById('picked').textContent.startsWith('Picked: ')")
            page.keyboard.press("Enter")
            done.append(path)
            if len(done) < total:
                path = _row_ready(page, path)
        eventually(page, "location.pathname === '/review' && document.readyState === 'complete'")
        assert "You have reviewed every row" in page.inner_text("main")
        page.screenshot(path=str(SHOTS / f"{prefix}queue-done-1400.png"))
        assert page.problems == []

    rows = read_reviews(reviews).to_pylist()
    assert [r["uuid"] for r in rows] == [unquote(p.removeprefix("/review/")) for p in done]
    assert len({r["uuid"] for r in rows}) == total
    assert {r["uuid"] for r in rows[:len(genus_only)]} == genus_only  # worked first
    assert rows[1]["not_identifiable"] and not rows[0]["not_identifiable"]


def test_blind_mode_by_keyboard_shows_the_label_only_after_the_answer(review_data, tmp_path) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    reviews = reviews_path(str(review_data.dataset))
    if reviews.exists():
        shutil.rmtree(reviews)  # the queue test reviewed every row
    with running(review_data, thumbnails=tmp_path / "thumbs") as (url, _), chromium_page() as page:
        page.goto(url + "review/" + review_data.genus_only[1] + "?blind=1")
        assert page.locator("#blind-note").count() == 1
        assert page.locator(".lineage, button.suggestion, #reviews").count() == 0
        page.screenshot(path=str(SHOTS / "blind-before-1400.png"))
        page.keyboard.press("1")  # no suggestion on the page: nothing is picked
        assert page.evaluate("document.getElementById('picked').textContent") == ""
        page.keyboard.press("0")
        page.keyboard.press("Enter")
        eventually(page, "document.readyState === 'complete' && !!document.querySelector('.lineage')")
        assert page.url.endswith("?blind=1") and page.locator("button.suggestion").count() > 0
        assert page.locator("[data-genus]").count() > 0
        assert _focused(page) == "next-unreviewed"
        page.screenshot(path=str(SHOTS / "blind-after-1400.png"))
        page.keyboard.press("Enter")  # on to the next row, blind again
        eventually(page, "document.readyState === 'complete' && !!document.getElementById('blind-note')")
        assert page.url.endswith("?blind=1")
        assert page.problems == []
    rows = read_reviews(reviews).to_pylist()
    assert len(rows) == 1 and rows[0]["suggestions"] == [] and rows[0]["run"] is None
