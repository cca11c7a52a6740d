"""A run record lists its label strings only while the label set is small: a larger one (a tree-of-life set has
1.1M species) is kept by count, digest and source, and every reader of run records still reads the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cladebench.cli import main
from cladebench.evaluate import run as run_module
from cladebench.evaluate.record import RunRecord
from cladebench.report.runs import load_runs
from cladebench.tasks.common import label_digest
from helpers.toy_dataset import write_toy_dataset

SPECIES = ["Genus sp0", "Genus sp1", "Genus sp2"]
"""The toy dataset's classes, as the retrieval task names them."""


def _retrieval(dataset: Path, out: Path) -> int:
    return main(["eval", "retrieval", str(dataset), "--column", "emb_toy", "--group-by", "none", "--out", str(out)])


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_toy_dataset(tmp_path / "toy.lance")


def test_a_small_label_set_is_listed_with_its_count_and_digest(dataset: Path, tmp_path: Path, capsys) -> None:
    assert _retrieval(dataset, tmp_path / "run") == 0, capsys.readouterr().err
    label_set = json.loads((tmp_path / "run" / "run.json").read_text())["provenance"]["label_set"]
    assert label_set["labels"] is not None and sorted(label_set["labels"]) == SPECIES
    assert label_set["labels_count"] == 3 and label_set["labels_sha256"] == label_digest(label_set["labels"])
    assert "labels_omitted" not in label_set


def test_a_large_label_set_is_kept_by_count_and_digest_and_every_reader_reads_it(
        dataset: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    assert _retrieval(dataset, tmp_path / "listed") == 0, capsys.readouterr().err
    listed = RunRecord.read(tmp_path / "listed").provenance["label_set"]
    monkeypatch.setattr(run_module, "LABELS_IN_RECORD", 2)  # the toy's 3 labels now count as a large set
    assert _retrieval(dataset, tmp_path / "large") == 0, capsys.readouterr().err
    text = (tmp_path / "large" / "run.json").read_text()
    label_set = json.loads(text)["provenance"]["label_set"]
    assert label_set["labels"] is None and not any(name in text for name in SPECIES[1:])
    assert label_set["labels_count"] == 3 and label_set["labels_sha256"] == listed["labels_sha256"]
    assert "more than the 2" in label_set["labels_omitted"] and label_set["size"] == 3
    # The report (HTML and Markdown), compare and the run loader shared by serve and the suite read it.
    assert [run.record.provenance["label_set"]["labels_count"] for run in load_runs([tmp_path / "large"])] == [3]
    assert main(["report", str(tmp_path / "listed"), str(tmp_path / "large"), "--out-file",
                 str(tmp_path / "report.html")]) == 0, capsys.readouterr().err
    assert main(["report", str(tmp_path / "large"), "--format", "md", "--out-file", str(tmp_path / "report.md")]) == 0
    assert label_set["sha256"] in (tmp_path / "report.md").read_text()
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "listed"), str(tmp_path / "large")]) == 0, capsys.readouterr().err
