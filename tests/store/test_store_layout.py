"""The store and embed packages' shape, and the helpers every stage shares through the store.

Why: ``embed``'s two paths (``local``, ``ray``) build on ``core`` and never on the dispatcher that chooses
between them; tasks read embedding columns through the store, never through ``embed`` (which sits below them,
but whose job is writing columns). And row normalisation, SQL literals and atomic writes each have one
definition. (That no store or embed module imports its own package's ``__init__`` is a rule for every package:
``tests/test_shape.py``.)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import cladebench
from cladebench import store
from cladebench.paths import atomic_write
from cladebench.store.embeddings import normalise_rows
from cladebench.store.sql import sql_literal
from helpers.source_imports import cladebench_imports as _imports

PACKAGE = Path(cladebench.__file__).parent


def test_the_embed_paths_import_neither_the_dispatcher_nor_each_other() -> None:
    for name, other in (("local", "cladebench.embed.ray"), ("ray", "cladebench.embed.local"),
                        ("ray_actor", "cladebench.embed.local"), ("core", "cladebench.embed.local"),
                        ("core", "cladebench.embed.ray")):
        imported = _imports(PACKAGE / "embed" / f"{name}.py")
        assert other not in imported and not any(i.startswith(other + ".") for i in imported), name


def test_no_task_imports_embed() -> None:
    offenders = {str(p.relative_to(PACKAGE)) for p in sorted((PACKAGE / "tasks").rglob("*.py"))
                 if any(i == "cladebench.embed" or i.startswith("cladebench.embed.") for i in _imports(p))}
    assert not offenders


def test_normalise_rows_keeps_each_callers_dtype_and_zero_rows() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((5, 7))
    vectors[2] = 0.0
    unit32 = normalise_rows(vectors)  # the default: float32, as the zero-shot and rerank scores are
    assert unit32.dtype == np.float32
    reference = vectors.astype(np.float32)
    reference = reference / np.maximum(np.linalg.norm(reference, axis=1, keepdims=True), 1e-12)
    np.testing.assert_array_equal(unit32, reference)
    assert not unit32[2].any()  # an all-zero row stays all zero: it has no direction to give

    unit64 = normalise_rows(vectors, dtype=None)  # the input's own dtype (few-shot works in float64)
    assert unit64.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(np.delete(unit64, 2, axis=0), axis=1), 1.0, rtol=0, atol=1e-15)
    assert normalise_rows(vectors.astype(np.float32), dtype=None).dtype == np.float32

    with np.errstate(invalid="ignore"):
        raw = normalise_rows(vectors, dtype=np.float64, floor=0.0)  # as the division makes it
    assert np.isnan(raw[2]).all() and np.isfinite(np.delete(raw, 2, axis=0)).all()
    np.testing.assert_allclose(normalise_rows(np.array([3.0, 4.0])), [0.6, 0.8], rtol=1e-6)  # one vector


def test_sql_literal_keeps_a_quote_inside_one_value(tmp_path: Path) -> None:
    names = ["Anas d'Orbigny", "Anas d", "x' OR '1'='1"]
    table = pa.table({"uuid": ["a", "b", "c"], "image": pa.array([b""] * 3, pa.large_binary()),
                      "scientific_name": names})
    dataset = store.write_dataset(table, tmp_path / "quotes.lance")
    for uuid, name in zip(["a", "b", "c"], names, strict=True):
        found = store.read(dataset, columns=["uuid"], where=f"scientific_name = {sql_literal(name)}")
        assert found.column("uuid").to_pylist() == [uuid]
    assert sql_literal("it's") == "'it''s'"


@pytest.mark.parametrize("durable", [False, True])
def test_atomic_write_leaves_the_old_file_when_the_rename_fails(tmp_path: Path, durable: bool,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.json"
    atomic_write(path, b"old", durable=durable)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]

    def killed(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, b"new", durable=durable)
    monkeypatch.undo()
    assert path.read_bytes() == b"old"  # whole, never part of the new one
    atomic_write(path, b"new", durable=durable)
    assert path.read_bytes() == b"new"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="zombies are read from /proc")
def test_a_killed_process_not_yet_reaped_is_not_alive() -> None:
    """A staging folder's writer killed by its parent and not yet reaped still answers a signal probe; it runs
    nothing, so what it left may be cleaned."""
    import signal
    import subprocess
    import sys
    import time

    from cladebench.store import process_alive

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert process_alive(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert not process_alive(child.pid)
    finally:
        child.wait()
    assert not process_alive(child.pid)
