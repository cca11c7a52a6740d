"""Metrics of lineage completion from its prediction table: per-rank accuracy, exact completion, depth, LCA distance,
naming the other organism, and the per-target values `compare` pairs runs on.

Why a module of its own: metrics are computed from predictions, never inside the task, so a re-analysis or a
paired comparison works from the same rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cladebench.metrics import WILSON, Estimate, accuracy, bootstrap_ci, define_metric
from cladebench.tasks.common import MAX_UNUSABLE_SHARE, Predictions
from cladebench.tasks.lineage.parse import UNPARSEABLE
from cladebench.tasks.lineage.targets import CONDITIONS
from cladebench.taxonomy import RANK_COLUMNS

UNUSABLE = (UNPARSEABLE, "bad_image", "invalid_response")
"""Statuses of a VLM answer that names nothing the metrics can score (see :mod:`.vlm`)."""

BOOTSTRAP_RESAMPLES = 2000
"""Resamples for the bootstrap intervals of mean depth and LCA distance (seeded: a rerun gives the same)."""


# --- metrics -------------------------------------------------------------------------------------


def _definitions() -> None:
    scored = ("over targets with at least one rank below the hint whose true name is known; names equal up to "
              "case and whitespace, the species compared as its binomial")
    texts = {
        "accuracy": "share of targets whose predicted name at the rank is the true one, over the targets for which "
                    "the rank is below the hint and its true name known; " + WILSON,
        "exact": "share of targets with every rank below the hint (with a known true name) right, " + scored + "; "
                 + WILSON,
        "depth": "mean number of ranks right in a row from the first rank below the hint down (the correct "
                 "prefix), " + scored + "; percentile bootstrap over photos",
        "lca_distance": "mean of (m - depth) / m, m the ranks below the hint with a known true name: the ranks from "
                        "the lowest common ancestor of prediction and truth down to species, as a share of those to "
                        "name (0 exact, 1 wrong at the first); " + scored + "; percentile bootstrap over photos",
        "named_other": "share of targets whose prediction at its deepest predicted rank (among those asked) is the "
                       "other organism's name there and not the target's, " + scored + "; " + WILSON,
        "unparseable": "share of targets whose VLM answer could not be read as any name at an asked rank, "
                       + scored + "; " + WILSON,
        "unusable": "share of targets whose VLM answer is unusable: unreadable as any name at an asked rank, its "
                    "image undecodable, or the answer refused by the client; " + scored + "; " + WILSON + "; when "
                    f"more than {MAX_UNUSABLE_SHARE:.0%} are, the condition's other metrics have no value",
    }
    for condition in CONDITIONS:
        for name, text in texts.items():
            define_metric(f"{condition}_{name}", f"{condition}: {text}")
    define_metric("nohint_hint_agreement", "share of targets whose no-hint prediction equals the target's names at "
                  "every hinted rank (down to the divergence rank) with a known name, " + scored + "; " + WILSON)


_definitions()


def _bool(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, present) of a nullable boolean column."""
    column = table.column(name)
    present = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    values = np.asarray(column.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    return values, present


def _mean(values: np.ndarray, photos: np.ndarray) -> Estimate:
    return bootstrap_ci(values, groups=photos, n_resamples=BOOTSTRAP_RESAMPLES)


def condition_metrics(table: pa.Table, condition: str) -> dict[str, dict[str, object]]:
    """The metrics of one condition over the rows of ``table`` (see the module docstring)."""
    c = condition
    scored = np.asarray(table.column("scored").to_numpy(zero_copy_only=False), dtype=bool)
    if not scored.any() or f"{c}_exact" not in table.column_names:
        return {}
    out: dict[str, dict[str, object]] = {}
    for rank in RANK_COLUMNS:
        values, present = _bool(table, f"{c}_correct_{rank}")
        if (present & scored).any():
            out[f"{c}_accuracy_{rank}"] = accuracy(values[present & scored]).to_dict()
    out[f"{c}_exact"] = accuracy(_bool(table, f"{c}_exact")[0][scored]).to_dict()
    photos = np.asarray(table.column("uuid").to_pylist(), dtype=object)[scored]
    for name in ("depth", "lca_distance"):
        values = np.asarray(table.column(f"{c}_{name}").to_numpy(zero_copy_only=False), dtype=np.float64)[scored]
        out[f"{c}_{name}"] = _mean(values, photos).to_dict()
    out[f"{c}_named_other"] = accuracy(_bool(table, f"{c}_named_other")[0][scored]).to_dict()
    if f"{c}_hint_agreement" in table.column_names:
        out[f"{c}_hint_agreement"] = accuracy(_bool(table, f"{c}_hint_agreement")[0][scored]).to_dict()
    if f"{c}_answer" in table.column_names:
        status = np.asarray(table.column(f"{c}_status").to_pylist(), dtype=object)[scored]
        out[f"{c}_unparseable"] = accuracy(status == UNPARSEABLE).to_dict()
        unusable = np.isin(status, UNUSABLE)
        out[f"{c}_unusable"] = accuracy(unusable).to_dict()
        if unusable.sum() > MAX_UNUSABLE_SHARE * unusable.size:
            kinds = ", ".join(f"{k} {int((status == k).sum())}" for k in UNUSABLE if (status == k).any())
            reason = (f"not reported: {int(unusable.sum())} of {unusable.size} answers are unusable ({kinds}), more "
                      f"than {MAX_UNUSABLE_SHARE:.0%}; the numbers would measure the failures, not the model")
            for name, estimate in out.items():
                if name not in (f"{c}_unparseable", f"{c}_unusable"):
                    estimate.update(value=None, low=None, high=None, reason=reason)
    return out


BREAKDOWNS: dict[str, str] = {"divergence": "divergence_rank", "kingdom_pair": "kingdom_pair"}
"""Metric-name prefix -> predictions column whose values the metrics are broken down by."""


def lineage_metrics(predictions: Predictions) -> dict[str, dict[str, object]]:
    """Every condition's metrics, pooled and broken down by divergence rank and kingdom pair."""
    table = predictions.table
    conditions = predictions.info.get("conditions") or [c for c in CONDITIONS if f"{c}_exact" in table.column_names]
    out: dict[str, dict[str, object]] = {}
    for condition in conditions:
        out.update(condition_metrics(table, condition))
    for prefix, column in BREAKDOWNS.items():
        values = table.column(column).to_pylist()
        for value in sorted({v for v in values if v is not None}, key=_breakdown_order):
            subset = table.filter(pa.array([v == value for v in values]))
            for condition in conditions:
                for name, estimate in condition_metrics(subset, condition).items():
                    out[f"{prefix}={value}/{name}"] = estimate
    return out


def _breakdown_order(value: str) -> tuple[int, str]:
    """Ranks in taxonomic order, anything else after them alphabetically."""
    return (RANK_COLUMNS.index(value), "") if value in RANK_COLUMNS else (len(RANK_COLUMNS), value)


def per_target_values(table: pa.Table, task_provenance: dict[str, object]
                      ) -> dict[str, tuple[list[object], np.ndarray]]:
    """Each scored target's value of every pooled metric, keyed by 'uuid#target', so runs pair target by target."""
    keys = [f"{u}#{t}" for u, t in zip(table.column("uuid").to_pylist(), table.column("target").to_pylist(),
                                        strict=True)]
    scored = np.asarray(table.column("scored").to_numpy(zero_copy_only=False), dtype=bool)
    out: dict[str, tuple[list[object], np.ndarray]] = {}
    for condition in CONDITIONS:
        if f"{condition}_exact" not in table.column_names:
            continue
        columns = {f"{condition}_accuracy_{r}": f"{condition}_correct_{r}" for r in RANK_COLUMNS}
        columns.update({f"{condition}_{m}": f"{condition}_{m}" for m in ("exact", "depth", "lca_distance",
                                                                          "named_other", "hint_agreement")})
        for metric, column in columns.items():
            if column not in table.column_names:
                continue
            present = np.asarray(table.column(column).is_valid().to_numpy(zero_copy_only=False), dtype=bool) & scored
            if not present.any():
                continue
            values = table.column(column).cast(pa.float64()).fill_null(0.0).to_numpy()
            out[metric] = ([k for k, p in zip(keys, present, strict=True) if p], values[present])
        if f"{condition}_answer" in table.column_names:
            status = np.asarray(table.column(f"{condition}_status").to_pylist(), dtype=object)
            out[f"{condition}_unparseable"] = ([k for k, p in zip(keys, scored, strict=True) if p],
                                              (status[scored] == UNPARSEABLE).astype(np.float64))
    return out
