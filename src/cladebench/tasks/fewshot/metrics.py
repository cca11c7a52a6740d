"""Few-shot metrics from the prediction table: accuracy and balanced accuracy per method and shot count, as a mean
and t-interval over repetitions.

Why a module of its own: metrics are computed from predictions, never inside the task, so `compare-columns` and a
re-analysis get the same numbers from the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.metrics import define_metric, mean_std_ci
from cladebench.tasks.common import Predictions
from cladebench.tasks.fewshot.methods import METHODS

# --- metrics ---------------------------------------------------------------------------------------


T_INTERVAL = ("mean over repetitions; interval: mean +/- t(0.975, N-1) * s / sqrt(N) over the N repetitions "
              "(s the sample standard deviation), clipped to [0, 1]; none when N = 1")

PAIRED_OVER_QUERIES = (
    "two runs on identical splits are compared by a paired bootstrap over query images: each image carries its "
    "share of the metric over every repetition it was a query in (its rows weighted as the mean over repetitions "
    "of each repetition's accuracy, or balanced accuracy, weighs them), and images are resampled with those "
    "shares; BioBench bootstraps the test images of a single split, while here the repetitions stay fixed, so the "
    "interval covers which images were tested, not which support images were drawn")
"""How runs are paired on a few-shot metric (see :func:`per_query_image_values`)."""


def _mean_t_interval(values: Sequence[float], confidence: float = 0.95) -> dict[str, object]:
    """:func:`cladebench.metrics.mean_std_ci` as a record entry: clipped to [0, 1] (accuracies), and None
    rather than NaN for a single repetition, so run.json stays strict JSON."""
    estimate = mean_std_ci(np.asarray(values, dtype=np.float64), confidence)
    if estimate.n < 2:
        return {"value": estimate.value, "low": None, "high": None, "n": estimate.n, "std": None,
                "confidence": confidence}
    return {"value": estimate.value, "low": max(0.0, estimate.low), "high": min(1.0, estimate.high), "n": estimate.n,
            "std": estimate.std, "confidence": confidence}


def metric_name(method: str, shots: int, balanced: bool = False) -> str:
    """``simpleshot_5shot`` or ``simpleshot_5shot_balanced``."""
    return f"{method}_{shots}shot" + ("_balanced" if balanced else "")


def _define(method: str, shots: int, balanced: bool) -> str:
    what = METHODS[method].definition if method in METHODS else method
    score = ("balanced accuracy (mean over classes of the share of the class's query images predicted correctly)"
             if balanced else "accuracy (share of query images predicted correctly)")
    return define_metric(metric_name(method, shots, balanced),
                         f"{what}, with {shots} support image(s) per class: {score} per repetition, {T_INTERVAL}; "
                         f"{PAIRED_OVER_QUERIES}")


def few_shot_summary(table: pa.Table, methods: Sequence[str] | None = None) -> dict[str, dict[str, object]]:
    """Accuracy and balanced accuracy per method and shot count from a prediction table (see the module docstring)."""
    truth = "true_index" if "true_index" in table.column_names else "true_label"  # classes are label indices
    slim = table.select(["method", "shots", "repetition", truth, "correct"])
    slim = slim.set_column(4, "correct", pc.cast(slim.column("correct"), pa.float64()))
    keys = ["method", "shots", "repetition"]
    per_rep = slim.group_by(keys).aggregate([("correct", "mean"), ("correct", "count")])
    per_class = slim.group_by([*keys, truth]).aggregate([("correct", "mean")])
    balanced = per_class.group_by(keys).aggregate([("correct_mean", "mean")])
    accuracy: dict[tuple[str, int], dict[int, tuple[float, int]]] = {}
    for row in per_rep.to_pylist():
        accuracy.setdefault((row["method"], row["shots"]), {})[row["repetition"]] = (row["correct_mean"],
                                                                                     row["correct_count"])
    balanced_of = {(r["method"], r["shots"], r["repetition"]): r["correct_mean_mean"] for r in balanced.to_pylist()}
    order = list(methods) if methods is not None else []
    order += sorted({m for m, _ in accuracy} - set(order))
    metrics: dict[str, dict[str, object]] = {}
    for method in order:
        for shots in sorted(k for m, k in accuracy if m == method):
            reps = sorted(accuracy[(method, shots)])
            pooled = sum(accuracy[(method, shots)][r][1] for r in reps)
            for is_balanced in (False, True):
                values = [balanced_of[(method, shots, r)] if is_balanced else accuracy[(method, shots)][r][0]
                          for r in reps]
                name = _define(method, shots, is_balanced)
                metrics[name] = {**_mean_t_interval(values), "query_examples": pooled,
                                 "per_repetition": [float(v) for v in values], "interval": T_INTERVAL}
    return metrics


def _row_weights(reps: np.ndarray, classes: np.ndarray | None) -> np.ndarray:
    """Each row's weight in the mean over repetitions of a per-repetition mean: 1 / (R n_r) for accuracy, and
    1 / (R C_r n_rc) for balanced accuracy (C_r classes among repetition r's queries, n_rc queries of class c)."""
    rep_codes = np.unique(reps, return_inverse=True)[1]
    n_reps = int(rep_codes.max()) + 1
    if classes is None:
        return 1.0 / (n_reps * np.bincount(rep_codes)[rep_codes])
    cell_codes = np.unique(np.stack([rep_codes, np.unique(classes, return_inverse=True)[1]]), axis=1,
                           return_inverse=True)[1].ravel()
    cell_sizes = np.bincount(cell_codes)
    cell_rep = np.zeros(cell_sizes.size, dtype=np.int64)
    cell_rep[cell_codes] = rep_codes
    classes_per_rep = np.bincount(cell_rep)
    return 1.0 / (n_reps * classes_per_rep[rep_codes] * cell_sizes[cell_codes])


def per_query_image_values(table: pa.Table,
                           task_provenance: dict[str, object]) -> dict[str, tuple[list[object], np.ndarray]]:
    """Each query image's share of every few-shot metric, keyed by uuid, so runs on identical splits pair image
    by image (:data:`PAIRED_OVER_QUERIES`).

    An image's value is U * sum over its rows of weight x correct (U the images of the method and shot count),
    so the mean over images is exactly the stored metric: the mean over repetitions of each repetition's accuracy
    (weight 1 / (R n_r)) or balanced accuracy (1 / (R C_r n_rc)). Classes are label indices where the rows carry
    them, else the true labels.
    """
    del task_provenance  # the rows say everything: method, shots, repetition, truth
    if table.num_rows == 0:
        return {}
    methods = np.asarray(table.column("method").to_pylist(), dtype=object)
    shots = table.column("shots").to_numpy(zero_copy_only=False)
    reps = table.column("repetition").to_numpy(zero_copy_only=False)
    correct = np.asarray(table.column("correct").to_numpy(zero_copy_only=False), dtype=np.float64)
    uuids = np.asarray(table.column("uuid").to_pylist(), dtype=object)
    truth_column = "true_index" if "true_index" in table.column_names else "true_label"
    truth = np.asarray(table.column(truth_column).to_pylist(), dtype=object).astype(str)
    out: dict[str, tuple[list[object], np.ndarray]] = {}
    for method, shot in sorted({(m, int(k)) for m, k in zip(methods, shots, strict=True)}):
        rows = (methods == method) & (shots == shot)
        keys, unit = np.unique(uuids[rows].astype(str), return_inverse=True)
        for balanced in (False, True):
            weights = _row_weights(reps[rows], truth[rows] if balanced else None)
            values = keys.size * np.bincount(unit, weights=weights * correct[rows], minlength=keys.size)
            out[metric_name(method, shot, balanced)] = (keys.tolist(), values)
    return out


def few_shot_metrics(predictions: Predictions) -> dict[str, dict[str, object]]:
    """``<method>_<k>shot`` and ``<method>_<k>shot_balanced`` for every method and shot count of the run."""
    return few_shot_summary(predictions.table, predictions.info.get("methods"))


for _method in METHODS.values():
    define_metric(_method.name, f"few-shot {_method.definition}; {T_INTERVAL}")
