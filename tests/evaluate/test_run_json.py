"""run.json is strict JSON: a metric with nothing to score (NaN) is written as null, and the tools that read
records (compare, report) treat it as undefined rather than as a disagreement or a crash."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa

from cladebench.evaluate.compare import compare_runs
from cladebench.evaluate.compare_text import format_comparison
from cladebench.evaluate.record import RunRecord
from cladebench.report import write_report
from cladebench.tasks.common import Predictions
from cladebench.tasks.zeroshot import zero_shot_metrics


def _unscored_run(directory: Path, seed: int) -> Path:
    """A zero-shot run whose species truth is outside the label set for every row: top-1 at species is NaN."""
    n = 12
    rng = np.random.default_rng(seed)
    table = pa.table({
        "uuid": [f"u{i}" for i in range(n)],
        "true_label": pa.nulls(n, pa.string()),
        "pred_label": [f"species {i % 3}" for i in range(n)],
        "scored": np.zeros(n, dtype=bool),
        "correct_top1": np.zeros(n, dtype=bool),
        "correct_top5": np.zeros(n, dtype=bool),
        "pred_genus": [f"genus {i % 2}" for i in range(n)],
        "correct_genus": rng.uniform(size=n) < 0.5,
        "scored_genus": np.ones(n, dtype=bool),
    })
    info = {"rank": "species", "scored_ranks": ["species", "genus"]}
    metrics = zero_shot_metrics(Predictions(table=table, labels=["species 0", "species 1", "species 2"], info=info))
    assert np.isnan(metrics["top1_species"]["value"])
    provenance = {"dataset": {"uri": "toy.lance", "evaluated_rows": n, "evaluated_fingerprint": "f" * 64},
                  "label_set": {"rank": "species", "size": 3, "labels": ["species 0", "species 1", "species 2"]},
                  "task": info, "model": {"id": f"model-{seed}"}}  # what a run writes: its metrics are recomputed
    return RunRecord(task="zeroshot", metrics=metrics, provenance=provenance,
                     config={"rank": "species"}).write(directory, table)


def test_a_metric_with_nothing_scored_is_null_and_compares_as_undefined(tmp_path: Path) -> None:
    paths = [_unscored_run(tmp_path / "a", 1), _unscored_run(tmp_path / "b", 2)]
    stored = json.loads(paths[0].read_text(), parse_constant=lambda token: (_ for _ in ()).throw(ValueError(token)))
    assert stored["metrics"]["top1_species"]["value"] is None
    assert "metrics.top1_species.value" in stored["provenance"]["non_finite_values"]
    comparison = compare_runs(paths, n_resamples=200)  # the null is not taken for a record that disagrees
    text = format_comparison(comparison, verbose=True)
    assert any(line.startswith("top1_species") and "undefined" in line for line in text.splitlines())
    assert write_report(paths, tmp_path / "r.md", format="md").exists()
