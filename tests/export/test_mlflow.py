"""``cladebench export mlflow`` on a small real suite, into a tracking store under tmp_path: one MLflow run per run
record, with the metrics of ``results --format json`` (and their bounds), params, tags and artifacts; a second
export adds none; hostile names survive as params and through the metric-key map; the store is the one named (or
$MLFLOW_TRACKING_URI); a store MLflow cannot open and a missing mlflow are each one line."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlflow")
from mlflow import MlflowClient

from cladebench.cli import main
from cladebench.export.tracked import SHA256_TAG, metric_key, metric_keys
from helpers.export_suite import HOSTILE_BENCHMARK, rename_benchmark


@pytest.fixture(autouse=True)
def _file_store(monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the tests' own client reads the store too
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def _runs(uri: str, experiment: str = "cladebench") -> list:
    client = MlflowClient(tracking_uri=uri)
    return client.search_runs([client.get_experiment_by_name(experiment).experiment_id])


def _json_rows(capsys, folder) -> list[dict]:
    assert main(["results", str(folder), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_one_mlflow_run_per_record_with_its_metrics_and_a_second_export_adds_none(export_suite, capsys, tmp_path):
    out = export_suite["out"]
    rows = _json_rows(capsys, out)
    uri = (tmp_path / "mlruns").as_uri()
    assert main(["export", "mlflow", str(out), "--tracking-uri", uri, "--experiment", "paper"]) == 0
    assert "2 runs logged, 0 there already" in capsys.readouterr().out
    runs = _runs(uri, "paper")
    records = {r["run"] for r in rows if r["run"]}
    assert len(runs) == len(records) == 2
    client = MlflowClient(tracking_uri=uri)
    for mlflow_run in runs:
        params, tags, metrics = mlflow_run.data.params, mlflow_run.data.tags, mlflow_run.data.metrics
        record = next(r for r in records if params["model"] == next(x["model"] for x in rows if x["run"] == r))
        assert tags[SHA256_TAG] == hashlib.sha256((out / record).read_bytes()).hexdigest()
        assert tags["cladebench.dataset_fingerprint"] == json.loads((out / record).read_text())["provenance"][
            "dataset"]["fingerprint"]
        mine = [r for r in rows if r["run"] == record]
        keys = metric_keys([r["metric"] for r in mine if r["value"] is not None])
        expected = {keys[r["metric"]]: r["value"] for r in mine if r["value"] is not None}
        expected |= {f"{keys[r['metric']]}.{b}": r[b] for r in mine if r["value"] is not None for b in ("low", "high")
                     if r[b] is not None}
        assert metrics == expected and "ap_100" in metrics
        assert (params["benchmark"], params["task"], params["protocol"]) == ("inquire-rerank", "rerank", "rerank")
        assert params["setting.rerank_k"] == "100" and params["model_id"] == mine[0]["model_id"]
        assert {a.path for a in client.list_artifacts(mlflow_run.info.run_id)} == {
            "run.json", "report.md", "metric_keys.json"}
    assert main(["export", "mlflow", str(out), "--tracking-uri", uri, "--experiment", "paper"]) == 0
    assert "0 runs logged, 2 there already" in capsys.readouterr().out
    assert len(_runs(uri, "paper")) == 2
    # A run record given by itself is the same run: found, not logged again.
    assert main(["export", "mlflow", str(out / sorted(records)[0]), "--tracking-uri", uri, "--experiment",
                 "paper"]) == 0
    assert "0 runs logged, 1 there already" in capsys.readouterr().out


def test_suite_mlflow_logs_each_run_as_it_goes_and_once(export_suite, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(export_suite["cache"]))
    monkeypatch.delenv("CLADEBENCH_MIRROR", raising=False)
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    out = tmp_path / "suite"
    assert main([*export_suite["args"], "--out", str(out), "--mlflow"]) == 0
    assert f"mlflow: 2 runs logged, 0 there already, experiment 'cladebench' at {uri}" in capsys.readouterr().out
    runs = _runs(uri)
    rows = _json_rows(capsys, out)
    for mlflow_run in runs:  # the suite's own rows: its protocol and run key, as `export mlflow DIR` logs them
        mine = [r for r in rows if r["model"] == mlflow_run.data.params["model"]]
        assert mlflow_run.data.tags["cladebench.run_key"] == mine[0]["key"]
        assert mlflow_run.data.metrics["ap_100"] == next(r["value"] for r in mine if r["metric"] == "ap@100")
    assert main([*export_suite["args"], "--out", str(out), "--mlflow"]) == 0  # every run reused: none logged again
    assert "mlflow: 0 runs logged, 2 there already" in capsys.readouterr().out
    assert main(["export", "mlflow", str(out)]) == 0
    assert "0 runs logged, 2 there already" in capsys.readouterr().out and len(_runs(uri)) == 2


def test_hostile_names_survive_as_params_and_through_the_key_map(export_suite, capsys, tmp_path):
    folder = rename_benchmark(export_suite["out"], tmp_path / "copy")
    hostile = export_suite["models"][0]
    uri = (tmp_path / "mlruns").as_uri()
    assert main(["export", "mlflow", str(folder), "--tracking-uri", uri, "--model", hostile]) == 0
    said = capsys.readouterr().out
    assert "1 run logged" in said and all(line.startswith(("mlflow: ", "  left out: ")) for line in said.splitlines())
    (run,) = _runs(uri)
    assert run.data.params["model"] == hostile and run.data.params["benchmark"] == HOSTILE_BENCHMARK
    local = MlflowClient(tracking_uri=uri).download_artifacts(run.info.run_id, "metric_keys.json", str(tmp_path))
    names = json.loads(Path(local).read_text())
    assert set(names) == {k for k in run.data.metrics if not k.endswith((".low", ".high"))}
    assert "ap@100" in names.values()


def test_metric_keys_are_what_mlflow_takes_and_never_meet():
    from mlflow.utils.validation import _validate_metric_name

    names = ["ap@100", "ap_100", "Aves=x/../y", "a//b/", "/lead", "ünï", "g & h/top1 (x)"]
    keys = metric_keys(names)
    assert len(set(keys.values())) == len(names)
    for key in keys.values():
        _validate_metric_name(key)  # raises on a key MLflow refuses
        assert key.isascii()
    assert metric_key("category=Aves/ap@100") == "category_Aves/ap_100"
    assert keys["ap_100"].startswith("ap_100_") and keys["ap@100"].startswith("ap_100_")


def test_the_tracking_uri_is_mlflow_tracking_uri_when_none_is_given(export_suite, capsys, tmp_path, monkeypatch):
    uri = (tmp_path / "from-env").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(["export", "mlflow", str(export_suite["out"])]) == 0
    assert f"at {uri}" in capsys.readouterr().out and len(_runs(uri)) == 2


def test_a_database_store_is_used_or_refused_in_one_line(export_suite, capsys, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code = main(["export", "mlflow", str(export_suite["out"]), "--tracking-uri", uri])
    if importlib.util.find_spec("sqlalchemy") is not None:  # the full mlflow package: the database store works
        assert code == 0 and len(_runs(uri)) == 2
        return
    err = capsys.readouterr().err.strip()  # mlflow-skinny: no database store
    assert code == 1 and len(err.splitlines()) == 1 and "pip install mlflow" in err and "file:" in err


def test_without_mlflow_it_is_one_line_with_the_pip_command(export_suite, capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    assert main(["export", "mlflow", str(export_suite["out"]), "--tracking-uri", (tmp_path / "m").as_uri()]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'cladebench[mlflow]'" in err
    assert not (tmp_path / "m").exists()


def test_skipped_and_unchecked_runs_are_said_never_logged(export_suite, capsys, tmp_path):
    import shutil

    from cladebench.evaluate.suite.results import SCHEMA, update_results

    folder = tmp_path / "copy"
    shutil.copytree(export_suite["out"], folder)
    base = {**dict.fromkeys(SCHEMA.names), "benchmark": "inquire-rerank", "protocol": "rerank"}
    update_results(folder, ["s", "g"], [
        {**base, "model": "skipped_m", "key": "s", "status": "skipped", "reason": "too few queries"},
        {**base, "model": "ghost", "key": "g", "status": "finished", "metric": "ap@100", "value": 1.0, "n": 1,
         "run": "runs/none/run.json"}])
    uri = (tmp_path / "mlruns").as_uri()
    assert main(["export", "mlflow", str(folder), "--tracking-uri", uri]) == 0
    said = capsys.readouterr().out
    assert "2 runs logged" in said
    assert "left out: inquire-rerank (rerank) with skipped_m: skipped: too few queries" in said
    assert "left out: inquire-rerank (rerank) with ghost: not exported, its numbers did not check: its run record " \
           "is missing" in said
    assert {r.data.params["model"] for r in _runs(uri)} == set(export_suite["models"])
