"""The few-shot task: read the labelled rows, plan the splits, run every method on every split, record the settings.

Why a module of its own: it ties the pieces together (:mod:`~cladebench.tasks.labelled_rows`,
:mod:`~cladebench.tasks.fewshot.splits`, :mod:`~cladebench.tasks.fewshot.methods`) into predictions, one row per
(method, shots, repetition, query image); the metrics are computed from them in
:mod:`~cladebench.tasks.fewshot.metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cladebench.errors import CladebenchError, NotEvaluableError
from cladebench.tasks.common import Predictions, column_metadata, label_digest, resolve_embedding_column
from cladebench.tasks.fewshot.config import FewShotConfig
from cladebench.tasks.fewshot.methods import METHODS, SIMPLESHOT_PROTOCOLS
from cladebench.tasks.fewshot.splits import SplitPlan, few_shot_splits
from cladebench.tasks.labelled_rows import LABEL_STYLE, LabelledRows, read_labelled_rows
from cladebench.taxonomy import Rank

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder


def plan_splits(rows: LabelledRows, config: FewShotConfig) -> SplitPlan:
    """The run's splits over ``rows``, with the config's shots, repetitions, seed and query minimum."""
    return few_shot_splits(rows.labels, rows.groups, rows.uuids, shots=config.shots, repetitions=config.repetitions,
                           seed=config.seed, min_test_per_class=config.min_test_per_class, classes=rows.classes)


def predict_splits(vectors: np.ndarray, plan: SplitPlan, uuids: Sequence[str],
                   config: FewShotConfig) -> tuple[pa.Table, dict[str, list[dict[str, object]]]]:
    """Run every configured method on every split: one row per (method, shots, repetition, query image).

    Returns the prediction table and, per method, what it chose on each split (shots, repetition, details).
    """
    if len(plan.classes) < 2:  # a grouped run leaves this group out with the reason and evaluates the others
        raise NotEvaluableError(f"few-shot needs at least 2 classes with enough images; {len(plan.classes)} qualify "
                                f"({len(plan.skipped)} skipped: too few groups for {max(plan.shots)} shots)")
    vectors = np.asarray(vectors)
    label_array = np.asarray(plan.classes, dtype=object)
    uuid_array = np.asarray(uuids, dtype=object)
    pieces: list[pa.Table] = []
    chosen: dict[str, list[dict[str, object]]] = {}
    for method in config.methods:
        fit_predict = METHODS[method].fit_predict
        for split in plan.splits:
            truth = plan.targets[split.query]
            output = fit_predict(vectors[split.support], plan.targets[split.support], vectors[split.query], config)
            n = len(split.query)
            pieces.append(pa.table({
                "uuid": pa.array(uuid_array[split.query], pa.string()),
                "method": pa.array([method] * n, pa.string()),
                "shots": pa.array(np.full(n, split.shots), pa.int32()),
                "repetition": pa.array(np.full(n, split.repetition), pa.int32()),
                "true_label": pa.array(label_array[truth], pa.string()),
                "pred_label": pa.array(label_array[output.predicted], pa.string()),
                # the classes as indices: two taxa whose labels read alike stay two classes in per-class scores
                "true_index": pa.array(truth, pa.int64()),
                "pred_index": pa.array(output.predicted, pa.int64()),
                "correct": pa.array(output.predicted == truth, pa.bool_()),
            }))
            if output.details:
                chosen.setdefault(method, []).append({"shots": split.shots, "repetition": split.repetition,
                                                      **output.details})
    return pa.concat_tables(pieces), chosen


# --- the task --------------------------------------------------------------------------------------


def _resolve_column(dataset: lance.LanceDataset, encoder: Encoder | None, config: FewShotConfig) -> str:
    return resolve_embedding_column(dataset, encoder, config.column, task="few-shot")


def few_shot(dataset: lance.LanceDataset, encoder: Encoder | None, config: FewShotConfig) -> Predictions:
    """Run few-shot classification; see the module docstring. ``encoder`` may be None when ``column`` is given."""
    column = _resolve_column(dataset, encoder, config)
    rank = Rank.parse(config.rank)
    rows = read_labelled_rows(dataset, [column], rank=rank, where=config.where, group_key=config.group_key)
    if not rows.uuids:
        raise CladebenchError(f"no rows with embeddings in {column!r} match the filter {config.where!r}")
    plan = plan_splits(rows, config)
    table, chosen = predict_splits(rows.vectors[column], plan, rows.uuids, config)
    info = {
        "column": column,
        "embedding_metadata": column_metadata(dataset, column),
        "rank": rank.column,
        "label_set": {"rank": rank.column, "size": len(plan.classes), "sha256": label_digest(plan.classes),
                      "name_style": LABEL_STYLE, "candidates": len(rows.classes)},
        "where": config.where,
        "rows": {"read": len(rows.uuids), "without_label": sum(label is None for label in rows.labels),
                 "without_direction": rows.rows_without_direction,
                 "in_evaluated_classes": int((plan.targets >= 0).sum())},
        "split": {**plan.provenance(), "sampling_unit": rows.group_key, "group_key": config.group_key,
                  "rows_without_group": rows.rows_without_group},
        "methods": list(config.methods),
        "method_settings": _method_settings(config, chosen),
    }
    return Predictions(table=table, labels=list(plan.classes), info=info)


def _method_settings(config: FewShotConfig, chosen: dict[str, list[dict[str, object]]]) -> dict[str, object]:
    settings: dict[str, object] = {}
    for method in config.methods:
        if method == "knn":
            settings[method] = {"k": config.knn_k, "weights": config.knn_weights, "metric": "cosine"}
        elif method == "linear":
            settings[method] = {"cs": list(config.linear_cs), "max_folds": config.linear_folds,
                                "fallback_c": config.linear_fallback_c, "features": "L2-normalised",
                                "chosen": chosen.get(method, [])}
        elif method in SIMPLESHOT_PROTOCOLS:
            protocol = SIMPLESHOT_PROTOCOLS[method]
            settings[method] = {"protocol": protocol,
                                "input": "L2-normalised vectors" if protocol == "bioclip" else "raw stored vectors",
                                "centre": "support mean", "distance": "euclidean",
                                "definition": METHODS[method].definition}
        else:
            settings[method] = {"definition": METHODS[method].definition}
    return settings
