"""A report that reads at a glance: real runs that make it wide (many long challenge-group names, grouped and pooled
zero-shot runs mixed, a run missing a group and holding an undefined value, a few-shot run of six metrics) loaded
in headless Chromium at 1,400 px, with assertions on the DOM: nothing wider than the window, chart tick labels that
do not meet, undefined values as n/a gaps (never bars), confused pairs by binomial, task settings as a table,
"not compared" and missing photo credits said once."""

from __future__ import annotations

import base64
import os
import re
import shutil
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2", reason="reports need jinja2 (the report extra)")
pytest.importorskip("matplotlib", reason="reports need matplotlib (the report extra)")

from cladebench.evaluate.record import RunRecord
from cladebench.report import write_report
from cladebench.report.plots import Series, bar_chart, wrap_label
from cladebench.report.taxon_names import taxon_name
from helpers.devtools import DevTools
from helpers.devtools import browser as chromium

WIDTH = 1400
"""Viewport width the report must fit."""
SCREENSHOTS_ENV = "CLADEBENCH_SCREENSHOTS"
"""A folder to copy the screenshots the tests take into (to look at them); unset: they stay in tmp_path."""


# --- pieces that need no browser -----------------------------------------------------------------------


def test_wrap_label_breaks_only_at_separators() -> None:
    assert wrap_label("Animalia|Plantae", 10) == "Animalia|\nPlantae"
    assert wrap_label("Gakrir|Tisoshor|Sothel", 16) == "Gakrir|Tisoshor|\nSothel"
    assert wrap_label("kingdom", 10) == "kingdom"
    assert wrap_label("Plethodontidae", 8) is None  # no separator: cannot wrap, the chart rotates it instead
    assert wrap_label("a|b|c|d|e", 2, max_lines=3) is None


def test_taxon_labels_read_back_as_binomial_and_lineage() -> None:
    label = "Animalia Chordata Actinopterygii Clupeiformes Engraulidae Anchoa mitchilli"
    name = taxon_name(label, "taxon")
    assert (name.name, name.hover) == ("Anchoa mitchilli", label)
    assert name.lineage == "Animalia Chordata Actinopterygii Clupeiformes Engraulidae"
    assert taxon_name("Animalia Chordata Anchoa mitchilli with common name Bay anchovy", "taxon_com").name == \
        "Anchoa mitchilli (Bay anchovy)"
    assert taxon_name("Animalia Chordata Aves Passeriformes Corvidae Corvus", "taxon").name == "Corvus"  # genus rank
    assert taxon_name("Great Blue Heron", None).name == "Great Blue Heron"  # no recorded style: not a lineage
    assert taxon_name("Great Blue Heron", "com").lineage is None
    assert taxon_name("Anchoa mitchilli", "sci").name == "Anchoa mitchilli"


def test_a_note_shared_by_many_metrics_is_said_once() -> None:
    from cladebench.report.sections.leaderboard import merge_notes

    reason = "not a mean of per-example hits: no paired test"
    notes = [(f"G{i}/simpleshot_1shot", reason) for i in range(8)] + [("knn_1shot", "other"), ("G0/simpleshot_1shot",
                                                                                                reason)]
    assert merge_notes(notes) == (f"G0/simpleshot_1shot, G1/simpleshot_1shot, G2/simpleshot_1shot and 5 more: {reason}",
                                  "knn_1shot: other")


# --- the wide runs --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from helpers.report_runs import build_wide_runs

    root = tmp_path_factory.mktemp("wide")
    built = build_wide_runs(root)
    paths = list(built["runs"].values())
    built["index"] = {name: i for i, name in enumerate(built["runs"], start=1)}
    built["html"] = write_report(paths, root / "report.html", max_gallery=6)
    built["md"] = write_report(paths, root / "report.md", format="md")
    return built


@pytest.fixture(scope="module")
def browser() -> Iterator[DevTools]:
    with chromium() as devtools:
        yield devtools


@pytest.fixture(scope="module")
def page(browser: DevTools, wide: dict[str, Any]) -> str:
    """The wide report open at 1,400 px."""
    return browser.open(wide["html"].as_uri(), width=WIDTH)


def _keep_screenshot(path: Path) -> None:
    folder = os.environ.get(SCREENSHOTS_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


OVERFLOWING = """(() => {
  const width = innerWidth, out = [];
  for (const el of document.querySelectorAll('table, figure, img, .scroll, pre, dl, .gallery, h3, h4, p')) {
    const box = el.getBoundingClientRect();
    if (box.right > width + 0.5 || box.left < -0.5)
      out.push(['outside', el.tagName, el.className, box.left, box.right]);
    if (el.classList.contains('scroll') && el.scrollWidth > el.clientWidth + 1)
      out.push(['scrolls', el.firstElementChild && el.firstElementChild.className, el.scrollWidth, el.clientWidth]);
  }
  return out;
})()"""


def test_nothing_is_wider_than_the_window(browser, page, wide, tmp_path) -> None:
    assert browser.evaluate("innerWidth", page) == WIDTH
    assert browser.evaluate("document.documentElement.scrollWidth", page) <= WIDTH
    assert browser.evaluate(OVERFLOWING, page) == []
    assert browser.evaluate("document.querySelectorAll('table.leaderboard').length", page) >= 3
    assert browser.evaluate("document.querySelectorAll('script').length", page) == 0
    assert browser.problems(page) == []
    shot = browser.screenshot(page, tmp_path / "wide-report-1400.png")
    assert _png_size(shot)[0] == WIDTH
    _keep_screenshot(shot)


RUN_NAME_WORDS = """Array.from(document.querySelectorAll('.run-name')).flatMap(el => {
  const out = [], walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.textContent.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const lines = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
      out.push([match[0], lines.size]);
    }
  }
  return out;
})"""


def test_run_names_are_never_broken_inside_a_word(browser, page) -> None:
    """Names get the room they need, or wrap between words (never eight characters a line)."""
    words = browser.evaluate(RUN_NAME_WORDS, page)
    assert len(words) > 20
    assert [w for w, lines in words if lines != 1] == []


def test_wide_leaderboards_are_split_or_turned(browser, page, wide) -> None:
    tables = browser.evaluate("""Array.from(document.querySelectorAll('table.leaderboard')).map(t => ({
      task: t.dataset.task, turned: t.classList.contains('turned'),
      columns: t.querySelector('thead tr').children.length,
      metrics: Array.from(new Set(Array.from(t.querySelectorAll('td[data-metric]')).map(td =>
        td.dataset.metric)))}))""",
                              page)
    zeroshot = [t for t in tables if t["task"] == "zeroshot"]
    # Grouped and pooled numbers are separate tables: no table mixes GROUP/metric with a pooled metric.
    assert len(zeroshot) == 2
    assert {all("/" in m for m in t["metrics"]) for t in zeroshot} == {True, False}
    grouped = next(t for t in zeroshot if "/" in t["metrics"][0])
    assert len(grouped["metrics"]) == len(wide["groups"]) and grouped["turned"]  # six groups, three runs: turned
    fewshot = [t for t in tables if t["task"] == "fewshot"]
    assert len(fewshot) == 1 and len(fewshot[0]["metrics"]) == 6 and fewshot[0]["turned"]
    assert all(t["columns"] <= 6 for t in tables)  # at most five metrics, or five runs, beside the name column


# --- charts ------------------------------------------------------------------------------------------------


TICK_LABEL_BOXES = """Array.from(document.querySelectorAll('[id="matplotlib.axis_1"] [id^="xtick_"]')).map(tick =>
  Array.from(tick.querySelectorAll('[id^="text_"] g[transform]')).map(line => {
    const box = line.getBBox(), m = line.getCTM();
    return [[box.x, box.y], [box.x + box.width, box.y], [box.x + box.width, box.y + box.height],
            [box.x, box.y + box.height]].map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  })).filter(lines => lines.length)"""


def _separated(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> bool:
    """Whether two convex polygons do not intersect (separating axis theorem; touching counts as apart)."""
    for polygon in (a, b):
        for i in range(len(polygon)):
            (x1, y1), (x2, y2) = polygon[i], polygon[(i + 1) % len(polygon)]
            axis = (y1 - y2, x2 - x1)
            project = [[axis[0] * x + axis[1] * y for x, y in p] for p in (a, b)]
            if max(project[0]) <= min(project[1]) + 1e-6 or max(project[1]) <= min(project[0]) + 1e-6:
                return True
    return False


def _tick_labels(browser: DevTools, svg: bytes, path: Path) -> list[list[list[list[float]]]]:
    path.write_bytes(svg)
    session = browser.open(path.as_uri(), width=WIDTH)
    return browser.evaluate(TICK_LABEL_BOXES, session)


def _assert_apart(labels: list[list[list[list[float]]]], where: str) -> None:
    for i, first in enumerate(labels):
        for j in range(i + 1, len(labels)):
            for a in first:
                for b in labels[j]:
                    assert _separated(a, b), f"{where}: tick labels {i} and {j} meet"


def _charts(html: str) -> dict[str, bytes]:
    """The report's charts: alt text -> SVG."""
    found = re.findall(r'<img class="chart" src="data:image/svg\+xml;base64,([^"]+)" alt="([^"]*)"', html)
    return {alt: base64.b64decode(data) for data, alt in found}


def test_chart_tick_labels_do_not_meet_in_the_report(browser, wide, tmp_path) -> None:
    charts = _charts(wide["html"].read_text())
    assert len(charts) >= 4
    checked = 0
    for i, (alt, svg) in enumerate(charts.items()):
        labels = _tick_labels(browser, svg, tmp_path / f"chart-{i}.svg")
        _assert_apart(labels, alt)
        checked += len(labels)
    assert checked >= 20


@pytest.mark.parametrize("categories", [
    ["Animalia|Plantae", "Animalia|Animalia", "Plantae|Plantae"],
    [f"Animalia|Plantae|Group {i}" for i in range(12)],
    [f"Plethodontidaeformes{i}" for i in range(9)],  # long, and nowhere to wrap
    [f"g{i}" for i in range(60)],
], ids=["three-long", "twelve-long", "unbreakable", "sixty-short"])
def test_chart_tick_labels_do_not_meet(browser, tmp_path, categories) -> None:
    values = [10.0 + 3 * i for i in range(len(categories))]
    uri = bar_chart(categories, [Series("[1] a", values), Series("[2] b", values[::-1])], ylabel="top1 (%)")
    labels = _tick_labels(browser, base64.b64decode(uri.split(",", 1)[1]), tmp_path / "chart.svg")
    assert len(labels) == len(categories)
    _assert_apart(labels, ", ".join(categories[:3]))


# --- undefined values -------------------------------------------------------------------------------------


def test_undefined_and_missing_values_are_gaps_marked_na(browser, page, wide) -> None:
    run = wide["index"]["partial-b"]
    missing = f"{wide['left_out']}/top1_species"
    cell = f"(m) => {{ const td = document.querySelector(`td[data-run='{run}'][data-metric='${{m}}']`); " \
           "return td && [td.className, td.querySelector('.value') ? td.querySelector('.value').textContent : " \
           "td.textContent]; }"
    classes, value = browser.evaluate(f"({cell})({wide['undefined']!r})", page)
    assert value == "n/a" and "undefined" in classes.split()
    assert browser.evaluate(f"({cell})({missing!r})", page) == ["missing", "n/a"]
    # The per-group chart repeats no number: its values are the leaderboard's cells, which it points to.
    panel = browser.evaluate("""Array.from(document.querySelectorAll('#groups figure.panel')).filter(f =>
      f.querySelector('figcaption').textContent === 'zeroshot: top1_species by challenge group').map(f =>
      [f.querySelectorAll('table').length, f.querySelector('a[href="#leaderboard"]') !== null])""", page)
    assert panel == [[0, True]]
    # In the chart, those two are no bar at all (not a bar of height 0) and are marked n/a.
    svg = _charts(wide["html"].read_text())["zeroshot: top1_species by challenge group"].decode()
    series = 2  # runs [1], [2] and [4] have the metric: [4] is the third series
    gaps = [wide["groups"].index(wide["undefined"].split("/")[0]), wide["groups"].index(wide["left_out"])]
    for category in range(len(wide["groups"])):
        gap = category in gaps
        assert (f'id="bar-{series}-{category}"' in svg) is not gap, category
        assert (f'id="missing-{series}-{category}"' in svg) is gap, category
        assert f'id="bar-0-{category}"' in svg and f'id="bar-1-{category}"' in svg
    assert svg.count("<!-- n/a -->") == len(gaps)


# --- sections ---------------------------------------------------------------------------------------------


def test_confused_pairs_are_named_by_binomial_with_the_lineage_on_hover(browser, page) -> None:
    names = browser.evaluate("""Array.from(document.querySelectorAll('table.confusion .taxon')).map(s =>
      [s.textContent, s.title])""", page)
    assert len(names) >= 10
    for name, title in names:
        genus, epithet = name.split(" ")
        assert genus[0].isupper() and epithet.islower(), name
        assert title.endswith(" " + name) and len(title.split()) > 2, (name, title)


def test_task_settings_are_a_table(browser, page, wide) -> None:
    settings = browser.evaluate("""Array.from(document.querySelectorAll('table.settings')).map(t =>
      [t.dataset.run, Object.fromEntries(Array.from(t.querySelectorAll('tbody tr')).map(tr =>
        [tr.querySelector('th').textContent, tr.querySelector('td').textContent]))])""", page)
    by_run = {int(run): rows for run, rows in settings}
    assert set(by_run) == set(wide["index"].values())
    fewshot = by_run[wide["index"]["fewshot"]]
    assert fewshot["methods"] == "simpleshot, linear, knn" and fewshot["rank"] == "species"
    record = RunRecord.read(wide["runs"]["grouped-a"])
    zeroshot = by_run[wide["index"]["grouped-a"]]
    assert zeroshot["rank"] == record.provenance["task"]["rank"] and zeroshot["column"] == "emb_a"
    facts = browser.evaluate("Array.from(document.querySelectorAll('table.facts th')).map(th => th.textContent)", page)
    assert "task settings" not in facts
    assert '{"' not in browser.evaluate("""Array.from(document.querySelectorAll('table.settings td')).map(td =>
      td.textContent).filter(t => !t.startsWith('[')).join(' ')""", page)


def test_not_compared_is_said_once_per_table(browser, page, wide) -> None:
    tables = browser.evaluate("""Array.from(document.querySelectorAll('#leaderboard table.leaderboard')).map(t => {
      const before = t.parentElement.previousElementSibling;
      return {task: t.dataset.task, once: before && before.classList.contains('said-once') ?
                before.querySelector('.mark').textContent : null,
              marks: Array.from(t.querySelectorAll('td .mark')).map(m => m.textContent)};
    })""", page)
    fewshot = next(t for t in tables if t["task"] == "fewshot")
    assert fewshot == {"task": "fewshot", "once": "not compared", "marks": []}
    pooled, grouped = sorted((t for t in tables if t["task"] == "zeroshot"), key=lambda t: len(t["marks"]))
    assert pooled["once"] == "not compared" and pooled["marks"] == []
    # Runs [1] and [2] share their examples and are compared; [4] has fewer: its cells say so each, as they differ.
    # No difference holds in any group, so no cell is marked best: each compared cell says tied.
    assert grouped["once"] is None and {"tied", "not compared"} == set(grouped["marks"])
    assert grouped["marks"].count("not compared") == len(wide["groups"]) - 2  # not the undefined, not the missing


def test_a_missing_photo_credit_is_said_once_per_gallery(browser, page) -> None:
    galleries = browser.evaluate("""Array.from(document.querySelectorAll('.gallery')).map(g => {
      const notes = [];
      for (let el = g.previousElementSibling; el && el.tagName !== 'H3'; el = el.previousElementSibling)
        if (el.classList.contains('credits-missing')) notes.push(el.textContent);
      return {notes, cards: g.querySelectorAll('.card').length,
              credited: g.querySelectorAll('.card .attribution').length, text: g.innerText};
    })""", page)
    assert len(galleries) >= 4
    for gallery in galleries:
        assert "no attribution recorded" not in gallery["text"] and "license not recorded" not in gallery["text"]
        uncredited = gallery["cards"] - gallery["credited"]
        if uncredited:
            assert gallery["notes"] == [f"{uncredited} of {gallery['cards']} photos have no attribution recorded "
                                        "in the dataset: check their source before reusing them."]
        else:
            assert gallery["notes"] == []
    assert any(g["notes"] for g in galleries)


def test_markdown_of_the_wide_runs(wide) -> None:
    text = wide["md"].read_text()
    leaderboard = text.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    assert leaderboard.count("Every run in this table: not compared") == 2  # the pooled zero-shot and the few-shot
    assert leaderboard.count("(not compared)") == len(wide["groups"]) - 2
    assert len(re.findall(r" n/a\s*\|", leaderboard)) == 2  # the undefined value and the missing group
    settings = text.split("| task setting | value |", 1)[1].split("\n\n", 1)[0]
    assert "| methods | simpleshot, linear, knn |" in text and '{"' not in settings
    table: list[int] = []
    for line in [*text.splitlines(), ""]:  # a pipe from data would add a cell to its row
        if line.startswith("|"):
            table.append(len(re.split(r"(?<!\\)\|", line)))
        elif table:
            assert len(set(table)) == 1, table
            table = []


def test_at_a_phone_width_the_page_never_scrolls_sideways(browser, wide) -> None:
    """At 390 px, folded sections opened, no table is wider than the window and none scrolls in a box of its own:
    each row of a table is a block whose cells say their column's header (a run is a row, not a column)."""
    page = browser.open(wide["html"].as_uri(), width=390, height=844)
    browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)", page)
    assert browser.evaluate("document.documentElement.scrollWidth", page) <= 390
    wider = browser.evaluate("""Array.from(document.querySelectorAll('body *')).filter(e => e.clientWidth > 0
      && (e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > 391)).map(e => e.tagName)""", page)
    assert wider == []
    cell = browser.evaluate("""(() => { const td = document.querySelector('table.leaderboard td[data-run]');
      return [getComputedStyle(td).display, getComputedStyle(td, '::before').content]; })()""", page)
    assert cell[0] == "block" and cell[1] not in ("none", "normal", '""'), cell
    assert browser.problems(page) == []


def test_the_answer_counts_the_groups_of_its_best_run(wide) -> None:
    """Grouped runs beside a pooled one: the answer counts the groups the grouped runs were paired on, the pooled
    value of another run not counted as a group."""
    answer = wide["md"].read_text().split("## Answer", 1)[1].split("\n## ", 1)[0]
    verdict = next(line for line in answer.splitlines() if line.startswith("- top1"))
    found = re.search(r" on (\d+) of (\d+) groups", verdict)
    assert found and int(found.group(2)) <= len(wide["groups"]), verdict
