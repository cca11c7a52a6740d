"""A Playwright page in the system's Chromium (``helpers.devtools.CHROMIUM``), for the tests that use the app as a
person does: open it at a viewport width, press keys, wait for what the page does, measure it, take screenshots.

``chromium_page()`` skips the test when Playwright or the browser is missing. Page errors, dialogs and console
errors are collected in ``page.problems``. The page's Content-Security-Policy forbids the string evaluation
Playwright's ``wait_for_function`` uses (as it should), so :func:`eventually` polls ``page.evaluate`` instead.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.devtools import CHROMIUM

PHONE_WIDTH = 390
"""A phone's viewport width in CSS pixels (an iPhone 12 to 15)."""


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A Playwright page at ``width`` x ``height`` in headless Chromium, closed on exit."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM),
                                             args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_context(viewport={"width": width, "height": height}).new_page()
        page.problems = []
        page.on("pageerror", lambda error: page.problems.append(str(error)))
        page.on("dialog", lambda dialog: (page.problems.append(f"dialog {dialog.message}"), dialog.dismiss()))
        page.on("console", lambda message: message.type == "error" and page.problems.append(message.text))
        try:
            yield page
        finally:
            browser.close()


def eventually(page: Any, expression: str, seconds: float = 30.0) -> Any:
    """The value of ``expression`` once it is truthy; an AssertionError naming it when it is not within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # a navigation in progress destroys the context evaluated in
            value = page.evaluate(expression)
            if value:
                return value
        page.wait_for_timeout(50)
    raise AssertionError(f"never true within {seconds:g} s: {expression} (at {page.url})")


def scroll_width(page: Any) -> int:
    """How wide the page is laid out, in CSS pixels (wider than the window: it scrolls sideways)."""
    return int(page.evaluate("document.documentElement.scrollWidth"))


def no_overflow(page: Any) -> None:
    """Nothing on the page is wider than the window."""
    width, window = scroll_width(page), page.evaluate("window.innerWidth")
    assert width <= window, f"{page.url} is {width} px wide in a {window} px window"
