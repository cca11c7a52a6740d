"""`cladebench suite` over mirrors of every named benchmark (offline, photos from 127.0.0.1) with tiny models: two
models, then a third added by a second suite that reruns nothing, an interrupted suite resumed, the FGC protocol per
group with genus-only rows never scored, skips recorded with their reason, the results table accumulated and merged
by concurrent writers, and endpoints skipped where a task takes none."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench import store
from cladebench.cli import main
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.suite import SuiteConfig, plan_suite, read_results, run_suite
from cladebench.evaluate.suite import runner as suite_runner
from cladebench.models.tiny import write_tiny_model
from cladebench.paths import held_lock
from cladebench.synthetic.mirrors import write_mirrors
from helpers.http_local import serving
from helpers.photo_host import PhotoHost
from helpers.suite_writer import write_rows

FAST = ("--setting", "methods=simpleshot", "repetitions=1")
"""Few-shot as one SimpleShot draw: the protocol's runs, at a fraction of the time."""
FGC = ("fine-grained-challenges", "test-fine-grained-challenges")
RUNS_PER_MODEL = 4 * 3 + 2 * 7 + 1 + 1
"""CrypticBio: four benchmarks x three name styles; each FGC: zero-shot x 2 exposures, few-shot x 2 shot counts x 2
exposures, retrieval; INQUIRE-Rerank; Co-Observed."""


@pytest.fixture(scope="module")
def suite_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Mirrors of every benchmark (the FGC ones embedded with three tiny models, as a user embeds a copy), a photo
    host for CrypticBio's photos, a cache of its own, and the first suite (two models) written by the CLI."""
    root = tmp_path_factory.mktemp("suite")
    models = ["local-dir:" + str(write_tiny_model(root / f"tiny-{seed}", seed=seed)) for seed in (0, 2, 3)]
    with pytest.MonkeyPatch.context() as patch, serving(PhotoHost({})) as host:
        patch.setenv("CLADEBENCH_CACHE_DIR", str(root / "cache"))
        patch.delenv("CLADEBENCH_MIRROR", raising=False)
        mirrors = write_mirrors(root / "mirrors", photo_base_url=host.url(""))
        host.photos.update(mirrors.photos)
        for name in FGC:
            for model in models:
                embed_dataset(EmbedConfig(dataset=str(mirrors.folders[name] / "data/challenges.lance"), model=model,
                                          device="cpu", progress=False))
        out = root / "out"
        args = ["suite", "--model", models[0], "--model", models[1], "--mirror", str(mirrors.root), "--out", str(out),
                "--device", "cpu", "--no-report", *FAST]
        code = main(args)
        assert code == 0
        first = {p.name: (p / "run.json").stat().st_mtime_ns
                 for p in (out / "runs").glob("*/*") if (p / "run.json").exists()}
        yield {"root": root, "models": models, "mirrors": mirrors, "out": out, "args": args, "first": first,
               "host": host}


def _config(env: dict, models: list[str], out: Path, **kw) -> SuiteConfig:
    return SuiteConfig(model=tuple(models), out=out, mirror=env["mirrors"].root, device="cpu", report=False,
                       progress=False, setting=FAST[1:], **kw)


@pytest.mark.slow
def test_two_models_over_every_mirrored_benchmark(suite_env):
    out = suite_env["out"]
    table = read_results(out).to_pylist()
    finished = [r for r in table if r["status"] == "finished"]
    assert {r["benchmark"] for r in finished} == {
        "crypticbio-common", "crypticbio-commonunseen", "crypticbio-endangered", "crypticbio-invasive", *FGC,
        "inquire-rerank", "inat-coobserved"}
    assert {r["model"] for r in table} == set(suite_env["models"][:2])
    assert len({r["key"] for r in table}) == 2 * RUNS_PER_MODEL
    # Every row's number is its run record's: value, interval, n and label.
    for row in finished[::7]:
        record = RunRecord.read(out / row["run"])
        estimate = record.metrics[row["metric"]]
        assert (row["value"], row["low"], row["high"], row["n"]) == (
            estimate["value"], estimate.get("low"), estimate.get("high"), estimate["n"])
        assert row["label"] == record.label and record.provenance["dataset"]["benchmark"] == row["benchmark"]
    crypticbio = {r["protocol"] for r in finished if r["benchmark"] == "crypticbio-common"}
    assert crypticbio == {"zeroshot · name_style=sci", "zeroshot · name_style=com", "zeroshot · name_style=mixed"}
    # Too few unseen images for 5 shots in every group: that run alone is skipped, with the task's reason, and
    # recorded (a run where only some groups are too small finishes with their gaps: test_suite_left_out_groups).
    skipped = [r for r in table if r["status"] == "skipped"]
    assert skipped and {(r["benchmark"], r["protocol"]) for r in skipped} <= {
        (name, "fewshot · shots=5 · unseen_only") for name in FGC}
    assert all("5 shots" in r["reason"] and r["metric"] is None for r in skipped)
    assert any(r["protocol"] == "fewshot · shots=1 · unseen_only" for r in finished)
    for row in skipped:
        folder = next((out / "runs" / row["benchmark"]).glob(f"*-{row['key'][:12]}"))
        assert json.loads((folder / "skipped.json").read_text())["reason"] == row["reason"]
        assert not (folder / "run.json").exists()


def test_the_fgc_protocol_is_per_group_and_never_scores_genus_only_rows(suite_env):
    out, mirrors = suite_env["out"], suite_env["mirrors"]
    dataset = store.open_dataset(mirrors.folders["fine-grained-challenges"] / "data/challenges.lance")
    table = store.read(dataset, columns=["uuid", "challenge_group", "species"])
    groups = set(table.column("challenge_group").to_pylist())
    genus_only = {u for u, s in zip(table.column("uuid").to_pylist(), table.column("species").to_pylist(),
                                    strict=True) if s is None}
    assert len(groups) == 3 and genus_only
    runs = {r["run"] for r in read_results(out).to_pylist()
            if r["benchmark"] == "fine-grained-challenges" and r["status"] == "finished"}
    tasks = set()
    for run in runs:
        record = RunRecord.read(out / run)
        tasks.add(record.task)
        assert record.provenance["groups"]["pooled"] is False
        assert record.provenance["groups"]["column"] == "challenge_group"
        assert {name.split("/")[0] for name in record.metrics} <= groups  # every number is one group's
        predictions = pq.read_table(out / Path(run).parent / "predictions.parquet")
        if record.task == "zeroshot":  # genus-only rows are predicted for the inspection table, never scored
            scored = dict(zip(predictions.column("uuid").to_pylist(), predictions.column("scored").to_pylist(),
                              strict=True))
            assert not any(scored[u] for u in genus_only if u in scored)
            if not record.config["unseen_only"]:
                assert sum(i.get("genus_only_rows", 0) for i in record.inspection.values()) == len(genus_only)
                assert sum(record.metrics[f"{g}/top1_species"]["n"] for g in groups) == (
                    table.num_rows - len(genus_only))
        else:
            assert not genus_only & set(predictions.column("uuid").to_pylist())
    assert tasks == {"zeroshot", "fewshot", "retrieval"}


def test_a_third_model_added_later_reruns_nothing_and_extends_the_table(suite_env, monkeypatch):
    out, models = suite_env["out"], suite_env["models"]
    before = read_results(out).to_pylist()
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(suite_env["root"] / "cache"))
    summary = run_suite(_config(suite_env, models, out))
    planned = {p.key: p for p in summary.runs}
    assert {planned[k].model for k in summary.executed} == {models[2]}  # only the new model's runs ran
    assert len(summary.executed) + sum(planned[k].model == models[2] for k in summary.skipped) == RUNS_PER_MODEL
    assert not [k for k in summary.skipped if planned[k].model != models[2]
                and not (planned[k].folder / "skipped.json").exists()]
    after = {p.name: (p / "run.json").stat().st_mtime_ns
             for p in (out / "runs").glob("*/*") if (p / "run.json").exists()}
    assert {name: after[name] for name in suite_env["first"]} == suite_env["first"]  # no record rewritten
    rows = read_results(out).to_pylist()
    assert {r["model"] for r in rows} == set(models)
    old = [r for r in rows if r["model"] != models[2]]
    assert sorted(old, key=lambda r: (r["key"], r["metric"] or "")) == sorted(
        before, key=lambda r: (r["key"], r["metric"] or ""))


def test_an_interrupted_suite_continues_where_it_stopped(suite_env, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(suite_env["root"] / "cache"))
    out = tmp_path / "out"
    real = suite_runner.run_eval
    calls: list[str] = []

    def interrupted_second(config, **kw):
        calls.append(str(config.out))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(config, **kw)

    monkeypatch.setattr(suite_runner, "run_eval", interrupted_second)
    args = ["suite", "--model", *suite_env["models"][:2], "--benchmarks", "inquire-rerank", "inat-coobserved",
            "--mirror", str(suite_env["mirrors"].root), "--out", str(out), "--device", "cpu", "--no-report"]
    assert main(args) == 130
    assert "interrupted" in capsys.readouterr().err
    done = Path(calls[0]) / "run.json"
    assert done.exists() and not (Path(calls[1]) / "run.json").exists()
    assert {r["run"] for r in read_results(out).to_pylist()} == {str(done.relative_to(out))}  # kept as it finished
    stamp = done.stat().st_mtime_ns
    monkeypatch.setattr(suite_runner, "run_eval", real)
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "suite: 4 runs: 3 run now, 1 reused, 0 skipped" in captured.out
    progress = [line for line in captured.err.splitlines() if line.startswith("[suite]")]
    assert progress[0].endswith("4 runs, 1 finished or skipped before, 3 to run")
    assert progress[1].startswith("[suite] 1/2 inquire-rerank: 2 runs (1 run, 1 reused, 0 skipped)")
    assert "left for 2 runs" in progress[1] and progress[2].endswith("suite done")
    assert done.stat().st_mtime_ns == stamp
    assert len({r["key"] for r in read_results(out).to_pylist() if r["status"] == "finished"}) == 4


def test_an_endpoint_runs_only_the_tasks_that_take_one(suite_env, tmp_path):
    endpoint = "openai-compatible:vlm@http://127.0.0.1:9/v1"
    planned = plan_suite(_config(suite_env, [endpoint], tmp_path / "out"))
    reasons = {(p.benchmark.name, p.task): p.unsupported for p in planned}
    assert reasons[("inquire-rerank", "rerank")] is None and reasons[("inat-coobserved", "lineage")] is None
    for name in ("fine-grained-challenges", "crypticbio-common"):
        assert "zeroshot needs an image tower and a text tower; " in reasons[(name, "zeroshot")]
        assert "is a VLM behind an endpoint" in reasons[(name, "zeroshot")]


def test_settings_and_models_are_checked_before_any_run(suite_env, tmp_path, capsys):
    base = ["suite", "--out", str(tmp_path / "o"), "--mirror", str(suite_env["mirrors"].root)]
    for extra, said in ((["--model", "no-such-model"], "no-such-model"),
                        (["--model", suite_env["models"][0], "--setting", "shots=0"], "--shots"),
                        (["--model", suite_env["models"][0], "--setting", "no_such=1"], "no_such"),
                        (["--model", suite_env["models"][0], "--setting", "model=x"], "sets model itself"),
                        (["--model", suite_env["models"][0], "--benchmarks", "inquire-rernak"], "inquire-rerank")):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_two_writers_at_once_lose_no_rows(tmp_path):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=write_rows, args=(str(tmp_path), prefix, 12)) for prefix in ("a", "b")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    keys = read_results(tmp_path).column("key").to_pylist()
    assert sorted(keys) == sorted(f"{p}{i}" for p in "ab" for i in range(12))
    assert [p.name for p in tmp_path.iterdir() if p.name != ".results.lock"] == ["results.parquet"]


def test_two_suite_processes_on_one_out_take_turns_and_lose_no_row(suite_env, tmp_path):
    """Two `cladebench suite` processes on one --out, with other models: each waits for the folder (here held first
    by this test, so that both are seen waiting), says so in one line, then runs; the table holds the rows of both."""
    out = tmp_path / "shared"
    out.mkdir()
    models = suite_env["models"][:2]
    args = ["suite", "--benchmarks", "inquire-rerank", "--mirror", str(suite_env["mirrors"].root), "--out", str(out),
            "--device", "cpu", "--no-report"]
    logs = [tmp_path / f"stderr-{i}.txt" for i in range(2)]
    with held_lock(out / suite_runner.LOCK_FILE):
        processes = [subprocess.Popen([sys.executable, "-m", "cladebench", *args, "--model", model],
                                      stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
                     for model, log in zip(models, logs, strict=True)]
        deadline = time.monotonic() + 120
        while not all("waiting for it to finish" in log.read_text() for log in logs):
            assert time.monotonic() < deadline and all(p.poll() is None for p in processes), [
                log.read_text() for log in logs]
            time.sleep(0.1)
    for process in processes:
        process.communicate(timeout=300)
    said = [log.read_text() for log in logs]
    assert [p.returncode for p in processes] == [0, 0], said
    assert all(text.count("another cladebench suite") == 1 for text in said), said
    rows = [r for r in read_results(out).to_pylist() if r["status"] == "finished"]
    assert {r["model"] for r in rows} == set(models)
    for model in models:  # every run of each suite, each with its metrics
        assert len({r["key"] for r in rows if r["model"] == model}) == 1
        assert len([r for r in rows if r["model"] == model]) == len(rows) // 2


def test_results_of_a_moved_folder_still_name_their_records(suite_env, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(suite_env["out"], moved)
    for row in read_results(moved).to_pylist()[:20]:
        if row["run"]:
            assert (moved / row["run"]).is_file()


def test_the_metrics_digest_does_not_depend_on_what_was_imported() -> None:
    """Tasks define their metrics when imported; the run key's digest of the definitions loads every task first,
    so a suite that happened to import one task's module before planning keys its runs as one that did not."""
    program = ("import sys\n{}\nfrom cladebench.evaluate.suite.plan import metrics_version\nprint(metrics_version())")
    digests = {subprocess.run([sys.executable, "-c", program.format(first)], capture_output=True, text=True,
                              check=True).stdout.strip()
               for first in ("pass", "import cladebench.tasks.geo.task", "import cladebench.tasks.lineage.metrics")}
    assert len(digests) == 1 and len(next(iter(digests))) == 64, digests


def test_results_pivots_on_mistake_severity_when_asked(suite_env, capsys):
    out = suite_env["out"]
    assert main(["results", str(out), "--metric", "mistake_severity_species"]) == 0
    printed = capsys.readouterr().out
    assert "| crypticbio-common mistake_severity_species |" in printed.replace(" | ", " |\n| ")
    assert "Each cell: mistake_severity_species of the model's latest run" in printed
    rows = [r for r in read_results(out).to_pylist() if r["status"] == "finished"
            and r["benchmark"] == "crypticbio-common" and r["metric"] == "mistake_severity_species"
            and r["protocol"] == "zeroshot · name_style=sci"]
    assert rows and all(f"{r['value']:.2f}" in printed for r in rows)  # a height, not a percentage
    assert main(["results", str(out), "--metric", "no_such_metric"]) == 0
    assert "No finished run reports no_such_metric" in capsys.readouterr().out
