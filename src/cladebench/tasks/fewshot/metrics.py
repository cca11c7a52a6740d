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

from cladebench.metrics import HEIGHT_COLUMN, TOP_HEIGHTS_COLUMN, define_metric, mean_std_ci, top_k_undefined
from cladebench.metrics.hierarchy import RULE, absent_estimates
from cladebench.tasks.common import Predictions
from cladebench.tasks.fewshot.methods import METHODS
from cladebench.taxonomy import RANKS, Rank

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
    """Each query image's share of every few-shot metric but mistake severity, keyed by uuid, so runs on identical
    splits pair image by image (:data:`PAIRED_OVER_QUERIES`).

    An image's value is U * sum over its rows of weight x correct (U the images of the method and shot count),
    so the mean over images is exactly the stored metric: the mean over repetitions of each repetition's accuracy
    (weight 1 / (R n_r)) or balanced accuracy (1 / (R C_r n_rc)). Classes are label indices where the rows carry
    them, else the true labels.
    """
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
        if HEIGHT_COLUMN in table.column_names:
            out.update(_hierarchy_shares(table, rows, uuids, reps, correct, method, shot,
                                         str(task_provenance.get("rank", "species"))))
    return out


def _hierarchy_shares(table: pa.Table, rows: np.ndarray, uuids: np.ndarray, reps: np.ndarray, correct: np.ndarray,
                      method: str, shot: int, label_rank: str) -> dict[str, tuple[list[object], np.ndarray]]:
    """Each query image's share of hdist@1 and @5 and of accuracy at each higher rank (as :func:`per_query_image_values`
    for accuracy: the mean over images is the stored mean over repetitions); mistake severity, a ratio, has none."""
    heights = table.column(HEIGHT_COLUMN).to_numpy(zero_copy_only=False).astype(np.float64)
    depths = table.column("true_depth").to_numpy(zero_copy_only=False).astype(np.int64)
    label_level = int(Rank.parse(label_rank))
    names = hierarchy_names(method, shot, label_rank)
    wanted = [(names["hdist1"], rows, np.where(correct > 0, 0.0, heights))]
    top = _top_heights(table)
    if top is not None and np.isfinite(top[rows]).all():
        wanted.append((names["hdist5"], rows, np.nan_to_num(top.mean(axis=1))))
    for rank in RANKS[:label_level]:
        hit = ((correct > 0) | (heights <= label_level - int(rank))).astype(np.float64)
        wanted.append((names[rank.column], rows & (depths >= int(rank) + 1), hit))
    out: dict[str, tuple[list[object], np.ndarray]] = {}
    for name, mask, value in wanted:
        if not mask.any():
            continue
        keys, unit = np.unique(uuids[mask].astype(str), return_inverse=True)
        weights = _row_weights(reps[mask], None)
        out[name] = (keys.tolist(), keys.size * np.bincount(unit, weights=weights * value[mask], minlength=keys.size))
    return out


HIERARCHY_INTERVAL = ("mean over repetitions; interval: mean +/- t(0.975, N-1) * s / sqrt(N) over the N repetitions "
                      "that have a value (s the sample standard deviation); none when N = 1")


def hierarchy_names(method: str, shots: int, label_rank: str) -> dict[str, str]:
    """The few-shot severity metrics of one method and shot count: mistake severity, hdist@1 and accuracy at each
    rank above the label rank (``simpleshot_5shot_mistake_severity``, ``_hdist1``, ``_genus`` ...)."""
    base = metric_name(method, shots)
    above = RANKS[: Rank.parse(label_rank)]
    return {"severity": f"{base}_mistake_severity", "hdist1": f"{base}_hdist1", "hdist5": f"{base}_hdist5",
            **{rank.column: f"{base}_{rank.column}" for rank in above}}


def _define_hierarchy(method: str, shots: int, label_rank: str) -> dict[str, str]:
    names = hierarchy_names(method, shots, label_rank)
    what = METHODS[method].definition if method in METHODS else method
    define_metric(names["severity"], f"{what}, with {shots} support image(s) per class: mistake severity (mean LCA "
                  f"height of truth and prediction over the wrongly predicted query images) per repetition, "
                  f"{HIERARCHY_INTERVAL}; {RULE}")
    for k in (1, 5):
        define_metric(names[f"hdist{k}"], f"{what}, with {shots} support image(s) per class: hierarchical "
                      f"distance@{k} (mean over the query images of the mean LCA height of truth and each of the "
                      f"method's {k} best classes, 0 when correct) per repetition, {HIERARCHY_INTERVAL}; {RULE}; "
                      "undefined where k is at least the class count")
    for rank in RANKS[: Rank.parse(label_rank)]:
        define_metric(names[rank.column], f"{what}, with {shots} support image(s) per class: accuracy at "
                      f"{rank.column} (share of query images whose predicted class names the true {rank.column} and "
                      f"every rank above it, over the images whose true lineage names them all) per repetition, "
                      f"{T_INTERVAL}")
    return names


def _repetition_estimate(values: Sequence[float], clip: bool) -> dict[str, object]:
    if not values:
        return {"value": None, "low": None, "high": None, "n": 0, "reason": "no repetition has a value"}
    if clip:
        return {**_mean_t_interval(values), "interval": T_INTERVAL}
    estimate = mean_std_ci(np.asarray(values, dtype=np.float64))
    several = estimate.n >= 2
    return {"value": estimate.value, "low": estimate.low if several else None,
            "high": estimate.high if several else None, "n": estimate.n, "std": estimate.std if several else None,
            "confidence": 0.95, "interval": HIERARCHY_INTERVAL}


def few_shot_hierarchy(table: pa.Table, methods: Sequence[str] | None, label_rank: str,
                       hierarchy: dict[str, object] | None, n_classes: int | None = None
                       ) -> dict[str, dict[str, object]]:
    """Mistake severity, hdist@1 and accuracy at every rank above the label rank, per method and shot count, each
    a mean over repetitions (:data:`HIERARCHY_INTERVAL`); from the predictions' ``lca_height`` and ``true_depth``.

    Accuracy at a higher rank r: the prediction's lineage agrees with the truth's down to r (LCA height at most
    the ranks between r and the label rank), over the rows whose true lineage names every rank down to r.
    Predictions without heights (written before them) give none; a hierarchy marked absent gives each without a
    value and with the reason.
    """
    if table.num_rows == 0 or (HEIGHT_COLUMN not in table.column_names and not (hierarchy or {}).get("absent")):
        return {}
    label_level = int(Rank.parse(label_rank))
    methods_of = np.asarray(table.column("method").to_pylist(), dtype=object)
    shots_of = table.column("shots").to_numpy(zero_copy_only=False)
    reps_of = table.column("repetition").to_numpy(zero_copy_only=False)
    has_heights = HEIGHT_COLUMN in table.column_names
    heights = table.column(HEIGHT_COLUMN).to_numpy(zero_copy_only=False).astype(np.int64) if has_heights else None
    depths = table.column("true_depth").to_numpy(zero_copy_only=False).astype(np.int64) if has_heights else None
    correct = np.asarray(table.column("correct").to_numpy(zero_copy_only=False), dtype=bool)
    top = _top_heights(table)
    undefined = top_k_undefined(5, n_classes) if n_classes else None
    order = list(methods) if methods is not None else []
    order += sorted(set(methods_of.tolist()) - set(order))
    metrics: dict[str, dict[str, object]] = {}
    for method in order:
        for shot in sorted({int(k) for k in shots_of[methods_of == method]}):
            names = _define_hierarchy(method, shot, label_rank)
            if heights is None or depths is None:
                metrics.update(absent_estimates(list(names.values()), str((hierarchy or {}).get("absent"))))
                continue
            rows = (methods_of == method) & (shots_of == shot)
            per_rep: dict[str, list[float]] = {name: [] for name in names}
            ranked = top is not None and bool(np.isfinite(top[rows]).all())
            for rep in sorted(set(reps_of[rows].tolist())):
                here = rows & (reps_of == rep)
                wrong = here & ~correct
                if wrong.any():
                    per_rep["severity"].append(float(np.maximum(heights[wrong], 1).mean()))
                per_rep["hdist1"].append(float(np.where(correct[here], 0, heights[here]).mean()))
                if ranked and top is not None:
                    per_rep["hdist5"].append(float(top[here].mean()))
                for rank in RANKS[:label_level]:
                    scored = here & (depths >= int(rank) + 1)
                    if scored.any():
                        hit = correct[scored] | (heights[scored] <= label_level - int(rank))
                        per_rep[rank.column].append(float(hit.mean()))
            for key, name in names.items():
                if key == "hdist5" and (undefined or not ranked):
                    metrics[name] = {"value": None, "low": None, "high": None, "n": 0,
                                     "reason": undefined or "the method ranks no classes beyond its prediction"}
                    continue
                metrics[name] = {**_repetition_estimate(per_rep[key], clip=key not in ("severity", "hdist1", "hdist5")),
                                 "per_repetition": per_rep[key]}
    return metrics


def _top_heights(table: pa.Table) -> np.ndarray | None:
    """Each row's heights of its method's five best classes (n, 5), NaN where a row has fewer; None without them."""
    if TOP_HEIGHTS_COLUMN not in table.column_names:
        return None
    lists = table.column(TOP_HEIGHTS_COLUMN).to_pylist()
    out = np.full((len(lists), 5), np.nan)
    for i, values in enumerate(lists):
        if values is not None and len(values) >= 5:
            out[i] = values[:5]
    return out


def few_shot_metrics(predictions: Predictions) -> dict[str, dict[str, object]]:
    """``<method>_<k>shot`` and ``<method>_<k>shot_balanced`` for every method and shot count of the run, and their
    mistake severity, hdist@1 and accuracy at the ranks above (:func:`few_shot_hierarchy`); a shot count the data
    did not allow (the task's ``shots_skipped``) has its metrics without a value, with the reason, so the gap shows
    where its numbers would be."""
    methods = predictions.info.get("methods")
    metrics = {**few_shot_summary(predictions.table, methods),
               **few_shot_hierarchy(predictions.table, methods, predictions.info.get("rank", "species"),
                                    predictions.info.get("hierarchy"), len(predictions.labels) or None)}
    for skip in predictions.info.get("shots_skipped") or ():
        for method in methods or ():
            for balanced in (False, True):
                metrics[_define(method, int(skip["shots"]), balanced)] = {
                    "value": None, "low": None, "high": None, "n": 0,
                    "reason": f"{skip['shots']}-shot skipped: {skip['reason']}"}
    return metrics


for _method in METHODS.values():
    define_metric(_method.name, f"few-shot {_method.definition}; {T_INTERVAL}")
