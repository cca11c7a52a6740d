"""The evaluation plan: what the user gave is kept (a benchmark's protocol fills only what was not given, and a run
that departs from it says so and is marked), every record carries its comparability key, and a suite reuses a run
only when its data, model and record are what they were."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from cladebench.benchmarks import BENCHMARKS, apply_protocol
from cladebench.evaluate.configs import ZeroShotEvalConfig, eval_config
from cladebench.evaluate.plan import given_settings

# --- what the user gave is kept ---------------------------------------------------------------------------------


def test_a_given_setting_equal_to_the_default_is_not_replaced_by_the_protocol() -> None:
    benchmark = BENCHMARKS.get_named("crypticbio-common")
    given = eval_config(dataset="crypticbio-common", out=Path("o"), name_style="taxon")  # zero-shot's own default
    config, off = apply_protocol(given, benchmark, given_settings(given))
    assert config.name_style == "taxon"
    assert off == {"name_style": {"protocol": "sci", "run": "taxon"}}
    left = eval_config(dataset="crypticbio-common", out=Path("o"))
    config, off = apply_protocol(left, benchmark, given_settings(left))
    assert config.name_style == "sci" and off == {}


def test_a_run_of_the_protocols_own_runs_is_on_protocol() -> None:
    """The protocol's runs (FGC few-shot at 1 shot and at 5, CrypticBio under common names) are what a suite runs
    for it: each one asked for alone is on protocol; a value none of them takes is not."""
    for name, task, setting, value in (("fine-grained-challenges", "fewshot", "shots", (1,)),
                                       ("fine-grained-challenges", "fewshot", "shots", (5,)),
                                       ("crypticbio-common", "zeroshot", "name_style", "com")):
        given = eval_config(task=task, dataset=name, out=Path("o"), **{setting: value})
        assert apply_protocol(given, BENCHMARKS.get_named(name), given_settings(given))[1] == {}
    given = eval_config(task="fewshot", dataset="fine-grained-challenges", out=Path("o"), shots=(2,))
    off = apply_protocol(given, BENCHMARKS.get_named("fine-grained-challenges"), given_settings(given))[1]
    assert off == {"shots": {"protocol": [1, 5], "run": [2]}}


def test_a_config_built_directly_counts_what_differs_from_its_defaults_as_given() -> None:
    config = ZeroShotEvalConfig(dataset="d", out=Path("o"), rank="genus")
    assert given_settings(config) == {"dataset", "out", "rank"}
    assert given_settings(eval_config(dataset="d", out=Path("o"), group_by="auto")) == {"dataset", "out", "group_by"}


def test_the_command_line_records_the_options_typed() -> None:
    from cladebench.cli import FAMILIES, build_parser
    from cladebench.config import config_from_args

    args = build_parser().parse_args(["eval", "crypticbio-common", "--out", "o", "--name-style", "taxon",
                                      "--group-by", "auto"])
    config = config_from_args(FAMILIES["eval"].members()["crypticbio-common"].config_class(), args)
    assert {"name_style", "group_by", "out"} <= given_settings(config)
    assert "rank" not in given_settings(config)


# --- end to end: a benchmark run off protocol, and the suite's reuse by content -------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main  # noqa: E402
from cladebench.evaluate.record import PREDICTIONS_FILE, RUN_FILE, RunRecord  # noqa: E402
from cladebench.evaluate.suite import SuiteConfig, run_suite  # noqa: E402
from cladebench.evaluate.verify import verify_record  # noqa: E402
from cladebench.models.tiny import write_tiny_model  # noqa: E402
from cladebench.synthetic import make_world  # noqa: E402
from cladebench.synthetic.mirrors import MIRROR_WORLD, write_crypticbio_mirror, write_mirrors  # noqa: E402
from helpers.http_local import serving  # noqa: E402
from helpers.photo_host import PhotoHost  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return "local-dir:" + str(write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny", seed=2))


def test_an_off_protocol_run_runs_as_asked_says_so_and_is_marked(model, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    with serving(PhotoHost({})) as host:
        host.photos.update(write_crypticbio_mirror(tmp_path / "common", make_world(MIRROR_WORLD),
                                                   "crypticbio-common", photo_base_url=host.url("")))
        base = ["eval", "crypticbio-common", "--data", str(tmp_path / "common"), "--model", model, "--device", "cpu"]
        assert main([*base, "--out", str(tmp_path / "taxon"), "--name-style", "taxon"]) == 0
        err = capsys.readouterr().err
        assert main([*base, "--out", str(tmp_path / "protocol")]) == 0
        quiet = capsys.readouterr().err
    taxon, protocol = RunRecord.read(tmp_path / "taxon"), RunRecord.read(tmp_path / "protocol")
    assert taxon.provenance["prompts"]["name_style"] == "taxon"
    assert taxon.provenance["plan"]["off_protocol"] == {"name_style": {"protocol": "sci", "run": "taxon"}}
    assert [line for line in err.splitlines() if "off protocol" in line] == [
        "[eval] off protocol: crypticbio-common run as asked with --name-style taxon (protocol: sci); the record "
        "marks it"]
    assert protocol.provenance["prompts"]["name_style"] == "sci"
    assert protocol.provenance["plan"]["off_protocol"] == {} and "off protocol" not in quiet
    # The comparability key: same rows, different label strings (the label set is its strings' hash).
    a, b = taxon.provenance["comparability"], protocol.provenance["comparability"]
    assert a["rows_sha256"] == b["rows_sha256"] and a["rank"] == b["rank"] == "species"
    assert a["label_set_sha256"] != b["label_set_sha256"]


@pytest.fixture
def suite(model, tmp_path, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CLADEBENCH_MIRROR", raising=False)
    mirrors = write_mirrors(tmp_path / "mirrors")
    lines: list[str] = []

    def run() -> object:
        config = SuiteConfig(model=(model,), out=tmp_path / "out", benchmarks=("inquire-rerank",),
                             mirror=mirrors.root, device="cpu", report=False, progress=False)
        return run_suite(config, progress=lines.append)

    first = run()
    assert len(first.executed) == 1
    record = next((tmp_path / "out" / "runs").glob("*/*/run.json"))
    return {"run": run, "record": record, "lines": lines, "mirror": mirrors.folders["inquire-rerank"]}


def test_a_suite_reuses_a_verified_run_and_reruns_a_tampered_one(suite):
    assert verify_record(suite["record"]) is None
    assert len(suite["run"]().reused) == 1
    data = json.loads(suite["record"].read_text())
    name = next(n for n, e in data["metrics"].items() if e.get("value") is not None)
    data["metrics"][name]["value"] = 0.999
    suite["record"].write_text(json.dumps(data))
    assert f"its {name} reads 0.999" in verify_record(suite["record"])
    again = suite["run"]()
    assert len(again.executed) == 1 and not again.reused
    assert any("run again" in line and name in line for line in suite["lines"])
    assert verify_record(suite["record"]) is None  # the rerun wrote a record that agrees with its predictions


def test_a_suite_reruns_a_run_whose_predictions_are_gone(suite):
    (suite["record"].parent / PREDICTIONS_FILE).unlink()
    assert "predictions are missing" in verify_record(suite["record"])
    again = suite["run"]()
    assert len(again.executed) == 1
    assert any("predictions are missing" in line for line in suite["lines"])


def test_a_changed_mirror_is_a_new_run_not_the_old_numbers(suite):
    changed = next(p for p in suite["mirror"].rglob("*") if p.is_file())
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    again = suite["run"]()
    assert len(again.executed) == 1 and not again.reused
    assert len(list(suite["record"].parents[2].glob(f"*/*/{RUN_FILE}"))) == 2


def test_the_results_table_marks_an_off_protocol_run_and_reads_older_tables(suite, tmp_path):
    import pyarrow.parquet as pq

    from cladebench.evaluate.suite.results import RESULTS_FILE, format_results, off_protocol_text, read_results

    record = RunRecord(task="fewshot", metrics={}, config={}, provenance={"plan": {"off_protocol": {
        "methods": {"protocol": ["simpleshot", "linear"], "run": ["simpleshot"]}}}})
    assert off_protocol_text(record) == "methods=simpleshot (protocol: simpleshot,linear)"
    out = suite["record"].parents[3]
    table = read_results(out)
    assert set(table.column("off_protocol").to_pylist()) == {None}  # the suite ran its protocol as published
    older = tmp_path / "older"
    older.mkdir()
    pq.write_table(table.drop_columns(["off_protocol"]), older / RESULTS_FILE)
    assert read_results(older).column("off_protocol").null_count == table.num_rows
    marked = table.set_column(table.schema.get_field_index("off_protocol"), "off_protocol",
                              pa.array(["rerank_k=5 (protocol: 100)"] * table.num_rows, pa.string()))
    assert "(off protocol: rerank_k=5 (protocol: 100))" in format_results(marked, "md")


def test_results_never_show_a_number_its_record_and_predictions_do_not_give(suite, capsys):
    import pyarrow.parquet as pq

    from cladebench.evaluate.suite.results import RESULTS_FILE, read_results, require_results

    out = suite["record"].parents[3]
    table = read_results(out)
    assert set(require_results(out).column("status").to_pylist()) == {"finished"}
    values = table.column("value").to_pylist()
    edited = next(i for i, v in enumerate(values) if v is not None)
    values[edited] = 0.999
    pq.write_table(table.set_column(table.schema.get_field_index("value"), "value", pa.array(values)),
                   out / RESULTS_FILE)
    checked = require_results(out).to_pylist()
    assert checked[edited]["status"] == "unverified" and checked[edited]["value"] is None
    assert "results.parquet gives 0.999" in checked[edited]["reason"]
    assert main(["results", str(out), "--view", "rows"]) == 0
    shown = capsys.readouterr().out
    assert "0.999" in shown and "99.90" not in shown  # named as the refused value, never shown as a result
    (suite["record"].parent / PREDICTIONS_FILE).unlink()
    assert {r["status"] for r in require_results(out).to_pylist()} == {"unverified"}


def test_results_never_show_an_interval_its_record_does_not_give(suite, capsys):
    """An interval is shown beside its value: one edited in results.parquet is refused as an edited value is."""
    import pyarrow.parquet as pq

    from cladebench.evaluate.suite.results import RESULTS_FILE, read_results, require_results

    out = suite["record"].parents[3]
    table = read_results(out)
    edited = next(i for i, v in enumerate(table.column("low").to_pylist()) if v is not None)
    for column, value in (("low", 0.5), ("high", 0.9)):
        values = table.column(column).to_pylist()
        values[edited] = value
        table = table.set_column(table.schema.get_field_index(column), column, pa.array(values))
    pq.write_table(table, out / RESULTS_FILE)
    checked = require_results(out).to_pylist()
    assert checked[edited]["status"] == "unverified" and checked[edited]["low"] is None
    assert "results.parquet gives" in checked[edited]["reason"] and "[0.5, 0.9]" in checked[edited]["reason"]


def test_results_open_with_models_by_benchmarks(suite, capsys):
    out = suite["record"].parents[3]
    assert main(["results", str(out)]) == 0
    pivot = capsys.readouterr().out.splitlines()
    assert pivot[0].startswith("| model | inquire-rerank ap@100") and pivot[1].startswith("|---|")
    assert pivot[2].startswith("| local-dir:") and "[" in pivot[2]  # a value and its interval
    assert main(["results", str(out), "--view", "rows"]) == 0
    assert capsys.readouterr().out.startswith("| benchmark | protocol | model | metric |")


@pytest.mark.parametrize(("column", "value"), [("model", "another-model"), ("model_id", "hf-hub:org/another"),
                                               ("benchmark", "inat-coobserved"), ("task", "zeroshot"),
                                               ("label", "another run")])
def test_results_never_give_a_run_to_another_model_or_benchmark(suite, column, value):
    """A row edited to say another model (or benchmark, task, label) would put that run's number, verified, in
    another model's row of the pivot: what a row says of its run is checked against the record too."""
    import pyarrow.parquet as pq

    from cladebench.evaluate.suite.results import RESULTS_FILE, read_results, require_results

    out = suite["record"].parents[3]
    table = read_results(out)
    edited = next(i for i, v in enumerate(table.column("value").to_pylist()) if v is not None)
    values = table.column(column).to_pylist()
    assert values[edited] != value
    values[edited] = value
    pq.write_table(table.set_column(table.schema.get_field_index(column), column, pa.array(values)),
                   out / RESULTS_FILE)
    checked = require_results(out).to_pylist()
    assert checked[edited]["status"] == "unverified" and checked[edited]["value"] is None
    assert f"results.parquet gives {column} {value}" in checked[edited]["reason"]
    assert sum(row["status"] == "unverified" for row in checked) == 1


def test_an_older_run_never_stands_in_for_a_newer_one_that_is_refused(suite, tmp_path):
    """The pivot and the suite's board show each model's newest run. When that run is refused (its predictions
    gone), an older run of the model (other settings, an older copy of the data) must not take its place as if it
    were the model's result: the cell says the newest run is unverified, and why."""
    import shutil

    import pyarrow.parquet as pq

    from cladebench.evaluate.suite.results import RESULTS_FILE, format_pivot, read_results
    from cladebench.report.suite import render_suite_report

    out = suite["record"].parents[3]
    table = read_results(out)
    older_folder = suite["record"].parent.with_name("older")
    shutil.copytree(suite["record"].parent, older_folder)
    older = [dict(row, run=str(older_folder.relative_to(out) / "run.json"), key="older",
                  recorded_at="2000-01-01T00:00:00+00:00") for row in table.to_pylist()]
    pq.write_table(pa.concat_tables([pa.Table.from_pylist(older, schema=table.schema), table]), out / RESULTS_FILE)
    shown = format_pivot(require(out), out).splitlines()[2].split(" | ")[1]  # the model's cell
    assert shown.split()[0][0].isdigit()
    (suite["record"].parent / PREDICTIONS_FILE).unlink()
    pivot = format_pivot(require(out), out)
    assert shown not in pivot and "unverified (its predictions are missing" in pivot
    board = render_suite_report(out, max_gallery=0)
    assert "its predictions are missing" in board


def require(out: Path) -> pa.Table:
    from cladebench.evaluate.suite.results import require_results

    return require_results(out)
