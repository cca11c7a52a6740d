"""``cladebench compare`` end to end on run records with planted answers, Holm against statsmodels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import balanced_accuracy_score

from cladebench.cli import main
from cladebench.errors import CladebenchError, SchemaError, UnknownNameError
from cladebench.evaluate.compare import accuracy_columns, compare_runs
from cladebench.evaluate.compare_text import format_comparison
from cladebench.evaluate.record import RunRecord
from cladebench.tasks.common import Predictions
from cladebench.tasks.zeroshot import zero_shot_metrics

multitest = pytest.importorskip("statsmodels.stats.multitest")

N = 500


def planted(rate: float, seed: int, n: int = N) -> np.ndarray:
    """Exactly round(rate * n) correct examples, in a seeded order."""
    correct = np.zeros(n, dtype=bool)
    correct[: round(rate * n)] = True
    return np.random.default_rng(seed).permutation(correct)


def write_run(directory: Path, correct: np.ndarray, *, model: str = "model-a", uuids: list[str] | None = None,
              task: str = "zeroshot", unscored: int = 0, order_seed: int | None = None) -> Path:
    """A zero-shot run record whose stored metrics come from the task's own metric function.

    The last ``unscored`` examples have a true taxon outside the label set (scored = False) at species
    rank; genus hits equal species hits or better, so the genus metric is tested as well.
    """
    n = correct.size
    uuids = uuids or [f"u{i:04d}" for i in range(n)]
    scored = np.arange(n) < n - unscored
    correct_top1 = correct & scored
    genus = correct_top1 | (np.arange(n) % 7 == 0)
    table = pa.table({
        "uuid": uuids,
        # an example's taxon follows its uuid (u0007 is species 7 in every run), as a dataset's rows do
        "true_label": [f"species {int(u[1:]) % 9}" if s else None for u, s in zip(uuids, scored, strict=True)],
        "pred_label": [f"species {int(u[1:]) % 9 if c else (int(u[1:]) + 1) % 9}"
                       for u, c in zip(uuids, correct_top1, strict=True)],
        "scored": scored,
        "correct_top1": correct_top1,
        "correct_top5": correct_top1 | (np.arange(n) % 3 == 0) & scored,
        "pred_genus": [f"genus {i % 4}" for i in range(n)],
        "correct_genus": genus,
        "scored_genus": np.ones(n, dtype=bool),
    })
    info = {"rank": "species", "scored_ranks": ["species", "genus"]}
    labels = [f"species {i}" for i in range(9)]
    if order_seed is not None:  # the same predictions written in another row order
        table = table.take(np.random.default_rng(order_seed).permutation(n))
    # From the predictions as written, as a run computes them: a bootstrap's interval follows the row order.
    metrics = zero_shot_metrics(Predictions(table=table, labels=labels, info=info))
    provenance = {"dataset": {"uri": "toy.lance", "evaluated_rows": n, "evaluated_fingerprint": "f" * 64},
                  "label_set": {"rank": "species", "size": 9, "labels": labels}, "model": {"id": model}, "task": info}
    record = RunRecord(task=task, metrics=metrics, provenance=provenance, config={"rank": "species"})
    return record.write(directory, table)


def test_mapping_matches_the_zero_shot_metrics(tmp_path: Path) -> None:
    """Every metric zero-shot reports maps to columns whose mean over the mask is the stored value."""
    path = write_run(tmp_path / "a", planted(0.7, 0), unscored=20)
    record = RunRecord.read(path)
    table = record.predictions(path)
    assert set(record.metrics) == {"top1_species", "top5_species", "top1_genus", "balanced_accuracy_species"}
    assert accuracy_columns("balanced_accuracy_species", "species") is None  # not a mean of hits: shown, not tested
    scored = table.filter(table.column("scored"))
    assert record.metrics["balanced_accuracy_species"]["value"] == pytest.approx(balanced_accuracy_score(
        scored.column("true_label").to_pylist(), scored.column("pred_label").to_pylist()))
    for name, estimate in record.metrics.items():
        if name.startswith("balanced_"):
            continue
        columns = accuracy_columns(name, "species")
        assert columns is not None, name
        mask = np.asarray(table.column(columns[1]), dtype=bool)
        hits = np.asarray(table.column(columns[0]), dtype=bool)[mask]
        assert (hits.mean(), hits.size) == (pytest.approx(estimate["value"]), estimate["n"])
    assert accuracy_columns("top5_genus", "species") is None
    assert accuracy_columns("macro_f1", "species") is None
    assert accuracy_columns("top1_genus", "genus") == ("correct_top1", "scored")


def test_identical_runs_are_tied(tmp_path: Path) -> None:
    correct = planted(0.7, 1)
    paths = [write_run(tmp_path / "a", correct), write_run(tmp_path / "b", correct, model="model-b")]
    comparison = compare_runs(paths, n_resamples=2_000)
    assert [m.metric for m in comparison.metrics] == ["top1_species", "top5_species", "balanced_accuracy_species",
                                                      "top1_genus"]
    for entry in comparison.metrics:
        if entry.metric.startswith("balanced_"):
            assert entry.differences == () and "no paired test" in entry.note
            continue
        (difference,) = entry.differences
        assert difference.paired.difference == 0.0 and difference.paired.p_value == 1.0
        assert difference.p_adjusted == 1.0 and not difference.holds
    text = format_comparison(comparison, verbose=True)
    assert "tied" in text and "holds" not in text.split("'holds' when")[1]
    assert "model-a" in text and "model-b" in text and str(paths[1]) in text


def test_planted_large_difference_holds(tmp_path: Path) -> None:
    paths = [write_run(tmp_path / "a", planted(0.9, 2)), write_run(tmp_path / "b", planted(0.6, 3), model="model-b")]
    comparison = compare_runs(paths, metric="top1_species")
    (entry,) = comparison.metrics
    (difference,) = entry.differences
    assert difference.run == 1 and difference.holds and difference.p_adjusted < 0.01
    assert difference.paired.difference == pytest.approx(-0.3)
    assert difference.paired.high < 0 and difference.paired.n == N
    assert entry.estimates[0]["value"] == pytest.approx(0.9) and entry.estimates[1]["value"] == pytest.approx(0.6)
    text = format_comparison(comparison, verbose=True)
    line = [line for line in text.splitlines() if line.strip().startswith("[2]")][-1]
    assert "-30.00" in line and line.endswith("holds")


def test_three_runs_are_holm_corrected_like_statsmodels(tmp_path: Path) -> None:
    reference = planted(0.7, 4)
    rng = np.random.default_rng(5)
    runs = [reference]
    for flips in (12, 30, 60):  # increasingly different runs; flips to wrong answers lower the accuracy
        changed = reference.copy()
        changed[rng.choice(np.flatnonzero(reference), size=flips, replace=False)] = False
        changed[rng.choice(np.flatnonzero(~reference), size=flips // 3, replace=False)] = True
        runs.append(changed)
    paths = [write_run(tmp_path / f"run{i}", c, model=f"model-{i}") for i, c in enumerate(runs)]
    comparison = compare_runs(paths, metric="top1_species", n_resamples=5_000, seed=3)
    differences = comparison.metrics[0].differences
    assert [d.run for d in differences] == [1, 2, 3]
    raw = np.array([d.paired.p_value for d in differences])
    reject, adjusted, _, _ = multitest.multipletests(raw, alpha=0.05, method="holm")
    np.testing.assert_allclose([d.p_adjusted for d in differences], adjusted, atol=1e-12)
    assert [d.holds for d in differences] == list(reject)
    assert not all(reject) and any(reject), "the planted case must have both a tie and a difference that holds"


def test_row_order_does_not_matter(tmp_path: Path) -> None:
    """Pairing is by uuid: the same predictions in another row order give the same comparison."""
    a, b = planted(0.8, 6), planted(0.7, 7)
    in_order = compare_runs([write_run(tmp_path / "a", a), write_run(tmp_path / "b", b)], n_resamples=2_000)
    shuffled = compare_runs([write_run(tmp_path / "a2", a), write_run(tmp_path / "b2", b, order_seed=1)],
                            n_resamples=2_000)
    for x, y in zip(in_order.metrics, shuffled.metrics, strict=True):
        if x.metric.startswith("balanced_"):  # shown, not paired
            assert x.differences == y.differences == ()
            continue
        assert x.differences[0].paired == y.differences[0].paired


def test_unscored_examples_are_left_out(tmp_path: Path) -> None:
    paths = [write_run(tmp_path / "a", planted(0.8, 8), unscored=40),
             write_run(tmp_path / "b", planted(0.8, 9), unscored=40)]
    comparison = compare_runs(paths, n_resamples=1_000)
    by_name = {m.metric: m for m in comparison.metrics}
    assert by_name["top1_species"].differences[0].paired.n == N - 40
    assert by_name["top1_genus"].differences[0].paired.n == N


def test_different_examples_are_refused_unless_intersected(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", planted(0.8, 10))
    b = write_run(tmp_path / "b", planted(0.8, 11, n=480), uuids=[f"u{i:04d}" for i in range(20, 500)])
    with pytest.raises(CladebenchError) as error:
        compare_runs([a, b])
    message = str(error.value)
    assert str(a) in message and str(b) in message and "500 and 480" in message and "480 in common" in message
    comparison = compare_runs([a, b], intersect=True, n_resamples=1_000)
    assert comparison.intersected and comparison.examples == 480
    assert comparison.metrics[0].differences[0].paired.n == 480
    text = format_comparison(comparison, verbose=True)
    assert "only the examples every run evaluated" in text and "(on 480 paired examples)" in text


def test_different_tasks_and_inconsistent_records_are_refused(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", planted(0.8, 12))
    other_task = write_run(tmp_path / "b", planted(0.8, 12), task="fewshot")
    with pytest.raises(CladebenchError, match="same task"):
        compare_runs([a, other_task])
    tampered = write_run(tmp_path / "c", planted(0.8, 13))
    record = json.loads(tampered.read_text())
    record["metrics"]["top1_species"]["value"] = 0.95
    tampered.write_text(json.dumps(record))
    with pytest.raises(SchemaError, match=r"its top1_species reads 0\.95 on n = 500, but its predictions give 0\.8 "):
        compare_runs([a, tampered])
    with pytest.raises(UnknownNameError, match="top1_specie"):
        compare_runs([a, write_run(tmp_path / "d", planted(0.7, 12))], metric="top1_specie")
    with pytest.raises(CladebenchError, match="at least two"):
        compare_runs([a])


def test_a_metric_the_predictions_do_not_give_is_refused(tmp_path: Path) -> None:
    """Every stored metric is checked, not only the accuracies that are paired: one added by hand, or a balanced
    accuracy (no per-example column) edited, is refused, naming the run and the metric."""
    paths = [write_run(tmp_path / "a", planted(0.8, 14)), write_run(tmp_path / "b", planted(0.7, 15))]
    record = json.loads(paths[1].read_text())
    record["metrics"]["macro_f1"] = {"value": 0.5, "low": 0.45, "high": 0.55, "n": N}
    paths[1].write_text(json.dumps(record))
    with pytest.raises(SchemaError, match=r"b/run\.json: not compared: its metric macro_f1 is not one its pred"):
        compare_runs(paths, n_resamples=1_000)
    del record["metrics"]["macro_f1"]
    record["metrics"]["balanced_accuracy_species"]["value"] = 0.99
    paths[1].write_text(json.dumps(record))
    with pytest.raises(SchemaError, match=r"its balanced_accuracy_species reads 0\.99 on n = 500, but its pred"):
        compare_runs(paths, n_resamples=1_000, metric="top1_species")  # whichever metric is asked for


def test_cli_text_json_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path / "a", planted(0.9, 16))
    b = write_run(tmp_path / "b", planted(0.6, 17), model="model-b")
    assert main(["compare", str(a), str(b.parent), "--metric", "top1_species", "--resamples", "2000"]) == 0
    out = capsys.readouterr().out
    assert "top1_species" in out and "model-b" in out and "holds" in out and "-30.00" in out

    assert main(["compare", str(a), str(b), "--json", "--seed", "4", "--resamples", "2000"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["task"] == "zeroshot" and result["settings"]["seed"] == 4
    assert [r["model_id"] for r in result["runs"]] == ["model-a", "model-b"]
    top1 = result["metrics"][0]
    assert top1["metric"] == "top1_species" and top1["differences"][0]["holds"] is True
    assert top1["differences"][0]["difference"] == pytest.approx(-0.3)

    c = write_run(tmp_path / "c", planted(0.6, 18, n=400), uuids=[f"u{i:04d}" for i in range(400)])
    assert main(["compare", str(a), str(c)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "different examples" in err and "--intersect" in err

    assert main(["compare", str(a), str(b), "--metric", "top9_species"]) == 2
    assert "unknown metric" in capsys.readouterr().err

    assert main(["compare", str(a), str(tmp_path / "missing")]) == 1
    assert "no run record" in capsys.readouterr().err


def _fewshot_run(directory: Path, correct: np.ndarray, repetitions: int) -> Path:
    """A few-shot record of one method at one shot count: one row per query image and repetition, its metrics
    from the task's own metrics function."""
    from cladebench.tasks import get_task

    n = correct.size
    truth = np.arange(n) % 4
    table = pa.table({"uuid": [f"u{i % (n // repetitions):03d}" for i in range(n)],
                      "method": ["simpleshot"] * n, "shots": np.ones(n, dtype=np.int32),
                      "repetition": np.repeat(np.arange(repetitions, dtype=np.int32), n // repetitions),
                      "true_index": truth, "pred_index": np.where(correct, truth, (truth + 1) % 4),
                      "correct": correct})
    labels = [f"species {i}" for i in range(4)]
    metrics = get_task("fewshot").metrics(Predictions(table=table, labels=labels, info={}))
    record = RunRecord(task="fewshot", metrics=metrics, config={},
                       provenance={"model": {"id": f"model-{directory.name}"}, "task": {},
                                   "label_set": {"rank": "species", "size": 4, "labels": labels}})
    return record.write(directory, table)


def test_runs_with_several_rows_per_example_are_paired_by_query_image(tmp_path: Path) -> None:
    """Few-shot predictions hold one row per query and repetition: example sets are checked, and query images are
    paired (not rows)."""
    paths = [_fewshot_run(tmp_path / "a", np.arange(120) % 3 == 0, 3),
             _fewshot_run(tmp_path / "b", np.arange(120) % 2 == 0, 3)]
    comparison = compare_runs(paths, n_resamples=500)
    entry = next(m for m in comparison.metrics if m.metric == "simpleshot_1shot")
    assert comparison.examples == 40 and entry.unit == "query images"
    stored = [RunRecord.read(path).metrics["simpleshot_1shot"]["value"] for path in paths]
    text = format_comparison(comparison, verbose=True)
    assert all(f"{100 * value:.2f}%" in text for value in stored)
    _fewshot_run(tmp_path / "c", np.ones(90, dtype=bool), 3)
    with pytest.raises(CladebenchError, match="40 and 30 examples"):
        compare_runs([paths[0], tmp_path / "c"])


def test_one_run_to_compare_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`compare RUN` alone is how the command was called, not a failure of the run: exit 2, one line."""
    assert main(["compare", str(tmp_path / "run.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compare needs at least two run records" in err[0]
