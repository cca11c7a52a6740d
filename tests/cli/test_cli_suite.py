"""`cladebench results DIR` in each format, `suite --model` given several times, and the one-line errors of both
verbs; the table is written by the suite's own merge (:func:`update_results`), so no model is needed here."""

from __future__ import annotations

import csv
import io
import json

import pytest

from cladebench.cli import main
from cladebench.config import add_config_arguments, config_from_args
from cladebench.evaluate.suite.plan import SuiteConfig
from cladebench.evaluate.suite.results import SCHEMA, format_results, read_results, update_results
from cladebench.metrics import display_scale


def _row(**values) -> dict:
    row = {name: None for name in SCHEMA.names}
    row.update(values)
    return row


@pytest.fixture
def folder(tmp_path):
    update_results(tmp_path, ["k1"], [
        _row(benchmark="inquire-rerank", task="rerank", protocol="rerank", model="bioclip-2", metric="ap@100",
             value=0.4321, low=0.4, high=0.46, n=250, label="bioclip-2", run="runs/inquire-rerank/a/run.json",
             key="k1", status="finished"),
        _row(benchmark="inquire-rerank", task="rerank", protocol="rerank", model="bioclip-2", metric="mrr@100",
             value=0.5, low=0.45, high=0.55, n=250, label="bioclip-2", run="runs/inquire-rerank/a/run.json",
             key="k1", status="finished")])
    update_results(tmp_path, ["k2"], [
        _row(benchmark="fine-grained-challenges", task="fewshot", protocol="fewshot · shots=5 · unseen_only",
             model="bioclip-2", key="k2", status="skipped", reason="few-shot needs at least 2 classes | enough")])
    return tmp_path


def test_results_in_each_format(folder, capsys):
    assert main(["results", str(folder), "--view", "rows"]) == 0
    checked = capsys.readouterr().out  # the rows' run records are not there: no number is shown for them
    assert "Not shown" in checked and "its run record is missing" in checked and "0.43" not in checked
    md = format_results(read_results(folder), "md")
    scale, unit = display_scale("ap@100")  # as `eval` prints it
    assert (f"| inquire-rerank | rerank | bioclip-2 | ap@100 | {scale * 0.4321:.2f}{unit} | [{scale * 0.4:.2f}, "
            f"{scale * 0.46:.2f}] | 250 | bioclip-2 | runs/inquire-rerank/a/run.json |") in md
    assert "Skipped runs:" in md and "few-shot needs at least 2 classes \\| enough" in md
    rows = json.loads(format_results(read_results(folder), "json"))
    assert rows == read_results(folder).to_pylist() and len(rows) == 3
    parsed = list(csv.DictReader(io.StringIO(format_results(read_results(folder), "csv"))))
    assert [r["metric"] for r in parsed] == [r["metric"] or "" for r in rows]
    assert list(parsed[0]) == SCHEMA.names and float(parsed[1]["value"]) == 0.4321


def test_results_of_a_folder_without_a_table_is_one_line(tmp_path, capsys):
    assert main(["results", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no results table" in err and "cladebench suite" in err


def test_model_may_be_given_several_times():
    import argparse

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, SuiteConfig)
    config = config_from_args(SuiteConfig, parser.parse_args(["--model", "a", "--model", "b", "c", "--out", "o"]))
    assert config.model == ("a", "b", "c")


def test_a_model_named_twice_is_a_usage_error(tmp_path, capsys):
    assert main(["suite", "--model", "bioclip", "--model", "bioclip", "--out", str(tmp_path / "o")]) == 2
    assert "names a model twice" in capsys.readouterr().err
    assert main(["suite", "--model", "bioclip", "--model", "hf-hub:imageomics/bioclip", "--out",
                 str(tmp_path / "o"), "--benchmarks", "inquire-rerank"]) == 2
    assert "name the same model" in capsys.readouterr().err
