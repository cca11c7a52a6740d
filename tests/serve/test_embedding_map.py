"""The embedding map over HTTP and in Chromium: scikit-learn's PCA of the normalised vectors, computed once per
dataset version and column and read back from its cache; colours by rank, run and group; a box turned into a
``--where`` filter that the grid then shows; hover and click on a point. Screenshots go to /tmp/shots30."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("sklearn")

from cladebench.serve.embedding_map import map_path
from cladebench.serve.runs_data import by_uuid, said
from helpers.playwright_page import PHONE_WIDTH, chromium_page, eventually, no_overflow
from helpers.serve_data import running

SHOTS = Path("/tmp/shots30")


def _points(url: str, **params: str) -> httpx.Response:
    return httpx.get(url.rstrip("/") + "/map/points", params=params, timeout=120)


def test_the_map_is_pca_of_the_normalised_vectors_cached_per_version_and_column(serve_data, tmp_path) -> None:
    from sklearn.decomposition import PCA

    from cladebench.store.embeddings import normalise_rows, valid_embeddings

    with running(serve_data, thumbnails=tmp_path / "cache") as (url, started):
        state = started.state
        column = state.columns[-1]
        assert column.startswith("emb_") and not map_path(state, column).exists()
        answer = _points(url, column=column).json()
        rows, vectors = valid_embeddings(state.dataset, column)
        expected = PCA(n_components=2, random_state=0).fit_transform(normalise_rows(vectors))
        got = np.column_stack([answer["x"], answer["y"]])
        assert answer["uuid"] == rows.column("uuid").to_pylist() and answer["n"] == len(vectors) == 48
        for axis in range(2):  # a principal axis has no sign of its own
            sign = np.sign(expected[:, axis] @ got[:, axis])
            np.testing.assert_allclose(got[:, axis], sign * expected[:, axis], atol=2e-4)
        assert "PCA" in answer["method"] and len(answer["explained"].split(",")) == 2
        cached = map_path(state, column)
        assert cached.exists() and cached.parent.name == state.key  # the dataset's URI hash and its version
        stamp = cached.stat().st_mtime_ns
    with running(serve_data, thumbnails=tmp_path / "cache") as (url, started):  # a new server: read, not computed
        again = _points(url, column=column).json()
        assert again["x"] == answer["x"] and cached.stat().st_mtime_ns == stamp


def test_colours_by_rank_run_and_group_and_a_bad_one_is_refused(served) -> None:
    url, started = served
    state = started.state
    family = _points(url, color="rank:family").json()
    legend = dict(map(tuple, family["legend"]))
    families = state.dataset.to_table(columns=["family"]).column(0).to_pylist()
    top = max(set(families), key=families.count)
    assert legend[top] == families.count(top) and sum(legend.values()) == 48
    run = dict(map(tuple, _points(url, color="run:1").json()["legend"]))
    told = [said(state, 1, row).right for row in by_uuid(state, 1).values()]
    assert run.get("wrong", 0) == told.count(False) and run.get("right", 0) == told.count(True)
    group = dict(map(tuple, _points(url, color="group:challenge_group").json()["legend"]))
    assert group["mammals"] == 24
    refused = _points(url, color="rank:nonsense")
    assert refused.status_code == 400 and refused.json()["error"].startswith("color must be one of")
    assert "no embedding column 'emb_x<b>'" in _points(url, column="emb_x<b>").json()["error"]


def test_a_box_on_the_map_becomes_a_where_filter_the_grid_shows(served) -> None:
    url, _ = served
    answer = _points(url).json()
    x, y = np.array(answer["x"]), np.array(answer["y"])
    box = (float(np.median(x)), float(y.min()) - 1, float(x.max()) + 1, float(np.median(y)))
    inside = int(((x >= box[0]) & (x <= box[2]) & (y >= box[1]) & (y <= box[3])).sum())
    selected = httpx.get(url.rstrip("/") + "/map/select", params={"box": ",".join(map(str, box))}, timeout=60).json()
    assert selected["rows"] == inside > 0 and selected["where"].startswith("uuid IN (")
    grid = httpx.get(url.rstrip("/") + selected["browse"], timeout=60)
    assert f">{inside} row" in grid.text, re.findall(r"id=.summary.>[^<]*", grid.text)
    assert grid.text.count("<a class=\"cell") == inside, grid.text.split("id=\"grid\"")[1][:3000]
    for bad in ("1,2,x", "nan,0,1,1", "0,0,inf,1"):
        refused = httpx.get(url.rstrip("/") + "/map/select", params={"box": bad}, timeout=60)
        assert refused.status_code == 400 and refused.json()["error"].startswith("box must be"), bad


def test_the_map_in_a_browser_hover_click_and_a_box_to_browse(served) -> None:
    url, _ = served
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium_page(1400) as page:
        page.goto(url.rstrip("/") + "/map")
        assert eventually(page, "document.getElementById('map').dataset.drawn") == "48"
        assert page.locator("#map-legend li").count() > 1
        box = page.locator("#map").bounding_box()
        page.mouse.move(box["x"] + box["width"] * .35, box["y"] + box["height"] * .1)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * .9, box["y"] + box["height"] * .9, steps=8)
        page.mouse.up()
        eventually(page, "!document.getElementById('map-selection').hidden && "
                         "document.getElementById('map-where').value")
        page.screenshot(path=str(SHOTS / "map-1400.png"))
        count = int(re.match(r"(\d+) row", page.inner_text("#map-selected")).group(1))
        assert count > 0
        page.click("#map-browse")
        page.wait_for_selector("#summary")
        assert page.locator("#grid .cell").count() == count
        page.go_back()
        eventually(page, "document.getElementById('map').dataset.drawn")
        for fx in np.linspace(.02, .98, 40):  # sweep until the pointer is over a point: its image shows
            for fy in np.linspace(.05, .95, 12):
                page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
                if page.evaluate("!document.getElementById('map-hover').hidden"):
                    break
            else:
                continue
            break
        assert page.evaluate("document.querySelector('#map-hover img').src").split("/thumb/")[1]
        page.mouse.down()
        page.mouse.up()
        page.wait_for_url(re.compile(r"/image/"))
        assert page.problems == []
    with chromium_page(PHONE_WIDTH, 844) as page:
        page.goto(url.rstrip("/") + "/map")
        eventually(page, "document.getElementById('map').dataset.drawn")
        no_overflow(page)
        page.screenshot(path=str(SHOTS / "map-390.png"))
