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
from cladebench.metrics import HEIGHT_COLUMN, TOP_HEIGHTS_COLUMN, lca_heights
from cladebench.metrics.hierarchy import label_hierarchy, lineage_depth
from cladebench.tasks.common import Predictions, column_metadata, label_digest, resolve_embedding_column
from cladebench.tasks.fewshot.config import FewShotConfig
from cladebench.tasks.fewshot.methods import METHODS, SIMPLESHOT_PROTOCOLS
from cladebench.tasks.fewshot.splits import SplitPlan, few_shot_splits
from cladebench.tasks.labelled_rows import LABEL_STYLE, LabelledRows, read_labelled_rows
from cladebench.taxonomy import Lineage, Rank

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder


def plan_splits(rows: LabelledRows, config: FewShotConfig) -> SplitPlan:
    """The run's splits over ``rows``, with the config's repetitions, seed and query minimum, and each of its shot
    counts that the data allows.

    The most shots decide the classes (:func:`few_shot_splits`), so a shot count that leaves fewer than two classes
    would sink the counts that fit: it is dropped, largest first, and kept in the plan's ``shots_skipped`` with its
    reason (5 photos per species run 1-shot and say 5 was skipped). When no count leaves two classes, the plan with
    every count is returned, and :func:`predict_splits` says which ``--shots`` would run."""
    def plan(shots: Sequence[int], skipped: tuple[dict[str, object], ...] = ()) -> SplitPlan:
        return few_shot_splits(rows.labels, rows.groups, rows.uuids, shots=shots, repetitions=config.repetitions,
                               seed=config.seed, min_test_per_class=config.min_test_per_class, classes=rows.classes,
                               shots_skipped=skipped)

    full = plan(config.shots)
    shots = list(config.shots)
    skipped: list[dict[str, object]] = []
    current = full
    while len(current.classes) < 2 and len(shots) > 1:
        dropped = shots.pop()
        skipped.insert(0, {"shots": dropped, "reason": f"{len(current.classes)} of {len(rows.classes)} classes "
                                                       f"have enough images for {dropped} shots (2 needed)"})
        current = plan(shots)
    if len(current.classes) < 2:
        return full
    return plan(shots, tuple(skipped)) if skipped else current


def shots_that_fit(plan: SplitPlan) -> int:
    """The most shots per class that leave at least two classes a guaranteed query (0 when even one does not)."""
    fits = sorted((skip["images"] - skip["largest_group"] - plan.min_test_per_class + 1 for skip in plan.skipped),
                  reverse=True)
    kept = [plan.shots[-1]] * len(plan.classes)  # evaluated at the most shots: they fit at least that many
    most = sorted(kept + fits, reverse=True)
    return max(0, most[1]) if len(most) > 1 else 0


def predict_splits(vectors: np.ndarray, plan: SplitPlan, uuids: Sequence[str], config: FewShotConfig, *,
                   class_lineages: Sequence[Lineage] | None = None
                   ) -> tuple[pa.Table, dict[str, list[dict[str, object]]]]:
    """Run every configured method on every split: one row per (method, shots, repetition, query image).

    Returns the prediction table and, per method, what it chose on each split (shots, repetition, details).
    With ``class_lineages`` (one per class of ``plan``), each row also carries the LCA height of its truth and
    prediction (:func:`cladebench.metrics.lca_heights`), those of the method's five best classes where it ranks
    them (``top5_lca_heights``), and how deep its truth's lineage is named (``true_depth``): what mistake
    severity, hierarchical distance and accuracy at the higher ranks are computed from.
    """
    if len(plan.classes) < 2:  # a grouped run leaves this group out with the reason and evaluates the others
        most = shots_that_fit(plan)
        would = (f"; --shots {' '.join(str(k) for k in sorted({1, most}))} would run" if most >= 1
                 else "; no shot count would (each class needs images in at least 2 groups)")
        raise NotEvaluableError(f"few-shot needs at least 2 classes with enough images; {len(plan.classes)} qualify "
                                f"({len(plan.skipped)} skipped: too few groups for {max(plan.shots)} shots){would}")
    vectors = np.asarray(vectors)
    label_array = np.asarray(plan.classes, dtype=object)
    uuid_array = np.asarray(uuids, dtype=object)
    pieces: list[pa.Table] = []
    chosen: dict[str, list[dict[str, object]]] = {}
    depths = np.array([lineage_depth(lineage, config.rank) for lineage in class_lineages or ()], dtype=np.int64)
    for method in config.methods:
        fit_predict = METHODS[method].fit_predict
        for split in plan.splits:
            truth = plan.targets[split.query]
            output = fit_predict(vectors[split.support], plan.targets[split.support], vectors[split.query], config)
            n = len(split.query)
            hierarchy: dict[str, object] = {}
            if class_lineages is not None:
                top = output.predicted[:, None] if output.ranked is None else output.ranked
                heights = lca_heights(class_lineages, truth, top, config.rank)
                hierarchy = {HEIGHT_COLUMN: pa.array(heights[:, 0], pa.int8()),
                             "true_depth": pa.array(depths[truth], pa.int8())}
                if output.ranked is not None:
                    offsets = pa.array(np.arange(0, heights.size + 1, heights.shape[1], dtype=np.int32))
                    hierarchy[TOP_HEIGHTS_COLUMN] = pa.ListArray.from_arrays(offsets, pa.array(heights.ravel(),
                                                                                               pa.int8()))
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
                **hierarchy,
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
    lineage_of = dict(zip(rows.classes, rows.class_lineages, strict=False))
    class_lineages = [lineage_of[label] for label in plan.classes] if lineage_of else []
    class_lineages, hierarchy = label_hierarchy(class_lineages, rank, "the lineages of the evaluated classes (the "
                                                "dataset's rank columns)")
    table, chosen = predict_splits(rows.vectors[column], plan, rows.uuids, config,
                                   class_lineages=None if hierarchy["absent"] else class_lineages)
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
        "hierarchy": hierarchy,
        # kept with the task's settings (not the split's), so a check of the record recomputes their empty metrics
        "shots_skipped": list(plan.shots_skipped),
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
