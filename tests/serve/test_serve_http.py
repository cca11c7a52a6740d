"""The app over HTTP, served for real on 127.0.0.1: the grid and its filters, one image, search, the runs' views,
thumbnails made once, the filter that cannot write, and requests at the same moment."""

from __future__ import annotations

import html
import re
import threading
from urllib.parse import quote, unquote

import httpx
import pytest

from cladebench.serve import thumbs
from cladebench.serve.vectors import columns_of
from helpers.serve_data import HOSTILE_ATTRIBUTION, HOSTILE_NAME


def get(url: str, path: str, **params: str) -> httpx.Response:
    return httpx.get(url.rstrip("/") + path, params=params, timeout=60)


def test_the_grid_shows_a_page_of_the_dataset_and_counts(served) -> None:
    url, _started = served
    page = get(url, "/")
    assert page.status_code == 200
    assert page.text.count('class="cell') == 48
    assert "48 rows" in page.text
    assert "kingdom" in page.text  # the tree starts at kingdom, with counts


def test_a_rank_filter_narrows_the_grid_to_that_taxon(served) -> None:
    url, started = served
    table = started.state.dataset.to_table(columns=["genus"])
    genus = max(set(table.column("genus").to_pylist()), key=table.column("genus").to_pylist().count)
    expected = table.column("genus").to_pylist().count(genus)
    page = get(url, "/", genus=genus)
    assert page.text.count('class="cell') == expected
    assert f"{expected} row" in page.text


def test_a_bad_where_is_one_line_of_text_and_a_write_cannot_pass(served) -> None:
    url, started = served
    page = get(url, "/", where="no_such_column = 1")
    assert page.status_code == 200 and 'class="error"' in page.text and "no_such_column" in page.text
    assert page.text.count('class="cell') == 0
    versions = len(started.state.dataset.versions())
    for attempt in ("1=1; DELETE FROM photos", "1=1; DROP TABLE x", "uuid = 'a'); DELETE FROM t; --"):
        page = get(url, "/", where=attempt)
        assert 'class="error"' in page.text
        assert page.text.count('class="cell') == 0
    from cladebench.store import open_dataset

    assert len(open_dataset(started.state.uri).versions()) == versions  # nothing was written


def test_the_image_page_has_lineage_provenance_neighbours_and_each_run(served, serve_data) -> None:
    url, started = served
    uuid = started.state.dataset.to_table(columns=["uuid"], offset=5, limit=1).column(0)[0].as_py()
    page = get(url, f"/image/{quote(uuid, safe='')}")
    assert page.status_code == 200
    assert "Lineage" in page.text and "license_name" in page.text
    column = columns_of(started.state)[0]
    assert f'data-column="{column}"' in page.text
    assert page.text.count('class="cell"') == 12  # the neighbour strip
    assert f'href="/image/{quote(uuid, safe="")}"' not in page.text.split(f'data-column="{column}"')[1]  # not itself
    first, second = (run.label for run in started.state.runs)
    assert f"[1] {first}</b>" in page.text and f"[2] {second}</b>" in page.text  # both runs, by label
    assert first != second
    assert "top 5" in page.text


def test_hostile_strings_are_escaped_in_the_html(served, serve_data) -> None:
    url, _ = served
    page = get(url, f"/image/{quote(serve_data.hostile_uuid, safe='')}")
    assert HOSTILE_NAME not in page.text and HOSTILE_ATTRIBUTION not in page.text
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page.text
    assert "<td>javascript:window.__pwned=3</td>" in page.text  # the URL is text, not a link
    assert 'href="javascript:' not in page.text
    assert "content-security-policy" in page.headers


def test_a_stored_image_browsers_would_run_is_sent_as_png(served) -> None:
    from cladebench.serve.image import SHOWN_AS_IS

    assert "svg" not in SHOWN_AS_IS and "html" not in SHOWN_AS_IS
    url, started = served
    uuid = started.state.dataset.to_table(columns=["uuid"], limit=1).column(0)[0].as_py()
    full = get(url, f"/full/{quote(uuid, safe='')}")
    assert full.status_code == 200 and full.headers["content-type"] in ("image/jpeg", "image/png")
    assert full.headers["x-content-type-options"] == "nosniff"


def test_thumbnails_are_made_once_and_kept_under_the_dataset_version(served) -> None:
    url, started = served
    state = started.state
    uuid = state.dataset.to_table(columns=["uuid"], offset=7, limit=1).column(0)[0].as_py()
    path = thumbs.path_of(state, uuid)
    assert f"-v{state.version}" in str(path.parent)
    get(url, "/")
    assert path.exists()
    stamp = path.stat().st_mtime_ns
    assert get(url, f"/thumb/{quote(uuid, safe='')}").content == path.read_bytes()
    get(url, "/")
    assert path.stat().st_mtime_ns == stamp  # not made again


def test_a_uuid_with_slashes_names_no_path(served, tmp_path) -> None:
    _, started = served
    path = thumbs.path_of(started.state, "../../etc/passwd")
    assert path.parent == thumbs.folder(started.state) and ".." not in path.name


def test_search_by_text_and_more_like_this(served) -> None:
    url, started = served
    page = get(url, "/search", text="a small brown mammal at night")
    assert page.status_code == 200 and 'class="error"' not in page.text
    assert page.text.count('class="cell"') == 48  # fewer rows than a page of hits: every row, nearest first
    uuid = started.state.dataset.to_table(columns=["uuid"], limit=1).column(0)[0].as_py()
    like = get(url, "/search", like=uuid, column=columns_of(started.state)[0])
    assert like.text.count('class="cell"') == 47  # itself left out
    unknown = get(url, "/search", like=uuid, column="emb_nope")
    assert "no embedding column 'emb_nope'" in unknown.text.replace("&#39;", "'")


def test_the_runs_views_sort_errors_first_and_list_disagreements(served) -> None:
    url, _started = served
    errors = get(url, "/runs", run="1", sort="errors")
    cells = errors.text.split('id="grid"')[1]
    classes = [chunk.split('"')[0] for chunk in cells.split('class="cell ')[1:]]
    assert classes and classes == sorted(classes, key=lambda c: c != "wrong")  # every wrong one before any right
    disagree = get(url, "/runs", run="1", sort="disagree", other="2")
    assert disagree.status_code == 200 and re.search(r'<span class="tag">\[2\] \d+% → ', disagree.text)
    assert re.search(r'<span class="tag active">\[1\] \d+% → ', disagree.text)
    confusion = get(url, "/runs/confusion", run="1")
    assert confusion.status_code == 200 and "/runs?run=1&amp;sort=errors&amp;truth=" in confusion.text


def test_the_runs_grid_shows_the_mistakes_meeting_the_truth_at_one_rank(served) -> None:
    url, started = served
    run = started.state.runs[0]
    rank = run.record.provenance["task"]["rank"]
    rows = run.predictions.to_pylist()
    levels = ["kingdom", "phylum", "class", "order", "family", "genus", "species"]
    for place in [*reversed(levels[:levels.index(rank)]), "root"]:
        # Independently: a mistake meets the truth `height` ranks above the label rank, beyond the kingdom at root.
        expected = sum(1 for r in rows if r["lca_height"] and (
            levels.index(rank) - r["lca_height"] < 0 if place == "root"
            else levels.index(rank) - r["lca_height"] == levels.index(place)))
        page = get(url, "/runs", run="1", lca=place)
        assert page.status_code == 200 and 'class="error"' not in page.text
        assert f'id="summary">{expected} row' in page.text, place
        cells = page.text.split('id="grid"')[1]
        assert 'class="cell right' not in cells  # only mistakes
    assert "mistakes that meet the truth at:" in get(url, "/runs", run="1").text
    wrong = get(url, "/runs", run="1", lca="no_such_rank")
    assert 'class="error"' in wrong.text and "lca must be one of" in wrong.text


def test_a_confusion_cell_opens_the_images_behind_it(served) -> None:
    url, started = served
    from cladebench.serve.runs_data import by_uuid

    rows = list(by_uuid(started.state, 1).values())
    truth, pred = rows[0]["true_label"], rows[0]["pred_label"]
    group = rows[0]["group"]
    expected = sum(1 for r in rows if (r["true_label"], r["pred_label"], r["group"]) == (truth, pred, group))
    page = get(url, "/runs", run="1", truth=truth, pred=pred, group_of_run=group)
    assert page.text.count('class="cell ') == expected


def test_two_requests_at_the_same_moment_both_answer(served) -> None:
    url, _started = served
    barrier = threading.Barrier(2)
    results: list[int] = []

    def ask(path: str) -> None:
        barrier.wait()
        results.append(get(url, path).status_code)

    threads = [threading.Thread(target=ask, args=(p,)) for p in ("/?seen=unseen", "/runs?sort=least-confident")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == [200, 200]


@pytest.mark.parametrize("path", ["/nope", "/image/not-a-uuid"])
def test_unknown_pages_are_404(served, path) -> None:
    url, _ = served
    assert get(url, path).status_code == 404


@pytest.mark.parametrize("kept", [("image", "scientific_name", "emb_tinyclip"), ("image",), ("image", "genus")],
                         ids=["readme-subset", "uuid-and-image", "genus-only"])
def test_every_page_answers_on_a_dataset_without_the_optional_columns(serve_data, tmp_path, kept) -> None:
    """The README's own ``subset --columns image scientific_name emb_...`` makes such a dataset."""
    from dataclasses import replace

    from cladebench.store import subset
    from helpers.serve_data import running

    path = tmp_path / "subset.lance"
    subset(str(serve_data.dataset), str(path), columns=list(kept))
    data = replace(serve_data, dataset=path)
    with running(data, thumbnails=tmp_path / "thumbs") as (url, started):
        uuid = quote(started.state.dataset.to_table(columns=["uuid"], limit=1).column(0)[0].as_py(), safe="")
        paths = ["/", f"/image/{uuid}", f"/full/{uuid}", f"/thumb/{uuid}", "/review", f"/review/{uuid}",
                 "/runs", "/runs?sort=disagree", "/runs/confusion", "/search", f"/search?like={uuid}",
                 "/?where=uuid IS NOT NULL"]
        answers = {p: get(url, p).status_code for p in paths}
        assert answers == dict.fromkeys(paths, 200)


def _cells(page: httpx.Response) -> list[tuple[str, str]]:
    """(class, href) of each cell of a grid page."""
    return re.findall(r'<a class="(cell[^"]*)" href="([^"]+)"', page.text.split('id="grid"')[1])


def test_a_run_overlaid_on_the_grid_marks_and_filters_its_rows(served) -> None:
    from cladebench.serve.runs_data import by_uuid, said

    url, started = served
    state = started.state
    told = {u: said(state, 1, row) for u, row in by_uuid(state, 1).items()}
    overlaid = get(url, "/", run="1")
    cells = _cells(overlaid)
    assert len(cells) == 48 and all(c.split()[-1] in ("right", "wrong") for c, _ in cells)
    assert len(re.findall(r'<span class="tag">\d+% → [^<]+</span>', overlaid.text)) == 48
    wrong = _cells(get(url, "/", run="1", correct="wrong"))
    assert len(wrong) == sum(1 for s in told.values() if s.right is False) and all("wrong" in c for c, _ in wrong)
    band = _cells(get(url, "/", run="1", conf_min="10", conf_max="30"))
    assert len(band) == sum(1 for s in told.values() if .1 <= s.confidence <= .3) > 0
    name = next(iter(told.values())).predicted_name
    named = _cells(get(url, "/", run="1", predicted=name.upper(), challenge_group="mammals"))
    mammals = set(started.state.dataset.to_table(columns=["uuid"], filter="challenge_group = 'mammals'")
                  .column(0).to_pylist())
    assert len(named) == sum(1 for u, s in told.items() if s.predicted_name == name and u in mammals)
    for bad, message in ((dict(correct="maybe"), "correct must be one of"), (dict(conf_min="200"), "from 0 to 100"),
                         (dict(conf_min="60", conf_max="10"), "is above conf_max"), (dict(run="9"), "run must be")):
        refused = get(url, "/", **({"run": "1"} | bad))
        assert refused.status_code == 400 and message in refused.text, bad


def _step_through(url: str, first: str) -> list[str]:
    """The uuids met by following the image page's "next →" from ``first`` to the end of its view."""
    met, link = [], first
    while link:
        page = httpx.get(url.rstrip("/") + link, timeout=60)
        assert page.status_code == 200
        met.append(unquote(link.split("?")[0].removeprefix("/image/")))
        found = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        link = found.group(1).replace("&amp;", "&") if found else None
    return met


def test_prev_and_next_on_an_image_page_walk_the_view_it_was_opened_from(served) -> None:
    from cladebench.serve.runs import ordered

    url, started = served
    grid = get(url, "/", run="1", correct="wrong", challenge_group="mammals")
    hrefs = [h.replace("&amp;", "&") for _, h in _cells(grid)]
    assert hrefs and all("view=browse" in h for h in hrefs)
    shown = [unquote(h.split("?")[0].removeprefix("/image/")) for h in hrefs]
    assert _step_through(url, hrefs[0]) == shown
    last = httpx.get(url.rstrip("/") + hrefs[-1], timeout=60).text
    assert f"{len(shown)} of {len(shown)} in" in last and 'rel="next"' not in last and 'rel="prev"' in last
    runs = get(url, "/runs", run="1", sort="least-confident")
    first = _cells(runs)[0][1].replace("&amp;", "&")
    assert "view=runs" in first
    assert _step_through(url, first)[:5] == ordered(started.state, 1, "least-confident", None, None)[:5]
    assert 'rel="prev"' not in get(url, "/image/" + quote(shown[0], safe="")).text  # opened alone: no view


def test_the_predicted_and_true_filters_match_at_any_rank(served) -> None:
    """A genus typed in `predicted` keeps the rows predicted as any of its species; in `true`, the rows whose true
    taxon is in it (the dataset's own genus column says which)."""
    from cladebench.serve.runs_data import by_uuid, said

    url, started = served
    state = started.state
    told = {u: said(state, 1, row) for u, row in by_uuid(state, 1).items()}
    species = next(s.predicted_name for s in told.values() if s.predicted_name and len(s.predicted_name.split()) == 2)
    genus = species.split()[0]
    predicted = _cells(get(url, "/", run="1", predicted=genus.lower()))
    expected = [u for u, s in told.items() if (s.predicted_name or "").split()[:1] == [genus]]
    assert len(predicted) == min(48, len(expected)) > 0
    table = state.dataset.to_table(columns=["uuid", "genus"]).to_pylist()
    in_genus = {r["uuid"] for r in table if r["genus"] == genus} & {u for u, s in told.items() if s.truth}
    true = _cells(get(url, "/", run="1", true=genus))
    assert len(true) == min(48, len(in_genus)) > 0
    assert {unquote(href.split("/image/")[1].split("?")[0]) for _, href in true} <= in_genus


def test_a_taxon_is_named_at_any_rank_by_whole_words_from_a_capital() -> None:
    from cladebench.serve.runs_data import names_taxon

    lineage = "Animalia Chordata Aves Passeriformes Turdidae Turdus migratorius with common name American robin"
    assert names_taxon(lineage, "Turdus migratorius", "aves") and names_taxon(lineage, None, "Turdus migratorius")
    assert names_taxon("Turdus migratorius", None, "TURDUS") and names_taxon("Turdus", None, "turdus")
    assert not names_taxon("Turdus migratorius", None, "migratorius")  # an epithet alone names no taxon
    assert not names_taxon("Turdus migratorius", None, "Turd") and not names_taxon(lineage, None, "robin")
    assert not names_taxon(None, None, "Turdus") and not names_taxon("Turdus", None, " ")


def test_the_runs_grid_sorts_by_taxon_and_by_how_far_a_mistake_lands(served) -> None:
    """sort=taxon: true taxa A to Z; sort=severity: mistakes by their LCA height with the truth (the furthest
    first), the right ones after."""
    from cladebench.metrics.hierarchy import HEIGHT_COLUMN
    from cladebench.serve.runs_data import by_uuid, said

    url, started = served
    rows = by_uuid(started.state, 1)

    def shown(sort: str) -> list[str]:
        page = get(url, "/runs", run="1", sort=sort)
        assert page.status_code == 200
        return [unquote(h.split("/image/")[1].split("?")[0]) for _, h in _cells(page)]

    by_taxon = [str(said(started.state, 1, rows[u]).truth_name).casefold() for u in shown("taxon")]
    assert by_taxon and by_taxon == sorted(by_taxon)
    order = shown("severity")
    wrong = [u for u in order if said(started.state, 1, rows[u]).right is False]
    assert wrong and order[:len(wrong)] == wrong  # every mistake before any right answer
    heights = [rows[u].get(HEIGHT_COLUMN) for u in wrong]
    assert None not in heights and heights == sorted(heights, reverse=True) and heights[0] > heights[-1]


def test_a_selection_of_the_runs_grid_exports_as_csv(served) -> None:
    """The grid's link exports every row it selects (all pages, in its order, its filters kept) as CSV."""
    import csv
    import html
    import io

    from cladebench.serve.runs import ordered

    url, started = served
    page = get(url, "/runs", run="1", sort="severity")
    link = html.unescape(re.search(r'<a id="export" href="([^"]+)"', page.text).group(1))
    assert link.startswith("/runs.csv?") and "sort=severity" in link
    exported = httpx.get(url.rstrip("/") + link, timeout=60)
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    assert "attachment" in exported.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [r["uuid"] for r in rows] == ordered(started.state, 1, "severity", None, None)
    assert set(rows[0]) == {"uuid", "true_label", "pred_label", "confidence", "right", "lca_height"}
    assert all(float(r["confidence"]) <= 1 for r in rows if r["confidence"])
    assert get(url, "/runs.csv", run="1", sort="sideways").status_code == 400


def test_a_tile_caption_keeps_the_part_of_a_wrong_name_that_differs(served) -> None:
    """A wrong prediction in the truth's genus is captioned ``T. merula``: the epithet that differs survives a
    narrow tile cutting the caption's end; a right one, or one sharing nothing, keeps its whole name."""
    from cladebench.serve.runs_data import by_uuid, differing_name, said

    assert differing_name("Turdus merula", "Turdus migratorius") == "T. merula"
    assert differing_name("Animalia Aves Turdus merula", "Animalia Aves Corvus corax") == "A. A. Turdus merula"
    assert differing_name("Turdus merula", "Turdus merula") == "Turdus merula"
    assert differing_name("Corvus corax", "Turdus merula") == "Corvus corax"
    assert differing_name("Turdus", "Turdus migratorius") == "Turdus"  # a name is never cut to nothing
    url, started = served
    tags = dict(re.findall(r'href="/image/([^"?]+)[^"]*".*?<span class="tag">([^<]+)</span>',
                           get(url, "/runs", run="1", sort="errors").text.split('id="grid"')[1], re.S))
    rows = by_uuid(started.state, 1)
    for uuid, tag in tags.items():
        s = said(started.state, 1, rows[unquote(uuid)])
        name = tag.split("→ ", 1)[1]
        expected = s.predicted_name if s.right is not False else differing_name(s.predicted_name, s.truth_name)
        assert html.unescape(name) == expected
    assert tags
