"""``embed --ray`` on a local Ray cluster (2 CPUs), compared row by row with the single-process path.

One dataset (mixed good, corrupt and truncated images; four fragments; one deleted row) is embedded once
in this process as the reference. Every Ray run embeds a fresh copy and must give the same bits: the same
device (CPU), precision and math threads (one per actor, and one for the reference), and the same
batches, which both paths cut at fragment boundaries.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")
ray = pytest.importorskip("ray")

from cladebench.cli import main  # noqa: E402
from cladebench.embed import EmbedConfig, embed_dataset  # noqa: E402
from cladebench.embed import ray as embed_ray  # noqa: E402
from cladebench.embed.ray import plan_actors  # noqa: E402
from cladebench.embed.ray_actor import FAULT_MARKER_ENV, NormSums  # noqa: E402
from cladebench.errors import CladebenchError, SchemaError  # noqa: E402
from cladebench.models.tiny import write_tiny_model  # noqa: E402
from cladebench.store.embeddings import failures  # noqa: E402
from helpers.images import BROKEN, mixed_images, picture  # noqa: E402
from helpers.ray_local import local_ray  # noqa: E402

pytestmark = pytest.mark.slow  # each test starts Ray: 5-12 s on 2 cores

COLUMN = "emb_tiny"
BATCH = 6
FRAGMENT_ROWS = 13  # not a multiple of BATCH: every fragment ends in a short block


@pytest.fixture(scope="module")
def fault_marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where a test puts the marker that makes one actor's worker die (absent otherwise)."""
    return tmp_path_factory.mktemp("fault") / "kill-one-actor"


@pytest.fixture(scope="module")
def cluster(fault_marker: Path) -> Iterator[Any]:
    with local_ray({FAULT_MARKER_ENV: str(fault_marker)}) as session:
        yield session


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    images = mixed_images()
    images.update({f"extra-{i:02d}": picture(500 + i, size=(96, 80)) for i in range(20)})
    path = tmp_path_factory.mktemp("template") / "mixed.lance"
    table = pa.table({"uuid": list(images), "image": pa.array(list(images.values()), pa.large_binary())})
    store.write_dataset(table, path, max_rows_per_file=FRAGMENT_ROWS)
    dataset = store.open_dataset(path)
    dataset.delete("uuid = 'syn-004'")  # a deletion vector: fragments' logical rows differ from physical ones
    assert len(store.open_dataset(path).get_fragments()) >= 4
    return path


def _copy(template: Path, where: Path) -> Path:
    target = where / template.name
    shutil.copytree(template, target)
    return target


def _config(path: Path, model: str, **changes: Any) -> EmbedConfig:
    return EmbedConfig(dataset=str(path), model=model, column=COLUMN, batch_size=BATCH, device="cpu",
                       progress=False, **changes)


@pytest.fixture(scope="module")
def reference(template: Path, tiny_model: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The single-process run: one math thread, as each Ray actor has (``ray_cpus_per_actor=1``)."""
    path = _copy(template, tmp_path_factory.mktemp("reference"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = embed_dataset(_config(path, tiny_model, workers=0))
    finally:
        torch.set_num_threads(threads)
    return {"path": path, "summary": summary, **_column(path)}


def _column(path: Path) -> dict[str, Any]:
    dataset = store.open_dataset(path)
    table = dataset.to_table(columns=["uuid", COLUMN])
    failed = failures(str(path), COLUMN).select(["uuid", "reason"]).to_pylist()
    return {"uuids": table.column("uuid").to_pylist(), "vectors": table.column(COLUMN).to_pylist(),
            "metadata": store.embedding_metadata(dataset.schema.field(COLUMN)),
            "failures": sorted((r["uuid"], r["reason"]) for r in failed),
            "fingerprint": store.fingerprint(dataset), "version": dataset.version}


def _assert_same_column(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["uuids"] == want["uuids"]  # same rows, same order, each once
    assert len(set(got["uuids"])) == len(got["uuids"])
    for row_uuid, mine, theirs in zip(got["uuids"], got["vectors"], want["vectors"], strict=True):
        if theirs is None:
            assert mine is None, row_uuid
            continue
        assert mine is not None, row_uuid
        assert np.asarray(mine, np.float32).tobytes() == np.asarray(theirs, np.float32).tobytes(), row_uuid
    assert got["failures"] == want["failures"]
    a, b = dict(got["metadata"]), dict(want["metadata"])
    for meta in (a, b):
        meta.pop("created_at")
    norms_a, norms_b = a.pop("norm_stats"), b.pop("norm_stats")
    assert a == b
    assert norms_a == pytest.approx(norms_b, rel=1e-9)


def test_ray_run_equals_the_single_process_run_bit_for_bit(cluster: Any, template: Path, tiny_model: str,
                                                           reference: dict[str, Any], tmp_path: Path) -> None:
    path = _copy(template, tmp_path)
    before = store.open_dataset(path)
    summary = embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    got = _column(path)
    _assert_same_column(got, reference)
    assert got["fingerprint"] == store.fingerprint(before)  # rows untouched
    want = reference["summary"]
    assert (summary.rows, summary.valid, summary.failed, summary.encoded_now, summary.resumed) == (
        want.rows, want.valid, want.failed, want.encoded_now, 0)
    assert summary.failed == len(BROKEN & set(mixed_images())) == 3 and summary.valid == summary.rows - 3
    assert summary.runner == {"kind": "ray", "address": "default", "fragments": len(before.get_fragments()),
                              "fragments_resumed": 0, "actors": 2, "cpus_per_actor": 1, "gpus_per_actor": 0}
    # One Merge commits the column; the run statistics follow as a metadata-only version.
    assert got["version"] == before.version + 2 == summary.version
    assert store.open_dataset(path, version=before.version + 1).schema.names == [*before.schema.names, COLUMN]
    for fragment in store.open_dataset(path).get_fragments():
        assert len(fragment.metadata.files) == 2  # its own file and one column file
    sidecar = json.loads((path / store.EMBEDDING_SIDECAR).read_text())
    assert sidecar[COLUMN]["valid_rows"] == summary.valid
    assert not (path / "_cladebench" / "staging" / f"{COLUMN}.fragments").exists()


def test_a_killed_worker_is_retried_and_no_row_is_written_twice(cluster: Any, template: Path, tiny_model: str,
                                                                reference: dict[str, Any], fault_marker: Path,
                                                                tmp_path: Path) -> None:
    path = _copy(template, tmp_path)
    fault_marker.write_text("armed")
    summary = embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    assert not fault_marker.exists()  # an actor took the marker and died mid-fragment
    got = _column(path)
    _assert_same_column(got, reference)
    assert summary.encoded_now == reference["summary"].rows
    dataset = store.open_dataset(path)
    assert dataset.count_rows() == len(reference["uuids"])
    for fragment in dataset.get_fragments():
        assert len(fragment.metadata.files) == 2  # the dead attempt's file is not referenced


def test_an_interrupted_run_resumes_from_its_staged_fragments(cluster: Any, template: Path, tiny_model: str,
                                                              reference: dict[str, Any], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = _copy(template, tmp_path)
    write = embed_ray._FragmentStaging.write
    written: list[int] = []

    def interrupt_after_two(self: Any, result: dict[str, Any]) -> None:
        write(self, result)
        written.append(result["fragment_id"])
        if len(written) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(embed_ray._FragmentStaging, "write", interrupt_after_two)
    with pytest.raises(KeyboardInterrupt):
        embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    monkeypatch.undo()
    dataset = store.open_dataset(path)
    assert COLUMN not in dataset.schema.names  # nothing committed
    staged = sorted((path / "_cladebench" / "staging" / f"{COLUMN}.fragments").glob("fragment-*.json"))
    assert len(staged) == 2

    # The other path refuses to start over them, and says how to go on.
    with pytest.raises(CladebenchError, match="rerun with --ray"):
        embed_dataset(_config(path, tiny_model))

    rows = {f.fragment_id: f.count_rows() for f in dataset.get_fragments()}
    summary = embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    assert summary.resumed == sum(rows[f] for f in written)
    assert summary.encoded_now == summary.rows - summary.resumed
    assert summary.runner["fragments_resumed"] == 2
    _assert_same_column(_column(path), reference)


def test_a_staged_fragment_that_changed_is_encoded_again(cluster: Any, template: Path, tiny_model: str,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _copy(template, tmp_path)
    monkeypatch.setattr(embed_ray, "_commit", _raise_interrupt)
    with pytest.raises(KeyboardInterrupt):
        embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    monkeypatch.undo()
    dataset = store.open_dataset(path)
    first = dataset.get_fragments()[0]
    victim = first.to_table(columns=["uuid"]).column("uuid")[0].as_py()
    dataset.delete(f"uuid = '{victim}'")  # fragment 0 gets a new deletion vector
    summary = embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    assert summary.runner["fragments_resumed"] == summary.runner["fragments"] - 1
    assert summary.encoded_now == store.open_dataset(path).get_fragments()[0].count_rows()
    got = _column(path)
    assert victim not in got["uuids"] and got["metadata"]["valid_rows"] == summary.valid


def _raise_interrupt(*args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt


def test_the_cli_runs_on_ray_and_overwrites_only_when_asked(cluster: Any, template: Path, tiny_model: str,
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = _copy(template, tmp_path)
    monkeypatch.chdir(tmp_path)  # a relative path: the workers' working folder is not this one
    argv = ["embed", path.name, "--model", tiny_model, "--column", COLUMN, "--device", "cpu", "--batch-size",
            str(BATCH), "--no-progress", "--ray"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert COLUMN in out
    assert main(argv) != 0
    assert "--overwrite" in capsys.readouterr().err
    assert main([*argv[:-1], "--overwrite", "--ray", "default"]) == 0
    dataset = store.open_dataset(path)
    assert dataset.schema.names.count(COLUMN) == 1
    assert store.embedding_metadata(dataset.schema.field(COLUMN))["valid_rows"] == dataset.count_rows() - 3


@pytest.mark.parametrize(("cpus", "gpus", "changes", "fragments", "expected"), [
    (32, 4, {}, 100, (4, 8, 1)),                        # one actor per GPU, its share of CPUs
    (128, 2, {}, 100, (2, 8, 1)),                       # at most 8 decoding CPUs per GPU by default
    (16, 0, {}, 100, (16, 1, 0)),                       # CPU cluster: one actor per CPU
    (16, 0, {"ray_cpus_per_actor": 4}, 100, (4, 4, 0)),
    (16, 0, {}, 3, (3, 1, 0)),                          # never more actors than fragments
    (32, 4, {"device": "cpu"}, 100, (32, 1, 0)),        # GPUs left alone when asked for CPU
    (32, 4, {"ray_actors": 2}, 100, (2, 8, 1)),
])
def test_the_actor_pool_is_sized_from_the_cluster(cpus: float, gpus: float, changes: dict[str, Any],
                                                  fragments: int, expected: tuple[int, int, int]) -> None:
    config = EmbedConfig(dataset="d", model="m", **changes)
    plan = plan_actors(cpus, gpus, config, fragments)
    assert (plan.actors, plan.cpus, plan.gpus) == expected


def test_cuda_on_a_cluster_without_gpus_is_refused() -> None:
    with pytest.raises(CladebenchError, match="no GPU"):
        plan_actors(8, 0, EmbedConfig(dataset="d", model="m", device="cuda"), 4)


def test_norm_sums_merged_across_fragments_equal_the_whole() -> None:
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(n, 16)).astype(np.float32) for n in (5, 1, 0, 40)]
    merged = NormSums()
    for part in parts:
        sums = NormSums()
        sums.add(part)
        merged.merge(sums)
    norms = np.linalg.norm(np.concatenate(parts).astype(np.float64), axis=1)
    stats = merged.to_stats()
    assert stats == pytest.approx({"mean": norms.mean(), "std": norms.std(), "min": norms.min(),
                                   "max": norms.max()}, rel=1e-9)
    assert NormSums().to_stats() == {}


def test_a_worker_that_loads_other_model_files_stops_the_run_with_a_clear_error(
        cluster: Any, template: Path, tiny_model: str, tmp_path: Path) -> None:
    from cladebench.models import load_encoder

    path = _copy(template, tmp_path)
    other = "local-dir:" + str(write_tiny_model(tmp_path / "other-tiny", seed=1))
    with pytest.raises(CladebenchError, match="every node must see the same files"):
        embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1),
                      encoder=load_encoder(other, device="cpu"))
    assert COLUMN not in store.open_dataset(path).schema.names


def test_a_uuid_twice_in_a_fragment_is_refused_as_without_ray(cluster: Any, tiny_model: str, tmp_path: Path) -> None:
    import lance

    images = [picture(i) for i in range(4)]
    table = pa.table({"uuid": ["a", "b", "a", "c"], "image": pa.array(images, pa.large_binary())})
    path = tmp_path / "twice.lance"
    lance.write_dataset(table, path)  # around store.write_dataset, which refuses it at the door
    with pytest.raises(SchemaError, match="duplicate uuid 'a'"):
        embed_dataset(_config(path, tiny_model))
    with pytest.raises(SchemaError, match="duplicate uuid 'a'"):  # a schema error on the worker is one here too
        embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    assert COLUMN not in store.open_dataset(path).schema.names


def test_a_null_uuid_is_refused_before_ray_is_reached(tiny_model: str, tmp_path: Path) -> None:
    import lance

    table = pa.table({"uuid": pa.array(["a", None], pa.string()),
                      "image": pa.array([picture(0), picture(1)], pa.large_binary())})
    path = tmp_path / "null.lance"
    lance.write_dataset(table, path)
    with pytest.raises(SchemaError, match="row 1, column 'uuid': null uuid"):
        embed_dataset(_config(path, tiny_model, ray="an-address-never-contacted"))
    assert not (path / "_cladebench" / "staging").exists()


def test_a_ray_run_is_refused_while_another_run_holds_the_column(template: Path, tiny_model: str,
                                                                 tmp_path: Path) -> None:
    from cladebench.embed.core import embedding_lock

    path = _copy(template, tmp_path)
    with embedding_lock(str(path), COLUMN), pytest.raises(CladebenchError, match="another embed"):
        embed_dataset(_config(path, tiny_model, ray="an-address-never-contacted"))
    assert COLUMN not in store.open_dataset(path).schema.names


def test_staged_fragments_without_their_state_are_encoded_again(cluster: Any, template: Path, tiny_model: str,
                                                                reference: dict[str, Any], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _copy(template, tmp_path)
    monkeypatch.setattr(embed_ray, "_commit", _raise_interrupt)
    with pytest.raises(KeyboardInterrupt):
        embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    monkeypatch.undo()
    staging = path / "_cladebench" / "staging" / f"{COLUMN}.fragments"
    staged = len(list(staging.glob("fragment-*.json")))
    assert staged == len(store.open_dataset(path).get_fragments())
    (staging / "state.json").unlink()  # nothing proves which run staged them
    capsys.readouterr()
    summary = embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    assert summary.runner["fragments_resumed"] == 0 and summary.resumed == 0
    assert f"discarded {staged} staged fragment(s)" in capsys.readouterr().err
    _assert_same_column(_column(path), reference)


def test_every_image_failing_on_ray_ends_as_without_ray(cluster: Any, tiny_model: str, tmp_path: Path) -> None:
    table = pa.table({"uuid": [f"bad-{i}" for i in range(5)], "image": pa.array([b"junk"] * 5, pa.large_binary())})
    path = tmp_path / "broken.lance"
    store.write_dataset(table, path, max_rows_per_file=2)
    version = store.open_dataset(path).version
    with pytest.raises(CladebenchError, match="none of the 5 images could be decoded"):
        embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    assert store.open_dataset(path).version == version  # no column of nulls
    assert sorted(failures(str(path), COLUMN).column("uuid").to_pylist()) == [f"bad-{i}" for i in range(5)]
    assert not (path / "_cladebench" / "staging" / f"{COLUMN}.fragments").exists()


def test_rows_added_while_a_ray_run_encodes_are_encoded_in_the_same_run(
        cluster: Any, template: Path, tiny_model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Another process appending rows while the fragments were encoded made the one Merge fail (a Lance commit
    conflict, exit 70): a Merge lists every fragment, and the new ones had no column file. The run says what
    arrived, encodes the new fragments too, and commits them all at once."""
    path = _copy(template, tmp_path)
    late = {f"late-{i}": picture(900 + i, size=(96, 80)) for i in range(3)}
    run_pool = embed_ray._run_pool
    appended: list[bool] = []

    def pool_then_append(*args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield from run_pool(*args, **kwargs)
        if not appended:  # as another process would, between the last fragment and the commit
            appended.append(True)
            store.append(pa.table({"uuid": list(late), "image": pa.array(list(late.values()), pa.large_binary())}),
                         path)

    monkeypatch.setattr(embed_ray, "_run_pool", pool_then_append)
    rows = store.open_dataset(path).count_rows()
    summary = embed_dataset(_config(path, tiny_model, ray="default", ray_cpus_per_actor=1))
    assert "3 row(s) were added" in capsys.readouterr().err
    got = _column(path)
    assert summary.rows == rows + 3 and summary.arrived == 0
    vectors = dict(zip(got["uuids"], got["vectors"], strict=True))
    assert all(vectors[u] is not None for u in late)
    assert got["metadata"]["valid_rows"] == summary.valid and not embed_ray.staging_dir(
        str(path), COLUMN, fragments=True).exists()


def test_an_image_only_backbone_runs_on_ray_as_in_one_process(cluster: Any, template: Path, tiny_dinov2: Path,
                                                               tmp_path: Path) -> None:
    # A DINOv2 in transformers' own layout: its image processor rebuilt in each actor from the recorded values.
    model = f"local-dir:{tiny_dinov2}"
    (tmp_path / "one").mkdir()
    (tmp_path / "ray").mkdir()
    here, there = _copy(template, tmp_path / "one"), _copy(template, tmp_path / "ray")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        embed_dataset(_config(here, model, workers=0))
    finally:
        torch.set_num_threads(threads)
    embed_dataset(_config(there, model, ray="default", ray_cpus_per_actor=1))
    got, want = _column(there), _column(here)
    assert got["metadata"]["preprocessing"]["mode"] == "transformers" and "CLS" in got["metadata"]["embedding"]
    # Layer-normed CLS tokens of random weights have nearly equal norms: their std, merged from per-fragment sums,
    # keeps only about 7 digits, so the statistics are compared at that precision and everything else exactly.
    assert got["metadata"]["norm_stats"] == pytest.approx(want["metadata"]["norm_stats"], rel=1e-5)
    got["metadata"]["norm_stats"] = want["metadata"]["norm_stats"]
    _assert_same_column(got, want)
