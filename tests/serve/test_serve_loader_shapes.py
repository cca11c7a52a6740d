"""`cladebench serve` on a dataset of each `load` source's shape (CrypticBio with its list column cryptic_group,
INQUIRE-Rerank, Co-Observed with its organisms, your own photos), each made by its own loader: every page answers
(never a 500), a list column is a facet by its elements and its facet link filters by membership, and each page
opens in the browser without an error."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from cladebench import store
from helpers.loader_shapes import LOADER_SHAPES
from helpers.playwright_page import chromium_page


@pytest.fixture(scope="module", params=sorted(LOADER_SHAPES))
def shaped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[str, str, Path]]:
    """(source, URL, dataset) of a real server on 127.0.0.1 over a dataset of that source's shape."""
    from cladebench.serve.config import ServeConfig
    from cladebench.serve.server import open_state, start

    root = tmp_path_factory.mktemp(request.param)
    path = LOADER_SHAPES[request.param](root)
    config = ServeConfig(dataset=str(path), port=0, device="cpu")
    state = open_state(config)
    state.thumbnail_root = root / "thumbs"
    state.map_root = root / "maps"
    started = start(config, state)
    thread = started.run_in_thread()
    try:
        yield request.param, started.url, path
    finally:
        started.stop()
        thread.join(timeout=10)
        started.sock.close()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", errors="replace")


def _pages(base: str, path: Path) -> list[str]:
    uuid = quote(str(store.open_dataset(path).to_table(columns=["uuid"], limit=1).column(0)[0].as_py()), safe="")
    return ["/", "/?page=2", f"/image/{uuid}", f"/full/{uuid}", f"/thumb/{uuid}", "/runs", "/map", "/map/points",
            "/search?q=lizard", "/review", "/review/taxa", "/review/next", f"/review/{uuid}"]


def test_every_page_answers_without_a_server_error(shaped: tuple[str, str, Path]) -> None:
    _source, url, path = shaped
    base = url.split("?")[0].rstrip("/")
    answered = {page: _get(base + page)[0] for page in _pages(base, path)}
    assert {page: code for page, code in answered.items() if code >= 500} == {}
    assert answered["/"] == 200 and answered["/review"] == 200


def test_a_list_column_is_a_facet_by_its_elements(shaped: tuple[str, str, Path]) -> None:
    source, url, path = shaped
    if source != "crypticbio":
        pytest.skip("only CrypticBio's rows hold a list group column")
    base = url.split("?")[0].rstrip("/")
    code, page = _get(base + "/")
    assert code == 200 and "Podarcis liolepis" in page
    code, page = _get(base + "/?cryptic_group=" + quote("Podarcis liolepis"))
    groups = store.open_dataset(path).to_table(columns=["cryptic_group"]).column(0).to_pylist()
    holding = sum("Podarcis liolepis" in (g or []) for g in groups)
    assert code == 200 and 0 < holding < len(groups)
    assert f"{holding} row" in page, page[:2000]


def test_each_page_opens_in_the_browser(shaped: tuple[str, str, Path]) -> None:
    _source, url, _path = shaped
    base = url.split("?")[0].rstrip("/")
    with chromium_page(1280) as page:
        for address in ("/", "/runs", "/map", "/review", "/search?q=lizard"):
            response = page.goto(base + address)
            assert response is not None and response.status < 500, (address, response and response.status)
            assert "Internal Server Error" not in page.content()
        assert page.problems == [], page.problems
