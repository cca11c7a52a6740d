"""``embed`` end to end with a real (tiny, random) open_clip model loaded through ``local-dir:``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cladebench import store

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.embed import EmbedConfig, column_for_model, embed_dataset  # noqa: E402
from cladebench.store.embeddings import failures  # noqa: E402
from helpers.images import BROKEN, mixed_images, picture, reference_embeddings, with_real_camera_trap, write_images  # noqa: E402


def test_column_names_follow_the_published_convention() -> None:
    assert column_for_model("bioclip") == "emb_bioclip"
    assert column_for_model("bioclip-2") == "emb_bioclip2"
    assert column_for_model("bioclip-2.5") == "emb_bioclip2p5"
    assert column_for_model("local-dir:/models/tiny-clip") == "emb_tinyclip"
    assert column_for_model("ViT-B-16/openai") == "emb_vit_b_16_openai"


@pytest.mark.parametrize("workers", [0, 2])
def test_embed_mixed_dataset(tmp_path: Path, tiny_model: str, workers: int) -> None:
    images = with_real_camera_trap(mixed_images())
    path = tmp_path / "mixed.lance"
    write_images(path, images)
    before = store.open_dataset(path)
    summary = embed_dataset(EmbedConfig(dataset=str(path), model=tiny_model, column="emb_tiny", batch_size=5,
                                        workers=workers, device="cpu", progress=False))
    broken = BROKEN & set(images)
    assert summary.rows == len(images)
    assert summary.failed == len(broken)
    assert summary.valid == len(images) - len(broken)
    assert summary.encoded_now == len(images) and summary.resumed == 0

    ds = store.open_dataset(path)
    assert ds.version == before.version + 1
    assert store.fingerprint(ds) == store.fingerprint(before)  # rows and order untouched
    field = ds.schema.field("emb_tiny")
    meta = store.embedding_metadata(field)
    assert meta["model"] == tiny_model and meta["valid_rows"] == summary.valid
    assert meta["failed_rows"] == len(broken) and meta["normalized"] is False
    assert meta["preprocessing"]["mode"] == "openclip"
    assert {"torch", "open_clip_torch", "cladebench"} <= set(meta["software"])
    table = ds.to_table(columns=["uuid", "emb_tiny"])
    vectors = dict(zip(table.column("uuid").to_pylist(), table.column("emb_tiny").to_pylist(), strict=True))
    assert {k for k, v in vectors.items() if v is None} == broken

    reference = reference_embeddings(tiny_model, images)
    assert set(reference) == set(images) - broken
    norms = []
    for key, expected in reference.items():
        np.testing.assert_allclose(np.asarray(vectors[key], dtype=np.float32), expected, rtol=1e-4, atol=1e-5)
        norms.append(np.linalg.norm(expected))
    assert meta["norm_stats"]["mean"] == pytest.approx(float(np.mean(norms)), rel=1e-4)
    assert not np.allclose(norms, 1.0)  # raw vectors are stored, not normalised

    failed = failures(str(path), "emb_tiny").to_pylist()
    assert {row["uuid"] for row in failed} == broken
    reasons = {row["uuid"]: row["reason"] for row in failed}
    assert "zero-byte" in reasons["zero-bytes"] and "truncated" in reasons["truncated"]
    sidecar = json.loads((path / "embedding_models.json").read_text())
    assert sidecar["emb_tiny"]["model"] == tiny_model and sidecar["emb_tiny"]["dim"] == field.type.list_size
    assert not (path / "_cladebench" / "staging" / "emb_tiny").exists()


def test_existing_column_needs_overwrite_and_tol_mode_is_recorded(tmp_path: Path, tiny_model: str) -> None:
    images = {f"r{i}": picture(i, size=(160, 60)) for i in range(6)}
    path = tmp_path / "wide.lance"
    write_images(path, images)
    config = EmbedConfig(dataset=str(path), model=tiny_model, column="emb_tiny", workers=0, device="cpu",
                         progress=False)
    embed_dataset(config)
    with pytest.raises(Exception, match="already has column 'emb_tiny'"):
        embed_dataset(config)
    summary = embed_dataset(EmbedConfig(dataset=str(path), model=tiny_model, column="emb_tiny", workers=0,
                                        device="cpu", progress=False, overwrite=True, preprocessing="tol"))
    ds = store.open_dataset(path)
    assert store.embedding_metadata(ds.schema.field("emb_tiny"))["preprocessing"]["mode"] == "tol"
    reference = reference_embeddings(tiny_model, images, preprocessing="tol")
    stored = ds.to_table(columns=["uuid", "emb_tiny"]).to_pylist()
    for row in stored:
        expected = reference[row["uuid"]]
        np.testing.assert_allclose(np.asarray(row["emb_tiny"], np.float32), expected, rtol=1e-4, atol=1e-5)
    assert summary.valid == 6


def _start_embed(path: Path, model: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cladebench", "embed", str(path), "--model", model, "--column", "emb_tiny",
         "--batch-size", "8", "--checkpoint-rows", "8", "--workers", "1", "--device", "cpu", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_interrupted_run_resumes_without_reencoding(tmp_path: Path, tiny_model: str, how: signal.Signals) -> None:
    images = {f"img-{i:04d}": picture(i, size=(500, 375)) for i in range(480)}
    images["img-0007"] = b""  # a failure staged before the interruption stays a failure
    path = tmp_path / "big.lance"
    write_images(path, images)
    version = store.open_dataset(path).version
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    staging = path / "_cladebench" / "staging" / "emb_tiny"

    process = _start_embed(path, tiny_model, env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(staging.glob("part-*.parquet")):
        time.sleep(0.01)
    if process.poll() is not None:
        _, stderr = process.communicate()
        raise AssertionError(f"the run ended (exit {process.returncode}) before it could be interrupted:\n{stderr}")
    # Mid-run the dataset is untouched and readable.
    ds = store.open_dataset(path)
    assert ds.version == version and ds.count_rows() == len(images)
    process.send_signal(how)
    _, stderr = process.communicate(timeout=60)
    if how == signal.SIGINT:
        assert process.returncode == 130
        assert "rerun the same command to resume" in stderr
    staged_parts = list(staging.glob("part-*.parquet"))
    assert staged_parts
    import pyarrow.parquet as pq

    staged = sum(pq.read_table(p).num_rows for p in staged_parts)
    assert 0 < staged < len(images)
    assert store.open_dataset(path).version == version

    rerun = subprocess.run(
        [sys.executable, "-m", "cladebench", "embed", str(path), "--model", tiny_model, "--column", "emb_tiny",
         "--batch-size", "8", "--workers", "1", "--device", "cpu", "--no-progress"],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(images) - staged:,} encoded now" in rerun.stdout
    assert f"{staged:,} resumed" in rerun.stdout
    ds = store.open_dataset(path)
    assert ds.version == version + 1
    table = ds.to_table(columns=["uuid", "emb_tiny"])
    assert table.num_rows == len(images)
    assert table.column("emb_tiny").null_count == 1
    # Same vectors as an uninterrupted straightforward loop, for a sample of rows.
    sample = {k: images[k] for k in list(images)[::37]}
    reference = reference_embeddings(tiny_model, sample)
    stored = dict(zip(table.column("uuid").to_pylist(), table.column("emb_tiny").to_pylist(), strict=True))
    for key, expected in reference.items():
        np.testing.assert_allclose(np.asarray(stored[key], np.float32), expected, rtol=1e-4, atol=1e-5)
    assert not staging.exists()
