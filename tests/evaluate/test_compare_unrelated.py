"""Only comparable runs are compared: runs whose evaluated examples share nothing are refused by ``compare`` and
``report`` (exit 2, one line naming both datasets and their fingerprints); runs sharing part of their examples are
told how many; a metric no run could be paired on names no best."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from cladebench import store
from cladebench.cli import main
from helpers.toy_dataset import write_toy_dataset

ARGS = ("--column", "emb_toy", "--methods", "knn", "--repetitions", "2", "--group-key", "uuid", "--group-by", "none")


def _renamed(toy: Path, path: Path, keep: int) -> Path:
    """The toy dataset with every uuid but the first ``keep`` renamed: other photos, as far as a run can tell."""
    table = store.read(store.open_dataset(toy))
    uuids = [u if i < keep else f"other-{u}" for i, u in enumerate(table.column("uuid").to_pylist())]
    store.write_dataset(table.set_column(table.column_names.index("uuid"), "uuid", pa.array(uuids)), path)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("unrelated")
    toy = write_toy_dataset(root / "toy.lance")
    datasets = {"toy": toy, "own": _renamed(toy, root / "own.lance", 0), "half": _renamed(toy, root / "half.lance", 6)}
    out = {}
    for name, path in datasets.items():
        out[name] = root / name
        assert main(["eval", "fewshot", str(path), "--out", str(out[name]), "--shots", "1", *ARGS]) == 0
    out["two_shots"] = root / "two_shots"
    assert main(["eval", "fewshot", str(toy), "--out", str(out["two_shots"]), "--shots", "2", *ARGS]) == 0
    return out


def test_runs_sharing_no_example_are_refused_by_compare_and_report(runs, tmp_path, capsys):
    capsys.readouterr()
    for argv in (["compare", str(runs["toy"]), str(runs["own"])],
                 ["report", str(runs["toy"]), str(runs["own"]), "--out-file", str(tmp_path / "r.html")]):
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        err = captured.err.strip().splitlines()
        assert len(err) == 1 and not captured.out, argv
        assert "share no evaluated example" in err[0]
        assert "toy.lance (fingerprint " in err[0] and "own.lance (fingerprint " in err[0]
        fingerprints = [part.split(")")[0] for part in err[0].split("(fingerprint ")[1:]]
        assert len(fingerprints) == 2 and fingerprints[0] != fingerprints[1]
    assert not (tmp_path / "r.html").exists()


def test_runs_sharing_part_of_their_examples_say_how_many(runs, capsys):
    capsys.readouterr()
    # other query images draw other splits: shown beside the reference, never paired, and the overlap is said
    assert main(["compare", str(runs["toy"]), str(runs["half"]), "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "fewshot: 2 runs, not all on the same examples"
    assert "  [2] shares 6 of its 12 examples with [1] (of 12)" in out.splitlines()
    assert "best" not in out.replace("so none is best", "")


def test_a_metric_no_run_is_paired_on_names_no_best(runs, capsys):
    capsys.readouterr()
    assert main(["compare", str(runs["toy"]), str(runs["two_shots"]), "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "verdict: no metric could be paired between the runs, so none is best" in out
    assert "best" not in out.replace("so none is best", "")
