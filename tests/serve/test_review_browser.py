"""The review area in headless Chromium at 1,400 px, by keyboard only: three genus-only rows reviewed (a taxon typed
and picked, "not identifiable" with a note, a species picked from the list by arrow keys), the server restarted and
the reviews found, exported; hostile names and notes shown as text, no script of theirs run. Screenshots go to
/tmp/shots19r for a person to look at."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from cladebench.cli import main
from cladebench.store.reviews import read_reviews, reviews_path
from helpers.devtools import browser
from helpers.review_data import HOSTILE_GENUS, HOSTILE_NOTE
from helpers.serve_data import running

SHOTS = Path("/tmp/shots19r")


def _until(chrome, session: str, expression: str, timeout: float = 30.0) -> object:
    """Poll a JavaScript expression until it is truthy (the page's fetches and navigations are asynchronous)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = chrome.evaluate(expression, session)
        if value:
            return value
        time.sleep(0.05)
    state = chrome.evaluate("[location.pathname, document.readyState, (document.activeElement || {}).id, "
                            "(document.getElementById('message') || {}).textContent, "
                            "(document.getElementById('picked') || {}).textContent]", session)
    raise AssertionError(f"never true: {expression} (page: {state})")


def _problems(chrome, session: str) -> list[object]:
    """The tab's console errors, less the browser's own request for /favicon.ico (the app has no icon)."""
    return [p for p in chrome.problems(session) if not str(p.get("entry", {}).get("url", "")).endswith("/favicon.ico")]


def _key(chrome, session: str, key: str, *, code: int, modifiers: int = 0, text: str | None = None) -> None:
    event = {"key": key, "code": key if len(key) > 1 else f"Digit{key}", "windowsVirtualKeyCode": code,
             "modifiers": modifiers}
    chrome.call("Input.dispatchKeyEvent", {"type": "keyDown", **event, **({"text": text} if text else {})}, session)
    chrome.call("Input.dispatchKeyEvent", {"type": "keyUp", **event}, session)


def _enter(chrome, session: str, modifiers: int = 0) -> None:
    _key(chrome, session, "Enter", code=13, modifiers=modifiers, text="\r")


def _type(chrome, session: str, text: str) -> None:
    chrome.call("Input.insertText", {"text": text}, session)


def _wait_for_list(chrome, session: str) -> None:
    _until(chrome, session, "!document.getElementById('taxa').hidden && document.querySelectorAll('#taxa li').length")


def _moved_from(chrome, session: str, path: str) -> str:
    """The next row's path once it has loaded, with the taxon box entered by its key (/)."""
    moved = _until(chrome, session, f"location.pathname !== {path!r} && document.readyState === 'complete' && "
                                    "location.pathname")
    _enter_box(chrome, session)
    return moved


def _enter_box(chrome, session: str) -> None:
    _key(chrome, session, "/", code=191, text="/")
    assert chrome.evaluate("document.activeElement.id", session) == "taxon"


def test_three_genus_only_rows_reviewed_by_keyboard_survive_a_restart_and_export(review_data, tmp_path, capsys):
    SHOTS.mkdir(parents=True, exist_ok=True)
    data = review_data
    first_species = None
    with running(data, thumbnails=tmp_path / "thumbs") as (url, started), browser() as chrome:
        queue_tab = chrome.open(url + "review")
        _until(chrome, queue_tab, "Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        start = chrome.evaluate("document.getElementById('start').getAttribute('href')", queue_tab)
        tab = chrome.open(url.rstrip("/") + start)
        path = chrome.evaluate("location.pathname", tab)
        reviewed = []
        # 1: a genus typed in part, the first completion picked with Enter, saved with Enter
        genus = chrome.evaluate("document.querySelector('.lineage').textContent", tab)
        _enter_box(chrome, tab)
        table = started.state.dataset.to_table(columns=["genus", "species"], filter="species IS NOT NULL")
        some_genus = table.column("genus")[0].as_py()
        _type(chrome, tab, some_genus[:4].lower())
        _wait_for_list(chrome, tab)
        chrome.screenshot(tab, SHOTS / "row-completing.png", full_page=False)
        first_choice = chrome.evaluate("document.querySelector('#taxa li span').textContent", tab)
        _enter(chrome, tab)
        assert chrome.evaluate("document.getElementById('picked').textContent", tab).startswith("Picked: ")
        _enter(chrome, tab)
        reviewed.append(path)
        path = _moved_from(chrome, tab, path)
        # 2: "not identifiable" typed and picked, a hostile note in the next field (Tab), saved with Ctrl+Enter
        _type(chrome, tab, "not")
        _wait_for_list(chrome, tab)
        _enter(chrome, tab)
        _key(chrome, tab, "Tab", code=9)
        assert chrome.evaluate("document.activeElement.id", tab) == "note"
        _type(chrome, tab, HOSTILE_NOTE)
        _enter(chrome, tab, modifiers=2)
        reviewed.append(path)
        path = _moved_from(chrome, tab, path)
        # 3: a species: its epithet typed, the list walked with the arrow keys, picked and saved with Enter
        first_species = table.column("species")[0].as_py()
        _type(chrome, tab, first_species.split()[-1])
        _wait_for_list(chrome, tab)
        count = chrome.evaluate("document.querySelectorAll('#taxa li').length", tab)
        _key(chrome, tab, "ArrowDown", code=40)
        _key(chrome, tab, "ArrowUp", code=38)
        assert chrome.evaluate("document.querySelectorAll('#taxa li[aria-selected=true]').length", tab) == 1
        assert count >= 1
        _enter(chrome, tab)
        picked = chrome.evaluate("document.getElementById('picked').textContent", tab)
        _enter(chrome, tab)
        reviewed.append(path)
        path = _moved_from(chrome, tab, path)
        assert _problems(chrome, tab) == [] and _problems(chrome, queue_tab) == []
        assert genus  # the dataset's lineage was on the page

    rows = read_reviews(reviews_path(str(data.dataset))).to_pylist()
    assert [r["uuid"] for r in rows] == [unquote(p.removeprefix("/review/")) for p in reviewed]
    assert all(r["uuid"] in data.genus_only for r in rows)
    assert rows[0]["taxon"] == first_choice and not rows[0]["not_identifiable"]
    assert rows[1]["not_identifiable"] and rows[1]["note"] == HOSTILE_NOTE
    assert picked == f"Picked: {rows[2]['taxon']} ({rows[2]['rank']})"

    # the server restarted: every review is on the pages; the queue marks them as yours
    with running(data, thumbnails=tmp_path / "thumbs") as (url, _), browser() as chrome:
        queue_tab = chrome.open(url + "review")
        assert chrome.evaluate("document.querySelectorAll('#queue .ok').length", queue_tab) == 3
        _until(chrome, queue_tab, "Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        chrome.screenshot(queue_tab, SHOTS / "queue.png")
        tab = chrome.open(url + "review/" + quote(rows[1]["uuid"], safe=""))
        listed = chrome.evaluate("document.getElementById('reviews').textContent", tab)
        assert "not identifiable" in listed and HOSTILE_NOTE in listed  # the note as text
        assert chrome.evaluate("document.querySelectorAll('#reviews img, #reviews i').length", tab) == 0
        chrome.screenshot(tab, SHOTS / "row-reviewed.png")
        assert chrome.evaluate("typeof window.__pwned", tab) == "undefined"

    assert main(["reviews", str(data.dataset)]) == 0
    exported = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["uuid"] for r in exported] == [r["uuid"] for r in rows]


def test_hostile_names_render_as_text_in_the_row_and_the_completion_list(review_data, tmp_path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    with running(review_data, thumbnails=tmp_path / "thumbs") as (url, _), browser() as chrome:
        tab = chrome.open(url + "review/" + quote(review_data.hostile_uuid, safe=""))
        assert HOSTILE_GENUS in chrome.evaluate("document.querySelector('.lineage').textContent", tab)
        assert chrome.evaluate("document.querySelectorAll('.lineage b, .lineage script').length", tab) == 0
        _enter_box(chrome, tab)
        _type(chrome, tab, "<script")
        _wait_for_list(chrome, tab)
        assert chrome.evaluate("document.querySelector('#taxa li span').textContent", tab) == HOSTILE_GENUS
        assert chrome.evaluate("document.querySelectorAll('#taxa b, #taxa script').length", tab) == 0
        chrome.screenshot(tab, SHOTS / "row-hostile.png", full_page=False)
        width = chrome.evaluate("document.documentElement.scrollWidth", tab)
        assert width <= 1400  # nothing wider than the window
        assert chrome.evaluate("typeof window.__pwned", tab) == "undefined"
        assert _problems(chrome, tab) == []


def _pick_a_genus(chrome, tab: str, genus: str) -> str:
    _enter_box(chrome, tab)
    _type(chrome, tab, genus[:4].lower())
    _wait_for_list(chrome, tab)
    _enter(chrome, tab)
    picked = chrome.evaluate("document.getElementById('picked').textContent", tab)
    assert picked.startswith("Picked: ")
    _key(chrome, tab, "Escape", code=27)  # out of the box: the row's keys work again
    assert chrome.evaluate("document.activeElement.id", tab) != "taxon"
    return picked


def test_a_pick_moved_away_from_is_saved_or_asked_about(review_data, tmp_path):
    """A pick not saved is never dropped silently: ``n`` (on to the next row) saves it first; leaving by any other
    way (here the → key's link) asks the browser's "leave this page?", and staying keeps the pick on the page."""
    data = review_data
    where = reviews_path(str(data.dataset))

    def saved() -> list[str]:  # uuids reviewed, in order (the module's other tests may have saved some before)
        return [r["uuid"] for r in read_reviews(where).to_pylist()] if where.exists() else []

    before = saved()
    with running(data, thumbnails=tmp_path / "thumbs") as (url, started), browser() as chrome:
        queue = chrome.open(url + "review")
        start = chrome.evaluate("document.getElementById('start').getAttribute('href')", queue)
        tab = chrome.open(url.rstrip("/") + start)
        first = chrome.evaluate("location.pathname", tab)
        genus = started.state.dataset.to_table(columns=["genus"], filter="genus IS NOT NULL").column("genus")[0]
        _pick_a_genus(chrome, tab, genus.as_py())
        _key(chrome, tab, "n", code=78, text="n")  # on to the next row: the pick is saved, not dropped
        second = _until(chrome, tab, f"location.pathname !== {first!r} && document.readyState === 'complete' && "
                                     "location.pathname")
        assert saved() == [*before, unquote(first.removeprefix("/review/"))]

        picked = _pick_a_genus(chrome, tab, genus.as_py())
        assert chrome.evaluate("!!document.querySelector('a[rel=next]')", tab)
        chrome.events.clear()
        # → (the next row's link), pressed after this call returns: the browser's question holds the page until
        # answered, so a key sent through the protocol would not return before it is.
        chrome.evaluate("setTimeout(() => document.dispatchEvent(new KeyboardEvent('keydown', "
                        "{key: 'ArrowRight', bubbles: true})), 50), true", tab)
        dialog = chrome.wait_for("Page.javascriptDialogOpening", tab, timeout=15)
        assert dialog["params"]["type"] == "beforeunload"
        chrome.call("Page.handleJavaScriptDialog", {"accept": False}, tab)  # stay
        assert chrome.evaluate("location.pathname", tab) == second
        assert chrome.evaluate("document.getElementById('picked').textContent", tab) == picked
        assert len(saved()) == len(before) + 1  # asked, not saved behind the reviewer's back
        assert _problems(chrome, tab) == []
