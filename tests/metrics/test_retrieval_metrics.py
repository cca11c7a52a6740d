"""INQUIRE's retrieval metrics against an independent, literal reimplementation of INQUIRE's formulas with sklearn,
against brute force over tie orders, against hand-computed cases, and against a real per-query result file of an
INQUIRE-Rerank run."""

from __future__ import annotations

import doctest
import itertools
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import sklearn.metrics

import cladebench.metrics.retrieval
from cladebench.errors import UnknownNameError
from cladebench.metrics import METRIC_DEFINITIONS, bootstrap_ci
from cladebench.metrics.retrieval import (
    PROTOCOLS,
    RetrievalConfig,
    macro_means,
    macro_means_by,
    metric_names,
    protocol,
    score_queries,
    score_query,
    score_ragged,
    summarize,
    summarize_by,
)

# --- the reference: INQUIRE's src/metrics.py formulas, followed literally ------------------------------------------


def inquire_reference(relevance: np.ndarray, scores: np.ndarray, k: int, count_pos: int) -> dict[str, float]:
    """INQUIRE's compute_retrieval_metrics on the top-k ranked list, scaled as its scripts report.

    The candidates are put in ranked order (ties in candidate order) and sliced to the top k, the list its
    scripts pass; then AP is sklearn's AP on the slice (0 without a hit) times hits / min(count_pos, len),
    nDCG is sklearn's nDCG@len with count_pos - hits pseudo-positives of score -100 appended, MRR walks
    the flipped argsort, precision = hits / len and recall = hits / count_pos.
    """
    order = np.argsort(-scores, kind="stable")
    y_true = relevance[order][:k].astype(int)
    y_pred = scores[order][:k]
    cut = len(y_true)
    hits = y_true.sum()
    unnormalised = sklearn.metrics.average_precision_score(y_true, y_pred) if hits > 0 else 0
    ap = unnormalised * y_true.sum() / np.amin([count_pos, cut])
    unknown = count_pos - hits
    ndcg = sklearn.metrics.ndcg_score([y_true.tolist() + [1] * unknown], [y_pred.tolist() + [-100] * unknown], k=cut)
    ranked = y_true[np.flip(np.argsort(y_pred))]
    first = np.flatnonzero(ranked == 1)
    mrr = 1 / (first[0] + 1) if first.size else 0.0
    return {"ap": 100 * ap, "ndcg": 100 * ndcg, "mrr": mrr, "precision": 100 * hits / cut,
            "recall": 100 * hits / count_pos}


def expected_mrr_over_tie_orders(relevance: np.ndarray, scores: np.ndarray) -> float:
    """Brute force: the reciprocal rank of the first hit averaged over every order of the candidates.

    A stable sort of each permuted list orders the tied candidates as the permutation lists them, and every
    order within every tie group occurs equally often among the permutations.
    """
    perms = np.array(list(itertools.permutations(range(scores.size))))
    ranked = np.take_along_axis(relevance[perms], np.argsort(-scores[perms], axis=1, kind="stable"), axis=1)
    has_hit = ranked.any(axis=1)
    return float(np.where(has_hit, 1.0 / (np.argmax(ranked, axis=1) + 1), 0.0).mean())


def assert_matches(ours: object, reference: dict[str, float], fields: tuple[str, ...], context: object) -> None:
    for name in fields:
        assert getattr(ours, name) == pytest.approx(reference[name], rel=1e-12, abs=1e-12), (name, context)


ALL = ("ap", "ndcg", "mrr", "precision", "recall")


# --- against the reference -----------------------------------------------------------------------------------------


def test_random_rankings_match_inquire_reference() -> None:
    """Distinct scores (so INQUIRE's MRR is defined), k below, at and above n, extra unretrieved positives."""
    rng = np.random.default_rng(0)
    for case in range(400):
        n = int(rng.integers(2, 160))
        relevance = rng.random(n) < rng.uniform(0.0, 0.6)
        if not relevance.any() and case % 2:
            relevance[rng.integers(n)] = True
        scores = rng.normal(size=n)
        k = int(rng.choice([n, rng.integers(2, n + 1), n + int(rng.integers(1, 50))]))
        count_pos = int(relevance.sum() + (rng.integers(0, 20) if case % 3 == 0 else 0))
        if count_pos == 0:
            continue
        ours = score_query(relevance, scores, k=k, count_pos=count_pos)
        assert_matches(ours, inquire_reference(relevance, scores, k, count_pos), ALL, (case, n, k, count_pos))
        assert ours.defined and ours.cutoff == min(k, n) and not ours.ties_at_cut


def test_heavy_ties_match_sklearn() -> None:
    """Scores with 1-4 distinct values: AP takes each value as one threshold, nDCG averages over the tie."""
    rng = np.random.default_rng(1)
    for case in range(300):
        n = int(rng.integers(2, 120))
        relevance = rng.random(n) < rng.uniform(0.05, 0.9)
        relevance[rng.integers(n)] = True
        scores = rng.integers(0, int(rng.integers(1, 5)), size=n).astype(float)
        k = int(rng.choice([n, rng.integers(2, n + 1)]))
        count_pos = int(relevance.sum() + (rng.integers(0, 5) if case % 2 else 0))
        ours = score_query(relevance, scores, k=k, count_pos=count_pos)
        reference = inquire_reference(relevance, scores, k, count_pos)
        assert_matches(ours, reference, ("ap", "ndcg", "precision", "recall"), (case, n, k))
        ranked = -np.sort(-scores)
        assert ours.ties_at_cut == (k < n and ranked[k - 1] == ranked[k])


def test_batched_ties_match_sklearn_query_by_query() -> None:
    """The equal-length batched path (INQUIRE-Rerank's shape: 100 candidates per query) on tied scores."""
    rng = np.random.default_rng(2)
    relevance = rng.random((60, 100)) < rng.uniform(0.02, 0.5, size=(60, 1))
    relevance[:, 0] = True
    scores = np.round(rng.random((60, 100)), 1)
    table = score_queries(relevance, scores, k=100)
    for q in range(60):
        reference = inquire_reference(relevance[q], scores[q], 100, int(relevance[q].sum()))
        assert_matches(table.query(q), reference, ("ap", "ndcg", "precision", "recall"), q)


def test_mrr_on_ties_is_the_expectation_over_tie_orders() -> None:
    rng = np.random.default_rng(3)
    for case in range(120):
        n = int(rng.integers(2, 8))
        relevance = rng.random(n) < 0.4
        relevance[rng.integers(n)] = True
        scores = rng.integers(0, 3, size=n).astype(float)
        ours = score_query(relevance, scores, k=n)
        assert ours.mrr == pytest.approx(expected_mrr_over_tie_orders(relevance, scores), rel=1e-12), case


def test_mrr_with_a_tie_inside_the_top_k_only_averages_the_kept_list() -> None:
    relevance = np.array([0, 0, 1, 1, 0, 1, 0, 0, 1])
    scores = np.array([5.0, 4, 4, 4, 3, 3, 3, 1, 0])
    ours = score_query(relevance, scores, k=6)
    order = np.argsort(-scores, kind="stable")[:6]
    assert ours.mrr == pytest.approx(expected_mrr_over_tie_orders(relevance[order], scores[order]), rel=1e-12)
    assert ours.ties_at_cut  # 3, 3 | 3


# --- special rankings ----------------------------------------------------------------------------------------------


def test_all_positive() -> None:
    for scores in (np.linspace(1, 0, 30), np.zeros(30)):
        ours = score_query(np.ones(30, dtype=bool), scores, k=30)
        assert (ours.ap, ours.ndcg, ours.mrr, ours.precision, ours.recall) == pytest.approx((100, 100, 1, 100, 100))
    # Fullrank: all 50 retrieved are relevant, 80 exist: AP is perfect over what could be retrieved, recall is not.
    ours = score_query(np.ones(50, dtype=bool), np.linspace(1, 0, 50), k=50, count_pos=80)
    assert (ours.ap, ours.ndcg, ours.recall) == pytest.approx((100, 100, 62.5))


def test_single_positive_ap_is_100_mrr_without_ties_and_below_it_with_a_tie() -> None:
    rng = np.random.default_rng(4)
    for _ in range(100):
        n = int(rng.integers(2, 200))
        relevance = np.zeros(n, dtype=bool)
        relevance[rng.integers(n)] = True
        ours = score_query(relevance, rng.normal(size=n), k=n)
        assert ours.ap == pytest.approx(100 * ours.mrr, rel=1e-12)
    # The positive shares its score with two negatives, all three after one negative: sklearn's AP puts it at
    # rank 4 (the tie enters at once), the expected reciprocal rank averages ranks 2, 3, 4.
    ours = score_query(np.array([0, 0, 1, 0, 0]), np.array([2.0, 1, 1, 1, 0]), k=5)
    assert ours.ap == pytest.approx(25.0)
    assert ours.mrr == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)


def test_zero_positives_are_marked_and_left_out_of_means() -> None:
    relevance = np.array([[1, 0, 0, 1], [0, 0, 0, 0], [0, 1, 0, 0]])
    scores = np.array([[0.9, 0.8, 0.3, 0.1], [0.9, 0.8, 0.3, 0.1], [0.4, 0.3, 0.2, 0.1]])
    table = score_queries(relevance, scores, k=4)
    assert table.defined.tolist() == [True, False, True]
    assert all(np.isnan(getattr(table, name)[1]) for name in ALL)
    summary = summarize(table, RetrievalConfig(k=4, n_resamples=500))
    assert (summary.n_queries, summary.n_scored, summary.n_excluded) == (3, 2, 1)
    assert summary.estimates["ap@4"].value == pytest.approx((table.ap[0] + table.ap[2]) / 2)
    assert summary.estimates["ap@4"].n == 2
    assert table.to_dict()["ap@4"][1] is None and table.query(1).to_dict()["mrr"] is None
    json.dumps({"table": table.to_dict(), "summary": summary.to_dict()}, allow_nan=False)
    # Nothing defined: no estimate at all rather than a NaN one.
    empty = summarize(score_queries(relevance[1:2], scores[1:2], k=4), RetrievalConfig(k=4, n_resamples=50))
    assert empty.estimates == {} and empty.n_excluded == 1


def test_what_inquire_and_sklearn_do_without_positives() -> None:
    """The behaviour the module docstring reports for comparison (scikit-learn as installed)."""
    relevance = np.zeros(5, dtype=int)
    scores = np.linspace(1, 0, 5)
    with pytest.warns(UserWarning, match="No positive class found"):
        assert sklearn.metrics.average_precision_score(relevance, scores) == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's 0/0
        literal = inquire_reference(relevance, scores, 5, 0)
    assert np.isnan(literal["ap"]) and np.isnan(literal["recall"])
    assert (literal["ndcg"], literal["mrr"]) == (0.0, 0.0)
    assert sklearn.metrics.ndcg_score([relevance.tolist()], [scores.tolist()], k=5) == 0.0


def test_unretrieved_positives_rank_last_whatever_the_scores() -> None:
    """INQUIRE's -100 is 'last' for cosines; for scores below -100 its code would credit positives never returned.

    Metrics depend only on the order of the scores, so shifting every score up must change nothing, and the
    shifted list is where INQUIRE's literal -100 still means last.
    """
    rng = np.random.default_rng(5)
    relevance = rng.random(40) < 0.3
    relevance[0] = True
    scores = rng.normal(size=40) - 500.0
    ours = score_query(relevance, scores, k=40, count_pos=int(relevance.sum()) + 6)
    shifted = inquire_reference(relevance, scores + 1000.0, 40, int(relevance.sum()) + 6)
    literal = inquire_reference(relevance, scores, 40, int(relevance.sum()) + 6)
    assert_matches(ours, shifted, ALL, "shifted")
    assert literal["ndcg"] > ours.ndcg + 1.0


# --- hand-computed cases -------------------------------------------------------------------------------------------

LOG2_3, LOG2_5 = np.log2(3), np.log2(5)


def test_hand_computed_rerank_case() -> None:
    # Hits at ranks 2 and 4: precisions 1/2 and 2/4.
    ours = score_query(np.array([0, 1, 0, 1]), np.array([0.9, 0.8, 0.3, 0.1]), k=4)
    assert ours.ap == pytest.approx(50.0)
    assert ours.ndcg == pytest.approx(100 * (1 / LOG2_3 + 1 / LOG2_5) / (1 + 1 / LOG2_3))
    assert (ours.mrr, ours.precision, ours.recall, ours.hits) == (0.5, 50.0, 100.0, 2)


def test_hand_computed_fullrank_case_with_missed_positives() -> None:
    # Same list, but 4 positives exist: AP is divided by min(4, 4), the ideal DCG holds 4 hits.
    ours = score_query(np.array([0, 1, 0, 1]), np.array([0.9, 0.8, 0.3, 0.1]), k=4, count_pos=4)
    assert ours.ap == pytest.approx(100 * (1 / 2 + 2 / 4) / 4)
    assert ours.ndcg == pytest.approx(100 * (1 / LOG2_3 + 1 / LOG2_5) / (1 + 1 / LOG2_3 + 1 / 2 + 1 / LOG2_5))
    assert ours.recall == 50.0


def test_hand_computed_tie_case() -> None:
    # Three candidates tie at the top, one of them relevant; the other positive is last.
    ours = score_query(np.array([1, 0, 0, 1]), np.array([1.0, 1.0, 1.0, 0.0]), k=4)
    assert ours.ap == pytest.approx(100 * (0.5 * 1 / 3 + 0.5 * 2 / 4))  # thresholds 1 and 0
    assert ours.ndcg == pytest.approx(100 * ((1 + 1 / LOG2_3 + 1 / 2) / 3 + 1 / LOG2_5) / (1 + 1 / LOG2_3))
    assert ours.mrr == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def test_hand_computed_tie_at_the_cut_keeps_candidate_order() -> None:
    # Top 2 of [0.5, 0.5, 0.9]: candidate 2, then candidate 0 (listed before candidate 1, its tie).
    ours = score_query(np.array([0, 1, 1]), np.array([0.5, 0.5, 0.9]), k=2)
    assert ours.ties_at_cut and ours.cutoff == 2 and ours.hits == 1
    assert (ours.ap, ours.mrr, ours.precision, ours.recall) == pytest.approx((50.0, 1.0, 50.0, 50.0))


def test_fewer_candidates_than_k_cut_at_the_list_length() -> None:
    ours = score_query(np.array([1, 0, 1]), np.array([3.0, 2.0, 1.0]), k=100)
    assert ours.cutoff == 3 and ours.precision == pytest.approx(100 * 2 / 3)
    assert ours.ap == pytest.approx(100 * (1 + 2 / 3) / 2)


# --- shapes, ragged input, errors ----------------------------------------------------------------------------------


def test_ragged_equals_query_by_query_in_input_order() -> None:
    rng = np.random.default_rng(6)
    lengths = [5, 100, 5, 37, 100, 2, 37]
    relevances = [rng.random(n) < 0.3 for n in lengths]
    relevances[1][:] = False
    scores = [np.round(rng.random(n), 1) for n in lengths]
    counts = [int(r.sum()) + extra for r, extra in zip(relevances, [0, 0, 3, 1, 2, 4, 0], strict=True)]
    table = score_ragged(relevances, scores, k=50, count_pos=counts)
    for i in range(len(lengths)):  # compared as dicts: NaN (undefined) becomes None there
        assert table.query(i).to_dict() == score_query(relevances[i], scores[i], k=50, count_pos=counts[i]).to_dict()
    assert table.defined.tolist() == [c > 0 for c in counts]
    assert table.cutoff.tolist() == [5, 50, 5, 37, 50, 2, 37]


@pytest.mark.parametrize(("relevance", "scores", "k", "count_pos", "message"), [
    (np.array([[0, 2]]), np.array([[0.1, 0.2]]), 2, None, "0/1"),
    (np.array([[0, 1]]), np.array([[np.nan, 0.2]]), 2, None, "finite"),
    (np.array([[0, 1]]), np.array([[0.1, 0.2, 0.3]]), 2, None, "aligned"),
    (np.array([[1, 1]]), np.array([[0.1, 0.2]]), 2, 1, "count_pos"),
    (np.array([[1, 1]]), np.array([[0.1, 0.2]]), 0, None, "positive integer"),
    (np.zeros((1, 0)), np.zeros((1, 0)), 2, None, "at least one candidate"),
])
def test_bad_input_is_a_clear_error(relevance: np.ndarray, scores: np.ndarray, k: int, count_pos: int | None,
                                    message: str) -> None:
    with pytest.raises(ValueError, match=message):
        score_queries(relevance, scores, k=k, count_pos=count_pos)


def test_a_nan_in_a_defined_query_is_refused_by_the_mean() -> None:
    with pytest.raises(ValueError, match="NaN"):
        macro_means({"ap": np.array([10.0, np.nan])}, config=RetrievalConfig(n_resamples=10))


# --- means, breakdowns, registry -----------------------------------------------------------------------------------


def test_macro_means_use_the_bootstrap_over_defined_queries() -> None:
    rng = np.random.default_rng(7)
    relevance = rng.random((40, 100)) < 0.2
    relevance[:5] = False
    table = score_queries(relevance, rng.normal(size=(40, 100)), k=100)
    config = RetrievalConfig(k=100, n_resamples=2000, seed=3)
    summary = table.summary(config)
    expected = bootstrap_ci(table.ndcg[5:], n_resamples=2000, seed=3)
    assert summary.estimates["ndcg@100"] == expected
    assert summary.n_excluded == 5 and set(summary.estimates) == set(metric_names(100).values())


def test_breakdown_by_a_per_query_key() -> None:
    rng = np.random.default_rng(8)
    relevance = rng.random((30, 20)) < 0.3
    relevance[[3, 4]] = False
    table = score_queries(relevance, rng.normal(size=(30, 20)), k=20)
    keys = np.array(["Appearance", "Behavior", "Context"] * 10)
    keys[[3, 4]] = "Species"  # a group whose only queries have no positive
    groups = summarize_by(table, keys, RetrievalConfig(k=20, n_resamples=200))
    assert list(groups) == ["Appearance", "Behavior", "Context", "Species"]
    assert groups["Species"].estimates == {} and groups["Species"].n_excluded == 2
    overall = table.summary(RetrievalConfig(k=20, n_resamples=200)).estimates["ap@20"].value
    weighted = sum(g.estimates["ap@20"].value * g.n_scored for g in groups.values() if g.estimates)
    assert weighted / table.defined.sum() == pytest.approx(overall)
    for name, group in groups.items():
        members = (keys == name) & table.defined
        if members.any():
            assert group.estimates["mrr@20"].value == pytest.approx(table.mrr[members].mean())


def test_metric_definitions_are_registered_with_their_scale() -> None:
    assert protocol("inquire-rerank").k == 100 and protocol("inquire-fullrank").k == 50
    for config in PROTOCOLS.values():
        names = config.metric_names()
        assert names == {"ap": f"ap@{config.k}", "ndcg": f"ndcg@{config.k}", "mrr": f"mrr@{config.k}",
                         "precision": f"precision@{config.k}", "recall": f"recall@{config.k}"}
        assert all(name in METRIC_DEFINITIONS for name in names.values())
    assert "x100" in METRIC_DEFINITIONS["ap@100"] and "unscaled" in METRIC_DEFINITIONS["mrr@100"]
    with pytest.raises(UnknownNameError, match="inquire-rerank"):
        protocol("inquire-rernak")
    with pytest.raises(ValueError):
        RetrievalConfig(k=0)
    table = score_queries(np.array([[1, 0]]), np.array([[0.2, 0.1]]), k=2)
    with pytest.raises(ValueError, match="k=2"):
        summarize(table, RetrievalConfig(k=100))
    assert RetrievalConfig().to_dict() == {"k": 100, "n_resamples": 10_000, "confidence": 0.95, "seed": 0}


def test_docstring_examples_run() -> None:
    result = doctest.testmod(cladebench.metrics.retrieval)
    assert result.failed == 0 and result.attempted > 0


# --- a real per-query result file of INQUIRE-Rerank ----------------------------------------------------------------

ORACLE = "Yuyan-C-llm-course-project/results_rerank_with_clip_test.vitb32_bioclip_rows.csv"
MANIFEST_MEANS = {"vit-b-32": (30.56, 59.40, 0.473), "bioclip": (28.81, 57.29, 0.409)}


def read_oracle(path: Path) -> dict[str, np.ndarray]:
    import csv

    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {"model": np.array([r["model"] for r in rows]), "query": np.array([r["query"] for r in rows]),
            **{name: np.array([float(r[name]) for r in rows]) for name in ("ap", "ndcg", "mrr")}}


def test_oracle_means_equal_the_reported_ones(realdata: Callable[[str], Path]) -> None:
    oracle = read_oracle(realdata(ORACLE))
    by_model = macro_means_by({name: oracle[name] for name in ("ap", "ndcg", "mrr")}, oracle["model"],
                              config=RetrievalConfig(n_resamples=1000))
    assert set(by_model) == set(MANIFEST_MEANS)
    for model, (ap, ndcg, mrr) in MANIFEST_MEANS.items():
        summary = by_model[model]
        assert (summary.n_queries, summary.n_excluded) == (160, 0)
        got = summary.estimates
        assert (round(got["ap"].value, 2), round(got["ndcg"].value, 2), round(got["mrr"].value, 3)) == (ap, ndcg, mrr)
        assert got["ap"].low < got["ap"].value < got["ap"].high


def candidate_rankings(ap: float, mrr: float, n: int = 100, max_positives: int = 4) -> list[tuple[int, ...]]:
    """Ranks of all positives that give this AP and MRR for up to ``max_positives`` positives among n, no ties.

    With every positive among the candidates (Rerank), AP/100 = (1/P) sum_i i / r_i and MRR = 1/r_1: given r_1
    and all but the last rank, the last one is fixed by the AP.
    """
    first = round(1 / mrr)
    found: list[tuple[int, ...]] = [(first,)]
    for positives in range(2, max_positives + 1):
        combos = list(itertools.combinations(range(first + 1, n), positives - 2))
        middle = np.array(combos, dtype=float).reshape(len(combos), positives - 2)
        rest = positives * ap / 100 - 1 / first - (np.arange(2, positives) / middle).sum(axis=1)
        last = np.where(rest > 0, positives / np.where(rest > 0, rest, 1), 0.0)  # 0: no rank, rejected below
        previous = middle[:, -1] if positives > 2 else np.full(len(middle), first)
        valid = (np.abs(last - np.round(last)) < 1e-6) & (np.round(last) > previous) & (np.round(last) <= n)
        found += [(first, *map(int, m), round(float(r))) for m, r in zip(middle[valid], last[valid], strict=True)]
    return found


def test_oracle_rows_are_reproduced_from_reconstructed_rankings(realdata: Callable[[str], Path]) -> None:
    """Rebuild the ranking behind rows with few positives and score it: all three oracle values must come back.

    The file holds only the metric values. For a query with at most 4 positives, AP and MRR admit few rankings;
    each is scored here, and the rows where exactly one reproduces AP, nDCG and MRR (the nDCG being an independent
    check) identify the query's positive count. That count belongs to the query, not the model, so both models'
    rows of a query must agree on it.
    """
    oracle = read_oracle(realdata(ORACLE))
    reciprocal = 1 / oracle["mrr"]
    assert np.allclose(reciprocal, np.round(reciprocal), atol=1e-9) and reciprocal.max() <= 100  # ranks of 100
    positive_count: dict[tuple[str, str], int] = {}
    for row in range(oracle["ap"].size):
        rankings = candidate_rankings(oracle["ap"][row], oracle["mrr"][row])
        relevance = np.zeros((len(rankings), 100), dtype=bool)
        for i, ranks in enumerate(rankings):
            relevance[i, np.array(ranks) - 1] = True
        table = score_queries(relevance, np.broadcast_to(-np.arange(100.0), relevance.shape), k=100)
        reproduced = (np.isclose(table.ap, oracle["ap"][row], rtol=1e-9)
                      & np.isclose(table.ndcg, oracle["ndcg"][row], rtol=1e-9)
                      & np.isclose(table.mrr, oracle["mrr"][row], rtol=1e-9))
        if reproduced.sum() == 1:
            positive_count[(oracle["model"][row], oracle["query"][row])] = int(table.count_pos[reproduced][0])
    assert len(positive_count) >= 50  # 54 rows in the file
    assert set(positive_count.values()) == {1, 2, 3, 4}
    both = [q for (model, q) in positive_count if model == "bioclip" and ("vit-b-32", q) in positive_count]
    assert len(both) >= 20
    assert all(positive_count[("bioclip", q)] == positive_count[("vit-b-32", q)] for q in both)
    # Rows with AP = 100 MRR: one positive, or (one bioclip row) two positives at ranks r and 2r.
    single = np.isclose(oracle["ap"], 100 * oracle["mrr"], rtol=1e-9) & (oracle["mrr"] < 1)
    assert single.sum() >= 10
    single_rows = zip(oracle["model"][single], oracle["query"][single], strict=True)
    assert all(positive_count.get((model, query)) in (1, 2) for model, query in single_rows)
