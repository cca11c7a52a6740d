"""How wrong a wrong answer is on the tree of life: LCA heights, mistake severity, hierarchical distance@k.

Bertinetto et al., "Making Better Mistakes: Leveraging Class Hierarchies with Deep Networks" (CVPR 2020; code
fiveai/making-better-mistakes, ``better_mistakes/model/run_xent.py``) measure a classifier's mistakes by the height
of the lowest common ancestor (LCA) of the true class and a predicted one in the class hierarchy:

- **LCA height** h(t, p): the number of ranks from the label rank up to the lowest rank at which t and p name the
  same taxon; leaves have height 0. On the seven Linnaean ranks at species: sister species 1, same family 2, ...,
  same kingdom but different phyla 6, different kingdoms 7 (the root above the kingdoms). A correct prediction is
  0. At a higher label rank (genus) the heights count from that rank (same family 1).
- **Mistake severity**: mean of h(t, top-1) over the images whose top-1 prediction is wrong (correct ones excluded).
- **Hierarchical distance@k** (``hdist<k>``): mean over images of the mean of h(t, p) over the k highest-scoring
  predictions (a correct one counts 0); at k = 1 it is mistake severity times the error rate.

Where this differs from the paper on purpose:

- The hierarchy is the dataset's own seven-rank lineage (the label set's), not a fixed tree; a rank a lineage
  lacks is **never a match**: the LCA is the lowest rank such that it and every rank above it are named, and named
  alike (case ignored), in both lineages, so a hole puts the LCA above it (the height is then an upper bound). The
  paper's iNaturalist-19 tree is complete, so it never meets this.
- A mistake is a wrong top-1 class (the task's own ``correct_top1``), not a non-zero distance: the two agree on a
  complete hierarchy.
- The means run over every scored image once, not over equal-size batches with the last one dropped, and each has
  a percentile bootstrap interval over images; hdist@k is undefined (no value, the reason given) where k is at
  least the label count, as top-k is.

The tasks compute each scored row's heights once, when predicting (the predictions carry ``lca_height`` and, where
the task ranks labels, ``top5_lca_heights``), so a record's numbers are recomputed from its predictions alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np

from cladebench.metrics.definitions import define_metric
from cladebench.metrics.intervals import (
    CHUNK_ELEMENTS,
    PAIRED_P_VALUE,
    PERCENTILE_BOOTSTRAP,
    PairedComparison,
    bootstrap_ci,
)
from cladebench.taxonomy import RANKS, Lineage, Rank

_Keys = TypeVar("_Keys")

HEIGHT_COLUMN = "lca_height"
"""Predictions column: each scored row's LCA height of truth and top-1 prediction (null where not scored)."""
TOP_HEIGHTS_COLUMN = "top5_lca_heights"
"""Predictions column: each scored row's LCA heights of truth and each of its top-5 predictions, best first."""
DISTANCE_KS = (1, 5)
"""The k of the hierarchical distances reported (the paper reports 1, 5 and more; top-5 is what tasks keep)."""
SEVERITY_RESAMPLES = 10_000
"""Bootstrap resamples of every interval here (seeded with 0: a rerun gives the same interval)."""

RULE = ("LCA height: ranks from the label rank up to the lowest rank at which truth and prediction name the same "
        "taxon, that rank and every rank above it named alike (case ignored) in both lineages; a rank missing "
        "from either lineage never matches, so the LCA is above it; leaves 0, different kingdoms = label rank's "
        "depth + 1 (7 at species); the dataset's own 7-rank lineage (Bertinetto et al., CVPR 2020, "
        "'Making Better Mistakes')")


def lca_height(truth: Lineage, predicted: Lineage, rank: Rank | str) -> int:
    """LCA height of two lineages at label rank ``rank`` (:data:`RULE`), one pair at a time: the reference the
    vectorised :func:`lca_heights` is tested against. Two lineages that name the same taxon give 0."""
    rank = Rank.parse(rank)
    shared = 0
    for level in RANKS[: rank + 1]:
        a, b = truth.names[level], predicted.names[level]
        if a is None or b is None or a.casefold() != b.casefold():
            break
        shared += 1
    return int(rank) + 1 - shared


def lca_rank(height: int, rank: Rank | str) -> str | None:
    """Where a mistake of LCA ``height`` at label rank ``rank`` lands, as a rank column (``family`` for a same-family
    mistake at species), ``root`` across kingdoms, None for a correct prediction (height 0)."""
    if height <= 0:
        return None
    level = int(Rank.parse(rank)) - int(height)
    return "root" if level < 0 else RANKS[level].column


def lca_ranks(rank: Rank | str) -> list[str]:
    """Every place a mistake at label rank ``rank`` can land, the gentlest first: the rank above it .. kingdom,
    then ``root``."""
    return [r.column for r in reversed(RANKS[: Rank.parse(rank)])] + ["root"]


def lca_words(height: int, rank: Rank | str) -> str:
    """A mistake's LCA in words, as a gallery or a filter names it: ``same family (height 2)``, ``different
    kingdoms (height 7)``, ``correct``."""
    where = lca_rank(height, rank)
    if where is None:
        return "correct"
    return f"{'different kingdoms' if where == 'root' else 'same ' + where} (height {height})"


def lineage_depth(lineage: Lineage, rank: Rank | str) -> int:
    """How many ranks from the kingdom down are named without a hole: the most a height can ever share."""
    names = lineage.names[: int(Rank.parse(rank)) + 1]
    return names.index(None) if None in names else len(names)


def lca_heights(label_lineages: Sequence[Lineage], truth: np.ndarray, predicted: np.ndarray,
                rank: Rank | str) -> np.ndarray:
    """LCA heights (:data:`RULE`) of each row's true label against each of its predicted labels.

    ``truth`` (n,) and ``predicted`` (n, k) are indices into ``label_lineages``; a truth of -1 (not in the label
    set) gives -1 on its whole row. A predicted label equal to the truth is 0 whatever its lineage says. Only the
    labels the rows name are read, so a tree-of-life set of a million labels costs what its predictions touch.
    """
    rank = Rank.parse(rank)
    truth = np.asarray(truth, dtype=np.int64)
    predicted = np.asarray(predicted, dtype=np.int64).reshape(truth.size, -1)
    out = np.full(predicted.shape, -1, dtype=np.int8)
    valid = truth >= 0
    if not valid.any():
        return out
    used, inverse = np.unique(np.concatenate([truth[valid], predicted[valid].ravel()]), return_inverse=True)
    levels = int(rank) + 1
    codes = np.full((used.size, levels), -1, dtype=np.int64)
    vocabulary: dict[str, int] = {}
    for row, label in enumerate(used.tolist()):
        names = label_lineages[label].names
        for level in range(levels):
            name = names[level]
            if name is not None:
                codes[row, level] = vocabulary.setdefault(name.casefold(), len(vocabulary))
    n_valid = int(valid.sum())
    true_codes = codes[inverse[:n_valid]][:, None, :]
    predicted_codes = codes[inverse[n_valid:]].reshape(n_valid, predicted.shape[1], levels)
    same = (true_codes == predicted_codes) & (true_codes >= 0)
    shared = np.cumprod(same, axis=2).sum(axis=2)
    heights = levels - shared
    heights[predicted[valid] == truth[valid][:, None]] = 0
    out[valid] = heights.astype(np.int8)
    return out


def hierarchy_summary(label_lineages: Sequence[Lineage], rank: Rank | str, source: str) -> dict[str, object]:
    """What a run record says of the hierarchy its heights came from: the source, the ranks, how many labels have a
    full lineage (every rank down to the label rank), how many a hole, how many none (no kingdom: every mistake
    against them is the largest height), and ``absent`` (why there are no severity metrics) when no label has any."""
    rank = Rank.parse(rank)
    depths = np.fromiter((lineage_depth(lineage, rank) for lineage in label_lineages), dtype=np.int64,
                         count=len(label_lineages))
    full = int((depths == int(rank) + 1).sum())
    none = int((depths == 0).sum())
    summary: dict[str, object] = {
        "source": source, "ranks": [r.column for r in RANKS[: rank + 1]], "rule": RULE, "labels": int(depths.size),
        "labels_with_full_lineage": full, "labels_with_a_missing_rank": int(depths.size) - full - none,
        "labels_without_lineage": none, "absent": None}
    if not depths.size:
        summary["absent"] = "the label set gives no lineages to measure a mistake on"
    elif none == depths.size:
        summary["absent"] = (f"no label names a kingdom (none of the {depths.size} has a lineage above "
                             f"{rank.column}), so every mistake would have the same height")
    return summary


def label_hierarchy(label_lineages: Sequence[Lineage], rank: Rank | str,
                    source: str) -> tuple[list[Lineage], dict[str, object]]:
    """The lineages a run measures its mistakes on and the record's :func:`hierarchy_summary` of them: the labels'
    own, those without a kingdom completed from the offline taxonomy backbone where their names resolve
    (:func:`cladebench.taxonomy.resolve.complete_from_backbone`; the summary says how many)."""
    from cladebench.taxonomy.resolve import complete_from_backbone

    measured, completion = complete_from_backbone(label_lineages, rank)
    summary = hierarchy_summary(measured, rank, source)
    if completion is not None:
        summary["completed_from_backbone"] = completion
        if completion["resolved"]:
            summary["source"] = (f"{source}; {completion['resolved']} of the {completion['looked_up']} labels "
                                 f"without a kingdom completed from the taxonomy backbone {completion['backbone']}")
        if summary["absent"]:
            summary["absent"] = str(summary["absent"]) + (
                "; none of their names resolves in the taxonomy backbone" if completion["backbone"]
                else f"; no taxonomy backbone to resolve their names ({completion['why_not']})")
    return measured, summary


def severity_names(rank: str, prefix: str = "") -> dict[str, str]:
    """The metric names at label rank ``rank``: ``mistake_severity_<rank>``, ``hdist1_<rank>``, ``hdist5_<rank>``
    (``prefix`` before each: ``image_``, ``fused_``)."""
    return {"severity": f"{prefix}mistake_severity_{rank}",
            **{f"hdist{k}": f"{prefix}hdist{k}_{rank}" for k in DISTANCE_KS}}


def absent_estimates(names: Sequence[str], reason: str) -> dict[str, dict[str, object]]:
    """Each of ``names`` without a value, and why: never a 0 that reads as "no mistakes"."""
    return {name: {"value": None, "low": None, "high": None, "n": 0, "reason": reason} for name in names}


def _ratio_interval(heights: np.ndarray, n_resamples: int, confidence: float,
                    seed: int) -> tuple[float | None, float | None]:
    """Percentile bootstrap of mean(h | h counted as a mistake) over images: a resample draws the scored images
    with replacement, as the count of each height drawn (a multinomial, the same distribution as drawing images;
    heights take at most eight values). Resamples without a mistake have no severity and are left out."""
    kinds, counts = np.unique(heights, return_counts=True)
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(heights.size, counts / heights.size, size=n_resamples).astype(np.float64)
    mistakes = drawn @ (kinds > 0).astype(np.float64)
    total = drawn @ (kinds * (kinds > 0)).astype(np.float64)
    replicates = total[mistakes > 0] / mistakes[mistakes > 0]
    if not replicates.size:
        return None, None
    low, high = np.quantile(replicates, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    return float(low), float(high)


def mistake_severity(heights: np.ndarray, correct: np.ndarray, *, n_resamples: int = SEVERITY_RESAMPLES,
                     confidence: float = 0.95, seed: int = 0) -> dict[str, object]:
    """Mistake severity over scored rows: ``heights`` their top-1 LCA heights, ``correct`` their top-1 hits.

    ``n`` is the mistakes the mean is over, ``images`` the scored rows the bootstrap resamples; no mistake at all
    gives no value (with the reason), not 0.
    """
    heights = np.asarray(heights, dtype=np.int64)
    wrong = ~np.asarray(correct, dtype=bool)
    # A wrong class whose lineage equals the truth's (only with holes) is still a mistake: at least height 1.
    mistaken = np.where(wrong, np.maximum(heights, 1), 0)
    entry: dict[str, object] = {"n": int(wrong.sum()), "images": int(heights.size), "confidence": confidence}
    if not wrong.any():
        return {**entry, "value": None, "low": None, "high": None,
                "reason": "no mistakes among the scored images" if heights.size else "no scored images"}
    low, high = _ratio_interval(mistaken, n_resamples, confidence, seed)
    return {**entry, "value": float(mistaken[wrong].mean()), "low": low, "high": high,
            "interval": f"{PERCENTILE_BOOTSTRAP}; {n_resamples} resamples of images, seed {seed}"}


def hierarchical_distance(top_heights: np.ndarray, k: int, n_labels: int | None = None) -> dict[str, object]:
    """Hierarchical distance@k over scored rows: ``top_heights`` (n, >= k) their heights against the top
    predictions, best first; undefined (no value, the reason) when ``k`` is at least ``n_labels``."""
    from cladebench.metrics.classification import top_k_undefined

    top_heights = np.asarray(top_heights, dtype=np.float64)
    undefined = top_k_undefined(k, n_labels) if n_labels is not None and k > 1 else None
    if top_heights.shape[0] == 0 or undefined or top_heights.ndim != 2 or top_heights.shape[1] < k:
        reason = undefined or ("no scored images" if top_heights.shape[0] == 0
                               else f"fewer than {k} predictions per image")
        return {"value": None, "low": None, "high": None, "n": int(top_heights.shape[0]), "reason": reason}
    return bootstrap_ci(top_heights[:, :k].mean(axis=1), n_resamples=SEVERITY_RESAMPLES).to_dict()


def severity_metrics(heights: np.ndarray | None, top_heights: np.ndarray | None, correct: np.ndarray, rank: str, *,
                     n_labels: int | None, hierarchy: Mapping[str, object] | None, prefix: str = "",
                     ranked: bool = True) -> dict[str, dict[str, object]]:
    """Mistake severity and hdist@1/@5 of the scored rows at label rank ``rank``, named by :func:`severity_names`.

    ``heights`` (n,) are the top-1 heights, ``top_heights`` (n, 5) the top-5 ones; ``ranked`` False for a task that
    keeps only its top-1 prediction (hdist@5 is then not reported). ``hierarchy`` is :func:`hierarchy_summary` of
    the run, and when it says the metrics are absent each is recorded without a value and with that reason;
    predictions without heights (written before them) give none.
    """
    names = severity_names(rank, prefix)
    wanted = [names["severity"], names["hdist1"], *([names["hdist5"]] if ranked else [])]
    if hierarchy and hierarchy.get("absent"):
        return absent_estimates(wanted, str(hierarchy["absent"]))
    if heights is None:
        return {}
    heights = np.asarray(heights, dtype=np.int64)
    out = {names["severity"]: mistake_severity(heights, correct),
           names["hdist1"]: hierarchical_distance(heights[:, None], 1)}
    if ranked and top_heights is not None:
        out[names["hdist5"]] = hierarchical_distance(top_heights, 5, n_labels)
    return out


define_metric("mistake_severity", "mean LCA height of the true label and the top-1 prediction over the wrongly "
              "predicted scored images (correct ones excluded; n = the mistakes); " + RULE + "; percentile bootstrap "
              "over the scored images, resamples without a mistake left out")
for _k in DISTANCE_KS:
    define_metric(f"hdist{_k}", f"hierarchical distance@{_k}: mean over the scored images of the mean LCA height of "
                  f"the true label and each of the {_k} highest-scoring predictions (a correct one 0); " + RULE
                  + "; percentile bootstrap over images; undefined where k is at least the label count")


def severity_units(keys: _Keys, heights: np.ndarray, correct: np.ndarray) -> tuple[_Keys, np.ndarray, np.ndarray]:
    """A run's mistake severity image by image, for a paired comparison: (keys, each image's height where it is a
    mistake else 0, 1 where it is a mistake else 0); the ratio of their sums is the severity."""
    wrong = ~np.asarray(correct, dtype=bool)
    return keys, np.where(wrong, np.maximum(np.asarray(heights, dtype=np.float64), 1.0), 0.0), wrong.astype(np.float64)


def paired_ratio_bootstrap(a_values: np.ndarray, a_weights: np.ndarray, b_values: np.ndarray, b_weights: np.ndarray,
                           *, n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> PairedComparison:
    """Paired bootstrap of sum(a_values)/sum(a_weights) - sum(b_values)/sum(b_weights) on aligned images: how two
    runs' mistake severities (heights over mistakes, a ratio and not a mean of per-image values) differ.

    Each resample draws the images with replacement, the same draw for both runs (as the count of each distinct
    image kind, a multinomial: the same distribution as drawing images); a resample in which either run makes no
    mistake has no difference and is left out. The interval and p-value are those of
    :func:`cladebench.metrics.paired_bootstrap` over the resampled differences."""
    columns = [np.asarray(x, dtype=np.float64) for x in (a_values, a_weights, b_values, b_weights)]
    n = columns[0].size
    if n == 0 or any(c.shape != (n,) for c in columns):
        raise ValueError("a and b must be non-empty aligned 1-D arrays")
    if columns[1].sum() <= 0 or columns[3].sum() <= 0:
        raise ValueError("a run without a mistake has no severity to compare")
    kinds, counts = np.unique(np.stack(columns, axis=1), axis=0, return_counts=True)
    rng = np.random.default_rng(seed)
    pieces = []
    rows_per_chunk = max(1, CHUNK_ELEMENTS // kinds.shape[0])
    for start in range(0, n_resamples, rows_per_chunk):
        drawn = rng.multinomial(n, counts / n, size=min(rows_per_chunk, n_resamples - start)).astype(np.float64)
        sums = drawn @ kinds
        defined = (sums[:, 1] > 0) & (sums[:, 3] > 0)
        pieces.append(sums[defined, 0] / sums[defined, 1] - sums[defined, 2] / sums[defined, 3])
    replicates = np.concatenate(pieces)
    low, high = np.quantile(replicates, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    at_or_below = 1 + int(np.count_nonzero(replicates <= 0.0))
    at_or_above = 1 + int(np.count_nonzero(replicates >= 0.0))
    p_value = min(1.0, 2.0 * min(at_or_below, at_or_above) / (replicates.size + 1))
    difference = columns[0].sum() / columns[1].sum() - columns[2].sum() / columns[3].sum()
    return PairedComparison(difference=float(difference), low=float(low), high=float(high), p_value=p_value, n=n,
                            n_resamples=n_resamples, confidence=confidence, seed=seed,
                            method=f"paired {PERCENTILE_BOOTSTRAP} of a ratio of sums (mistake severity), "
                                   f"resamples in which a run makes no mistake left out; {PAIRED_P_VALUE}")
