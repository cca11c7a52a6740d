"""INQUIRE's ranking metrics from cached scores: ``score_queries`` + ``summarize`` against INQUIRE's per-query loop.

The question this answers: with every query's candidate scores already computed (INQUIRE-Rerank: 250 queries x
100 candidates, k = 100), how much faster is :func:`cladebench.metrics.retrieval.score_queries` (one vectorised
pass over all queries: AP@k, nDCG@k, MRR, precision, recall) than INQUIRE's own evaluation, a Python loop over
the queries calling sklearn per query (``src/metrics.py`` of ``inquire-benchmark/INQUIRE``, reproduced below as
written there, since it is what the paper's numbers come from), and what does the bootstrap interval that
:func:`cladebench.metrics.retrieval.summarize` adds to every mean (10,000 resamples of the queries, five metrics)
cost next to ``scipy.stats.bootstrap``?

Both sides score the same seeded data: about 10% positives per query, a share of the queries with none, scores
shaped like float32 cosines, and a share of the queries rounded to float16 (as INQUIRE's autocast similarities
are), which gives those queries a few tied scores. Queries without a positive are marked and left out on both
sides: the library marks them ``defined = False`` and its means leave them out; the loop skips them (INQUIRE's
code would return AP = NaN for them, with a numpy warning). Where a query has more candidates than k, the loop is
given the top k by a stable descending sort, as INQUIRE-Fullrank is given its top-k retrievals, with ``count_pos``
the positives among all the query's candidates; the library sorts the same way.

Checks: AP, nDCG, precision and recall of every defined query equal the loop's within 1e-9 (sklearn's tie
handling is the definition both follow); MRR is compared only on queries without any tied score, since on ties
the library takes the expected reciprocal rank over the tied orders while INQUIRE's ``np.argsort`` picks an
unspecified one; the intervals of ``summarize`` and ``scipy.stats.bootstrap`` (percentile) agree within a tenth of
their width (they draw different resamples, so only up to Monte Carlo error).
See bench/README.md for the figures measured here and how to run it.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
import warnings
from collections.abc import Callable

import numpy as np
import scipy
import scipy.stats
import sklearn
import sklearn.metrics

from _args import positive_int
from _timing import T, timed
from cladebench.metrics.retrieval import METRIC_FIELDS, RetrievalConfig, metric_names, score_queries, summarize

TOLERANCE = 1e-9


def timed_median(fn: Callable[..., T], *args: object, repeats: int) -> tuple[float, float, T]:
    """Median seconds of ``repeats`` untraced calls, then the peak MB of one more, traced and untimed."""
    times = []
    for _ in range(repeats):
        seconds, _, out = timed(fn, *args, trace=False)
        times.append(seconds)
    _, peak, _ = timed(fn, *args)
    return float(np.median(times)), peak, out


# --- the baseline: INQUIRE's src/metrics.py, as written there --------------------------------------


def inquire_ndcg_at_k(y_true, y_pred, count_pos, k):
    num_pos_unknown = count_pos - sum(y_true)
    y_true_expanded = y_true.tolist() + [1] * num_pos_unknown
    y_pred_expanded = y_pred.tolist() + [-100] * num_pos_unknown
    return sklearn.metrics.ndcg_score([y_true_expanded], [y_pred_expanded], k=k)


def inquire_ap_at_k(y_true, y_pred, count_pos, k):
    unnormalized_ap = sklearn.metrics.average_precision_score(y_true[:k], y_pred[:k]) if sum(y_true[:k]) > 0 else 0
    ap = unnormalized_ap * y_true[:k].sum() / np.amin([count_pos, k])
    return ap


def inquire_mrr(y_true, y_pred, count_pos):
    order = np.flip(np.argsort(y_pred))
    for i in range(len(y_true)):
        if y_true[order][i] == 1:
            return 1 / (i + 1)
    return 0.0


def inquire_compute_retrieval_metrics(y_true, y_pred, count_pos):
    k = len(y_true)
    precision = sum(y_true) / k
    recall = sum(y_true) / count_pos
    ap = inquire_ap_at_k(y_true, y_pred, count_pos, k)
    ndcg = inquire_ndcg_at_k(y_true, y_pred, count_pos, k)
    mrr_score = inquire_mrr(y_true, y_pred, count_pos)
    return precision, recall, ap, ndcg, mrr_score


def inquire_loop(relevance: np.ndarray, scores: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """INQUIRE's evaluation loop over queries, scaled as its scripts report (AP, nDCG, precision, recall x100).

    A query with as many candidates as k is passed whole, in candidate order, as ``eval_rerank_with_clip.py``
    does; with more, its top k by a stable descending sort are passed, as ``eval_fullrank.py`` passes its top-k
    retrievals, with ``count_pos`` the positives among all its candidates. Queries without a positive are
    skipped (left NaN): INQUIRE's code would give them AP = 0/0. Returns per-query arrays and the means.
    """
    rows, n = relevance.shape
    out = {name: np.full(rows, np.nan) for name in METRIC_FIELDS}
    for q in range(rows):
        count_pos = int(relevance[q].sum())
        if count_pos == 0:
            continue
        y_true, y_pred = relevance[q], scores[q]
        if n > k:
            top = np.argsort(-y_pred, kind="stable")[:k]
            y_true, y_pred = y_true[top], y_pred[top]
        pr, rec, ap, ndcg, mrr = inquire_compute_retrieval_metrics(y_true, y_pred, count_pos=count_pos)
        out["ap"][q], out["ndcg"][q], out["mrr"][q] = ap * 100, ndcg * 100, mrr
        out["precision"][q], out["recall"][q] = pr * 100, rec * 100
    means = {name: float(np.nanmean(v)) for name, v in out.items()}
    return {**out, "means": means}


# --- data -------------------------------------------------------------------------------------------


def make_data(queries: int, candidates: int, no_positive: float, tied: float, seed: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Relevance (int64 0/1), scores (float32) and which queries were rounded to float16 (the tied ones).

    Each query's positive rate is Beta(2, 18) (mean 10%); a ``no_positive`` share of queries gets none. Scores
    are cosine-like: a per-query offset around 0.2, noise of 0.03, and relevant candidates raised by a per-query
    signal between 0 and 0.06, so rankings range from near random to near perfect. A ``tied`` share of the queries
    is rounded to float16, which at this spread gives a few tied scores per 100 candidates.
    """
    rng = np.random.default_rng(seed)
    rate = rng.beta(2.0, 18.0, size=queries)
    relevance = (rng.random((queries, candidates)) < rate[:, None]).astype(np.int64)
    relevance[rng.random(queries) < no_positive] = 0
    offset = 0.2 + 0.02 * rng.standard_normal((queries, 1))
    signal = rng.uniform(0.0, 0.06, size=(queries, 1))
    scores = (offset + 0.03 * rng.standard_normal((queries, candidates)) + signal * relevance).astype(np.float32)
    rounded = rng.random(queries) < tied
    scores[rounded] = scores[rounded].astype(np.float16).astype(np.float32)
    return relevance, scores, rounded


def tie_free(scores: np.ndarray) -> np.ndarray:
    """Queries none of whose candidates share a score."""
    ordered = np.sort(scores, axis=1)
    return ~(ordered[:, 1:] == ordered[:, :-1]).any(axis=1)


# --- the bootstrap baseline -------------------------------------------------------------------------


def scipy_intervals(columns: dict[str, np.ndarray], defined: np.ndarray, n_resamples: int, seed: int
                    ) -> dict[str, tuple[float, float]]:
    """Percentile intervals of each metric's mean over the defined queries by ``scipy.stats.bootstrap``."""
    out = {}
    for name, values in columns.items():
        result = scipy.stats.bootstrap((values[defined],), np.mean, n_resamples=n_resamples, method="percentile",
                                       vectorized=True, rng=np.random.default_rng(seed))
        out[name] = (float(result.confidence_interval.low), float(result.confidence_interval.high))
    return out


# --- report -----------------------------------------------------------------------------------------


def row(label: str, seconds: float, queries: int, peak_mb: float, baseline_seconds: float | None) -> str:
    ratio = f"{baseline_seconds / seconds:>10.1f}" if baseline_seconds else f"{'-':>10}"
    return f"{label:<76}{seconds:>9.3f}{queries / seconds:>12,.0f}{peak_mb:>10,.2f}{ratio}"


def parse_size(text: str) -> tuple[int, int]:
    try:
        queries, candidates = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not QUERIESxCANDIDATES, e.g. 250x100") from None
    if queries < 1 or candidates < 1:
        raise argparse.ArgumentTypeError(f"{text!r} needs positive numbers")
    return queries, candidates



def share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not a share between 0 and 1")
    return value


def run_size(queries: int, candidates: int, args: argparse.Namespace, seed: int) -> None:
    relevance, scores, rounded = make_data(queries, candidates, args.no_positive, args.tied, seed)
    defined_expected = relevance.sum(axis=1) > 0
    ties = ~tie_free(scores)
    print(f"\n== {queries:,} queries x {candidates:,} candidates, k={args.k}: "
          f"{int((~defined_expected).sum()):,} queries without a positive (left out on both sides), "
          f"{relevance.mean() * 100:.1f}% positives, {int(ties.sum()):,} queries with tied scores "
          f"({int(rounded.sum()):,} rounded to float16)")

    # Warm-ups, unmeasured: sklearn's and the library's first calls pay for lazy imports and caches.
    inquire_loop(relevance[:5], scores[:5], args.k)
    score_queries(relevance[:5], scores[:5], k=args.k)
    config = RetrievalConfig(k=args.k, n_resamples=args.resamples, seed=seed)

    # The loop is timed untraced (tracemalloc slows sklearn's many small allocations), its memory traced on
    # the first 50 queries (it holds one query at a time, so its memory does not grow with the queries).
    _, loop_peak, _ = timed(inquire_loop, relevance[:50], scores[:50], args.k)
    loop_s, _, loop = timed(inquire_loop, relevance, scores, args.k, trace=False)
    score_s, score_peak, table = timed_median(score_queries, relevance, scores, args.k, repeats=args.repeats)
    summary_s, summary_peak, summary = timed_median(summarize, table, config, repeats=args.repeats)
    defined = table.defined
    columns = {name: getattr(table, name) for name in METRIC_FIELDS}
    scipy_s, scipy_peak, scipy_ci = timed(scipy_intervals, columns, defined, args.resamples, seed)

    header = f"{'method':<76}{'seconds':>9}{'queries/s':>12}{'peak MB':>10}{'ratio':>10}"
    print(header)
    print("-" * len(header))
    print(row("INQUIRE per-query loop (sklearn per query), + mean  [baseline]", loop_s, queries, loop_peak, loop_s))
    print(row("score_queries  [library]", score_s, queries, score_peak, loop_s))
    print(row(f"score_queries + summarize (CIs, {args.resamples:,} resamples)  [library]", score_s + summary_s,
              queries, max(score_peak, summary_peak), loop_s))
    print("-" * len(header))
    print(row(f"scipy.stats.bootstrap percentile, {args.resamples:,} resamples x 5 metrics  [baseline]", scipy_s,
              queries, scipy_peak, scipy_s))
    print(row(f"summarize: bootstrap CIs, {args.resamples:,} resamples x 5 metrics  [library]", summary_s, queries,
              summary_peak, scipy_s))
    print(f"ratio = baseline seconds / method seconds (the CI rows against scipy); library rows: median of "
          f"{args.repeats} runs; peak MB = tracemalloc peak of the allocations made during the call (the loop's on "
          f"50 queries)")

    # --- same answers ---
    same_mask = bool(np.array_equal(defined, defined_expected)
                     and np.array_equal(np.isnan(loop["ap"]), ~defined_expected))
    diffs = {name: float(np.max(np.abs(columns[name][defined] - loop[name][defined]), initial=0.0))
             for name in ("ap", "ndcg", "precision", "recall")}
    mrr_rows = defined & ~ties
    mrr_diff = float(np.max(np.abs(table.mrr[mrr_rows] - loop["mrr"][mrr_rows]), initial=0.0))
    tied_rows = defined & ties
    mrr_moved = int((np.abs(table.mrr[tied_rows] - loop["mrr"][tied_rows]) > TOLERANCE).sum())
    names = metric_names(args.k)
    mean_diffs = {name: abs(summary.estimates[names[name]].value - loop["means"][name])
                  for name in ("ap", "ndcg", "precision", "recall")}
    print(f"\nsame answers: excluded queries identical on both sides {same_mask} "
          f"({summary.n_excluded:,} left out, {summary.n_scored:,} scored)")
    print(f"same answers, per query on all {int(defined.sum()):,} scored queries: largest |difference| "
          + ", ".join(f"{name} {d:.1e}" for name, d in diffs.items()) + f" (tolerance {TOLERANCE:g})")
    print(f"same answers, MRR on the {int(mrr_rows.sum()):,} scored queries without tied scores: largest "
          f"|difference| {mrr_diff:.1e}; on the {int(tied_rows.sum()):,} with ties it differs by design on "
          f"{mrr_moved:,} (expected reciprocal rank over tied orders vs np.argsort's order)")
    print("same answers, means: |library - loop| " + ", ".join(f"{name} {d:.1e}" for name, d in mean_diffs.items()))
    ci_ok = True
    parts = []
    for name in METRIC_FIELDS:
        estimate = summary.estimates[names[name]]
        low, high = scipy_ci[name]
        width = max(high - low, estimate.high - estimate.low)
        worst = max(abs(estimate.low - low), abs(estimate.high - high))
        ci_ok &= worst <= 0.1 * width
        parts.append(f"{name} {worst:.1e}")
    ap_ci = summary.estimates[names["ap"]]
    print("intervals, summarize vs scipy: largest |endpoint difference| " + ", ".join(parts)
          + f" (within a tenth of the width: {ci_ok}); AP@{args.k} [{ap_ci.low:.4f}, {ap_ci.high:.4f}] vs "
          f"[{scipy_ci['ap'][0]:.4f}, {scipy_ci['ap'][1]:.4f}]")
    print("means " + ", ".join(f"{names[name]} {summary.estimates[names[name]].value:.2f}" for name in METRIC_FIELDS)
          + " (the data's difficulty, not a result)")
    ok = same_mask and max(diffs.values()) <= TOLERANCE and mrr_diff <= TOLERANCE
    ok = ok and max(mean_diffs.values()) <= TOLERANCE and ci_ok
    assert ok, "the library and INQUIRE's loop disagree"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_size, nargs="+", default=[(250, 100), (2_500, 1_000)],
                        metavar="QxN", help="queries x candidates per query (default 250x100 2500x1000)")
    parser.add_argument("--k", type=positive_int, default=100, help="cutoff (default 100, INQUIRE-Rerank's)")
    parser.add_argument("--resamples", type=positive_int, default=10_000,
                        help="bootstrap resamples of the queries (default 10000, the library's)")
    parser.add_argument("--no-positive", type=share, default=0.1,
                        help="share of queries without a positive (default 0.1)")
    parser.add_argument("--tied", type=share, default=0.2,
                        help="share of queries whose scores are rounded to float16, hence tied (default 0.2)")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed runs of each library call (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and the bootstrap (default 0)")
    parser.add_argument("--quick", action="store_true", help="a small run: 100 queries x 100 candidates")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = [(100, 100)]

    print(f"retrieval_metrics: python {platform.python_version()}, {os.cpu_count()} CPUs "
          f"(load average {os.getloadavg()[0]:.1f}), numpy {np.__version__}, scikit-learn {sklearn.__version__}, "
          f"scipy {scipy.__version__}")
    started = time.perf_counter()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a 0/0 in either side would be a bug here
        for queries, candidates in args.sizes:
            run_size(queries, candidates, args, args.seed)
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess max RSS {rss_after:,.0f} MB (grew by {rss_after - rss_before:,.0f} MB); "
          f"total {time.perf_counter() - started:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
