"""`cladebench report`: real run records of several tasks -> one HTML page (opened in headless Chromium) and a
Markdown appendix; numbers equal the records', strings from data (hostile ones included) stay text."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.errors import CladebenchError
from cladebench.evaluate.record import RunRecord
from cladebench.metrics import display_scale

pytest.importorskip("jinja2", reason="reports need jinja2 (the report extra)")
pytest.importorskip("matplotlib", reason="reports need matplotlib (the report extra)")

from cladebench.escaping import markdown_escape
from cladebench.report import ReportConfig, write_report
from cladebench.report.calibration import bin_index, reliability
from cladebench.report.sections import SECTIONS, ordered_sections
from helpers.devtools import DevTools
from helpers.devtools import browser as chromium

HOSTILE = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
"""An attribution a photo's uploader could have written."""
HOSTILE_GROUP = "Gakrir <b><i> | `x` & *y*"
"""A challenge group name with HTML, a table pipe, a code span and emphasis (no "/", which ends a group in
GROUP/metric, and no "=", which marks a breakdown to `cladebench compare`)."""
HOSTILE_QUERY = "Q <b>bold</b> | `code` [link](javascript:alert(1)) <script>window.__pwned=3</script>"
"""A rerank query text with HTML, a pipe, a code span and a link."""

# --- expected formatting, written out independently of the report's code ------------------------------


def expected_value(metric: str, estimate: dict[str, Any]) -> str:
    scale, unit = display_scale(metric)
    return f"{scale * estimate['value']:.2f}{unit}"


def expected_interval(metric: str, estimate: dict[str, Any]) -> str:
    scale, _ = display_scale(metric)
    return f"[{scale * estimate['low']:.2f}, {scale * estimate['high']:.2f}]"


# --- pieces that need no model ---------------------------------------------------------------------


def test_markdown_escape_keeps_data_inside_its_cell() -> None:
    escaped = markdown_escape(HOSTILE_QUERY + "\nsecond line")
    assert "<" not in escaped and ">" not in escaped and "\n" not in escaped
    assert re.search(r"(?<!\\)[|`\[\]]", escaped) is None  # every pipe, backtick and bracket is escaped
    assert "&lt;script&gt;" in escaped and r"\|" in escaped and r"\`code\`" in escaped
    assert markdown_escape("a & b_c*d") == r"a &amp; b\_c\*d"


def test_reliability_and_ece_match_a_direct_computation() -> None:
    rng = np.random.default_rng(0)
    confidence = np.concatenate([rng.uniform(0, 1, 500), [0.0, 0.1, 0.3, 1.0]])
    correct = rng.uniform(0, 1, confidence.size) < confidence ** 2
    result = reliability(confidence, correct)
    edges = np.linspace(0.0, 1.0, 11)
    bins = [[(c, hit) for c, hit in zip(confidence, correct, strict=True)
             if edges[b] < c <= edges[b + 1] or (b == 0 and c == 0)] for b in range(10)]
    assert [len(b) for b in bins] == result.counts.tolist()
    assert bin_index(np.array([0.0, 0.1, 0.3, 1.0])).tolist() == [0, 0, 2, 9]  # (0.2, 0.3] holds 0.3
    ece = sum(len(b) / confidence.size * abs(np.mean([h for _, h in b]) - np.mean([c for c, _ in b]))
              for b in bins if b)
    assert result.ece == pytest.approx(ece, abs=1e-12)
    assert result.accuracy[9] == pytest.approx(np.mean([h for _, h in bins[9]]))
    perfect = reliability(np.full(8, 0.75), np.array([1, 1, 1, 0, 1, 1, 1, 0], dtype=bool))
    assert perfect.ece == pytest.approx(0.0)


def _rerank_record(root: Path) -> Path:
    """A rerank run written by hand (scores planted), whose dataset is gone: the report must still be made."""
    from cladebench.tasks.common import Predictions
    from cladebench.tasks.rerank import rerank_metrics

    rng = np.random.default_rng(1)
    rows = []
    for query_id, query in enumerate(["red fox", HOSTILE_QUERY, "no positives"], start=1):
        for j in range(10):
            rows.append({"uuid": f"{query_id}-{j}", "query_id": query_id, "query": query,
                         "relevant": bool(j % 3 == 0) and query != "no positives", "score": float(rng.uniform())})
    table = pa.Table.from_pylist(rows)
    metrics = rerank_metrics(Predictions(table=table, labels=[], info={"rerank_k": 100}))
    record = RunRecord(task="rerank", metrics=metrics, config={"rerank_k": 100},
                       provenance={"dataset": {"uri": str(root / "gone.lance"), "version": 1},
                                   "model": {"id": "hf-hub:org/model|<b>"}, "task": {"rerank_k": 100},
                                   "metrics": {"ap@100": "INQUIRE AP"}})
    return record.write(root / "rerank-run", table)


def test_sections_appear_only_for_runs_they_apply_to(tmp_path) -> None:
    run = _rerank_record(tmp_path)
    html = write_report([run], tmp_path / "r.html").read_text()
    assert 'id="rerank_ap"' in html and 'id="leaderboard"' in html and 'id="provenance"' in html
    for absent in ("calibration", "confusion", "lineage", "ranks", "mistakes", "groups"):
        assert f'id="{absent}"' not in html, absent
    # The dataset is gone: the gallery says why instead of showing broken images.
    assert "photos not available" in html and "<img src=\"data:image/jpeg" not in html
    assert "no-photo" in html
    assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    md = write_report([run], tmp_path / "r.md", format="md").read_text()
    assert "## Per-query average precision (rerank)" in md and "Calibration" not in md
    assert "hf-hub:org/model\\|&lt;b&gt;" in md


def test_sections_are_registered_in_page_order() -> None:
    names = [s.name for s in ordered_sections()]
    # a suite's models x benchmarks table opens its report (the section is empty in any other report)
    assert names[:2] == ["suite", "leaderboard"] and names[-1] == "provenance"
    assert {"groups", "ranks", "calibration", "confusion", "rerank_ap", "lineage", "gallery"} <= set(SECTIONS)


def test_bad_arguments_are_refused(tmp_path) -> None:
    run = _rerank_record(tmp_path)
    with pytest.raises(CladebenchError, match=r"report format.*html"):
        write_report([run], tmp_path / "r.pdf", format="pdf")
    with pytest.raises(CladebenchError, match="no run record"):
        write_report([tmp_path / "missing"], tmp_path / "r.html")
    with pytest.raises(CladebenchError, match="at least one run"):
        write_report([], tmp_path / "r.html")
    assert not (tmp_path / "r.pdf").exists() and not (tmp_path / "r.html").exists()
    assert ReportConfig(runs=(run,), out_file=tmp_path / "r.html").format == "html"



def test_report_config_is_a_verb_config(tmp_path) -> None:
    """The CLI is generated from the config: runs positional, --out-file required, --format a choice."""
    import argparse

    from cladebench.config import add_config_arguments, config_from_args

    parser = argparse.ArgumentParser(prog="report", exit_on_error=False)
    add_config_arguments(parser, ReportConfig)
    config = config_from_args(ReportConfig, parser.parse_args(["a/run.json", "b", "--out-file", "r.md",
                                                               "--format", "md", "--max-gallery", "3"]))
    assert config == ReportConfig(runs=(Path("a/run.json"), Path("b")), out_file=Path("r.md"), format="md",
                                  max_gallery=3)
    with pytest.raises((SystemExit, argparse.ArgumentError)):
        parser.parse_args(["a", "--out", "r", "--format", "pdf"])
    # Importing the config (as the CLI does) loads neither jinja2 nor matplotlib.
    code = "import sys, cladebench.report; print('jinja2' in sys.modules or 'matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


# --- real runs of several tasks ------------------------------------------------------------------


def _rerank_table(world: Any, queries: int = 3, candidates: int = 12) -> pa.Table:
    """Queries (a species name each; one hostile) x candidate images, some of that species."""
    table = world.to_table(queries * candidates, seed=5, image_format="jpeg")
    names = table.column("scientific_name").to_pylist()
    species = sorted(set(names))[:queries]
    query_of = [species[i // candidates] for i in range(table.num_rows)]
    text = {s: (HOSTILE_QUERY if i == 1 else s) for i, s in enumerate(species)}
    table = table.set_column(table.column_names.index("uuid"), "uuid",
                             pa.array([f"q{species.index(q)}-{u}" for q, u in
                                       zip(query_of, table.column("uuid").to_pylist(), strict=True)]))
    relevant = [n == q for n, q in zip(names, query_of, strict=True)]
    for start in range(0, table.num_rows, candidates):
        relevant[start] = True  # every query has a positive
    return (table.append_column("query_id", pa.array([species.index(q) + 1 for q in query_of], pa.int64()))
            .append_column("query", pa.array([text[q] for q in query_of]))
            .append_column("relevant", pa.array(relevant)))


def _with_hostile_strings(table: pa.Table) -> pa.Table:
    groups = table.column("challenge_group").to_pylist()
    first = sorted(set(groups))[0]
    table = table.set_column(table.column_names.index("challenge_group"), "challenge_group",
                             pa.array([HOSTILE_GROUP if g == first else g for g in groups]))
    return table.set_column(table.column_names.index("attribution"), "attribution",
                            pa.array([HOSTILE] * table.num_rows))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Zero-shot runs of two tiny models on the same grouped images, a rerank run and a lineage run."""
    pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.evaluate.configs import eval_config
    from cladebench.evaluate.run import run_eval
    from cladebench.models.tiny import write_tiny_model
    from cladebench.synthetic import WorldConfig, make_world

    root = tmp_path_factory.mktemp("report")
    models = {name: "local-dir:" + str(write_tiny_model(root / name, seed=seed))
              for name, seed in (("tiny-a", 4), ("tiny-b", 5))}
    world = make_world(WorldConfig(seed=2, names="generated", branching=(1, 1, 3, 1, 2, 2, 2)))
    datasets = {
        "world": _with_hostile_strings(world.to_table(60, seed=7, image_format="jpeg")),
        "rerank": _rerank_table(world),
        "pairs": world.pair_table(24, seed=2),
    }
    for name, table in datasets.items():
        store.write_dataset(table, root / f"{name}.lance")
    for name, model in models.items():
        embed_dataset(EmbedConfig(dataset=str(root / "world.lance"), model=model, column=f"emb_{name[-1]}",
                                  workers=0, device="cpu", progress=False))
    for name in ("rerank", "pairs"):
        embed_dataset(EmbedConfig(dataset=str(root / f"{name}.lance"), model=models["tiny-a"], column="emb_a",
                                  workers=0, device="cpu", progress=False))

    def run(name: str, dataset: str, model: str, **options: Any) -> Path:
        return run_eval(eval_config(dataset=str(root / f"{dataset}.lance"), model=models[model], out=root / name,
                                    device="cpu", **options))[1]

    return {
        "zeroshot-a": run("zeroshot-a", "world", "tiny-a"),
        "zeroshot-b": run("zeroshot-b", "world", "tiny-b"),
        "rerank": run("rerank", "rerank", "tiny-a", task="rerank", group_by="none"),
        "lineage": run("lineage", "pairs", "tiny-a", task="lineage", group_by="none"),
    }


@pytest.fixture(scope="module")
def html_report(runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(list(runs.values()), tmp_path_factory.mktemp("html") / "report.html", max_gallery=6)


def _records(runs: dict[str, Path]) -> list[RunRecord]:
    return [RunRecord.read(path) for path in runs.values()]


def _expected_cells(runs: dict[str, Path]) -> dict[tuple[int, str], dict[str, Any]]:
    """Leaderboard cells the report must show: (run number, metric) -> stored estimate."""
    out = {}
    for index, record in enumerate(_records(runs), start=1):
        wanted = {"zeroshot": [f"{g}/top1_species" for g in record.provenance["groups"]["values"]],
                  "rerank": ["ap@100", "ndcg@100", "mrr@100"], "lineage": ["hint_exact", "nohint_exact"]}
        out.update({(index, metric): record.metrics[metric] for metric in wanted[record.task]})
    return out


class _Cells(HTMLParser):
    """The leaderboard cells of a page: data-run, data-metric and the text of their value/interval/mark spans."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self._span: str | None = None
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "td" and "data-metric" in attributes:
            self.cells.append({"run": attributes["data-run"] or "", "metric": attributes["data-metric"] or ""})
            self._in_cell = True
        elif tag == "span" and self._in_cell and attributes.get("class") in ("value", "interval", "mark"):
            self._span = attributes["class"]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "span"):
            self._span = None
        if tag == "td":
            self._in_cell = False

    def handle_data(self, data: str) -> None:
        if self._span:
            self.cells[-1][self._span] = self.cells[-1].get(self._span, "") + data


def _check_leaderboard(cells: list[dict[str, str]], runs: dict[str, Path]) -> None:
    by_key = {(int(c["run"]), c["metric"]): c for c in cells}
    expected = _expected_cells(runs)
    assert set(expected) <= set(by_key)
    for key, estimate in expected.items():
        cell = by_key[key]
        assert cell["value"] == expected_value(key[1], estimate), key
        assert cell["interval"] == expected_interval(key[1], estimate), key
    # Ties as `cladebench compare` decides them: best run first, the other tied unless Holm rejects.
    from cladebench.evaluate.compare import compare_runs

    paths = list(runs.values())
    for metric in {m for (i, m) in expected if i == 1}:
        marks = {i: by_key[(i, metric)].get("mark", "") for i in (1, 2)}
        # "best" only where the difference holds; two runs tied are both marked tied
        assert sorted(marks.values()) in (["tied", "tied"], ["best", "worse"]), (metric, marks)
        values = {i: RunRecord.read(paths[i - 1]).metrics[metric]["value"] for i in (1, 2)}
        best = next((i for i, m in marks.items() if m == "best"), 1 if values[1] >= values[2] else 2)
        other = 3 - best
        difference = compare_runs([paths[best - 1], paths[other - 1]], metric=metric).metrics[0].differences[0]
        assert marks[other] == ("worse" if difference.holds else "tied"), metric
        assert RunRecord.read(paths[best - 1]).metrics[metric]["value"] >= \
            RunRecord.read(paths[other - 1]).metrics[metric]["value"]
    for key in expected:
        if key[0] > 2:  # alone on their examples: said once above their task's table, not in the cell
            assert by_key[key].get("mark", "") == "", key


def test_html_report_numbers_and_escaping_without_a_browser(html_report, runs) -> None:
    html = html_report.read_text()
    parser = _Cells()
    parser.feed(html)
    _check_leaderboard(parser.cells, runs)
    assert HOSTILE not in html and "<script" not in html and "<img src=x" not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert all(src.startswith("data:") for src in re.findall(r'src="([^"]*)"', html))  # nothing is fetched
    for section in ("leaderboard", "groups", "ranks", "mistakes", "calibration", "confusion", "rerank_ap", "lineage",
                    "gallery", "provenance"):
        assert f'<section id="{section}">' in html, section
    for record in _records(runs):
        assert record.provenance["dataset"]["fingerprint"] in html
        for label_set in (record.provenance.get("label_sets") or {"all": record.provenance["label_set"]}).values():
            assert label_set["sha256"] in html


# --- the page in a real browser ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[DevTools]:
    with chromium() as devtools:
        yield devtools


LEADERBOARD_CELLS = """Array.from(document.querySelectorAll('td[data-metric]')).map(td => {
  const text = (cls) => { const el = td.querySelector('.' + cls); return el ? el.textContent : ''; };
  return {run: td.dataset.run, metric: td.dataset.metric, value: text('value'), interval: text('interval'),
          mark: text('mark')};
})"""


def test_html_report_in_chromium(browser, html_report, runs) -> None:
    session = browser.open(html_report.as_uri())
    images = browser.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.alt])", session)
    assert len(images) > 10  # charts, reliability diagrams and gallery thumbnails
    assert all(complete and width > 0 for complete, width, _ in images), [i for i in images if not i[1]]
    thumbnails = browser.evaluate("document.querySelectorAll('.gallery img').length", session)
    assert thumbnails >= 6
    assert browser.evaluate("typeof window.__pwned", session) == "undefined"
    assert browser.evaluate("document.querySelectorAll('script').length", session) == 0
    browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)", session)  # folded too
    text = browser.evaluate("document.body.innerText", session)
    assert HOSTILE in text and HOSTILE_GROUP in text and HOSTILE_QUERY in text
    _check_leaderboard(browser.evaluate(LEADERBOARD_CELLS, session), runs)
    assert browser.problems(session) == []


# --- Markdown ------------------------------------------------------------------------------------


def _tables(markdown: str) -> list[list[str]]:
    """The Markdown tables of a document, each as its lines."""
    tables, current = [], []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables + ([current] if current else [])


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_where_mistakes_land_is_counted_from_the_predictions(runs, html_report, tmp_path) -> None:
    from cladebench.report.runs import load_runs
    from cladebench.report.sections.mistakes import mistake_shares

    loaded = load_runs([runs["zeroshot-a"], runs["zeroshot-b"]])
    places = ["genus", "family", "order", "class", "phylum", "kingdom", "root"]
    for run in loaded:
        for group in run.groups:
            rows = [r for r in run.predictions.to_pylist() if r["group"] == group and r["scored"]
                    and not r["correct_top1"]]
            found = mistake_shares(run, group)
            if not rows:
                assert found is None
                continue
            rank, shares = found
            assert rank == "species" and sum(s["successes"] for s in shares.values()) == len(rows)
            for height, place in enumerate(places, start=1):  # a height h at species meets at rank 7 - h
                count = sum(r["lca_height"] == height for r in rows)
                assert shares[f"mistakes_at_{place}"]["value"] == pytest.approx(count / len(rows))
    md = write_report([runs["zeroshot-a"], runs["zeroshot-b"]], tmp_path / "m.md", format="md").read_text()
    assert "## Where mistakes land on the tree" in md and "| different kingdoms |" in md
    html = html_report.read_text()  # the gallery: the most severe mistakes first, each with where it lands
    assert "the most severe mistakes" in html and "(height " in html


def test_markdown_report(runs, tmp_path) -> None:
    markdown = write_report(list(runs.values()), tmp_path / "report.md", format="md", title="Appendix <b>A</b>")
    text = markdown.read_text()
    assert text.startswith("# Appendix &lt;b&gt;A&lt;/b&gt;\n")
    tables = _tables(text)
    assert len(tables) > 8
    for table in tables:  # a pipe from data would add a column to its row
        assert len({len(_cells(line)) for line in table}) == 1, table
        assert set(table[1].replace("|", "")) == {"-"}
    assert "<" not in text.replace("&lt;", "") and "<script" not in text
    assert markdown_escape(HOSTILE_GROUP) in text and markdown_escape(HOSTILE_QUERY) in text
    assert re.search(r"(?<!\\)`", text) is None  # no code span opened by data
    # Leaderboard rows: each expected cell reads "value [low, high]" in its run's row.
    leaderboard = text.split("## Leaderboard", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for table in _tables(leaderboard):
        header = _cells(table[0])
        for line in table[2:]:
            cells = _cells(line)
            rows.update({(int(cells[0].strip("[]")), name): cell for name, cell in zip(header, cells, strict=True)})
    for (index, metric), estimate in _expected_cells(runs).items():
        cell = rows[(index, markdown_escape(metric))]
        assert cell.startswith(f"{expected_value(metric, estimate)} {expected_interval(metric, estimate)}"), cell
    for record in _records(runs):
        assert record.provenance["dataset"]["fingerprint"] in text and record.provenance["command"]
    assert "## By challenge group and breakdown" in text and "## Provenance" in text


def test_fewshot_headline_includes_every_simpleshot_protocol() -> None:
    """BioBench's variant is named with a hyphen; a run of only that method still has a headline."""
    from cladebench.report.headline import picked
    from cladebench.tasks import get_task

    names = ["simpleshot-biobench_5shot", "simpleshot_1shot", "linear_5shot", "simpleshot_5shot_std", "n_classes"]
    assert picked(get_task("fewshot").headline, names, "species") == [
        "simpleshot-biobench_5shot", "simpleshot_1shot", "linear_5shot"]
