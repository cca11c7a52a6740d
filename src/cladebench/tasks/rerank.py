"""Reranking: order each query's candidate images by how well they match the query text (INQUIRE-Rerank).

Each row of the dataset is one (query, candidate) pair: ``query_id``, ``query`` (the text), ``relevant``
(the annotation) and the candidate's image. A scorer gives every pair a number, candidates are ranked
by it within their query, and the ranking is scored with INQUIRE's own formulas
(:mod:`cladebench.metrics.retrieval`): AP and nDCG over all candidates, normalised by the positives
among them, MRR; macro means over queries with bootstrap intervals over queries.

Scorers form a registry keyed by the kind of model:

- ``clip``: cosine similarity between the stored image embedding (an ``emb_*`` column made with the
  model) and the text embedding of the query. The raw query text is encoded as INQUIRE does
  (``query_templates="raw"``); a template set may be chosen instead and is recorded.
- ``vlm``: an OpenAI-compatible chat endpoint (``openai-compatible:NAME@URL``) asked "Does this picture
  show {query}? Answer Yes or No."; the score is P(Yes) / (P(Yes) + P(No)) of the first token
  (:mod:`cladebench.models.vlm`, with its on-disk cache, so a rerun is free). A candidate whose answer has
  neither Yes nor No among the top tokens has no score: it is ranked below every scored candidate of its
  query (a conservative choice: it cannot help its query) and counted. So is a candidate whose answer
  failed validation (``invalid_response``), that came without logprobs (``no_logprobs``: some gateways drop
  them now and then) or whose image did not decode (``bad_image``); the run says
  on stderr how many were unscored, and when more than :data:`MAX_UNSCORED_SHARE` of the candidates are,
  no metric is reported (its value is null, with the reason): a ranking that is mostly ties at the
  bottom measures the endpoint's failures, not the model.

Tied scores (a VLM's P(Yes) ties often) follow :mod:`cladebench.metrics.retrieval`: AP and nDCG take sklearn's
tie handling, as INQUIRE's code does; MRR is the expected reciprocal rank over the orders of a tie, where
INQUIRE's code takes numpy's argsort order. The run record's task section counts the queries where a tie
straddled the cutoff (``ties_at_cut``) and where a tie mixed relevant and irrelevant candidates
(``mixed_ties``), with both rules in words.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench import store
from cladebench.console import note, warn
from cladebench.errors import CladebenchError, SchemaError
from cladebench.models.spec import ANSWERS, EMBEDS_IMAGES, EMBEDS_TEXTS, first_fitting
from cladebench.registry import Registry
from cladebench.store.embeddings import normalise_rows
from cladebench.tasks.common import MAX_UNUSABLE_SHARE, Predictions, text_image_column
from cladebench.tasks.configs import RERANK_K, RerankConfig

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder
    from cladebench.models.endpoint import EndpointModel
    from cladebench.models.spec import ImageTextEncoder, Model

UNSCORED = -1.0
"""Score given to a candidate the scorer could not score: below every real score (all lie in [-1, 1])."""

MAX_UNSCORED_SHARE = MAX_UNUSABLE_SHARE
"""Largest share of candidates without a score for which metrics are still reported ("most" unscored: none)."""


_REQUIRED = ("uuid", "query_id", "query", "relevant")


def _read(dataset: lance.LanceDataset, config: RerankConfig, extra: tuple[str, ...]) -> pa.Table:
    missing = [c for c in _REQUIRED if c not in dataset.schema.names]
    if missing:
        raise SchemaError(f"{dataset.uri} lacks the rerank columns {missing}: each row must be one (query, candidate) "
                          "pair with query_id, query and relevant (as `cladebench load inquire-rerank` writes)")
    table = store.read(dataset, columns=[*_REQUIRED, *extra], where=config.where)
    if table.num_rows == 0:
        raise CladebenchError(f"no rows of {dataset.uri} match the filter {config.where!r}")
    nulls = [c for c in ("query_id", "query", "relevant") if table.column(c).null_count]
    if nulls:
        row = int(np.flatnonzero(table.column(nulls[0]).is_null().to_numpy(zero_copy_only=False))[0])
        raise SchemaError(f"{dataset.uri}: row uuid={table.column('uuid')[row]} has no {nulls[0]}")
    return table


def _clip_scores(dataset: lance.LanceDataset, encoder: Encoder, config: RerankConfig) -> tuple[pa.Table, np.ndarray,
                                                                                              dict[str, Any]]:
    from cladebench.models import class_text_embeddings
    from cladebench.store.embeddings import valid_embeddings

    column, meta = text_image_column(dataset, encoder, config.column, task="rerank")
    everything = _read(dataset, config, ())
    rows, vectors = valid_embeddings(dataset, column, where=config.where, columns=_REQUIRED,
                                     dim=getattr(encoder, "dim", None))
    if rows.num_rows != everything.num_rows:
        raise CladebenchError(f"{everything.num_rows - rows.num_rows} candidates have no embedding in {column!r}; "
                              "a query scored without some of its candidates would be wrong; run `cladebench embed` "
                              "to finish the column")
    queries = sorted(set(rows.column("query").to_pylist()))
    text = class_text_embeddings(encoder, queries, config.query_templates)
    index = {q: i for i, q in enumerate(queries)}
    images = normalise_rows(vectors)
    query_index = np.array([index[q] for q in rows.column("query").to_pylist()])
    scores = np.einsum("ij,ij->i", images, text[query_index]).astype(np.float64)
    info = {"column": column, "embedding_metadata": meta, "query_templates": config.query_templates,
            "scorer": "clip: cosine of normalised image and query-text embeddings"}
    return rows, scores, info


def _vlm_scores(dataset: lance.LanceDataset, encoder: EndpointModel, config: RerankConfig
                ) -> tuple[pa.Table, np.ndarray, dict[str, Any]]:
    from cladebench.models.vlm import VLMConfig, YesNoItem, score_yes_no

    rows = _read(dataset, config, ("image",))
    vlm_config = VLMConfig(prompt_template=config.vlm_prompt, concurrency=config.vlm_concurrency, progress=True,
                           request_deadline_s=config.vlm_deadline_s,
                           max_response_bytes=config.vlm_max_response_bytes)
    items = [YesNoItem(key=u, image=i, query=q) for u, i, q in zip(
        rows.column("uuid").to_pylist(), rows.column("image").to_pylist(), rows.column("query").to_pylist(),
        strict=True)]
    results = score_yes_no(items, encoder.endpoint, vlm_config)
    scores = np.array([UNSCORED if r.score is None else r.score for r in results], dtype=np.float64)
    outcomes: dict[str, int] = {}
    for result in results:
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
    rows = rows.drop_columns(["image"]).append_column("outcome", pa.array([r.outcome for r in results]))
    rows = rows.append_column("outcome_reason", pa.array([r.reason for r in results], pa.string()))
    unscored = sum(r.score is None for r in results)
    if unscored:
        counts = ", ".join(f"{o} {n}" for o, n in sorted(outcomes.items()) if o != "scored")
        warn(f"[rerank] {unscored} of {len(results)} candidates have no score ({counts}); they rank last in their "
             "query" + ("; too many to report a metric" if unscored > MAX_UNSCORED_SHARE * len(results) else ""))
    info = {"scorer": "vlm: P(Yes) / (P(Yes) + P(No)) of the first token", "vlm": vlm_config.provenance(),
            "outcomes": outcomes, "cached": sum(r.cached for r in results), "unscored": unscored,
            "unscored_rule": f"candidates without a score rank last in their query (score {UNSCORED}); metrics are "
                             f"not reported when more than {MAX_UNSCORED_SHARE:.0%} of the candidates are unscored"}
    return rows, scores, info


def _unscored_refusal(predictions: Predictions) -> str | None:
    """Why no metric may be reported (most candidates have no score), or None."""
    table = predictions.table
    if "outcome" not in table.column_names or table.num_rows == 0:
        return None
    unscored = table.num_rows - pc.sum(pc.equal(table.column("outcome"), "scored").cast(pa.int64())).as_py()
    if unscored <= MAX_UNSCORED_SHARE * table.num_rows:
        return None
    return (f"not reported: {unscored} of {table.num_rows} candidates have no score (more than "
            f"{MAX_UNSCORED_SHARE:.0%}); a ranking that is mostly ties at the bottom would measure the failures")


SCORERS: Registry[Callable[..., tuple[pa.Table, np.ndarray, dict[str, Any]]]] = Registry("rerank scorer")
"""Scorer name -> scorer; :data:`SCORER_NEEDS` says which models each takes."""
SCORERS.add("clip", _clip_scores)
SCORERS.add("vlm", _vlm_scores)

SCORER_NEEDS: Mapping[str, frozenset[str]] = MappingProxyType({
    "clip": frozenset({EMBEDS_IMAGES, EMBEDS_TEXTS}), "vlm": frozenset({ANSWERS})})
"""Scorer -> what it needs of a model (an image and a text tower for a cosine; an endpoint for P(Yes)), tried in
this order."""
MODEL_NEEDS: tuple[frozenset[str], ...] = tuple(SCORER_NEEDS.values())
"""What rerank needs of a model: any one scorer's needs."""


def scorer_for(encoder: Model | ImageTextEncoder) -> str:
    """The first scorer whose needs the model meets (the plan refused a model that meets none)."""
    return first_fitting("rerank", SCORER_NEEDS, encoder)


@dataclass(frozen=True)
class RankedPredictions(Predictions):
    """Rerank's predictions with each query's ranking already scored, so the metrics do not score it again."""

    scored: tuple[pa.Table, dict[str, object]] | None = field(default=None, repr=False, compare=False)
    """(the table it was computed from, :func:`per_query_table` of it). Kept with its table: a copy whose table
    differs (a breakdown's subset of the rows) is scored afresh."""


def _cutoff(rerank_k: int, table: pa.Table) -> dict[str, object]:
    """The cutoff the metrics are named and computed at: ``rerank_k``, or, when it is above both the default and
    every query's candidates (``--rerank-k 1000000``), the larger of the two, said once on stderr and kept in the
    record beside the value given. Every candidate is ranked either way, as INQUIRE's code ranks each query's whole
    list; ``ap@1000000`` would name a million candidates where a query has a hundred."""
    most = max(Counter(table.column("query_id").to_pylist()).values(), default=0)
    named = max(most, RERANK_K)
    if rerank_k <= named:
        return {"rerank_k": rerank_k}
    note(f"[rerank] --rerank-k {rerank_k} is more than any query's candidates (at most {most}): every candidate is "
         f"ranked, and the metrics are named @{named}")
    return {"rerank_k": named, "rerank_k_given": rerank_k,
            "rerank_k_rule": f"--rerank-k {rerank_k} capped at {named}: the larger of the most candidates a query "
                             f"has ({most}) and the default ({RERANK_K}); every candidate ranked"}


def rerank(dataset: lance.LanceDataset, encoder: Model | ImageTextEncoder | None, config: RerankConfig) -> Predictions:
    """Score every (query, candidate) row; see the module docstring."""
    if encoder is None:
        raise CladebenchError("rerank needs a model: a CLIP-style model or openai-compatible:NAME@URL")
    rows, scores, info = SCORERS.get_named(scorer_for(encoder))(dataset, encoder, config)
    table = rows.append_column("score", pa.array(scores, pa.float64()))
    table = table.set_column(table.column_names.index("relevant"), "relevant",
                             pc.cast(table.column("relevant"), pa.bool_()))
    pairs = sorted(set(zip(table.column("query_id").to_pylist(), table.column("query").to_pylist(), strict=True)))
    ids = [p[0] for p in pairs]
    if len(set(ids)) != len(ids):
        raise SchemaError(f"{dataset.uri}: a query_id has more than one query text")
    digest = hashlib.sha256(json.dumps([[str(i), q] for i, q in pairs], ensure_ascii=False).encode()).hexdigest()
    info.update({
        **_cutoff(config.rerank_k, table), "where": config.where,
        "label_set": {"kind": "queries", "size": len(pairs), "sha256": digest},
        "candidates": table.num_rows,
    })
    labels = [q for _, q in pairs]
    scored = per_query_table(Predictions(table=table, labels=labels, info=info))
    # How often ties decided something (the cut, or MRR's expectation over tie orders), with the rules applied.
    info.update(scored["scores"].tie_counts())
    return RankedPredictions(table=table, labels=labels, info=info, scored=(table, scored))


def rerank_metrics(predictions: Predictions) -> dict[str, dict[str, object]]:
    """INQUIRE's metrics per query (AP and nDCG x100, MRR), macro-averaged with bootstrap intervals over queries.

    Queries without a relevant candidate are undefined and excluded from every mean; how many is recorded.
    """
    from cladebench.metrics.retrieval import RetrievalConfig, summarize

    per_query = per_query_table(predictions)
    config = RetrievalConfig(k=predictions.info["rerank_k"])
    summary = summarize(per_query["scores"], config)
    refused = _unscored_refusal(predictions)
    out = {}
    for name, estimate in summary.recorded().items():  # a query set without a positive: each metric with why
        out[name] = {**estimate, "queries_excluded": summary.n_excluded}
        if refused is not None:
            out[name].update(value=None, low=None, high=None, reason=refused)
    return out


def per_query_table(predictions: Predictions) -> dict[str, Any]:
    """Each query's ranking scored (a :class:`~cladebench.metrics.retrieval.RetrievalTable`), with its ids in order.

    Predictions from :func:`rerank` carry this already (scored once, for the tie counts); it is reused while the
    table is the one it was computed from."""
    from cladebench.metrics.retrieval import score_ragged

    if isinstance(predictions, RankedPredictions) and predictions.scored is not None \
            and predictions.scored[0] is predictions.table:
        return predictions.scored[1]
    table = predictions.table
    ids = np.asarray(table.column("query_id").to_pylist(), dtype=object)
    order = sorted(set(ids.tolist()))
    relevance = np.asarray(table.column("relevant").to_numpy(zero_copy_only=False), dtype=np.int64)
    scores = np.asarray(table.column("score").to_numpy(zero_copy_only=False), dtype=np.float64)
    positions = {q: np.flatnonzero(ids == q) for q in order}
    scored = score_ragged([relevance[positions[q]] for q in order], [scores[positions[q]] for q in order],
                          predictions.info["rerank_k"])
    return {"query_ids": order, "scores": scored}


def per_query_values(table: pa.Table, task_provenance: dict[str, object]) -> dict[str, tuple[list[object], np.ndarray]]:
    """Each query's AP, nDCG, MRR... from a run's predictions, keyed by query_id, for paired comparisons."""
    predictions = Predictions(table=table, labels=[], info={"rerank_k": task_provenance.get("rerank_k", 100)})
    scored = per_query_table(predictions)
    return {name: (scored["query_ids"], np.asarray(values, dtype=np.float64))
            for name, values in scored["scores"].columns().items()}
