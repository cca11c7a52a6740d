"""INQUIRE's ranking metrics (AP@k, nDCG@k, MRR, precision, recall), reproduced exactly and vectorised.

INQUIRE (Vendrow et al., NeurIPS 2024 Datasets & Benchmarks; ``inquire-benchmark/INQUIRE`` ``src/metrics.py``)
scores a ranked list of candidates per query with sklearn and averages over queries. Its numbers are the ones
papers quote, so these are its definitions, not the textbook ones. Given a query's candidates, their 0/1
relevance, their scores, ``count_pos`` (how many relevant items exist for the query) and a cutoff ``k``:

- the candidates are ranked by score, highest first, and the top ``c = min(k, n)`` are kept. INQUIRE's scripts
  pass exactly such a list (Rerank: all 100 candidates, k = 100; Fullrank: the top 50 retrieved) and use
  ``c = len(list)`` as the cutoff, so a query with fewer than k candidates is cut at its length, as there;
- **AP@k** = sklearn ``average_precision_score`` on the kept list, times ``hits / min(count_pos, c)``; 0 without a
  hit. The factor turns "mean precision over the hits" into "over the positives that could have been retrieved",
  so missed positives count against a model;
- **nDCG@k** = sklearn ``ndcg_score(k=c)`` on the kept list with the ``count_pos - hits`` unretrieved positives
  appended behind it, so the ideal DCG counts them (``min(count_pos, c)`` ones at the top);
- **MRR** = 1 / rank of the first relevant candidate in the kept list, 0 without one;
- **precision@k** = hits / c, **recall@k** = hits / count_pos.

Scales follow INQUIRE's reports: AP, nDCG, precision and recall are percentages (x100); MRR is in [0, 1].

Ties in scores. Both sklearn functions are defined on scores, not on an order, and this module follows them
exactly: ``average_precision_score`` takes each distinct score as one threshold, so a tied group enters the
precision-recall curve at once (every positive in the group gets the precision of the whole group, the
pessimistic side); ``ndcg_score`` (``ignore_ties=False``) gives every member of a tied group the group's mean
gain, which is DCG averaged over all orders of the tie (McSherry & Najork 2008). INQUIRE's MRR orders by
``np.argsort``, whose order among tied scores is unspecified (it changes with numpy's sort kernel and the CPU), so
it is not defined on ties; here MRR is the expected reciprocal rank over uniformly random orders of the tied
candidates, the same averaging as nDCG, so it does not depend on the order candidates were listed in. Without
ties all three equal INQUIRE's. Consequence: a query with a single positive has AP = 100 MRR without ties, and
AP < 100 MRR when the positive shares its score with other candidates. Which tied candidates are kept when a tie
straddles the cutoff (only possible when k < n) cannot be decided from scores; they are kept in candidate order
(a stable sort), and ``ties_at_cut`` flags the queries where that choice was made; ``mixed_ties`` flags the queries
where a tie among the kept candidates holds relevant and irrelevant ones, the only queries where the tie rule
changes MRR. :meth:`RetrievalTable.tie_counts` counts both for run records.

The appended unretrieved positives are ranked last. INQUIRE appends them with score -100, which is last for every
score it produces (cosines, probabilities); for a kept score at or below -100 its code would rank them inside
the list and credit the model for positives it never returned, so here they are last whatever the scores.

Queries without positives (``count_pos == 0``): every metric is undefined (0/0 for AP's factor and recall, and an
ideal DCG of 0), so the query is marked ``defined = False``, its values are NaN, and macro means leave it out and
say how many they left out. A mean never sees a NaN and never counts such a query as 0 (which would depend on how
many positive-free queries a split happens to hold). For comparison, INQUIRE's own code would return AP = NaN
(``0 * 0 / 0`` with a numpy warning; it never calls sklearn there), nDCG = 0 (sklearn scores an all-irrelevant
list 0), MRR = 0 and recall = NaN, so one such query turns its model's mean AP into NaN. sklearn's
``average_precision_score`` itself, given no positive, warns "No positive class found in y_true" and returns 0.0
(scikit-learn 1.9). INQUIRE-Rerank has no such query; a fullrank run on a custom split may.

One module of about 540 lines on purpose: the definitions above, the vectorised per-query computation and the
means over queries are one reproduction of INQUIRE's code, read, and tested against it, together.

Example:
    >>> import numpy as np
    >>> q = score_query(np.array([0, 1, 0, 1]), np.array([0.9, 0.8, 0.3, 0.1]), k=4)
    >>> round(q.ap, 4), round(q.ndcg, 4), q.mrr, q.precision
    (50.0, 65.0921, 0.5, 50.0)
    >>> table = score_queries(np.array([[0, 1, 0, 1], [0, 0, 0, 0]]), np.array([[4.0, 3, 2, 1], [4, 3, 2, 1]]), k=4)
    >>> table.defined.tolist(), summarize(table, RetrievalConfig(k=4, n_resamples=200)).n_excluded
    ([True, False], 1)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from cladebench.errors import unknown_name
from cladebench.metrics.definitions import define_metric
from cladebench.metrics.display import register_display
from cladebench.metrics.intervals import Estimate, bootstrap_ci

METRIC_FIELDS = ("ap", "ndcg", "mrr", "precision", "recall")
"""The per-query metrics, in report order; their registered names carry the cutoff (:func:`metric_names`)."""
COUNT_FIELDS = ("count_pos", "hits", "cutoff", "ties_at_cut", "mixed_ties", "defined")
"""The per-query counts and flags that come with the metrics."""

_DEFINITIONS = {
    "ap": ("INQUIRE AP@{k}, x100: candidates ranked by score, top c = min({k}, n) kept, n being the query's "
           "candidates (fullrank: the rows retrieved, fewer than {k} only when fewer pass the filter; INQUIRE's "
           "compute_retrieval_metrics likewise cuts at the length of the list) and ties at the cut kept in candidate "
           "order (ties_at_cut counts the queries); sklearn average_precision_score on them (each distinct score "
           "one threshold, as in INQUIRE's ap_at_k) times hits / min(count_pos, c); 0 without a hit; undefined when "
           "count_pos = 0 (query left out of means)"),
    "ndcg": ("INQUIRE nDCG@{k}, x100: sklearn ndcg_score(k=c, ties averaged, as in INQUIRE's ndcg_at_k) over the top "
             "c = min({k}, n) candidates with the count_pos - hits unretrieved positives ranked last; undefined "
             "when count_pos = 0"),
    "mrr": ("INQUIRE MRR within the top c = min({k}, n) candidates, unscaled: 1 / rank of the first relevant one, "
            "0 without one; {tie_rule}; undefined when count_pos = 0"),
    "precision": "precision@{k}, x100: relevant candidates among the top c = min({k}, n), divided by c",
    "recall": "recall@{k}, x100: relevant candidates among the top c = min({k}, n), divided by count_pos",
}

MRR_TIE_RULE = ("tied scores: the expected reciprocal rank over uniformly random orders of each tie (differs on "
                "purpose from INQUIRE's mrr(), which takes np.argsort's order, unspecified among ties; without ties "
                "the two are equal; mixed_ties counts the queries where a tie holds relevant and irrelevant "
                "candidates)")
"""How MRR treats tied scores; part of the MRR definition recorded in every run record that reports it."""
TIES_AT_CUT_RULE = ("when a tie straddles the cutoff (only when k < n), the tied candidates are kept in candidate "
                    "order (a stable sort); ties_at_cut counts the queries where that choice was made")
"""Which tied candidates are kept when a tie straddles the cutoff."""

EXCLUSION_RULE = ("queries with count_pos = 0 have undefined metrics and are left out of every mean; "
                  "n_excluded counts them")


def metric_names(k: int) -> dict[str, str]:
    """Registered metric names for cutoff ``k`` by field: ``{"ap": "ap@100", "mrr": "mrr@100", ...}``.

    MRR carries the cutoff too because it is computed within the kept list (Fullrank's MRR is over the top 50).
    Registering here, on first use of a cutoff, puts the exact definitions into every run record that reports them.
    """
    _check_k(k)
    return {name: define_metric(f"{name}@{k}", _DEFINITIONS[name].format(k=k, tie_rule=MRR_TIE_RULE))
            for name in METRIC_FIELDS}


# AP, nDCG, precision and recall are reported x100 as the INQUIRE paper does; MRR stays in [0, 1].
register_display(r"(ap|ndcg|precision|recall)@\d+", 1.0, "")
register_display(r"mrr@\d+", 1.0, "")


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


@dataclass(frozen=True)
class RetrievalConfig:
    """How per-query metrics are cut and how their means' intervals are computed."""

    k: int = 100
    """Cutoff: only the top min(k, n) candidates by score count (INQUIRE-Rerank 100, INQUIRE-Fullrank 50)."""
    n_resamples: int = 10_000
    """Bootstrap resamples of the queries for each mean's interval."""
    confidence: float = 0.95
    """Confidence level of the intervals."""
    seed: int = 0
    """Seed of the bootstrap."""

    def __post_init__(self) -> None:
        _check_k(self.k)

    def metric_names(self) -> dict[str, str]:
        return metric_names(self.k)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


PROTOCOLS: dict[str, RetrievalConfig] = {
    "inquire-rerank": RetrievalConfig(k=100),
    "inquire-fullrank": RetrievalConfig(k=50),
}
"""Registry: evaluation protocol -> its settings (``src/eval_rerank_with_clip.py`` and ``src/eval_fullrank.py``)."""

for _config in PROTOCOLS.values():
    _config.metric_names()


def protocol(name: str) -> RetrievalConfig:
    """The settings of a registered protocol; an unknown name lists the known ones."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise unknown_name("retrieval protocol", name, PROTOCOLS) from None


# --- per-query results ---------------------------------------------------------------------------


def _json_float(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


@dataclass(frozen=True)
class QueryScores:
    """The metrics of one query. Values are NaN when ``defined`` is False (the query has no positive)."""

    k: int
    """Cutoff asked for."""
    ap: float
    """AP@k x100."""
    ndcg: float
    """nDCG@k x100."""
    mrr: float
    """Reciprocal rank of the first relevant candidate in the top cutoff (expected value over ties)."""
    precision: float
    """precision@k x100."""
    recall: float
    """recall@k x100."""
    count_pos: int
    """Relevant items that exist for the query (the normaliser of AP, nDCG and recall)."""
    hits: int
    """Relevant candidates among the kept ones."""
    cutoff: int
    """Candidates kept: min(k, number of candidates)."""
    ties_at_cut: bool
    """A tie straddled the cutoff, so candidate order decided which tied candidates were kept."""
    mixed_ties: bool
    """Some tie among the kept candidates holds relevant and irrelevant ones, so the tie rule decided MRR (and
    AP and nDCG took sklearn's tie handling): where INQUIRE's argsort-ordered MRR may differ."""
    defined: bool
    """False when count_pos is 0: the metrics are undefined and the query is left out of means."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: undefined values become None."""
        out = asdict(self)
        out.update({name: _json_float(getattr(self, name)) for name in METRIC_FIELDS})
        return out


@dataclass(frozen=True, eq=False)
class RetrievalTable:
    """The metrics of many queries, one array entry per query, in input order.

    The per-query rows are what paired comparisons and breakdowns need; :meth:`summary` gives the macro means.
    """

    k: int
    """Cutoff asked for."""
    ap: np.ndarray
    """AP@k x100 per query; NaN where undefined."""
    ndcg: np.ndarray
    """nDCG@k x100 per query; NaN where undefined."""
    mrr: np.ndarray
    """MRR per query; NaN where undefined."""
    precision: np.ndarray
    """precision@k x100 per query; NaN where undefined."""
    recall: np.ndarray
    """recall@k x100 per query; NaN where undefined."""
    count_pos: np.ndarray
    """Relevant items per query."""
    hits: np.ndarray
    """Relevant candidates among the kept ones per query."""
    cutoff: np.ndarray
    """Candidates kept per query: min(k, n)."""
    ties_at_cut: np.ndarray
    """Whether candidate order decided which tied candidates were kept."""
    mixed_ties: np.ndarray
    """Whether a tie among the kept candidates holds relevant and irrelevant ones (the tie rule decided MRR)."""
    defined: np.ndarray
    """False for queries without positives."""

    def __len__(self) -> int:
        return int(self.defined.size)

    def columns(self) -> dict[str, np.ndarray]:
        """Per-query values by registered metric name (``"ap@100"`` ...)."""
        return {name: getattr(self, fld) for fld, name in metric_names(self.k).items()}

    def query(self, index: int) -> QueryScores:
        """One query's row."""
        return QueryScores(k=self.k, **{fld: float(getattr(self, fld)[index]) for fld in METRIC_FIELDS},
                           count_pos=int(self.count_pos[index]), hits=int(self.hits[index]),
                           cutoff=int(self.cutoff[index]), ties_at_cut=bool(self.ties_at_cut[index]),
                           mixed_ties=bool(self.mixed_ties[index]), defined=bool(self.defined[index]))

    def tie_counts(self) -> dict[str, object]:
        """How often ties mattered, for a run record: queries with a tie at the cut, queries whose kept candidates
        hold a tie of relevant and irrelevant ones, and the rules applied to each."""
        return {"ties_at_cut": int(self.ties_at_cut.sum()), "mixed_ties": int(self.mixed_ties.sum()),
                "ties_at_cut_rule": TIES_AT_CUT_RULE, "mrr_tie_rule": MRR_TIE_RULE}

    def summary(self, config: RetrievalConfig | None = None) -> RetrievalSummary:
        """Macro means over the defined queries (:func:`summarize`)."""
        return summarize(self, config)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready columns: metric values under their registered names, undefined values as None."""
        out: dict[str, object] = {"k": self.k}
        for name, values in self.columns().items():
            out[name] = [_json_float(v) for v in values]
        for fld in COUNT_FIELDS:
            out[fld] = getattr(self, fld).tolist()
        return out


# --- the computation -----------------------------------------------------------------------------


def _checked_inputs(relevance: np.ndarray, scores: np.ndarray,
                    count_pos: np.ndarray | int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    relevance = np.asarray(relevance)
    scores = np.asarray(scores, dtype=np.float64)
    if relevance.ndim != 2 or relevance.shape != scores.shape:
        raise ValueError(f"relevance and scores must be aligned (queries, candidates) arrays, got shapes "
                         f"{relevance.shape} and {scores.shape}")
    if relevance.shape[1] == 0:
        raise ValueError("a query needs at least one candidate")
    if not np.isin(relevance, (0, 1)).all():
        raise ValueError("relevance must be 0/1 (binary, as in INQUIRE)")
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite (NaN or inf has no rank)")
    relevance = relevance.astype(bool)
    present = relevance.sum(axis=1)
    if count_pos is None:
        return relevance, scores, present
    counts = np.broadcast_to(np.asarray(count_pos), present.shape)
    if not np.issubdtype(counts.dtype, np.integer) or (counts < present).any():
        raise ValueError("count_pos must be integers at least the number of relevant candidates of each query")
    return relevance, scores, counts.astype(np.int64)


def _tie_groups(ranked_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each position of rows sorted descending, the first and last position of its run of equal scores."""
    rows, width = ranked_scores.shape
    position = np.broadcast_to(np.arange(width), (rows, width))
    changes = ranked_scores[:, 1:] != ranked_scores[:, :-1]
    starts_run = np.concatenate([np.ones((rows, 1), dtype=bool), changes], axis=1)
    ends_run = np.concatenate([changes, np.ones((rows, 1), dtype=bool)], axis=1)
    start = np.maximum.accumulate(np.where(starts_run, position, 0), axis=1)
    end = np.minimum.accumulate(np.where(ends_run, position, width)[:, ::-1], axis=1)[:, ::-1]
    return start, end


def _average_precision(gains: np.ndarray, cum_gains: np.ndarray, end: np.ndarray,
                       normaliser: np.ndarray) -> np.ndarray:
    """INQUIRE's AP: each hit contributes the precision at the end of its tie group, summed over min(count_pos, c).

    sklearn's AP is sum over thresholds of (recall step) x precision, recall normalised by the hits; INQUIRE
    multiplies by hits / min(count_pos, c), which cancels that normalisation, so no division by the hits is needed
    and a query without a hit scores 0 with no special case.
    """
    precision_at_group_end = np.take_along_axis(cum_gains, end, axis=1) / (end + 1)
    return (gains * precision_at_group_end).sum(axis=1) / normaliser


def _discounts(width: int) -> np.ndarray:
    # sklearn's expression, so the floating-point values agree with it to the last bits.
    return 1 / (np.log(np.arange(width) + 2) / np.log(2))


def _ndcg(gains: np.ndarray, cum_gains: np.ndarray, start: np.ndarray, end: np.ndarray,
          ideal_hits: np.ndarray) -> np.ndarray:
    """Tie-averaged DCG of the kept list over the DCG of ``ideal_hits`` relevant items on top.

    The unretrieved positives INQUIRE appends rank below the cutoff, so they add nothing to the DCG; they only
    raise the ideal count to min(count_pos, c).
    """
    cum_before = cum_gains - gains
    group_gain = np.take_along_axis(cum_gains, end, axis=1) - np.take_along_axis(cum_before, start, axis=1)
    mean_gain = group_gain / (end - start + 1)
    discount = _discounts(gains.shape[1])
    ideal = np.concatenate([[0.0], np.cumsum(discount)])[ideal_hits]
    dcg = (mean_gain * discount).sum(axis=1)
    return np.divide(dcg, ideal, out=np.zeros_like(dcg), where=ideal > 0)


def _expected_reciprocal_rank(gains: np.ndarray, cum_gains: np.ndarray, start: np.ndarray,
                              end: np.ndarray) -> np.ndarray:
    """E[1 / rank of the first hit] when each tie group is put in uniformly random order.

    Only the first group holding a hit matters: c candidates precede it (none relevant), it has m members, p of
    them relevant. The first hit is its j-th member with probability P(first j-1 irrelevant) x p / (m - j + 1),
    the survival term being the running product of (m - p - i) / (m - i): hypergeometric, without a factorial
    that could overflow. Without a tie (m = p = 1) this is exactly 1 / (c + 1).
    """
    rows, width = gains.shape
    has_hit = cum_gains[:, -1] > 0
    first = np.argmax(gains > 0, axis=1)[:, None]
    before = np.take_along_axis(start, first, axis=1)
    members = np.take_along_axis(end, first, axis=1) - before + 1
    relevant = (np.take_along_axis(cum_gains, np.take_along_axis(end, first, axis=1), axis=1)
                - np.take_along_axis(cum_gains - gains, before, axis=1))
    i = np.arange(width)[None, :]
    irrelevant_step = np.where(i < members - relevant, (members - relevant - i) / np.maximum(members - i, 1), 0.0)
    survive = np.concatenate([np.ones((rows, 1)), np.cumprod(irrelevant_step, axis=1)[:, :-1]], axis=1)
    first_hit_at = np.where(i < members, survive * relevant / np.maximum(members - i, 1), 0.0)
    expected = (first_hit_at / (before + i + 1)).sum(axis=1)
    return np.where(has_hit, expected, 0.0)


def score_queries(relevance: np.ndarray, scores: np.ndarray, k: int,
                  count_pos: np.ndarray | int | None = None) -> RetrievalTable:
    """INQUIRE's metrics for queries with the same number of candidates (INQUIRE-Rerank: 100 each).

    ``relevance`` (0/1) and ``scores`` have shape (queries, candidates). ``count_pos`` per query (or one number
    for all) is how many relevant items exist; by default the relevant candidates, as in Rerank. Fullrank passes
    the number of annotated positives, which may exceed what the candidates hold; it may not be smaller.
    """
    _check_k(k)
    relevance, scores, counts = _checked_inputs(relevance, scores, count_pos)
    rows, n = scores.shape
    order = np.argsort(-scores, axis=1, kind="stable")
    cut = min(int(k), n)
    kept = order[:, :cut]
    ranked_scores = np.take_along_axis(scores, kept, axis=1)
    gains = np.take_along_axis(relevance, kept, axis=1).astype(np.float64)
    cum_gains = np.cumsum(gains, axis=1)
    hits = cum_gains[:, -1].astype(np.int64)
    start, end = _tie_groups(ranked_scores)
    defined = counts > 0
    retrievable = np.minimum(counts, cut)
    safe_retrievable = np.maximum(retrievable, 1)
    if cut < n:
        ties_at_cut = ranked_scores[:, -1] == np.take_along_axis(scores, order[:, cut:cut + 1], axis=1)[:, 0]
    else:
        ties_at_cut = np.zeros(rows, dtype=bool)
    group_relevant = (np.take_along_axis(cum_gains, end, axis=1)
                      - np.take_along_axis(cum_gains - gains, start, axis=1))
    mixed_ties = ((group_relevant > 0) & (group_relevant < end - start + 1)).any(axis=1)
    values = {
        "ap": 100.0 * _average_precision(gains, cum_gains, end, safe_retrievable),
        "ndcg": 100.0 * _ndcg(gains, cum_gains, start, end, retrievable),
        "mrr": _expected_reciprocal_rank(gains, cum_gains, start, end),
        "precision": 100.0 * hits / cut,
        "recall": 100.0 * hits / np.maximum(counts, 1),
    }
    values = {name: np.where(defined, v, np.nan) for name, v in values.items()}
    return RetrievalTable(k=int(k), **values, count_pos=counts.astype(np.int64), hits=hits,
                          cutoff=np.full(rows, cut, dtype=np.int64), ties_at_cut=ties_at_cut,
                          mixed_ties=mixed_ties, defined=defined)


def score_query(relevance: np.ndarray, scores: np.ndarray, k: int, count_pos: int | None = None) -> QueryScores:
    """INQUIRE's metrics for one query: ``relevance`` (0/1) and ``scores`` are 1-D over its candidates."""
    relevance = np.asarray(relevance)
    scores = np.asarray(scores)
    if relevance.ndim != 1 or scores.ndim != 1:
        raise ValueError(f"one query takes 1-D relevance and scores, got shapes {relevance.shape} and {scores.shape}")
    return score_queries(relevance[None, :], scores[None, :], k, count_pos).query(0)


def score_ragged(relevances: Sequence[np.ndarray], scores: Sequence[np.ndarray], k: int,
                 count_pos: Sequence[int] | np.ndarray | None = None) -> RetrievalTable:
    """INQUIRE's metrics for queries with different numbers of candidates, as one table in input order.

    Queries of equal length are scored together in one :func:`score_queries` call, so the cost is one
    vectorised pass per distinct length rather than one per query.
    """
    if len(relevances) != len(scores) or len(relevances) == 0:
        raise ValueError(f"need one non-empty score array per relevance array, got {len(relevances)} and "
                         f"{len(scores)}")
    counts = None if count_pos is None else np.asarray(count_pos)
    if counts is not None and counts.shape != (len(relevances),):
        raise ValueError(f"count_pos must give one count per query ({len(relevances)}), got shape {counts.shape}")
    lengths = np.array([np.size(r) for r in relevances])
    parts: dict[str, np.ndarray] = {}
    for length in np.unique(lengths):
        members = np.flatnonzero(lengths == length).tolist()
        block = score_queries(np.stack([np.asarray(relevances[i]) for i in members]),
                              np.stack([np.asarray(scores[i]) for i in members]), k,
                              None if counts is None else counts[members])
        for fld in (*METRIC_FIELDS, *COUNT_FIELDS):
            column = getattr(block, fld)
            if fld not in parts:
                parts[fld] = np.empty(lengths.size, dtype=column.dtype)
            parts[fld][members] = column
    return RetrievalTable(k=int(k), **parts)


# --- means over queries --------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalSummary:
    """Macro means (each query weighs the same) over the queries whose metrics are defined."""

    estimates: dict[str, Estimate] = field(default_factory=dict)
    """Mean of each metric with its percentile bootstrap interval over queries; empty when no query is defined."""
    n_queries: int = 0
    """Queries given."""
    n_excluded: int = 0
    """Queries left out because their metrics are undefined (no positive)."""
    exclusion: str = EXCLUSION_RULE
    """Which queries are left out, and why."""
    undefined: dict[str, str] = field(default_factory=dict)
    """Metric -> why it has no value: no query is defined (none has a relevant candidate)."""

    @property
    def n_scored(self) -> int:
        return self.n_queries - self.n_excluded

    def recorded(self) -> dict[str, dict[str, object]]:
        """Every metric as a run record keeps it: the estimates, and each undefined metric without a value, with its
        reason, so a query set without a relevant candidate is said rather than reported as no metrics at all."""
        out: dict[str, dict[str, object]] = {name: estimate.to_dict() for name, estimate in self.estimates.items()}
        for name, reason in self.undefined.items():
            out[name] = {"value": None, "low": None, "high": None, "n": 0, "reason": reason}
        return out

    def to_dict(self) -> dict[str, object]:
        return {"estimates": {name: e.to_dict() for name, e in self.estimates.items()},
                "n_queries": self.n_queries, "n_scored": self.n_scored, "n_excluded": self.n_excluded,
                "exclusion": self.exclusion}


def macro_means(values: Mapping[str, np.ndarray], defined: np.ndarray | None = None,
                config: RetrievalConfig | None = None) -> RetrievalSummary:
    """Mean over the defined queries of each metric in ``values`` (per-query arrays by name), with bootstrap CIs.

    ``defined`` marks the queries to average (all by default). A NaN in a defined query is an error, not something
    to skip: undefined queries must be marked, so the number left out is always reported. The interval resamples
    queries (:func:`cladebench.metrics.bootstrap_ci`), since queries are the sampling unit of a benchmark.
    """
    config = config or RetrievalConfig()
    arrays = {name: np.asarray(v, dtype=np.float64) for name, v in values.items()}
    n = len(next(iter(arrays.values()))) if arrays else 0
    mask = np.ones(n, dtype=bool) if defined is None else np.asarray(defined, dtype=bool)
    if any(v.shape != (n,) for v in arrays.values()) or mask.shape != (n,):
        raise ValueError("every metric and the defined mask need one value per query")
    estimates = {}
    for name, v in arrays.items():
        kept = v[mask]
        if np.isnan(kept).any():
            raise ValueError(f"{name} is NaN for a query marked defined")
        if kept.size:
            estimates[name] = bootstrap_ci(kept, n_resamples=config.n_resamples, confidence=config.confidence,
                                           seed=config.seed)
    undefined = {} if mask.any() or not n else {
        name: f"undefined: none of the {n} quer{'y' if n == 1 else 'ies'} has a relevant candidate" for name in arrays}
    return RetrievalSummary(estimates=estimates, n_queries=n, n_excluded=int(n - mask.sum()), undefined=undefined)


def _config_for(table: RetrievalTable, config: RetrievalConfig | None) -> RetrievalConfig:
    """The bootstrap settings to summarise ``table`` with; a config for another cutoff is a mix-up, not a choice."""
    if config is None:
        return RetrievalConfig(k=table.k)
    if config.k != table.k:
        raise ValueError(f"the table was scored at k={table.k}, the config says k={config.k}")
    return config


def summarize(table: RetrievalTable, config: RetrievalConfig | None = None) -> RetrievalSummary:
    """Macro means of a table's metrics under their registered names, queries without positives left out."""
    return macro_means(table.columns(), table.defined, _config_for(table, config))


def macro_means_by(values: Mapping[str, np.ndarray], keys: np.ndarray | Sequence[object],
                   defined: np.ndarray | None = None,
                   config: RetrievalConfig | None = None) -> dict[str, RetrievalSummary]:
    """:func:`macro_means` within each value of a per-query key (supercategory, category, iconic group, model).

    Keys are compared as strings, so they serve directly as JSON object keys; groups come back sorted.
    """
    labels = np.asarray([str(key) for key in keys])
    arrays = {name: np.asarray(v) for name, v in values.items()}
    mask = np.ones(labels.size, dtype=bool) if defined is None else np.asarray(defined, dtype=bool)
    if mask.shape != labels.shape:
        raise ValueError(f"keys must give one key per query ({mask.size}), got {labels.size}")
    return {str(label): macro_means({name: v[labels == label] for name, v in arrays.items()}, mask[labels == label],
                                    config)
            for label in np.unique(labels)}


def summarize_by(table: RetrievalTable, keys: np.ndarray | Sequence[object],
                 config: RetrievalConfig | None = None) -> dict[str, RetrievalSummary]:
    """Macro means of a table's metrics within each value of a per-query key."""
    return macro_means_by(table.columns(), keys, table.defined, _config_for(table, config))
