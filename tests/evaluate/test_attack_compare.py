"""compare's text as a person reads it: columns that stay aligned under long per-group metric names, and a label
read from a record that was edited by hand printed on one line with no terminal escape sequences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cladebench.cli import main
from cladebench.evaluate.record import RunRecord
from helpers.toy_dataset import write_toy_dataset


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    toy = write_toy_dataset(tmp_path / "toy.lance")
    for k in ("1", "3"):
        assert main(["eval", "fewshot", str(toy), "--column", "emb_toy", "--out", str(tmp_path / k), "--group-by",
                     "challenge_group", "--shots", "1", "--methods", "knn", "--repetitions", "2", "--group-key",
                     "uuid", "--knn-k", k]) == 0
    return tmp_path / "1", tmp_path / "3"


def test_columns_stay_aligned_under_long_group_metric_names(two_runs: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compare", *map(str, two_runs), "--resamples", "50", "--all-metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("metric "))
    column = header.index("run")
    table = lines[lines.index(header) + 1:]
    rows = [line for line in table if "[1]" in line or "[2]" in line]
    assert any(len(line.split()[0]) > 16 for line in rows)  # e.g. mammals/knn_1shot_balanced
    assert rows and all(line[column - 1:column + 3].strip() in ("[1]", "[2]") for line in rows)


def test_a_hand_edited_label_prints_on_one_line_without_escapes(two_runs: tuple[Path, Path],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    first, second = two_runs
    record = json.loads((second / "run.json").read_text())
    record["label"] = "evil\x1b[2J\nsecond line\t| x"
    (second / "run.json").write_text(json.dumps(record))
    assert RunRecord.read(second).label == "evil [2J second line | x"
    capsys.readouterr()
    assert main(["compare", str(first), str(second), "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "  [2] evil [2J second line | x  " in out


def _relabelled_copy(toy: Path, path: Path) -> Path:
    """The toy dataset with one row's species changed to another species of the set: the same uuids and taxa (the
    next version of a dataset whose curator corrected one label)."""
    import pyarrow as pa

    from cladebench import store

    table = store.read(store.open_dataset(toy))
    for column, value in (("species", "sp1"), ("scientific_name", "Genus sp1")):
        values = table.column(column).to_pylist()
        assert values[0] != value
        values[0] = value
        table = table.set_column(table.column_names.index(column), column, pa.array(values))
    store.write_dataset(table, path)
    return path


def test_runs_whose_rows_carry_other_true_labels_are_not_paired(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs of one embedding on two versions of a dataset (one label corrected): the same uuids, the same taxa,
    but one query's relevant images differ. Pairing them would test the label change, not the runs."""
    toy = write_toy_dataset(tmp_path / "toy.lance")
    relabelled = _relabelled_copy(toy, tmp_path / "toy2.lance")
    for dataset, out in ((toy, "a"), (relabelled, "b")):
        assert main(["eval", "retrieval", str(dataset), "--column", "emb_toy", "--out", str(tmp_path / out),
                     "--group-by", "none"]) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--resamples", "50"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 of the 12 examples" in err[0] and "another true label" in err[0]


def test_the_same_run_given_twice_is_a_usage_error(two_runs: tuple[Path, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A run compared with itself is tied with itself on every metric: never what a person meant."""
    run = two_runs[0]
    capsys.readouterr()
    assert main(["compare", str(run), str(run / "run.json"), str(two_runs[1]), "--resamples", "50"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "twice" in err[0]
    assert main(["report", str(run), str(run), "--out-file", str(run.parent / "r.html")]) == 2
    assert not (run.parent / "r.html").exists()


def test_truths_are_taxa_so_a_shared_common_name_or_another_order_is_no_change() -> None:
    """Under common names two taxa may read alike (cryptic look-alikes), and another label order numbers the same
    taxa otherwise: neither is a changed label. Moving a row to another taxon is."""
    import pyarrow as pa

    from cladebench.evaluate.compare import _other_truths

    uuids = ["a", "b", "c", "d"]
    sci = pa.table({"uuid": uuids, "true_index": [0, 1, 2, 0], "true_label": ["A x", "A y", "B z", "A x"]})
    com = pa.table({"uuid": uuids[::-1], "true_index": [2, 1, 0, 2], "true_label": ["fly", "bee", "fly", "fly"]})
    assert _other_truths(sci, com, same_labels=False) == (0, 4)
    moved = com.set_column(1, "true_index", pa.array([2, 1, 0, 0]))  # "a" now the taxon "b" is
    assert _other_truths(sci, moved, same_labels=False)[0] > 0
    assert _other_truths(sci, sci.set_column(1, "true_index", pa.array([0, 1, 2, 1])), same_labels=True) == (1, 4)
