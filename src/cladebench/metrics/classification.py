"""Classification scores from per-example predictions: top-k hits, balanced accuracy, macro-F1.

Why a module of its own: zero-shot, few-shot and geo score labels the same way; these are the scores, each
equal to its reference (a stable descending sort for top-k, sklearn for the class-balanced ones) and
written so the bootstrap can score many resamples at once (``weights``).
"""

from __future__ import annotations

import numpy as np

from cladebench.metrics.definitions import define_metric
from cladebench.metrics.intervals import WILSON


def top_k_hits(scores: np.ndarray, targets: np.ndarray, k: int) -> np.ndarray:
    """Whether each row's target is among its ``k`` highest scores (ties broken toward lower index).

    ``targets`` of -1 mark examples whose true label is not in the label set: never a hit.
    The target's rank is counted (labels scoring higher, plus equal-scoring labels at a lower index)
    instead of sorting every row: the same answer as a stable descending sort, without its time and
    memory on 10k x 10k score matrices (``bench/zeroshot_scale.py``).
    """
    scores = np.asarray(scores)
    targets = np.asarray(targets)
    valid = targets >= 0
    if scores.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    safe = np.where(valid, targets, 0)
    target_scores = scores[np.arange(scores.shape[0]), safe][:, None]
    above = np.count_nonzero(scores > target_scores, axis=1)
    tied_before = np.count_nonzero((scores == target_scores) & (np.arange(scores.shape[1]) < safe[:, None]), axis=1)
    # A non-finite target score has no rank (NaN compares false with everything): never a hit.
    return (above + tied_before < k) & valid & np.isfinite(target_scores[:, 0])


define_metric("top1", "share of examples whose highest-scoring label is the true label; " + WILSON)
define_metric("top5", "share of examples whose true label is among the 5 highest-scoring labels; " + WILSON)


def top_k_undefined(k: int, n_labels: int) -> str | None:
    """Why top-``k`` accuracy over ``n_labels`` labels is undefined, or None when it is defined.

    With k at least the label count every label is among the top k, so top-k is 100% by construction and says
    nothing about the model. CLIP_benchmark reports top-5 as NaN below 5 classes; here exactly k labels are
    undefined too, since they give the same 100%.
    """
    if k >= n_labels:
        return (f"undefined: top-{k} over {n_labels} label{'s' if n_labels != 1 else ''} holds every label, so it is "
                "100% by construction")
    return None


# --- class-balanced scores -----------------------------------------------------------------------


def _encode_labels(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Both label arrays as codes into their sorted union, and the size of that union.

    Labels may be any sortable values of one kind (strings or integers); ``None`` is not a label, so
    unscored examples must be dropped before calling.
    """
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.ndim != 1 or y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred must be 1-D and aligned, got shapes {y_true.shape} and {y_pred.shape}")
    if y_true.size == 0:
        raise ValueError("no examples")
    classes, codes = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    return codes[: y_true.size], codes[y_true.size:], int(classes.size)


def _class_totals(codes: np.ndarray, n_classes: int, weights: np.ndarray) -> np.ndarray:
    """Per-class sums of ``weights`` (shape (batch, n)) by class code: shape (batch, n_classes)."""
    batch = weights.shape[0]
    flat = (np.arange(batch)[:, None] * n_classes + codes[None, :]).ravel()
    return np.bincount(flat, weights=weights.ravel(), minlength=batch * n_classes).reshape(batch, n_classes)


def _confusion_margins(y_true: np.ndarray, y_pred: np.ndarray,
                       weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-class true counts, predicted counts and hits, one row per row of ``weights`` (or one row)."""
    true_codes, pred_codes, n_classes = _encode_labels(y_true, y_pred)
    w = np.ones((1, true_codes.size)) if weights is None else np.atleast_2d(np.asarray(weights, dtype=np.float64))
    if w.shape[1] != true_codes.size:
        raise ValueError(f"weights have {w.shape[1]} columns for {true_codes.size} examples")
    true_count = _class_totals(true_codes, n_classes, w)
    pred_count = _class_totals(pred_codes, n_classes, w)
    hits = _class_totals(true_codes, n_classes, w * (true_codes == pred_codes)[None, :])
    return true_count, pred_count, hits


def _batch_result(values: np.ndarray, weights: np.ndarray | None) -> float | np.ndarray:
    return values if weights is not None and np.ndim(weights) == 2 else float(values[0])


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray,
                      weights: np.ndarray | None = None) -> float | np.ndarray:
    """Mean over the classes present in ``y_true`` of each class's recall (hits / true examples of the class).

    Equal to ``sklearn.metrics.balanced_accuracy_score`` (not adjusted): a class that is only ever
    predicted has no recall and is not averaged. Reported beside top-1 because a long-tailed test set
    lets a model score high top-1 on its few common species alone.

    ``weights`` are example multiplicities: shape (n,) gives one number, as if each example were
    repeated that many times; shape (batch, n) gives one number per row, which is how the bootstrap
    scores many resamples at once (see :func:`bootstrap_ci`).
    """
    true_count, _, hits = _confusion_margins(y_true, y_pred, weights)
    present = true_count > 0
    recall = np.divide(hits, true_count, out=np.zeros_like(hits), where=present)
    return _batch_result(recall.sum(axis=1) / present.sum(axis=1), weights)


def macro_f1(y_true: np.ndarray, y_pred: np.ndarray, weights: np.ndarray | None = None) -> float | np.ndarray:
    """Unweighted mean of per-class F1 over the labels present in ``y_true`` or ``y_pred``.

    Per class, F1 = 2 TP / (2 TP + FP + FN) = 2 TP / (true examples + predicted examples), which is 0
    for a class never hit. The label set is the union of the labels that occur in either array (in the
    resample, when ``weights`` are given), exactly sklearn's default: equal to
    ``sklearn.metrics.f1_score(y_true, y_pred, average="macro", labels=np.union1d(y_true, y_pred))``.
    Labels of the label set that occur in neither array are left out rather than counted as F1 = 0,
    so the number does not depend on how many unused labels a label set carries.

    ``weights``: as in :func:`balanced_accuracy`.
    """
    true_count, pred_count, hits = _confusion_margins(y_true, y_pred, weights)
    support = true_count + pred_count
    present = support > 0
    f1 = np.divide(2 * hits, support, out=np.zeros_like(hits), where=present)
    return _batch_result(f1.sum(axis=1) / present.sum(axis=1), weights)


define_metric("balanced_accuracy", "mean over the classes present among the true labels of per-class recall "
              "(sklearn balanced_accuracy_score, not adjusted)")
define_metric("macro_f1", "unweighted mean of per-class F1 = 2TP/(2TP+FP+FN) over the labels occurring among the "
              "true or predicted labels (sklearn f1_score average='macro')")
