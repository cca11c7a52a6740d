"""The leaderboard compares only comparable runs: a genus-rank run beside species-rank runs is not compared (and
the board says why in words, whichever run is best), each cell says what it was computed on, and an undefined
value (top-5 over five labels) is n/a with its reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("jinja2", reason="reports need jinja2 (the report extra)")

from cladebench.evaluate.record import RunRecord
from cladebench.report.runs import load_runs
from cladebench.report.sections.leaderboard import board
from cladebench.tasks.common import Predictions
from cladebench.tasks.zeroshot import zero_shot_metrics

N = 120


def zero_shot_run(directory: Path, rate: float, *, rank: str, labels: int, seed: int, n: int = N) -> Path:
    """A zero-shot record of ``n`` images at ``rank`` over ``labels`` labels, with a rolled-up genus column at
    species rank."""
    correct = np.random.default_rng(seed).random(n) < rate
    texts = [f"taxon {i}" for i in range(labels)]
    truth = np.arange(n) % labels
    predicted = np.where(correct, truth, (truth + 1) % labels)
    columns = {"uuid": [f"u{i:03d}" for i in range(n)], "true_label": [texts[t] for t in truth],
               "pred_label": [texts[p] for p in predicted], "true_index": truth, "pred_index": predicted,
               "scored": np.ones(n, dtype=bool), "correct_top1": correct, "correct_top5": correct | (truth % 2 == 0)}
    ranks = [rank]
    if rank == "species":
        columns.update(correct_genus=correct | (truth % 3 == 0), scored_genus=np.ones(n, dtype=bool))
        ranks.append("genus")
    table = pa.table(columns)
    info = {"rank": rank, "scored_ranks": ranks}
    metrics = zero_shot_metrics(Predictions(table=table, labels=texts, info=info))
    provenance = {"dataset": {"evaluated_fingerprint": "f" * 64}, "model": {"id": f"model-{seed}"}, "task": info,
                  "label_set": {"rank": rank, "size": labels, "sha256": f"{rank}-{labels}", "labels": texts}}
    return RunRecord(task="zeroshot", metrics=metrics, provenance=provenance,
                     config={"rank": rank, "model": f"model-{seed}"}).write(directory, table)


def test_a_genus_rank_run_is_not_compared_with_species_rank_runs(tmp_path: Path) -> None:
    paths = [zero_shot_run(tmp_path / "a", 0.5, rank="species", labels=12, seed=1),
             zero_shot_run(tmp_path / "b", 0.55, rank="species", labels=12, seed=2),
             zero_shot_run(tmp_path / "genus", 0.9, rank="genus", labels=4, seed=3)]
    runs = load_runs(paths)
    shown = board("zeroshot", runs)
    genus = shown.metrics.index("top1_genus")
    marks = [row.cells[genus].mark for row in shown.rows]  # the runs in the order given
    assert marks[2] == "not compared" and {marks[0], marks[1]} <= {"best", "tied", "worse"}
    assert any("genus rank vs species rank" in note for note in shown.notes), shown.notes
    assert not any("correct_" in note or "scored" in note for note in shown.notes)  # no internal column names
    top5 = shown.metrics.index("top5_genus")
    cell = shown.rows[2].cells[top5]
    assert cell.value == "n/a" and "top-5 over 4 labels" in cell.reason
    top1 = shown.metrics.index("top1_species")
    assert shown.rows[0].cells[top1].on == f"{N} images, 12 classes"
    assert shown.rows[0].cells[top1].unit == "images"


def test_the_report_opens_with_the_answer_compare_gives(tmp_path: Path) -> None:
    from cladebench.evaluate.compare import compare_runs
    from cladebench.evaluate.compare_text import format_comparison
    from cladebench.report.answer import answers

    paths = [zero_shot_run(tmp_path / "weak", 0.3, rank="species", labels=12, seed=4),
             zero_shot_run(tmp_path / "strong", 0.9, rank="species", labels=12, seed=5)]
    (answer,) = answers(load_runs(paths))
    (line,) = answer.lines
    assert line.startswith("top1_species: best: [2] model-5 ") and "beats [1] model-4 by " in line
    assert " points [" in line and "(p " in line and "groups" not in line  # one pooled value, no groups to count
    # the same sentence, word for word, as compare's verdict
    assert f"  {line}" in format_comparison(compare_runs(paths, metric="top1_species")).splitlines()
    # two equal runs: no best, a tie
    same = [zero_shot_run(tmp_path / name, 0.6, rank="species", labels=12, seed=6) for name in ("x", "y")]
    (tied,) = answers(load_runs(same)).pop().lines
    assert tied.startswith("top1_species: no winner") and "tied with [2]" in tied
    marks = {cell.mark for row in board("zeroshot", load_runs(same)).rows for cell in row.cells if cell}
    assert "best" not in marks and "tied" in marks


def test_the_board_reads_each_runs_predictions_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ties are decided per metric; each decision read every run's record and predictions again (a report of 50
    runs read them once per headline metric). The board compares the runs as the report read them."""
    paths = [zero_shot_run(tmp_path / name, rate, rank="species", labels=12, seed=seed)
             for name, rate, seed in (("a", 0.5, 1), ("b", 0.55, 2), ("c", 0.6, 3))]
    reads: list[str] = []
    original = RunRecord.predictions

    def counted(self: RunRecord, path: str | Path) -> pa.Table:
        reads.append(str(path))
        return original(self, path)

    monkeypatch.setattr(RunRecord, "predictions", counted)
    runs = load_runs(paths)
    shown = board("zeroshot", runs)
    assert len(shown.metrics) >= 3 and all(row.cells[0].mark for row in shown.rows)
    assert sorted(reads) == sorted(str(p) for p in paths), reads


def test_what_sets_a_run_apart_is_said_before_its_other_examples(tmp_path: Path) -> None:
    """A run on other examples that is also scored differently says how (the rank), not only that its examples
    differ: the rank is why they differ."""
    from cladebench.report.sections.leaderboard import apart, cohorts

    paths = [zero_shot_run(tmp_path / "a", 0.5, rank="species", labels=12, seed=1),
             zero_shot_run(tmp_path / "genus", 0.9, rank="genus", labels=4, seed=3, n=N - 20)]
    (note,) = apart(cohorts(load_runs(paths)))
    assert note.endswith("not compared with [1] model-1: genus rank vs species rank; evaluated on other examples")
