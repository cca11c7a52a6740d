"""``embed`` and ``embed --ray`` on a dataset in S3, against a real S3 server (moto) on 127.0.0.1.

The server is a process of its own, speaking HTTP on a local port; Lance's object store client (on the driver
and in every Ray actor) reaches it over TCP, as it would reach MinIO, Ceph or AWS. The setup is what a user of
such a store does: the standard ``AWS_*`` variables (credentials, region, ``AWS_ENDPOINT_URL``, and
``AWS_ALLOW_HTTP`` for a plain-HTTP endpoint) in the driver's environment, where Lance and the store's
reachability check read them, and the same variables in the Ray job's ``runtime_env``, the one way they reach
the workers on the nodes of a cluster. Ray is started here while the driver's environment does not have them,
so the actors can only have them from ``runtime_env``.

One dataset (good, corrupt and truncated images; three fragments) is written twice to the bucket: embedded
once in this process (one math thread, no decoding processes) and once on Ray through the command line
(``cladebench embed s3://... --ray``). The two columns must agree bit for bit.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store

pytest.importorskip("moto")
torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")
ray = pytest.importorskip("ray")

import boto3  # noqa: E402  (moto[server] brings boto3)

from cladebench.cli import main  # noqa: E402
from cladebench.embed import EmbedConfig, embed_dataset  # noqa: E402
from cladebench.embed.core import staging_dir  # noqa: E402
from cladebench.store.embeddings import failures  # noqa: E402
from helpers.images import mixed_images  # noqa: E402

pytestmark = pytest.mark.slow  # Ray and an S3 server: about 8 s on 2 cores

BUCKET = "cladebench"
COLUMN = "emb_tiny"
BATCH = 6
FRAGMENTS = 3
CORRUPT = {"zero-bytes", "garbage", "truncated"}  # among mixed_images()


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server, a process of its own on a free port of 127.0.0.1, with one empty bucket; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait_for(server, port)
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.terminate()
        server.wait(10)


def _wait_for(server: subprocess.Popen[bytes], port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"the moto server exited with {server.returncode} before listening") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _aws_env(endpoint: str) -> dict[str, str]:
    """The standard variables Lance (object_store) and the AWS SDKs read; moto accepts any credentials."""
    return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"}


def _without_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AWS_* variable of the machine running the tests (a profile, a real endpoint) may leak in."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def cluster(s3_endpoint: str) -> Iterator[Any]:
    """Ray (2 CPUs) whose workers get the AWS_* variables from the job's runtime_env and nowhere else."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _without_aws(monkeypatch)  # a local Ray's workers would otherwise inherit this process's environment
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": _aws_env(s3_endpoint)})
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def driver_env(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The AWS_* variables in this process, and a cache of its own (staging and failures of remote URIs)."""
    _without_aws(monkeypatch)
    for name, value in _aws_env(s3_endpoint).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    return s3_endpoint


@pytest.fixture(scope="module")
def images_table() -> pa.Table:
    images = mixed_images()
    return pa.table({"uuid": list(images), "image": pa.array(list(images.values()), pa.large_binary())})


def _write(table: pa.Table, uri: str, **kwargs: Any) -> None:
    store.write_dataset(table, uri, max_rows_per_file=math.ceil(table.num_rows / FRAGMENTS), **kwargs)


def _column(uri: str) -> dict[str, Any]:
    dataset = store.open_dataset(uri)
    table = dataset.to_table(columns=["uuid", COLUMN])
    failed = failures(uri, COLUMN).select(["uuid", "reason"]).to_pylist()
    return {"uuids": table.column("uuid").to_pylist(), "vectors": table.column(COLUMN).to_pylist(),
            "metadata": store.embedding_metadata(dataset.schema.field(COLUMN)),
            "failures": sorted((r["uuid"], r["reason"]) for r in failed), "dataset": dataset}


def _bucket_keys(endpoint: str, prefix: str) -> set[str]:
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {item["Key"] for page in pages for item in page.get("Contents", [])}


def test_embed_on_ray_from_s3_equals_the_single_process_run_bit_for_bit(
        cluster: Any, driver_env: str, tiny_model: str, images_table: pa.Table) -> None:
    reference_uri, ray_uri = f"s3://{BUCKET}/reference.lance", f"s3://{BUCKET}/mixed.lance"
    for uri in (reference_uri, ray_uri):
        _write(images_table, uri)
    assert len(store.open_dataset(ray_uri).get_fragments()) == FRAGMENTS

    # The reference: one math thread and decoding inline, as each actor has with one CPU.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = embed_dataset(EmbedConfig(dataset=reference_uri, model=tiny_model, column=COLUMN,
                                            batch_size=BATCH, device="cpu", workers=0, progress=False))
    finally:
        torch.set_num_threads(threads)

    assert main(["embed", ray_uri, "--model", tiny_model, "--column", COLUMN, "--device", "cpu", "--batch-size",
                 str(BATCH), "--ray-cpus-per-actor", "1", "--no-progress", "--ray"]) == 0

    want, got = _column(reference_uri), _column(ray_uri)
    assert got["uuids"] == want["uuids"] == images_table.column("uuid").to_pylist()
    for row_uuid, mine, theirs in zip(got["uuids"], got["vectors"], want["vectors"], strict=True):
        assert (mine is None) == (theirs is None), row_uuid
        if theirs is not None:
            assert np.asarray(mine, np.float32).tobytes() == np.asarray(theirs, np.float32).tobytes(), row_uuid
    nulls = {u for u, v in zip(got["uuids"], got["vectors"], strict=True) if v is None}
    assert nulls == CORRUPT
    assert got["failures"] == want["failures"] and {u for u, _ in got["failures"]} == nulls

    meta, reference_meta = dict(got["metadata"]), dict(want["metadata"])
    rows = images_table.num_rows
    assert (meta["valid_rows"], meta["failed_rows"]) == (rows - len(nulls), len(nulls))
    assert (summary.valid, summary.failed) == (rows - len(nulls), len(nulls))
    # Remote datasets keep their failures table in the local cache, one folder per URI.
    assert Path(meta["failures"]).is_file()
    assert Path(meta["failures"]).is_relative_to(os.environ["CLADEBENCH_CACHE_DIR"])
    for m in (meta, reference_meta):
        for key in ("created_at", "failures"):
            m.pop(key)
    assert meta.pop("norm_stats") == pytest.approx(reference_meta.pop("norm_stats"), rel=1e-9)
    assert meta == reference_meta

    # The actors wrote their column files into the bucket; one Merge referenced one per fragment.
    dataset = got["dataset"]
    files = [f.path for fragment in dataset.get_fragments() for f in fragment.metadata.files]
    assert len(files) == 2 * FRAGMENTS
    assert {f"mixed.lance/data/{name}" for name in files} <= _bucket_keys(driver_env, "mixed.lance/data/")
    assert not staging_dir(ray_uri, COLUMN, fragments=True).exists()


def test_aws_endpoint_alone_names_the_server(s3_endpoint: str, images_table: pa.Table,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """object_store's own variable, AWS_ENDPOINT, is enough (the reachability check reads it as Lance does)."""
    _without_aws(monkeypatch)
    env = _aws_env(s3_endpoint)
    env["AWS_ENDPOINT"] = env.pop("AWS_ENDPOINT_URL")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    uri = f"s3://{BUCKET}/endpoint-variable.lance"
    _write(images_table.slice(0, 3), uri)
    assert store.open_dataset(uri).count_rows() == 3


def test_storage_options_alone_name_the_server(s3_endpoint: str, images_table: pa.Table,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python API's way: endpoint and credentials in storage_options, nothing in the environment."""
    _without_aws(monkeypatch)
    options = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_region": "us-east-1",
               "aws_endpoint": s3_endpoint, "allow_http": "true"}
    uri = f"s3://{BUCKET}/storage-options.lance"
    _write(images_table.slice(0, 3), uri, storage_options=options)
    assert store.open_dataset(uri, storage_options=options).count_rows() == 3
