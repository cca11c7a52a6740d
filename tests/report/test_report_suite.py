"""The report of a suite folder: a models × benchmarks leaderboard at the top whose every value is its run record's
(one column per Fine-Grained Challenges group, never pooled), the best of each column marked, a published figure
beside ours where the benchmark lists one, then each benchmark's own sections."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")
pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

from cladebench.benchmarks import BENCHMARKS, PublishedFigure
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.suite import SuiteConfig, read_results, run_suite
from cladebench.models.tiny import write_tiny_model
from cladebench.report.suite import write_suite_report
from cladebench.synthetic.mirrors import write_mirrors

BENCHMARK_NAMES = ("fine-grained-challenges", "inquire-rerank", "inat-coobserved")


@pytest.fixture(scope="module")
def suite_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("suite-report")
    models = ["local-dir:" + str(write_tiny_model(root / f"tiny-{seed}", seed=seed)) for seed in (0, 2)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLADEBENCH_CACHE_DIR", str(root / "cache"))
        patch.delenv("CLADEBENCH_MIRROR", raising=False)
        mirrors = write_mirrors(root / "mirrors")
        for model in models:
            embed_dataset(EmbedConfig(dataset=str(mirrors.folders["fine-grained-challenges"] /
                                                  "data/challenges.lance"), model=model, device="cpu",
                                      progress=False))
        out = root / "out"
        summary = run_suite(SuiteConfig(model=tuple(models), out=out, mirror=mirrors.root,
                                        benchmarks=BENCHMARK_NAMES, device="cpu", report=False, progress=False,
                                        setting=("methods=simpleshot", "repetitions=1")))
        assert summary.executed
    return out, models


def _runs_by_index(page: str) -> dict[str, Path]:
    table = page.split('<table class="runs" data-stacks>', 1)[1].split("</table>", 1)[0]
    out = {}
    for index, row in re.findall(r'<tr data-run="(\d+)">(.*?)</tr>', table, re.S):
        cell = re.findall(r'<td class="mono"[^>]*>(.*?)(?:<div|</td>)', row, re.S)[-1]
        out[index] = Path(html.unescape(cell.replace("<wbr>", "")))
    return out


def _cells(page: str) -> list[tuple[str, str, str, str]]:
    board = page.split('<table class="leaderboard suite" data-stacks>', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<td class="metric ([^"]*)" data-run="(\d+)" data-metric="([^"]*)" data-value="([^"]*)"[^>]*>',
                      board)


def test_the_leaderboard_holds_the_run_records_values(suite_folder):
    out, models = suite_folder
    page = write_suite_report(out).read_text()
    assert page.index('id="suite"') < page.index('id="fine-grained-challenges-leaderboard"')
    for name in BENCHMARK_NAMES:
        assert f'id="{name}-provenance"' in page
    runs = _runs_by_index(page)
    cells = _cells(page)
    by_metric: dict[str, list[str]] = {}
    for classes, index, metric, value in cells:
        record = RunRecord.read(runs[index])
        assert float(value) == record.metrics[html.unescape(metric)]["value"]
        assert record.task in ("zeroshot", "rerank", "lineage") and not record.config.get("unseen_only")
        by_metric.setdefault(html.unescape(metric), []).append(classes)
    groups = {row["metric"].split("/")[0] for row in read_results(out).to_pylist()
              if row["benchmark"] == "fine-grained-challenges" and row["protocol"] == "zeroshot" and row["metric"]}
    assert set(by_metric) == {f"{g}/top1_species" for g in groups} | {"ap@100", "hint_exact"}
    assert len(groups) == 3 and "top1_species" not in by_metric  # a column per group, none pooled
    for metric, marks in by_metric.items():
        assert len(marks) == len(models)
        # one best where a difference holds against it; none where every run ties
        assert sum("mark-best" in m for m in marks) == (1 if any("mark-worse" in m for m in marks) else 0), metric
        assert all(any(f"mark-{k}" in m for k in ("best", "tied", "worse", "differs")) for m in marks)
    assert "published" not in page.split('<table class="leaderboard suite" data-stacks>', 1)[1].split("</table>", 1)[0]


def test_a_published_figure_is_shown_beside_ours(suite_folder, monkeypatch, tmp_path):
    out, models = suite_folder
    figure = PublishedFigure(model=models[1], metric="ap@100", value=0.25, low=0.2, high=0.3,
                             citation="A paper, Table 9 (a test figure)")
    benchmark = BENCHMARKS["inquire-rerank"]
    monkeypatch.setitem(BENCHMARKS, "inquire-rerank", dataclasses.replace(benchmark, published=(figure,)))
    page = write_suite_report(out, tmp_path / "report.html").read_text()
    board = page.split('<table class="leaderboard suite" data-stacks>', 1)[1].split("</table>", 1)[0]
    rows = dict(re.findall(r'<tr data-model="([^"]*)">(.*?)</tr>', board, re.S))
    mine = rows[models[1]]
    assert mine.count('class="published"') == 1
    assert 'title="A paper, Table 9 (a test figure)"' in mine and "published</span>" in mine
    assert 'class="published"' not in rows[models[0]]
    assert not (out / "report.html").exists() or (out / "report.html").read_text() != page


def test_results_mark_each_cell_as_the_suite_report_does(suite_folder, capsys):
    """`cladebench results` (its default pivot) marks best / tied / worse exactly as the suite's report does, cell
    by cell: both take the marks from one function."""
    from cladebench.cli import main
    from cladebench.evaluate.suite.results import require_results
    from cladebench.report.runs import load_runs
    from cladebench.report.sections.suite import SuiteData, suite_board

    out, models = suite_folder
    rows = [r for r in require_results(out).to_pylist() if r["status"] == "finished" and r["run"]]
    paths = list(dict.fromkeys(r["run"] for r in rows))
    columns, _, cells, _ = suite_board(SuiteData(rows=rows, runs=dict(zip(paths, load_runs([out / p for p in paths]),
                                                                          strict=True))))
    assert main(["results", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = {line.split(" | ")[0].removeprefix("| "): line.strip("| ").split(" | ")[1:]
             for line in lines[2:] if line.startswith("| ")}
    assert set(table) == set(models)
    shown_marks = set()
    for model in models:
        for index, column in enumerate(columns):
            text = table[model][index]
            mark = re.search(r"\(([a-z ]+?)(?:, paired by [a-z ]+)?\)$", text)
            shown = mark.group(1) if mark else ""
            assert shown == cells[(model, index)].mark, (model, column.metric, text)
            if shown in ("best", "tied", "worse"):
                assert f", paired by {cells[(model, index)].unit})" in text
            shown_marks.add(shown)
    assert shown_marks & {"best", "tied"} and ("best" not in shown_marks or "worse" in shown_marks)
    assert any("tied with the best" in line and "Holm" in line for line in lines)


def test_a_partly_skipped_suite_says_so_in_its_title_summary_and_a_section(suite_folder, tmp_path):
    """Cells the suite skipped are counted in the title and the summary, and each skip is listed with its reason:
    a board with gaps never reads as a complete models × benchmarks grid."""
    import shutil

    from cladebench.evaluate.suite.results import SCHEMA, update_results

    out = tmp_path / "suite"
    shutil.copytree(suite_folder[0], out)
    before = read_results(out).to_pylist()
    finished = {r["run"] for r in before if r["status"] == "finished"}
    skipped = 1 + sum(r["status"] == "skipped" for r in before)
    row = {name: None for name in SCHEMA.names}
    row.update(benchmark="crypticbio-common", task="zeroshot", protocol="zeroshot · sci", model="extra-model",
               key="skip-1", status="skipped", reason="no <vectors> for extra-model", recorded_at="2099-01-01")
    update_results(out, ["skip-1"], [row])
    page = write_suite_report(out).read_text()
    title = f"cladebench suite: 3 models × 4 benchmarks, {len(finished)} runs, {skipped} skipped"
    assert f"<title>{title}</title>" in page and f"<h1>{title}</h1>" in page
    assert f'{skipped} runs of the suite were skipped: <a href="#skipped">' in page
    section = page.split('<section id="skipped">')[1].split("</section>")[0].replace("<wbr>", "")
    assert "crypticbio-common" in section and "no &lt;vectors&gt; for extra-model" in section
    assert section.count("<tr><td data-label=\"benchmark\">") == skipped
