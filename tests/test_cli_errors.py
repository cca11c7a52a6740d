"""Ordinary conditions end with one line and their documented exit code, never 70 (a bug): read-only output
folders, outputs that are files or folders, missing or non-UTF-8 inputs, filters with a second statement,
predictions that are not the ones a run recorded. Real subprocesses, real files."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench import store
from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS
from cladebench.evaluate.record import RunRecord


def run(*args: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    prefix = _unprivileged_prefix() if unprivileged else []
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([*prefix, sys.executable, "-m", "cladebench", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def _unprivileged_prefix() -> list[str]:
    """Root writes into a read-only (0555) folder anyway; without CAP_DAC_OVERRIDE it obeys the mode bits."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to make a folder read-only for the command")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner"]


def one_line_error(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "internal error" not in lines[0] and "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture
def read_only(tmp_path: Path) -> Path:
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "toy.lance"
    store.write_dataset(pa.table({"uuid": ["a", "b", "c"], "image": pa.array([b"1", b"2", b"3"], pa.large_binary()),
                                  "scientific_name": ["A a", "B b", "C c"]}), path)
    return path


def _run_record(root: Path, *, undefined: str | None = None) -> Path:
    """A rerank run written by hand (planted scores), enough for a report; ``undefined`` names a metric whose
    value is planted as NaN (a record its predictions do not give)."""
    from cladebench.tasks.common import Predictions
    from cladebench.tasks.rerank import rerank_metrics

    rng = np.random.default_rng(0)
    rows = [{"uuid": f"{q}-{j}", "query_id": q, "query": f"query {q}", "relevant": j % 3 == 0,
             "score": float(rng.uniform())} for q in (1, 2) for j in range(8)]
    table = pa.Table.from_pylist(rows)
    metrics = rerank_metrics(Predictions(table=table, labels=[], info={"rerank_k": 100}))
    if undefined is not None:
        metrics[undefined] = {**metrics[undefined], "value": float("nan")}
    record = RunRecord(task="rerank", metrics=metrics, config={"rerank_k": 100},
                       provenance={"dataset": {"uri": str(root / "gone.lance"), "version": 1},
                                   "model": {"id": "org/model"}, "task": {"rerank_k": 100}, "metrics": {}})
    return record.write(root / "run", table)


# --- subset ------------------------------------------------------------------------------------------


def test_subset_into_a_read_only_folder(dataset: Path, read_only: Path) -> None:
    result = run("subset", str(dataset), "--out", str(read_only / "copy.lance"), unprivileged=True)
    one_line_error(result, 1, str(read_only), "permission denied")
    assert list(read_only.iterdir()) == []


def test_subset_onto_a_file_or_under_one(dataset: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    one_line_error(run("subset", str(dataset), "--out", str(notes)), 1, "is a file")
    one_line_error(run("subset", str(dataset), "--out", str(notes / "x.lance")), 1, "is a file")
    assert notes.read_text() == "mine"


def test_subset_with_a_second_statement_is_a_usage_error(dataset: Path, tmp_path: Path) -> None:
    result = run("subset", str(dataset), "--where", "1=1; DROP TABLE x", "--out", str(tmp_path / "out.lance"))
    one_line_error(result, 2, "--where", "one SQL expression")
    assert not (tmp_path / "out.lance").exists()


def test_subset_of_a_dataset_without_uuid_writes_nothing(tmp_path: Path) -> None:
    import lance

    source = tmp_path / "raw.lance"
    lance.write_dataset(pa.table({"id": ["a"], "image": pa.array([b"x"], pa.large_binary())}), str(source))
    result = run("subset", str(source), "--out", str(tmp_path / "out.lance"))
    one_line_error(result, 4, "no 'uuid' column")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw.lance"]


# --- report --------------------------------------------------------------------------------------------


def test_report_to_a_folder_leaves_nothing(tmp_path: Path) -> None:
    run_path = _run_record(tmp_path)
    folder = tmp_path / "reports"
    folder.mkdir()
    one_line_error(run("report", str(run_path), "--out-file", str(folder)), 1, "is a folder")
    assert list(folder.iterdir()) == [] and not list(tmp_path.glob(".*tmp"))


def test_report_into_a_read_only_folder(tmp_path: Path, read_only: Path) -> None:
    run_path = _run_record(tmp_path)
    result = run("report", str(run_path), "--out-file", str(read_only / "report.html"), unprivileged=True)
    one_line_error(result, 1, str(read_only), "permission denied")
    assert list(read_only.iterdir()) == []


def test_report_and_compare_refuse_predictions_that_are_not_the_recorded_ones(tmp_path: Path) -> None:
    run_path = _run_record(tmp_path)
    assert run("report", str(run_path), "--out-file", str(tmp_path / "ok.html")).returncode == 0
    predictions = run_path.parent / "predictions.parquet"
    data = predictions.read_bytes()
    predictions.write_bytes(data[: len(data) // 2])  # cut short
    for result in (run("report", str(run_path), "--out-file", str(tmp_path / "bad.html")),
                   run("compare", str(run_path), str(run_path))):
        one_line_error(result, 4, str(predictions), "SHA-256", "changed or cut short")
    assert not (tmp_path / "bad.html").exists()


def test_a_metric_nulled_by_hand_is_refused_by_report_and_compare(tmp_path: Path) -> None:
    """A stored value its predictions do not give, null included, never reaches a table (a metric its predictions
    leave undefined is written and shown as undefined: tests/evaluate/test_run_json.py)."""
    run_path = _run_record(tmp_path, undefined="ap@100")
    assert json.loads(run_path.read_text())["metrics"]["ap@100"]["value"] is None
    for result in (run("report", str(run_path), "--out-file", str(tmp_path / "r.md"), "--format", "md"),
                   run("compare", str(run_path), str(run_path))):
        one_line_error(result, 4, str(run_path), "ap@100 reads")
    assert not (tmp_path / "r.md").exists()


# --- load crypticbio -----------------------------------------------------------------------------------


def _csv(path: Path, body: bytes) -> Path:
    path.write_bytes(",".join(CSV_COLUMNS).encode() + b"\n" + body)
    return path


ROW = (b"Felis catus,2020.0,5.0,1.0,10.0,20.0,https://example.invalid/photos/1/original.jpg,Animalia,Chordata,"
       b"Mammalia,Carnivora,Felidae,Felis,['cat']\n")


@pytest.mark.parametrize("case", ["missing", "folder", "not_utf8"])
def test_load_crypticbio_input_problems(tmp_path: Path, case: str) -> None:
    csv_path = tmp_path / "CrypticBio-Common.csv"
    if case == "folder":
        csv_path.mkdir()
    elif case == "not_utf8":
        _csv(csv_path, ROW + ROW.replace(b"Felis catus", b"F\xe9lis catus"))
    result = run("load", "crypticbio", str(csv_path), "--out", str(tmp_path / "out.lance"))
    expected = {"missing": "no such file", "folder": "is a folder", "not_utf8": "line 3: not UTF-8 text"}[case]
    one_line_error(result, 4 if case == "not_utf8" else 1, str(csv_path), expected)
    assert not (tmp_path / "out.lance").exists()


@pytest.mark.parametrize("case", ["missing", "folder", "not_utf8"])
def test_load_crypticbio_lookup_problems(tmp_path: Path, case: str) -> None:
    csv_path = _csv(tmp_path / "CrypticBio-Common.csv", ROW)
    lookup = tmp_path / "lookup.tsv"
    if case == "folder":
        lookup.mkdir()
    elif case == "not_utf8":
        lookup.write_bytes(b"Felis catus\tFelis silvestris\n\xff\xfe\tx\n")
    result = run("load", "crypticbio", str(csv_path), "--lookup", str(lookup), "--out", str(tmp_path / "out.lance"))
    expected = {"missing": "no such file", "folder": "is a folder", "not_utf8": "line 2: not UTF-8 text"}[case]
    one_line_error(result, 4 if case == "not_utf8" else 1, str(lookup), expected)


def test_load_crypticbio_into_a_read_only_folder_fails_before_downloading(tmp_path: Path, read_only: Path) -> None:
    csv_path = _csv(tmp_path / "CrypticBio-Common.csv", ROW)
    result = run("load", "crypticbio", str(csv_path), "--out", str(read_only / "out.lance"),
                 "--download-dir", str(tmp_path / "downloads"), unprivileged=True)
    one_line_error(result, 1, str(read_only), "permission denied")
    assert not (tmp_path / "downloads").exists()  # nothing was fetched


# --- eval ----------------------------------------------------------------------------------------------


def test_eval_into_a_read_only_folder_or_onto_a_file(dataset: Path, tmp_path: Path, read_only: Path) -> None:
    result = run("eval", "zeroshot", str(dataset), "--model", "local-dir:/nowhere", "--out", str(read_only / "run"),
                 unprivileged=True)
    one_line_error(result, 1, str(read_only), "permission denied")
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    one_line_error(run("eval", "zeroshot", str(dataset), "--model", "local-dir:/nowhere", "--out", str(notes)), 1,
                   "is a file")
    assert notes.read_text() == "mine"


@pytest.mark.parametrize("scale", ["nan", "-1", "inf", "0"])
def test_eval_with_a_logit_scale_that_is_not_a_positive_number(dataset: Path, tmp_path: Path, scale: str) -> None:
    result = run("eval", "zeroshot", str(dataset), "--model", "local-dir:/nowhere", "--out", str(tmp_path / "run"),
                 "--logit-scale", scale)
    one_line_error(result, 2, "--logit-scale", repr(scale))
    assert not (tmp_path / "run").exists()


def test_run_record_writes_never_leave_temp_files_and_name_the_folder(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    record = RunRecord(task="t", metrics={}, provenance={}, config={})
    from cladebench.errors import CladebenchError

    with pytest.raises(CladebenchError, match=r"notes\.txt"):
        record.write(notes, pa.table({"uuid": ["a"]}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert json.loads(json.dumps(record.metrics)) == {}


# --- the safety net in cli.main -------------------------------------------------------------------------


@dataclass(frozen=True)
class _FailConfig:
    """A verb that fails as it is told to."""

    path: str
    """Where it pretends to write."""
    kind: str = "permission"
    """Which failure."""


def _fail(config: _FailConfig) -> int:
    if config.kind == "permission":
        raise PermissionError(errno.EACCES, "Permission denied", config.path)
    if config.kind == "lance-full-disk":  # how Lance (Rust) reports it: no errno attribute, the number in the text
        raise OSError("LanceError(IO): Generic LocalFileSystem error: No space left on device (os error 28), "
                      "/home/runner/work/lance/rust/lance-io/src/object_store.rs:1013:21")
    raise ValueError("a bug")


@pytest.mark.parametrize(("kind", "code", "needle"), [("permission", 1, "/some/where: permission denied"),
                                                      ("lance-full-disk", 1, "no space left on device"),
                                                      ("bug", 70, "internal error")])
def test_environment_failures_anywhere_end_in_one_line(monkeypatch, capsys, kind: str, code: int,
                                                       needle: str) -> None:
    from cladebench import cli

    monkeypatch.setitem(cli.VERBS, "fail", cli.Verb(name="fail", help="fails", config=_FailConfig, run=_fail))
    assert cli.main(["fail", "/some/where", "--kind", kind]) == code
    err = capsys.readouterr().err
    assert needle in err.splitlines()[0]
    assert len(err.strip().splitlines()) == (2 if code == 70 else 1)  # a bug adds the --debug hint


# --- build and demo -------------------------------------------------------------------------------------


def test_build_coobserved_into_a_read_only_folder(tmp_path: Path, read_only: Path) -> None:
    from cladebench.synthetic.inat_export import ExportConfig, write_export

    export = write_export(tmp_path / "export", ExportConfig(n_photos=300, n_coobserved=8))
    result = run("build", "coobserved", "--export-dir", str(export.export_dir), "--out", str(read_only / "out"),
                 unprivileged=True)
    one_line_error(result, 1, str(read_only), "cannot write")
    assert list(read_only.iterdir()) == []


def test_demo_into_a_read_only_folder_fails_before_any_work(read_only: Path) -> None:
    result = run("demo", "--out", str(read_only / "demo"), unprivileged=True)
    one_line_error(result, 1, str(read_only), "cannot write")
    assert list(read_only.iterdir()) == []
