"""``cladebench suite --out DIR`` where DIR already holds the user's files: a ``report.html`` or ``results.parquet``
cladebench did not write is refused before any run (one line, documented exit code) and left as it was; the
user's other files stay."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.cli import main

SUITE = ["suite", "--model", "bioclip", "--benchmarks", "inat-coobserved", "--device", "cpu"]
"""A suite that would try to build an unbuilt benchmark (offline: skipped): nothing that needs a model or data."""


def test_a_report_of_the_users_in_out_is_refused_before_any_run_and_kept(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CLADEBENCH_MIRROR", raising=False)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.html").write_text("<html>my own report</html>", encoding="utf-8")
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    assert main([*SUITE, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a suite report cladebench wrote" in err
    assert (out / "report.html").read_text(encoding="utf-8") == "<html>my own report</html>"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "report.html"]  # no run, no table


def test_a_results_table_of_the_users_in_out_is_refused_before_any_run_and_kept(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CLADEBENCH_MIRROR", raising=False)
    out = tmp_path / "mine"
    out.mkdir()
    pq.write_table(pa.table({"x": [1, 2]}), out / "results.parquet")
    assert main([*SUITE, "--out", str(out), "--no-report"]) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a suite's results table" in err
    assert pq.read_table(out / "results.parquet").column("x").to_pylist() == [1, 2]
    assert sorted(p.name for p in out.iterdir()) == ["results.parquet"]


def test_out_must_be_empty_or_a_suite_folder_cladebench_made(tmp_path, capsys, monkeypatch):
    """``--out`` at a dataset or at a folder of the user's photos got a table, a report and a lock written in."""
    from cladebench import store
    from cladebench.curate.staging import read_marker

    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CLADEBENCH_MIRROR", raising=False)
    store.write_dataset(pa.table({"uuid": ["a"], "image": [b"x"], "species": ["Bufo bufo"]}), tmp_path / "data")
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "toad.jpg").write_bytes(b"a photo")
    for out in (tmp_path / "data", tmp_path / "photos"):
        before = sorted(p.relative_to(out) for p in out.rglob("*"))
        assert main([*SUITE, "--out", str(out)]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "is not empty and is not a suite folder" in err, err
        assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    (tmp_path / "empty").mkdir()
    for _ in range(2):  # an empty folder, then the suite folder it became
        assert main([*SUITE, "--out", str(tmp_path / "empty")]) == 1  # offline, the benchmark is skipped
        assert "no run of the suite could run" in capsys.readouterr().err
        assert read_marker(tmp_path / "empty")["writer"] == "suite"
