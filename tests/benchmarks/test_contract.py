"""The contract every registered benchmark keeps, the same checks on each (a new family gets them by registering):
it builds from its offline mirror (written in its published layout, nothing fetched), every run of each of its
protocols runs with the tiny model (its photos, for CrypticBio, from 127.0.0.1), and its headline reaches
``cladebench results``, one column per challenge group of a grouped benchmark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.benchmarks import BENCHMARKS, Benchmark
from cladebench.cli import main
from cladebench.embed import EmbedConfig, embed_dataset
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.suite import read_results
from cladebench.evaluate.suite.board import headline
from cladebench.models.tiny import write_tiny_model
from cladebench.synthetic.mirrors import write_mirrors
from helpers.http_local import serving
from helpers.photo_host import PhotoHost

FAST = ("--setting", "methods=simpleshot", "repetitions=1")
"""Few-shot as one SimpleShot draw: every run of the protocol, at a fraction of the time."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """The tiny model, a mirror of every benchmark (one embedded with the model where the benchmark publishes
    embeddings, as a user embeds a copy), the photo host its mirrors link to, and a cache of its own."""
    root = tmp_path_factory.mktemp("contract")
    model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=2))
    with pytest.MonkeyPatch.context() as patch, serving(PhotoHost({})) as host:
        patch.setenv("CLADEBENCH_CACHE_DIR", str(root / "cache"))
        patch.setenv("HF_HUB_OFFLINE", "1")  # built from the mirror, never fetched
        patch.delenv("CLADEBENCH_MIRROR", raising=False)
        mirrors = write_mirrors(root / "mirrors", photo_base_url=host.url(""))
        host.photos.update(mirrors.photos)
        for name, folder in mirrors.folders.items():
            if BENCHMARKS[name].publishes_embeddings:
                for table in (p for p in folder.rglob("*.lance") if (p / "_versions").is_dir()):
                    embed_dataset(EmbedConfig(dataset=str(table), model=model, device="cpu", progress=False))
        yield {"model": model, "mirrors": mirrors, "root": root}


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_a_benchmark_builds_from_its_mirror_runs_its_protocols_and_reaches_results(
        name: str, world: dict, capsys: pytest.CaptureFixture[str]) -> None:
    benchmark: Benchmark = BENCHMARKS[name]
    mirrors = world["mirrors"]
    assert name in mirrors.folders, f"{name}: synthetic.mirrors.write_mirrors writes no mirror of it"
    out = world["root"] / "out" / name
    fast = FAST if "fewshot" in benchmark.tasks else ()
    assert main(["suite", "--benchmarks", name, "--model", world["model"], "--mirror", str(mirrors.root),
                 "--out", str(out), "--device", "cpu", "--no-report", *fast]) == 0
    rows = read_results(out).to_pylist()
    finished = [r for r in rows if r["status"] == "finished"]
    # every protocol ran, each of its runs finished or was skipped with its reason (never lost)
    assert {r["protocol"].split(" · ")[0] for r in finished} == set(benchmark.tasks)
    assert all(r["status"] in ("finished", "skipped") and (r["status"] == "finished" or r["reason"]) for r in rows)
    for run in {r["run"] for r in finished}:
        source = RunRecord.read(out / run).provenance["dataset"]["benchmark_source"]
        assert source["kind"] == "mirror" and source["folder"] == str(mirrors.folders[name].resolve())
        assert "fetched" not in source
    # the headline: its metric, from its protocol's run, in the leaderboard `cladebench results` prints
    chosen = headline(benchmark)
    shown = [r for r in finished if r["protocol"].split(" · ")[0] == chosen.task
             and r["metric"].rsplit("/", 1)[-1] == chosen.metric]
    assert shown, f"{name}: no finished run reports its headline {chosen.task} {chosen.metric}"
    capsys.readouterr()
    assert main(["results", str(out)]) == 0
    header, _, row = capsys.readouterr().out.splitlines()[:3]
    groups = {r["metric"].rsplit("/", 1)[0] for r in shown if "/" in r["metric"]} - {  # breakdowns are no column
        r["metric"].rsplit("/", 1)[0] for r in shown if "=" in r["metric"]}
    for title in ([f"{name}/{g}" for g in sorted(groups)] or [name]):
        assert title in header, (title, header)
    assert chosen.metric in header and row.startswith(f"| {world['model']}")
    assert any(cell.strip()[:1].isdigit() for cell in row.split("|")[2:]), row  # a number, not a gap
