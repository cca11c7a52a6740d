"""``cladebench export wandb`` on a small real suite, offline into tmp_path: one W&B run per run record, read back
from W&B's own transaction log, with the metrics of ``results --format json`` and the params and identity MLflow
gets; a second export adds none; hostile names survive; a missing wandb is one line with the pip command."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

from cladebench.cli import main
from cladebench.export.tracked import SHA256_TAG, metric_keys


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    """W&B offline, its caches and settings under tmp_path (never the home folder)."""
    pytest.importorskip("wandb")
    for name in ("WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_DIR", raising=False)
    return tmp_path / "wandb-runs"


def _json_rows(capsys, folder) -> list[dict]:
    assert main(["results", str(folder), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_one_offline_run_per_record_with_its_metrics_and_a_second_export_adds_none(export_suite, capsys,
                                                                                     wandb_env):
    from helpers.wandb_log import offline_run

    out = export_suite["out"]
    rows = _json_rows(capsys, out)
    assert main(["export", "wandb", str(out), "--dir", str(wandb_env), "--project", "paper"]) == 0
    said = capsys.readouterr().out
    assert "wandb (offline): 2 runs logged, 0 there already" in said and "wandb sync" in said
    folders = sorted((wandb_env / "wandb").glob("offline-run-*"))
    assert len(folders) == 2
    for folder in folders:
        run = offline_run(folder)
        config, summary = run["config"], run["summary"]
        mine = [r for r in rows if r["model"] == config["model"]]
        record = out / mine[0]["run"]
        assert config[SHA256_TAG] == hashlib.sha256(record.read_bytes()).hexdigest() and run["project"] == "paper"
        assert (config["benchmark"], config["protocol"], config["setting.rerank_k"]) == ("inquire-rerank", "rerank",
                                                                                         "100")
        keys = metric_keys([r["metric"] for r in mine if r["value"] is not None])
        expected = {keys[r["metric"]]: r["value"] for r in mine if r["value"] is not None}
        expected |= {f"{keys[r['metric']]}.{b}": r[b] for r in mine if r["value"] is not None for b in ("low", "high")
                     if r[b] is not None}
        assert {k: v for k, v in summary.items() if not k.startswith("_")} == expected
        (files,) = run["artifacts"].values()
        assert files == {"run.json", "report.md", "metric_keys.json"}
    assert main(["export", "wandb", str(out), "--dir", str(wandb_env), "--project", "paper"]) == 0
    assert "0 runs logged, 2 there already" in capsys.readouterr().out
    assert len(list((wandb_env / "wandb").glob("offline-run-*"))) == 2


def test_hostile_names_survive_in_the_config(export_suite, capsys, wandb_env, tmp_path):
    from helpers.export_suite import HOSTILE_BENCHMARK, rename_benchmark
    from helpers.wandb_log import offline_run

    folder = rename_benchmark(export_suite["out"], tmp_path / "copy")
    hostile = export_suite["models"][0]
    assert main(["export", "wandb", str(folder), "--dir", str(wandb_env), "--model", hostile]) == 0
    said = capsys.readouterr().out
    assert all(line.startswith(("wandb (offline): ", "  left out: ")) for line in said.splitlines())
    (run_folder,) = (wandb_env / "wandb").glob("offline-run-*")
    config = offline_run(run_folder)["config"]
    assert config["model"] == hostile and config["benchmark"] == HOSTILE_BENCHMARK


def test_disabled_wandb_is_one_line(export_suite, capsys, wandb_env, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert main(["export", "wandb", str(export_suite["out"]), "--dir", str(wandb_env)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "WANDB_MODE=disabled" in err and not wandb_env.exists()


def test_without_wandb_it_is_one_line_with_the_pip_command(export_suite, capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError, installed or not
    assert main(["export", "wandb", str(export_suite["out"]), "--dir", str(tmp_path / "w")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'cladebench[wandb]'" in err
    assert not (tmp_path / "w").exists()
