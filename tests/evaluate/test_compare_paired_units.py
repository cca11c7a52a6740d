"""``compare`` pairs few-shot runs query image by query image and retrieval runs query by query, pairs only runs
that can be compared (and says why not in words), matches ``--metric`` in every group and ends with the verdict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cladebench.errors import CladebenchError
from cladebench.evaluate.compare import comparability_of, compare_runs, incomparable
from cladebench.evaluate.compare_text import format_comparison
from cladebench.evaluate.record import RunRecord
from cladebench.tasks.fewshot import few_shot_summary
from cladebench.tasks.retrieval import retrieval_summary

UUIDS = [f"u{i:03d}" for i in range(120)]


def as_version_1(path: Path) -> Path:
    """The record as version 1 wrote it (no comparability entry: its facts are derived when it is read), as the
    records these tests make by hand hold none."""
    import json

    record = json.loads(path.read_text())
    record["record_version"] = 1
    path.write_text(json.dumps(record))
    return path


def few_shot_run(directory: Path, rate: float, *, seed: int, shots: tuple[int, ...] = (1,), classes: int = 12,
                 candidates: int = 12, split: str = "s" * 64, pool: int = len(UUIDS)) -> Path:
    """A few-shot record on one fixed split (the same queries in every run): 3 repetitions, each with its own
    queries; each query right with probability ``rate``, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    pieces = []
    for repetition in range(3):
        queries = np.random.default_rng(100 + repetition).choice(pool, size=90, replace=False)
        truth = [f"species {q % classes}" for q in queries]
        correct = rng.random(queries.size) < rate
        pieces.append(pa.table({
            "uuid": [UUIDS[q] for q in queries], "method": ["simpleshot"] * queries.size,
            "shots": pa.array(np.full(queries.size, shots[0]), pa.int32()),
            "repetition": pa.array(np.full(queries.size, repetition), pa.int32()),
            "true_label": truth, "pred_label": [t if c else "species x" for t, c in zip(truth, correct, strict=True)],
            "correct": correct}))
    table = pa.concat_tables(pieces)
    provenance = {"dataset": {"evaluated_fingerprint": "f" * 64}, "model": {"id": f"model-{seed}"},
                  "label_set": {"rank": "species", "size": classes, "candidates": candidates,
                                "sha256": f"labels-{classes}"},
                  "split": {"fingerprint": split}, "task": {"rank": "species"}}
    record = RunRecord(task="fewshot", metrics=few_shot_summary(table, ["simpleshot"]), provenance=provenance,
                       config={"rank": "species", "shots": list(shots)})
    return as_version_1(record.write(directory, table))


def test_few_shot_runs_on_identical_splits_pair_query_images(tmp_path: Path) -> None:
    weak = few_shot_run(tmp_path / "weak", 0.45, seed=1)
    strong = few_shot_run(tmp_path / "strong", 0.8, seed=2)
    same = few_shot_run(tmp_path / "same", 0.45, seed=1)
    comparison = compare_runs([weak, strong, same], n_resamples=2_000)
    by_name = {entry.metric: entry for entry in comparison.metrics}
    for name in ("simpleshot_1shot", "simpleshot_1shot_balanced"):
        entry = by_name[name]
        assert entry.unit == "query images" and [d.run for d in entry.differences] == [1, 2]
        stronger, identical = entry.differences
        # the paired difference is exactly the difference of the stored means over repetitions
        expected = entry.estimates[1]["value"] - entry.estimates[0]["value"]
        assert stronger.paired.difference == pytest.approx(expected)
        assert stronger.holds and stronger.paired.low > 0
        assert identical.paired.difference == 0.0 and not identical.holds
        assert stronger.paired.n == len(set(UUIDS))  # every image was a query in some repetition
    text = format_comparison(comparison, verbose=True)
    assert "3 reps of 270 query images in all, 12 classes" in text
    lines = text.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("verdict"))
    # the verdict comes first, before the table; runs are numbered from 1, as in the report
    assert verdict < next(i for i, line in enumerate(lines) if line.startswith("metric"))
    assert lines[verdict + 1].startswith("  simpleshot_1shot: best: [2] model-2")
    assert "beats [1] model-1" in lines[verdict + 1] and "120 query images)" in lines[verdict + 1]


def test_few_shot_runs_with_other_shots_or_splits_are_not_paired(tmp_path: Path) -> None:
    one = few_shot_run(tmp_path / "one", 0.5, seed=3)
    five = few_shot_run(tmp_path / "five", 0.9, seed=4, shots=(1, 5), classes=3)  # only 3 species have 5+
    # other splits query other images: shown beside the others, not refused as "different examples"
    other_split = few_shot_run(tmp_path / "split", 0.5, seed=5, split="t" * 64, pool=100)
    comparison = compare_runs([one, five, other_split], n_resamples=500)
    entry = comparison.metrics[0]
    assert entry.differences == ()
    assert "run [2] not paired: 5-shot scores 3 of 12 species vs 1-shot" in entry.note
    assert "run [3] not paired: different few-shot splits" in entry.note
    # the 5-shot run scores higher on its 3 species, but is no rival: with no run paired, no run is best
    assert comparison.verdicts == ()
    assert "verdict: no metric could be paired between the runs, so none is best" in (
        format_comparison(comparison).splitlines())
    assert "shots" not in (incomparable(RunRecord.read(one), RunRecord.read(other_split)) or "")


def retrieval_run(directory: Path, quality: float, *, seed: int, rank: str = "species") -> Path:
    """A retrieval record: 150 queries, per-query values drawn from ``seed`` and raised by ``quality``."""
    rng = np.random.default_rng(seed)
    n = 150
    values = np.clip(rng.random((5, n)) * 0.6 + quality, 0, 1)
    defined = np.arange(n) % 25 != 0  # a few queries with no relevant image in their gallery
    table = pa.table({"uuid": UUIDS[:n] + [f"v{i}" for i in range(n - len(UUIDS[:n]))],
                      "true_label": [f"species {i % 7}" for i in range(n)], "defined": defined,
                      "ap_full": values[0], "ap_at_k": values[1], "reciprocal_rank": values[2],
                      "precision_at_k": values[3], "recall_at_k": values[4]})
    metrics = retrieval_summary(table, 10, rank)
    provenance = {"dataset": {"evaluated_fingerprint": "f" * 64}, "model": {"id": f"model-{seed}"},
                  "label_set": {"rank": rank, "size": 7, "sha256": "labels"}, "task": {"rank": rank, "k": 10}}
    return as_version_1(RunRecord(task="retrieval", metrics=metrics, provenance=provenance,
                                  config={"rank": rank}).write(directory, table))


def test_retrieval_runs_pair_query_by_query(tmp_path: Path) -> None:
    paths = [retrieval_run(tmp_path / "a", 0.2, seed=6), retrieval_run(tmp_path / "b", 0.35, seed=6)]
    comparison = compare_runs(paths, n_resamples=1_000)
    names = [entry.metric for entry in comparison.metrics]
    assert "map_species" in names and "mrr_species_class_mean" in names
    for entry in comparison.metrics:
        assert entry.unit == "queries", entry.metric
        (difference,) = entry.differences
        expected = entry.estimates[1]["value"] - entry.estimates[0]["value"]
        assert difference.paired.difference == pytest.approx(expected) and difference.paired.n == 144
        assert difference.holds
    assert "144 queries" in format_comparison(comparison, verbose=True)


def test_runs_at_another_rank_are_said_in_words_and_not_paired(tmp_path: Path) -> None:
    species = retrieval_run(tmp_path / "species", 0.2, seed=7)
    genus = retrieval_run(tmp_path / "genus", 0.2, seed=8, rank="genus")
    assert comparability_of(RunRecord.read(genus))["rank"] == "genus"
    assert incomparable(RunRecord.read(species), RunRecord.read(genus)) == "genus rank vs species rank"
    comparison = compare_runs([species, genus], n_resamples=200)
    entry = next(e for e in comparison.metrics if e.metric == "map_species")
    assert entry.differences == () and "run [2] does not report it" in entry.note


def test_a_stored_comparability_entry_is_read_as_the_same_facts(tmp_path: Path) -> None:
    """A record with the comparability entry ``eval`` writes and one without it give the same facts, group by
    group; the entry's own values are read where it has them."""
    path = few_shot_run(tmp_path / "a", 0.5, seed=9)
    record = RunRecord.read(path)
    derived = comparability_of(record)
    record.provenance["comparability"] = {
        "task": "fewshot", "rows_sha256": "f" * 64, "label_set_sha256": "digest of every group's",
        "label_sets_sha256": {"None": "labels-12"}, "rank": "species", "split_sha256": "digest", "shots": [1],
        "gallery": None}
    assert comparability_of(record) == derived
    record.provenance["comparability"].update(rank="genus", label_sets_sha256={"None": "other"},
                                              gallery={"rule": "...", "group_key": "source_id"})
    facts = comparability_of(record)
    assert (facts["rank"], facts["label_set_sha256"], facts["gallery"]) == ("genus", "other", "source_id")


def grouped_zero_shot_run(directory: Path, rates: dict[str, float], *, seed: int) -> Path:
    """A zero-shot record evaluated per challenge group, as `eval` writes one: ``GROUP/metric`` names and a
    ``group`` column, 200 images per group right with the group's rate."""
    from cladebench.tasks.common import Predictions
    from cladebench.tasks.zeroshot import zero_shot_metrics

    rng = np.random.default_rng(seed)
    pieces, metrics = [], {}
    for group, rate in rates.items():
        n = 200
        correct = rng.random(n) < rate
        truth = [f"{group} {i % 6}" for i in range(n)]
        table = pa.table({"uuid": [f"{group}-{i:03d}" for i in range(n)], "true_label": truth,
                          "pred_label": [t if c else f"{group} x" for t, c in zip(truth, correct, strict=True)],
                          "scored": np.ones(n, dtype=bool), "correct_top1": correct,
                          "correct_top5": correct | (np.arange(n) % 2 == 0)})
        labels = [f"{group} {i}" for i in range(6)]
        info = {"rank": "species", "scored_ranks": ["species"]}
        found = zero_shot_metrics(Predictions(table=table, labels=labels, info=info))
        metrics.update({f"{group}/{name}": value for name, value in found.items()})
        pieces.append(table.append_column("group", pa.array([group] * n)))
    provenance = {"dataset": {"evaluated_fingerprint": "f" * 64}, "model": {"id": f"model-{seed}"},
                  "groups": {"column": "challenge_group", "values": list(rates)},
                  "task": info, "task_by_group": {g: info for g in rates},
                  "label_sets": {g: {"rank": "species", "size": 6, "sha256": g,
                                     "labels": [f"{g} {i}" for i in range(6)]} for g in rates}}
    return as_version_1(RunRecord(task="zeroshot", metrics=metrics, provenance=provenance,
                                  config={"rank": "species"}).write(directory, pa.concat_tables(pieces)))


def test_metric_matches_in_every_group_and_the_verdict_counts_groups(tmp_path: Path) -> None:
    rates = {"birds": 0.5, "mammals": 0.5, "moths": 0.5}
    paths = [grouped_zero_shot_run(tmp_path / "a", rates, seed=10),
             grouped_zero_shot_run(tmp_path / "b", {"birds": 0.9, "mammals": 0.9, "moths": 0.5}, seed=11)]
    comparison = compare_runs(paths, metric="top1_species", n_resamples=2_000)
    assert [entry.metric for entry in comparison.metrics] == [f"{g}/top1_species" for g in rates]
    (verdict,) = comparison.verdicts
    assert verdict.best == 1 and verdict.metric == "top1_species"
    ((run, tally),) = verdict.against
    assert run == 0 and tally["groups"] == 3 and tally["better"] == 2 and tally["tied"] == 1
    assert "better on 2 of 3 groups (by 37.0 to 44.0 points), tied on 1" in format_comparison(comparison, verbose=True)
    with pytest.raises(CladebenchError) as error:
        compare_runs(paths, metric="top1_specie")
    assert "top1_species" in str(error.value) and "birds/" not in str(error.value)


def test_name_styles_of_one_label_set_pair_and_other_label_sets_do_not(tmp_path: Path) -> None:
    import json

    rates = {"birds": 0.5, "mammals": 0.6}
    sci = grouped_zero_shot_run(tmp_path / "sci", rates, seed=12)
    paths = [sci, grouped_zero_shot_run(tmp_path / "com", rates, seed=13),
             grouped_zero_shot_run(tmp_path / "wider", rates, seed=14)]
    for path, style, digest, size in zip(paths, ("sci", "com", "sci"), ("a", "b", "c"), (6, 6, 9), strict=True):
        record = json.loads(path.read_text())
        for entry in record["provenance"]["label_sets"].values():
            entry.update(name_style=style, sha256=digest, size=size)
        path.write_text(json.dumps(record))
    comparison = compare_runs(paths, metric="birds/top1_species", n_resamples=500)
    (entry,) = comparison.metrics
    assert [d.run for d in entry.differences] == [1]
    assert entry.unpaired == ((2, "different label sets (9 vs 6 labels)"),)


def test_splits_are_said_only_where_a_split_was_drawn() -> None:
    """Zero-shot and retrieval draw no split (kind none): a grouped and a pooled run of them are not said to have
    different few-shot splits, though their keys' digests of those empty splits differ; drawn splits still are."""
    def record(digest: str, split: dict) -> RunRecord:
        return RunRecord(task="retrieval", metrics={}, config={}, provenance={
            "split": split, "comparability": {"split_sha256": digest, "rank": "species"}})

    none = {"kind": "none: every labelled image queries every other labelled image outside its group"}
    assert incomparable(record("a", none), record("b", none)) is None
    drawn = [record(digest, {"kind": "seeded", "fingerprint": digest}) for digest in ("a", "b")]
    assert "different few-shot splits" in incomparable(*drawn)


def test_compare_of_runs_with_nothing_paired_marks_no_run_best(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    """Two few-shot runs on other splits printed "best" for one of them on every metric, nothing compared."""
    from cladebench.cli import main

    one = few_shot_run(tmp_path / "one", 0.5, seed=3)
    other = few_shot_run(tmp_path / "other", 0.9, seed=5, split="t" * 64, pool=100)
    assert main(["compare", str(one), str(other)]) == 0
    out = capsys.readouterr().out
    assert "best" not in out.replace("so none is best", "")
    assert "run [2] not paired: different few-shot splits" in out  # the verdict says why, by default too
    assert "verdict: no metric could be paired between the runs, so none is best" in out.splitlines()


def test_a_leaderboard_cell_marks_no_run_best_when_none_is_paired(tmp_path: Path) -> None:
    from cladebench.evaluate.marks import marks_against_best

    paths = [few_shot_run(tmp_path / "one", 0.5, seed=3),
             few_shot_run(tmp_path / "other", 0.9, seed=5, split="t" * 64, pool=100)]
    metric = "simpleshot_1shot"
    found = marks_against_best(metric, paths, [RunRecord.read(p).metrics[metric] for p in paths], n_resamples=200)
    assert found.marks == {0: "not compared", 1: "not compared"} and 0 in found.unpaired
