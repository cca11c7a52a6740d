"""The suite leaderboard's cells come from their own benchmark's runs: benchmarks that share a protocol and a metric
name (the four CrypticBio benchmarks all report ``top1_species`` under ``zeroshot · name_style=sci``; the two
Fine-Grained Challenges copies share their groups' metrics) never show one another's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jinja2")

from cladebench.evaluate.record import RunRecord
from cladebench.report.runs import ReportRun
from cladebench.report.sections.suite import SuiteData, suite_board

PROTOCOL = "zeroshot · name_style=sci"


def _run(index: int, path: str, value: float) -> ReportRun:
    record = RunRecord(task="zeroshot", metrics={"top1_species": {"value": value, "low": value - 0.05,
                                                                   "high": value + 0.05, "n": 24}},
                       provenance={}, config={"name_style": "sci"}, label="tiny")
    return ReportRun(index=index, path=Path(path), record=record, predictions=None)


def _row(benchmark: str, run: str, value: float, when: str) -> dict:
    return {"benchmark": benchmark, "protocol": PROTOCOL, "model": "m", "model_id": "local-dir:/m", "revision": None,
            "metric": "top1_species", "value": value, "run": run, "status": "finished", "recorded_at": when}


def test_each_benchmark_column_shows_its_own_run_when_benchmarks_share_protocol_and_metric():
    names = ("crypticbio-common", "crypticbio-commonunseen", "crypticbio-endangered", "crypticbio-invasive")
    values = (0.1, 0.2, 0.3, 0.9)
    runs, rows = {}, []
    for index, (name, value) in enumerate(zip(names, values, strict=True), start=1):
        path = f"runs/{name}/m-{index}/run.json"
        runs[path] = _run(index, path, value)
        rows.append(_row(name, path, value, f"2025-01-0{index}T00:00:00+00:00"))  # the last benchmark is newest
    columns, models, cells, _ = suite_board(SuiteData(rows=rows, runs=runs))
    assert [c.benchmark for c in columns] == list(names) and models == ["m"]
    for position, (name, value) in enumerate(zip(names, values, strict=True)):
        cell = cells[("m", position)]
        assert cell.raw == value, name
        assert cell.run.path == Path(f"runs/{name}/m-{position + 1}/run.json")


def test_the_definition_reads_as_sentences_when_no_figure_is_published():
    from cladebench.report.render import FORMATS
    from cladebench.report.sections.base import ReportContext
    from cladebench.report.sections.suite import SUITE_KEY, suite_section

    path = "runs/crypticbio-common/m-1/run.json"
    data = SuiteData(rows=[_row("crypticbio-common", path, 0.5, "2025-01-01T00:00:00+00:00")],
                     runs={path: _run(1, path, 0.5)})
    output = FORMATS["html"]
    context = ReportContext(format=output.name, environment=output.environment(), max_gallery=1,
                            cache={SUITE_KEY: data})
    text = " ".join(str(suite_section(list(data.runs.values()), context)).split())
    assert "it takes no part in the ties. No published figure is listed for crypticbio-common" in text
