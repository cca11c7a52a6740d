"""Rerank with planted scores from a VLM endpoint on 127.0.0.1: ties counted in the run record, the tie rule
stated in the recorded MRR definition, and, on queries without ties, the record's means equal INQUIRE's
``compute_retrieval_metrics`` recomputed independently with sklearn as ``src/metrics.py`` calls it."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from PIL import Image
from sklearn.metrics import average_precision_score, ndcg_score

from cladebench import store
from cladebench.evaluate.configs import eval_config
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import run_eval
from helpers.http_local import ChatEndpoint, ChatRequest, serving, yes_no_reply

# Query id -> (query text, [(P(Yes), relevant), ...]) in candidate order.
TIE_AT_CUT = 1   # 102 candidates: 99 distinct scores, then three irrelevant ones tied across the cut at 100
MIXED_TIE = 2    # the top score shared by a relevant and an irrelevant candidate
PLAIN = (3, 4)   # no ties


def _planted() -> dict[int, tuple[str, list[tuple[float, bool]]]]:
    rng = np.random.default_rng(11)
    first = [(0.99 - 0.005 * i, bool(i % 4 == 1)) for i in range(99)] + [(0.2, False)] * 3
    mixed = [(0.9, False), (0.9, True), (0.7, False), (0.6, True), (0.5, False), (0.4, False)]
    plain = {}
    for query_id in PLAIN:
        p = rng.permutation(np.linspace(0.05, 0.95, 9))
        plain[query_id] = [(float(v), bool(r)) for v, r in zip(p, rng.random(9) < 0.4, strict=True)]
        plain[query_id][0] = (plain[query_id][0][0], True)  # a positive for sure
    return {TIE_AT_CUT: ("a heron in flight", first), MIXED_TIE: ("a crab on a can", mixed),
            PLAIN[0]: ("a fox at night", plain[PLAIN[0]]), PLAIN[1]: ("moss on a rock", plain[PLAIN[1]])}


def _png(index: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (index % 251, index // 251 % 251, 77)).save(buffer, format="PNG")
    return buffer.getvalue()


def _planted_answer(answers: dict[tuple[str, str], float]) -> Callable[[ChatRequest], dict[str, Any]]:
    """Answers Yes/No with the P(Yes) planted for (query text, image bytes)."""
    def answer(request: ChatRequest) -> dict[str, Any]:
        p_yes = next(p for (query, sha), p in answers.items() if sha == request.image_sha256 and query in request.text)
        return yes_no_reply(p_yes)

    return answer


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    rows, answers, index = [], {}, 0
    for query_id, (text, candidates) in _planted().items():
        for p_yes, relevant in candidates:
            image = _png(index)
            answers[(text, hashlib.sha256(image).hexdigest())] = p_yes
            rows.append({"uuid": f"c{index:04d}", "image": image, "query_id": query_id, "query": text,
                         "relevant": relevant})
            index += 1
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("uuid", pa.string()), ("image", pa.large_binary()), ("query_id", pa.int64()), ("query", pa.string()),
        ("relevant", pa.bool_())]))
    path = tmp_path / "planted.lance"
    store.write_dataset(table, path)
    server = ChatEndpoint(_planted_answer(answers))
    with serving(server):
        yield path, f"openai-compatible:planted@http://127.0.0.1:{server.server_address[1]}/v1"


def _inquire(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[float, float, float]:
    """INQUIRE-Rerank per query (eval_rerank_with_clip.py: count_pos = sum(y_true), k = len(y_true)), afresh."""
    k, count_pos = len(y_true), int(y_true.sum())
    ap = (average_precision_score(y_true[:k], y_pred[:k]) if y_true[:k].sum() > 0 else 0) * y_true[:k].sum() / min(
        count_pos, k)
    unknown = count_pos - int(y_true.sum())
    ndcg = ndcg_score([y_true.tolist() + [1] * unknown], [y_pred.tolist() + [-100] * unknown], k=k)
    order = np.flip(np.argsort(y_pred))
    mrr = next((1 / (i + 1) for i in range(k) if y_true[order][i] == 1), 0.0)
    return 100 * ap, 100 * ndcg, mrr


def test_ties_are_counted_and_the_tie_rule_is_in_the_recorded_definition(planted, tmp_path: Path) -> None:
    path, model = planted
    record, run = run_eval(eval_config(dataset=str(path), model=model, task="rerank", group_by="none",
                                       out=tmp_path / "run"))
    task = record.provenance["task"]
    assert task["ties_at_cut"] == 1  # query 1 only: its three tied candidates straddle the cut at 100
    assert task["mixed_ties"] == 1  # query 2 only: a relevant and an irrelevant candidate share the top score
    assert "candidate order" in task["ties_at_cut_rule"] and "argsort" in task["mrr_tie_rule"]
    definition = record.provenance["metrics"]["mrr@100"]
    assert "expected reciprocal rank over uniformly random orders" in definition and "np.argsort" in definition
    assert "ties_at_cut" in record.provenance["metrics"]["ap@100"]
    # Query 2's MRR is the expectation over the two orders of its tie: (1 + 1/2) / 2.
    predictions = record.predictions(run)
    from cladebench.tasks.rerank import per_query_values

    ids, mrr = per_query_values(predictions, task)["mrr@100"]
    assert mrr[ids.index(MIXED_TIE)] == pytest.approx(0.75)


def test_without_ties_the_record_holds_inquire_s_own_numbers(planted, tmp_path: Path) -> None:
    path, model = planted
    record, run = run_eval(eval_config(dataset=str(path), model=model, task="rerank", group_by="none",
                                       where=f"query_id IN {PLAIN}", out=tmp_path / "run"))
    assert record.provenance["task"]["ties_at_cut"] == 0 and record.provenance["task"]["mixed_ties"] == 0
    predictions = record.predictions(run)
    per_query = []
    for query_id in PLAIN:
        rows = predictions.filter(pc.equal(predictions["query_id"], query_id))
        y_true = np.asarray(rows.column("relevant").to_pylist(), dtype=np.int64)
        y_pred = np.asarray(rows.column("score").to_pylist(), dtype=np.float64)
        assert len(np.unique(y_pred)) == len(y_pred)
        per_query.append(_inquire(y_true, y_pred))
    ap, ndcg, mrr = np.mean(per_query, axis=0)
    assert record.metrics["ap@100"]["value"] == pytest.approx(ap, abs=1e-9)
    assert record.metrics["ndcg@100"]["value"] == pytest.approx(ndcg, abs=1e-9)
    assert record.metrics["mrr@100"]["value"] == pytest.approx(mrr, abs=1e-12)
    assert RunRecord.read(run).metrics == record.metrics
