"""Downloads on Ray against a real HTTP server: the same report as one process, one manifest line per item,
resume, a worker killed mid-shard, the load verb with --ray, and the config that carries the cluster.

One local Ray instance (2 CPUs) serves the whole module; its workers reach the server on 127.0.0.1 like
the driver does. The server counts requests per path, so the tests assert what went over the wire.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from cladebench import store
from cladebench.benchmarks.coobserved.builder.config import CoObservedBuildConfig
from cladebench.benchmarks.crypticbio.builder.sections import parse_config
from cladebench.benchmarks.finegrained.builder.config import FineGrainedBuildConfig
from cladebench.config import add_config_arguments, config_from_args
from cladebench.curate.fetch import (
    DownloadConfig,
    DownloadItem,
    DownloadReport,
    DownloadStore,
    download,
    download_async,
)
from cladebench.curate.fetch.ray import FAULT_MARKER_ENV, _shard_failures
from cladebench.errors import CladebenchError
from helpers.crypticbio_rows import GOOD_ROW, write_csv
from helpers.image_host import JPEG, ImageHost, fail_first, image_bytes, image_host, ok, send
from helpers.ray_local import local_ray

# Timeouts far above what 127.0.0.1 needs: a busy 2-core machine must not turn a good item into a timeout in
# one run and not the other. Failures here come from what the server sends, never from timing.
CONFIG = DownloadConfig(concurrency=4, connect_timeout_s=5.0, read_timeout_s=5.0, attempt_timeout_s=20.0,
                        max_attempts=3, backoff_base_s=0.01, backoff_max_s=0.05)
ON_RAY = replace(CONFIG, ray="default", ray_shard_size=5)


@pytest.fixture(scope="module")
def fault_marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where a test puts the marker that makes one shard's worker die (absent otherwise)."""
    return tmp_path_factory.mktemp("fault") / "kill-one-worker"


@pytest.fixture(scope="module")
def ray_cluster(fault_marker: Path) -> Iterator[Any]:
    """A local Ray instance for the module; ``download`` reuses it (an open session is never shut down)."""
    with local_ray({FAULT_MARKER_ENV: str(fault_marker)}) as ray:
        yield ray


@pytest.fixture
def server() -> Iterator[ImageHost]:
    with image_host() as httpd:
        yield httpd


def good_items(server: ImageHost, count: int) -> list[tuple[str, str]]:
    items = []
    for i in range(count):
        body = image_bytes("PNG" if i % 3 == 0 else "JPEG", i + 10)
        server.state.routes[f"/img{i}"] = ok(body, "image/png" if i % 3 == 0 else "image/jpeg")
        items.append((f"good-{i}", server.url(f"/img{i}")))
    return items


def mixed_items(server: ImageHost) -> list[tuple[str, str]]:
    """21 items: 12 good, one repeat of a good body, 3 gone (404), 3 flaky (500 then 200), 2 cut short."""
    items = good_items(server, 12)
    server.state.routes["/same-as-img1"] = ok(image_bytes("JPEG", 11))
    items.append(("repeat", server.url("/same-as-img1")))
    for i in range(3):
        items.append((f"gone-{i}", server.url(f"/gone{i}")))
        server.state.routes[f"/flaky{i}"] = fail_first(1, 500, ok(image_bytes("JPEG", 40 + i)))
        items.append((f"flaky-{i}", server.url(f"/flaky{i}")))
    server.state.routes["/cut"] = lambda handler, number: send(handler, 200, JPEG[:500], declared=len(JPEG))
    server.state.routes["/half.jpg"] = ok(JPEG[: len(JPEG) // 2])  # the length matches; decoding fails
    items += [("cut", server.url("/cut")), ("half", server.url("/half.jpg"))]
    return items


def outcome(report: DownloadReport) -> tuple[Any, ...]:
    """What must not depend on where the fetching ran (attempt counts and times may)."""
    return ([(k, d.url, d.sha256, d.size, d.image_format) for k, d in report.downloaded.items()],
            [(f.key, f.reason, f.status) for f in report.failures], report.ok, report.cached, report.failed)


def manifest_keys(root: Path) -> list[str]:
    lines = (root / "manifest.jsonl").read_text().splitlines()
    return [json.loads(line)["key"] for line in lines]


# --- on Ray ----------------------------------------------------------------------------------------


def test_ray_report_matches_the_local_report_item_by_item(ray_cluster: Any, server: ImageHost, tmp_path: Path) -> None:
    items = mixed_items(server)
    local = download(items, tmp_path / "local", CONFIG)
    assert (local.ok, local.cached, local.failed) == (16, 0, 5)
    local_requests = Counter(server.state.requests)
    server.state.requests.clear()

    on_ray = download(items, tmp_path / "ray", ON_RAY)  # 21 items in shards of 5: five tasks
    assert outcome(on_ray) == outcome(local)
    assert on_ray.failed_by_reason == {"http_404": 3, "truncated": 1, "invalid_image": 1}
    assert server.state.requests == local_requests  # each shard asked exactly what one process asks
    assert all(on_ray.read_bytes(k) == local.read_bytes(k) for k in local.downloaded)
    keys = manifest_keys(tmp_path / "ray")
    assert sorted(keys) == sorted(on_ray.downloaded) and len(keys) == len(set(keys))
    failures = pq.read_table(tmp_path / "ray" / "failures.parquet")
    assert failures.column("key").to_pylist() == [f.key for f in local.failures]

    # A rerun on Ray fetches nothing finished (only the failures are asked again) and counts it cached.
    before = Counter(server.state.requests)
    again = download(items, tmp_path / "ray", ON_RAY)
    assert (again.ok, again.cached, again.failed) == (0, 16, 5)
    assert [f.key for f in again.failures] == [f.key for f in local.failures]
    failed_paths = {"/gone0", "/gone1", "/gone2", "/cut", "/half.jpg"}
    assert set(server.state.requests - before) == failed_paths
    assert manifest_keys(tmp_path / "ray") == keys

    # The store a Ray run filled resumes in one process too.
    finished = [item for item in items if item[0] in on_ray.downloaded]
    before = Counter(server.state.requests)
    local_again = download(finished, tmp_path / "ray", CONFIG)
    assert (local_again.ok, local_again.cached, local_again.failed) == (0, 16, 0)
    assert server.state.requests == before


def test_a_worker_killed_mid_shard_is_rerun_and_its_items_recorded_once(
        ray_cluster: Any, server: ImageHost, tmp_path: Path, fault_marker: Path) -> None:
    items = good_items(server, 10)
    fault_marker.touch()  # the first shard to finish fetching kills its worker before returning
    report = download(items, tmp_path, ON_RAY)
    assert not fault_marker.exists()
    assert (report.ok, report.cached, report.failed) == (10, 0, 0)
    keys = manifest_keys(tmp_path)
    assert sorted(keys) == sorted(key for key, _ in items)  # once each, though one shard ran twice
    # The killed shard's five bodies were stored but not returned, so its rerun fetched them again.
    assert sum(server.state.requests.values()) == 15
    assert sorted(Counter(server.state.requests.values()).items()) == [(1, 5), (2, 5)]
    assert all(DownloadStore(tmp_path).has(entry) for entry in report.downloaded.values())


def test_load_verb_with_ray_builds_the_dataset(ray_cluster: Any, server: ImageHost, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    (good,) = good_items(server, 1)
    server.state.routes["/bird.png"] = ok(image_bytes("PNG", 3), "image/png")
    rows = [
        GOOD_ROW | {"url": good[1]},
        GOOD_ROW | {"url": server.url("/gone.jpg"), "scientificName": "Podarcis liolepis"},
        GOOD_ROW | {"url": server.url("/bird.png"), "class": "Aves", "order": "Passeriformes", "family": "Paridae",
                    "genus": "Parus", "scientificName": "Parus major", "vernacularName": "['great tit']"},
    ]
    csv_path = write_csv(tmp_path / "CrypticBio-Common.csv", rows)
    out = tmp_path / "loaded.lance"
    code = main(["load", "crypticbio", str(csv_path), "--out", str(out), "--download-dir", str(tmp_path / "dl"),
                 "--ray", "--concurrency", "2", "--retries", "2"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "2 of 3 rows written" in printed and "http_404 1" in printed
    assert store.open_dataset(out).count_rows() == 2
    assert len(manifest_keys(tmp_path / "dl")) == 2
    assert ray_cluster.is_initialized()  # the caller's session is left open


# --- the config that carries the cluster (no Ray needed) -----------------------------------------------


def test_shard_size_is_checked_and_download_async_refuses_ray(tmp_path: Path) -> None:
    with pytest.raises(CladebenchError, match="ray_shard_size must be at least 1"):
        DownloadConfig(ray_shard_size=0)
    with pytest.raises(CladebenchError, match="call download"):
        asyncio.run(download_async([("a", "http://127.0.0.1:9/a")], tmp_path, replace(CONFIG, ray="local")))


def test_crypticbio_yaml_download_section_takes_ray(tmp_path: Path) -> None:
    config = parse_config({"dataset": {"metadata": "x.csv", "out": "o"},
                           "download": {"cache_dir": "/shared/downloads", "ray": "auto", "ray_shard_size": 200}},
                          base_dir=tmp_path)
    assert config.download is not None
    assert (config.download.fetch.ray, config.download.fetch.ray_shard_size) == ("auto", 200)
    default = parse_config({"dataset": {"metadata": "x.csv", "out": "o"}, "download": None}, base_dir=tmp_path)
    assert default.download is not None and default.download.fetch.ray is None


@pytest.mark.parametrize(("cls", "required"), [
    (FineGrainedBuildConfig, ["cat.parquet", "--provenance", "p.csv", "--out", "o"]),
    (CoObservedBuildConfig, ["--export-dir", "export", "--out", "o", "--download"]),
])
@pytest.mark.parametrize(("flags", "expected"), [
    ([], None), (["--ray"], "default"), (["--ray", "ray://head:10001"], "ray://head:10001"),
])
def test_builders_take_ray(cls: type, required: list[str], flags: list[str], expected: str | None) -> None:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, cls)
    assert config_from_args(cls, parser.parse_args([*required, *flags])).ray == expected


def test_ray_on_a_source_that_fetches_nothing_is_refused(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from cladebench.cli import main

    with pytest.raises(SystemExit) as refused:  # its images are in its files: no fetch options at all
        main(["load", "inquire-rerank", str(tmp_path), "--out", str(tmp_path / "x.lance"), "--ray"])
    assert refused.value.code == 2 and "unrecognized arguments: --ray" in capsys.readouterr().err


def test_the_core_imports_without_ray() -> None:
    code = "import sys, cladebench.curate.fetch, cladebench.cli; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_shard_that_failed_for_good_becomes_one_failure_per_item() -> None:
    shard = [DownloadItem("a", "http://x/a"), DownloadItem("b", "http://x/b")]
    failures = _shard_failures(shard, ValueError("first line\nthe cause"))
    assert [(f.key, f.url, f.reason, f.exception, f.attempts) for f in failures] == [
        ("a", "http://x/a", "ray_task", "ValueError", 0), ("b", "http://x/b", "ray_task", "ValueError", 0)]
    assert failures[0].detail == "shard of 2 items failed on Ray: ValueError: the cause"
