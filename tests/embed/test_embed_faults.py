"""``embed`` under attack: concurrent runs, unprovable staged rows, images that all fail, bad column names,
bad uuids, wrong column types and a read-only dataset. Each ends with one line and its documented exit code,
and leaves the dataset as it was (or with the whole column)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cladebench import store

torch = pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main  # noqa: E402
from cladebench.embed import EmbedConfig, embed_dataset  # noqa: E402
from cladebench.embed import core as embed_core  # noqa: E402
from cladebench.embed import local as embed_local  # noqa: E402
from cladebench.errors import CladebenchError, SchemaError  # noqa: E402
from cladebench.store.embeddings import STATE_DIR, failures, valid_embeddings  # noqa: E402
from helpers.images import picture, reference_embeddings, write_images  # noqa: E402

COLUMN = "emb_tiny"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def _images(n: int, size: tuple[int, int] = (120, 90)) -> dict[str, bytes]:
    return {f"img-{i:04d}": picture(i, size=size) for i in range(n)}


def _config(path: Path, model: str, **changes: Any) -> EmbedConfig:
    return EmbedConfig(**{"dataset": str(path), "model": model, "column": COLUMN, "batch_size": 4, "workers": 0,
                          "device": "cpu", "progress": False, **changes})


def _argv(path: Path, model: str, *extra: str) -> list[str]:
    return ["embed", str(path), "--model", model, "--column", COLUMN, "--batch-size", "4", "--workers", "0",
            "--device", "cpu", "--no-progress", *extra]


def _cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cladebench", *argv], capture_output=True, text=True, env=ENV,
                          timeout=300, check=False)


def _error_lines(stderr: str) -> list[str]:
    """What the CLI printed, less Lance's own log lines (its Rust logger writes to the same stderr)."""
    return [line for line in stderr.splitlines() if line.strip() and " WARN " not in line]


# --- B2: one run per dataset and column -----------------------------------------------------------


def test_a_second_run_is_refused_while_another_holds_the_column(tmp_path: Path, tiny_model: str) -> None:
    path = tmp_path / "locked.lance"
    write_images(path, _images(6))
    version = store.open_dataset(path).version
    with embed_core.embedding_lock(str(path), COLUMN):  # this process is "the other run"
        result = _cli(_argv(path, tiny_model))
    assert result.returncode == 1, result.stderr
    lines = _error_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert f"another embed of {COLUMN!r}" in lines[0] and f"pid {os.getpid()}" in lines[0]
    assert store.open_dataset(path).version == version
    assert not embed_core.staging_dir(str(path), COLUMN).exists()  # it staged nothing


def test_a_lock_left_by_a_killed_process_blocks_nothing(tmp_path: Path, tiny_model: str) -> None:
    path = tmp_path / "stale.lance"
    write_images(path, _images(6))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom cladebench.embed.core import embedding_lock\n"
         f"with embedding_lock({str(path)!r}, {COLUMN!r}):\n    print('locked', flush=True)\n    sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(CladebenchError, match="another embed"):
            embed_dataset(_config(path, tiny_model))
    finally:
        holder.kill()  # SIGKILL: no cleanup of its own runs
        holder.wait(timeout=60)
    assert embed_core.lock_path(str(path), COLUMN).exists()  # the file stays; its lock went with the process
    summary = embed_dataset(_config(path, tiny_model))
    assert summary.valid == 6


@pytest.mark.slow
def test_two_runs_started_together_commit_one_column(tmp_path: Path, tiny_model: str) -> None:
    images = _images(160, size=(200, 150))
    path = tmp_path / "race.lance"
    write_images(path, images)
    version = store.open_dataset(path).version
    argv = [sys.executable, "-m", "cladebench", *_argv(path, tiny_model, "--checkpoint-rows", "8")]
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
            for _ in range(2)]
    outcomes = [(run.wait(timeout=300), run.communicate()[1]) for run in runs]
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 1], outcomes
    loser = _error_lines(next(stderr for code, stderr in outcomes if code == 1))
    # Refused while the winner ran, or (had the winner finished first) refused for the column it added.
    assert len(loser) == 1 and ("another embed" in loser[0] or "already has column" in loser[0]), loser
    ds = store.open_dataset(path)
    assert ds.version == version + 1  # one commit
    table = ds.to_table(columns=["uuid", COLUMN])
    assert table.num_rows == len(images) and table.column(COLUMN).null_count == 0
    assert not embed_core.staging_dir(str(path), COLUMN).exists()


def _interrupt(*args: Any, **kwargs: Any) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize("proof", ["state.json lost", "other settings"])
def test_staged_rows_whose_settings_cannot_be_proven_are_encoded_again(
        tmp_path: Path, tiny_model: str, proof: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    images = _images(10, size=(160, 60))  # wide: the two preprocessings give different vectors
    path = tmp_path / "staged.lance"
    write_images(path, images)
    monkeypatch.setattr(embed_local, "_commit", _interrupt)  # every row staged with openclip, then a kill
    with pytest.raises(KeyboardInterrupt):
        embed_dataset(_config(path, tiny_model, checkpoint_rows=4))
    monkeypatch.undo()
    staging = embed_core.staging_dir(str(path), COLUMN)
    assert sum(pq.read_metadata(p).num_rows for p in staging.glob("part-*.parquet")) == len(images)
    if proof == "state.json lost":
        (staging / "state.json").unlink()  # as a run that lost a race, or a removal cut short, left it

    summary = embed_dataset(_config(path, tiny_model, preprocessing="tol", overwrite=True))
    assert (summary.resumed, summary.encoded_now) == (0, len(images))
    assert f"discarded {len(images)} staged row(s)" in capsys.readouterr().err
    stored = store.open_dataset(path).to_table(columns=["uuid", COLUMN]).to_pylist()
    reference = reference_embeddings(tiny_model, images, preprocessing="tol")
    for row in stored:  # every row is tol's, as the metadata says
        np.testing.assert_allclose(np.asarray(row[COLUMN], np.float32), reference[row["uuid"]], rtol=1e-4, atol=1e-5)
    assert store.embedding_metadata(store.open_dataset(path).schema.field(COLUMN))["preprocessing"]["mode"] == "tol"


def test_staged_rows_of_the_same_settings_are_still_resumed(tmp_path: Path, tiny_model: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "resume.lance"
    write_images(path, _images(10))
    monkeypatch.setattr(embed_local, "_commit", _interrupt)
    with pytest.raises(KeyboardInterrupt):
        embed_dataset(_config(path, tiny_model, checkpoint_rows=4))
    monkeypatch.undo()
    summary = embed_dataset(_config(path, tiny_model))
    assert (summary.resumed, summary.encoded_now, summary.valid) == (10, 0, 10)


def test_a_removal_cut_short_leaves_nothing_to_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "staging"
    directory.mkdir()
    (directory / "state.json").write_text('{"run_key": {}}')
    (directory / "part-1.parquet").write_bytes(b"")
    monkeypatch.setattr(shutil, "rmtree", _interrupt)  # killed before the parts went
    with pytest.raises(KeyboardInterrupt):
        embed_core.remove_staging(directory)
    monkeypatch.undo()
    assert (directory / "part-1.parquet").exists() and embed_core.read_state(directory) is None  # proof went first


# --- B7: every image failing ----------------------------------------------------------------------


def test_every_image_failing_ends_with_one_line_and_the_failures_table(
        tmp_path: Path, tiny_model: str, capsys: pytest.CaptureFixture[str]) -> None:
    images = {f"bad-{i}": b"not an image at all" for i in range(5)}
    path = tmp_path / "broken.lance"
    write_images(path, images)
    version = store.open_dataset(path).version
    for _ in range(2):  # the rerun ends the same way, not stuck on something else
        assert main(_argv(path, tiny_model)) == 1
        lines = _error_lines(capsys.readouterr().err)
        assert len(lines) == 1, lines
        assert "none of the 5 images could be decoded" in lines[0] and "dimension" not in lines[0]
        table = failures(str(path), COLUMN).to_pylist()
        assert sorted(r["uuid"] for r in table) == sorted(images)
        assert all(r["reason"] for r in table)
        assert store.open_dataset(path).version == version  # no column of nulls
        assert not embed_core.staging_dir(str(path), COLUMN).exists()


def test_every_image_failing_on_overwrite_keeps_the_column_and_its_failures(
        tmp_path: Path, tiny_model: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kept.lance"
    write_images(path, {"good": picture(1), "bad": b"junk"})
    assert main(_argv(path, tiny_model)) == 0
    capsys.readouterr()
    before = store.open_dataset(path)
    before_failures = failures(str(path), COLUMN).to_pylist()
    before.delete("uuid = 'good'")  # now every row left fails
    assert main(_argv(path, tiny_model, "--overwrite")) == 1
    assert "left as it was" in capsys.readouterr().err
    assert COLUMN in store.open_dataset(path).schema.names
    assert failures(str(path), COLUMN).to_pylist() == before_failures  # still the column's own
    attempt = path / "_cladebench" / "failures" / f"{COLUMN}.not-committed.parquet"
    assert pq.read_table(attempt).column("uuid").to_pylist() == ["bad"]


@pytest.mark.parametrize(("column", "values", "type_name"), [
    ("image", ["a", "b"], "string"),
    ("image", [1, 2], "int64"),
    ("uuid", [1, 2], "int64"),
])
def test_a_uuid_or_image_column_of_another_type_is_a_schema_error(
        tmp_path: Path, tiny_model: str, column: str, values: list[Any], type_name: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    import lance

    data = {"uuid": ["a", "b"], "image": pa.array([picture(0), picture(1)], pa.large_binary()), column: values}
    path = tmp_path / "typed.lance"
    lance.write_dataset(pa.table(data), path)  # around store.write_dataset, which refuses it at the door
    assert main(_argv(path, tiny_model)) == 4
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and f"column {column!r} has type {type_name}" in lines[0], lines
    assert not (path / STATE_DIR).exists()  # nothing written


# --- B8: column names -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["emb_a b", "emb_it's", 'emb_"q"', "emb_Upper", "emb_", "emb_x;drop", "tiny",
                                  "emb_a-b"])
def test_a_column_name_outside_the_pattern_is_refused_before_anything_is_written(
        tmp_path: Path, tiny_model: str, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "named.lance"
    write_images(path, _images(2))
    version = store.open_dataset(path).version
    argv = _argv(path, tiny_model)
    argv[argv.index("--column") + 1] = name
    assert main(argv) == 2
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "--column" in lines[0] and "emb_[a-z0-9_]+" in lines[0], lines
    assert store.open_dataset(path).version == version
    assert not (path / STATE_DIR).exists()


def _foreign_columns(path: Path) -> None:
    """Embedding columns ``embed`` would not write: odd names, a string column, a ragged and a mis-declared one."""
    import lance

    vectors = pa.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], pa.list_(pa.float32(), 3))
    declared = pa.field("emb_declared", pa.list_(pa.float32(), 3), metadata={"model": "m", "dim": "4"})
    table = pa.table({
        "uuid": ["a", "b"],
        "emb_a b": vectors,
        "emb_it's": vectors,
        "emb_text": ["0.1,0.2", "0.3,0.4"],
        "emb_declared": vectors,
    }).cast(pa.schema([pa.field("uuid", pa.string()), pa.field("emb_a b", vectors.type),
                       pa.field("emb_it's", vectors.type), pa.field("emb_text", pa.string()), declared]))
    lance.write_dataset(table, path)


def test_info_describes_embedding_columns_of_any_name_and_type(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "foreign.lance"
    _foreign_columns(path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "emb_a b: dim 3, 2 valid rows" in out and "emb_it's: dim 3, 2 valid rows" in out
    assert "emb_text: type string (not a fixed-width vector), 2 valid rows" in out


def test_readers_refuse_a_column_that_is_no_embedding_space(tmp_path: Path) -> None:
    path = tmp_path / "foreign.lance"
    _foreign_columns(path)
    dataset = store.open_dataset(path)
    for name in ("emb_a b", "emb_it's"):  # odd names are quoted, not an SQL error
        rows, vectors = valid_embeddings(dataset, name, where="uuid = 'a'")
        assert rows.column("uuid").to_pylist() == ["a"] and vectors.shape == (1, 3)
    with pytest.raises(SchemaError, match="'emb_text' has type string"):
        valid_embeddings(dataset, "emb_text")
    with pytest.raises(SchemaError, match="width 3, but its field metadata says 4"):
        valid_embeddings(dataset, "emb_declared")
    with pytest.raises(SchemaError, match="width 3, but the model says 64"):
        valid_embeddings(dataset, "emb_a b", dim=64)


# --- B12: uuids -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("uuids", "expected"), [
    (["a", None, "c"], "row 1, column 'uuid': null uuid"),
    (["a", "b", "c\nd"], "row 2, column 'uuid': uuid 'c\\nd' contains a newline"),
    (["a", "b", "a"], "duplicate uuid 'a'"),
])
def test_bad_uuids_are_refused_before_encoding(tmp_path: Path, tiny_model: str, uuids: list[str | None],
                                               expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    import lance

    path = tmp_path / "uuids.lance"
    lance.write_dataset(pa.table({"uuid": pa.array(uuids, pa.string()),
                                  "image": pa.array([picture(i) for i in range(3)], pa.large_binary())}), path)
    assert main(_argv(path, tiny_model)) == 4
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and expected in lines[0], lines
    assert COLUMN not in store.open_dataset(path).schema.names
    assert not embed_core.staging_dir(str(path), COLUMN).exists()


# --- B11: a read-only dataset ---------------------------------------------------------------------


@contextmanager
def _read_only(path: Path) -> Iterator[None]:
    """``path`` read-only for this process: by permissions, or (as root, whom permissions do not stop) by a
    read-only bind mount; skipped where neither is possible."""
    if os.geteuid() != 0:
        folders = [path, *(p for p in path.rglob("*") if p.is_dir())]
        for folder in folders:
            folder.chmod(0o555)
        try:
            yield
        finally:
            for folder in folders:
                folder.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip("running as root without the right to mount: cannot make a folder read-only")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True,
                          check=False).returncode != 0:
            pytest.skip("cannot remount read-only here")
        yield
    finally:
        subprocess.run(["umount", str(path)], capture_output=True, check=False)


def test_a_read_only_dataset_fails_with_one_line_naming_it(tmp_path: Path, tiny_model: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "readonly.lance"
    write_images(path, _images(3))
    version = store.open_dataset(path).version
    with _read_only(path):
        assert main(_argv(path, tiny_model)) == 1
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and str(path) in lines[0] and "not writable" in lines[0], lines
    assert store.open_dataset(path).version == version


def test_a_task_refuses_a_column_whose_width_is_not_the_models(tmp_path: Path, tiny_model: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    n = 6
    vectors = pa.FixedSizeListArray.from_arrays(
        pa.array(np.random.default_rng(0).normal(size=n * 3).astype(np.float32)), 3)
    table = pa.table({"uuid": [f"u{i}" for i in range(n)], "image": pa.array([b""] * n, pa.large_binary()),
                      "kingdom": ["K"] * n, "phylum": ["P"] * n, "class": ["C"] * n, "order": ["O"] * n,
                      "family": ["F"] * n, "genus": ["G", "H"] * 3, "species": ["a", "b", "c"] * 2})
    table = table.append_column(store.embedding_field("emb_tinyclip", 3, {"model": tiny_model}), vectors)
    path = tmp_path / "narrow.lance"
    store.write_dataset(table, path)  # the metadata's dim agrees with the values: only the model's differs
    assert main(["eval", "zeroshot", str(path), "--model", tiny_model, "--out", str(tmp_path / "run"),
                 "--rank", "genus"]) == 4
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "width 3, but the model says 32" in lines[0], lines


def test_a_full_disk_while_staging_is_one_line_not_a_bug(tmp_path: Path, tiny_model: str,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    path = tmp_path / "full.lance"
    write_images(path, _images(3))

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path / "_cladebench" / "staging"))

    monkeypatch.setattr(embed_local._Staging, "write", full)  # the device fills up as the first part is staged
    assert main(_argv(path, tiny_model)) == 1
    lines = _error_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "cannot write" in lines[0] and "No space left on device" in lines[0], lines


# --- rows added by another process while a run encodes ----------------------------------------------


def _append_once(path: Path, images: dict[str, bytes]) -> Any:
    """A stand-in for `_Staging.write` that, at the run's first flush, lets another writer append ``images`` (what a
    second process adding rows to the dataset does while the run encodes), then stages as usual."""
    write = embed_local._Staging.write
    appended: list[bool] = []

    def write_and_append(self: Any, *args: Any, **kwargs: Any) -> None:
        if not appended:
            appended.append(True)
            store.append(pa.table({"uuid": list(images),
                                   "image": pa.array(list(images.values()), pa.large_binary())}), path)
        write(self, *args, **kwargs)

    return write_and_append


def _vectors(path: Path) -> dict[str, list[float] | None]:
    return {r["uuid"]: r[COLUMN] for r in store.open_dataset(path).to_table(columns=["uuid", COLUMN]).to_pylist()}


def test_rows_added_during_a_run_are_said_and_a_later_run_encodes_only_them(
        tmp_path: Path, tiny_model: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Rows appended while embed ran were committed with null vectors under "16 of 16 rows embedded", and only
    --overwrite (encoding everything again) filled them. The run commits what it encoded against the version it
    read, says how many rows arrived meanwhile, and the next run encodes only those."""
    first = {**_images(16), "broken": b"not an image"}
    late = {f"late-{i}": picture(100 + i) for i in range(5)}
    path = tmp_path / "growing.lance"
    write_images(path, first)
    monkeypatch.setattr(embed_local._Staging, "write", _append_once(path, late))
    summary = embed_dataset(_config(path, tiny_model, checkpoint_rows=4))
    monkeypatch.undo()
    assert (summary.rows, summary.valid, summary.failed, summary.arrived) == (17, 16, 1, 5)
    note = capsys.readouterr().err
    assert "5 row(s) were added" in note and "embed again" in note, note
    vectors = _vectors(path)
    assert [u for u, v in vectors.items() if v is None] == ["broken", *late]
    fingerprint = store.fingerprint(store.open_dataset(path))

    filled = embed_dataset(_config(path, tiny_model))  # no --overwrite: only the rows without a vector
    assert (filled.encoded_now, filled.rows, filled.valid, filled.failed, filled.arrived) == (5, 22, 21, 1, 0)
    after = _vectors(path)
    assert all(after[u] == v for u, v in vectors.items() if v is not None)  # the first run's vectors, bit for bit
    reference = reference_embeddings(tiny_model, late)
    for row_uuid, expected in reference.items():
        np.testing.assert_allclose(np.asarray(after[row_uuid], np.float32), expected, rtol=1e-4, atol=1e-5)
    dataset = store.open_dataset(path)
    assert after["broken"] is None and store.fingerprint(dataset) == fingerprint  # rows stay where they were
    metadata = store.embedding_metadata(dataset.schema.field(COLUMN))
    assert (metadata["valid_rows"], metadata["failed_rows"]) == (21, 1)
    assert sorted(failures(str(path), COLUMN).column("uuid").to_pylist()) == ["broken"]
    assert not embed_core.staging_dir(str(path), COLUMN).exists()

    with pytest.raises(CladebenchError, match=f"already has column {COLUMN!r}"):  # nothing left to encode
        embed_dataset(_config(path, tiny_model))


def test_rows_without_a_vector_are_not_filled_with_other_settings(tmp_path: Path, tiny_model: str) -> None:
    """A column is one model's, all through: rows filled with another preprocessing would be another space."""
    path = tmp_path / "settings.lance"
    write_images(path, _images(6))
    embed_dataset(_config(path, tiny_model))
    store.append(pa.table({"uuid": ["late"], "image": pa.array([picture(50)], pa.large_binary())}), path)
    version = store.open_dataset(path).version
    with pytest.raises(CladebenchError, match=r"1 row\(s\) of 'emb_tiny' have no vector.*preprocessing"):
        embed_dataset(_config(path, tiny_model, preprocessing="tol"))
    assert store.open_dataset(path).version == version


def test_on_ray_rows_without_a_vector_are_sent_to_the_local_path(tmp_path: Path, tiny_model: str) -> None:
    """The Ray path commits whole fragments' columns; it refuses, before connecting, a column it would have to
    drop to add a few rows, and says which path fills them."""
    path = tmp_path / "ray-fill.lance"
    write_images(path, _images(4))
    embed_dataset(_config(path, tiny_model))
    store.append(pa.table({"uuid": ["late"], "image": pa.array([picture(50)], pa.large_binary())}), path)
    version = store.open_dataset(path).version
    with pytest.raises(CladebenchError, match=r"1 row\(s\) of 'emb_tiny' have no vector yet; embed without --ray"):
        embed_dataset(_config(path, tiny_model, ray="default"))
    assert store.open_dataset(path).version == version and _vectors(path)["late"] is None


def test_rows_added_at_the_moment_of_the_commit_are_merged_around(tmp_path: Path, tiny_model: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An append landing between the run's last look at the dataset and its merge made Lance refuse the merge
    (a commit conflict, exit 70): the merge is made again on what the other writer committed."""
    import lance

    path = tmp_path / "moment.lance"
    write_images(path, _images(6))
    merge = lance.LanceDataset.merge
    appended: list[bool] = []

    def append_then_merge(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not appended:
            appended.append(True)
            store.append(pa.table({"uuid": ["late"], "image": pa.array([picture(60)], pa.large_binary())}), path)
        return merge(self, *args, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "merge", append_then_merge)
    summary = embed_dataset(_config(path, tiny_model))
    assert (summary.valid, summary.arrived) == (6, 1) and _vectors(path)["late"] is None
