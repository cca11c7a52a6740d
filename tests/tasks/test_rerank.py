"""Reranking end to end: a rerank dataset -> CLIP cosine or a VLM endpoint -> INQUIRE metrics -> run record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import average_precision_score

from cladebench import store

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from cladebench.cli import main
from cladebench.evaluate.configs import eval_config
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import run_eval
from cladebench.models import class_text_embeddings, load_encoder
from cladebench.models.tiny import write_tiny_model
from helpers.embedded import write_embedded
from helpers.http_local import ChatEndpoint, ChatRequest, serving, yes_no_reply
from helpers.rerank_data import rerank_table as planted_rerank_table

QUERIES = 4
CANDIDATES = 12


def rerank_table(seed: int = 3) -> pa.Table:
    """QUERIES queries (a species' scientific name each) x CANDIDATES images, some of that species."""
    table = planted_rerank_table(QUERIES, CANDIDATES, seed=seed)
    return table.append_column("supercategory", pa.array(["Species" if i % 2 else "Context"
                                                          for i in range(table.num_rows)]))


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("rerank")
    model = "local-dir:" + str(write_tiny_model(root / "tiny", seed=5))
    path = root / "rerank.lance"
    write_embedded(rerank_table(), path, model)
    return path, model


def independent_ap(relevant: list[bool], scores: list[float]) -> float:
    """INQUIRE's AP@100 with every candidate retrieved: sklearn AP x positives / min(positives, 100), x100."""
    return 100 * float(average_precision_score(relevant, scores)) if any(relevant) else float("nan")


def test_clip_rerank_scores_are_query_cosines_and_metrics_follow_inquire(embedded, tmp_path):
    path, model = embedded
    record, run_path = run_eval(eval_config(dataset=str(path), model=model, out=tmp_path / "run", task="rerank",
                                            device="cpu", group_by="none", breakdown=("supercategory",)))
    predictions = record.predictions(run_path).to_pylist()
    assert len(predictions) == QUERIES * CANDIDATES
    encoder = load_encoder(model, device="cpu")
    rows = store.read(store.open_dataset(path), columns=["uuid", "query", "emb_tiny"]).to_pylist()
    by_uuid = {r["uuid"]: r for r in rows}
    queries = sorted({r["query"] for r in rows})
    text = dict(zip(queries, class_text_embeddings(encoder, queries, "raw"), strict=True))
    for row in predictions:
        image = np.asarray(by_uuid[row["uuid"]]["emb_tiny"], dtype=np.float64)
        expected = float(image @ text[row["query"]] / np.linalg.norm(image))
        assert row["score"] == pytest.approx(expected, abs=1e-5)
    aps = []
    for query_id in sorted({r["query_id"] for r in predictions}):
        rows_q = [r for r in predictions if r["query_id"] == query_id]
        aps.append(independent_ap([r["relevant"] for r in rows_q], [r["score"] for r in rows_q]))
    defined = [a for a in aps if np.isfinite(a)]
    assert record.metrics["ap@100"]["value"] == pytest.approx(np.mean(defined))
    assert record.metrics["ap@100"]["n"] == len(defined)
    assert record.provenance["task"]["query_templates"] == "raw"
    assert record.provenance["label_set"]["size"] == QUERIES
    assert {"supercategory=Species/ap@100", "supercategory=Context/ap@100"} <= set(record.metrics)


def _answer(request: ChatRequest) -> dict[str, Any]:
    p_yes = 0.05 + 0.9 * ((sum(request.image_url.encode()[-64:]) + len(request.text)) % 97) / 96
    return yes_no_reply(p_yes)


@pytest.fixture
def endpoint() -> Iterator[ChatEndpoint]:
    with serving(ChatEndpoint(_answer)) as server:
        yield server


def test_vlm_rerank_through_the_eval_verb_and_its_cache(embedded, tmp_path, endpoint, monkeypatch, capsys):
    path, _ = embedded
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = f"openai-compatible:tiny-vlm@http://127.0.0.1:{endpoint.server_address[1]}/v1"
    args = ["eval", "rerank", str(path), "--model", model, "--group-by", "none"]
    assert main([*args, "--out", str(tmp_path / "vlm")]) == 0
    assert endpoint.requests == QUERIES * CANDIDATES
    record = RunRecord.read(tmp_path / "vlm" / "run.json")
    assert record.provenance["model"]["id"] == model
    assert record.provenance["task"]["outcomes"] == {"scored": QUERIES * CANDIDATES}
    assert "Does this picture show {query}?" in record.provenance["task"]["vlm"]["prompt_template"]
    scores = record.predictions(tmp_path / "vlm" / "run.json").column("score").to_pylist()
    assert all(0.0 < s < 1.0 for s in scores)
    assert main([*args, "--out", str(tmp_path / "vlm2")]) == 0  # a rerun is served from the cache
    assert endpoint.requests == QUERIES * CANDIDATES
    again = RunRecord.read(tmp_path / "vlm2" / "run.json")
    assert again.metrics == record.metrics and again.provenance["task"]["cached"] == QUERIES * CANDIDATES
    assert "ap@100" in capsys.readouterr().out


def test_named_benchmark_uses_its_task_split_and_breakdowns(embedded, tmp_path, monkeypatch):
    """`cladebench eval inquire-rerank`: the dataset built in the cache folder, embedded on first use."""
    _, model = embedded
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    from cladebench.benchmarks import get_benchmark

    built = get_benchmark("inquire-rerank").dataset_path()
    table = rerank_table()
    table = table.append_column("split", pa.array(["test" if i < 3 * CANDIDATES else "val"
                                                   for i in range(table.num_rows)]))
    table = table.append_column("category", pa.array(["Appearance"] * table.num_rows))
    store.write_dataset(table, built)
    record, _ = run_eval(eval_config(dataset="inquire-rerank", model=model, out=tmp_path / "bench", device="cpu"))
    assert record.task == "rerank"
    assert record.provenance["dataset"]["benchmark"] == "inquire-rerank"
    assert record.provenance["dataset"]["evaluated_rows"] == 3 * CANDIDATES  # the test split only
    assert record.provenance["label_set"]["size"] == 3
    assert "category=Appearance/ap@100" in record.metrics and "supercategory=Species/mrr@100" in record.metrics
    assert any(f.startswith("emb_") for f in store.open_dataset(built).schema.names)  # embedded on first use


def test_named_benchmark_offline_says_how_to_build_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "empty"))
    code = main(["eval", "inquire-rerank", "--model", "openai-compatible:x@http://127.0.0.1:9/v1", "--out",
                 str(tmp_path / "o")])
    assert code == 1
    message = capsys.readouterr().err
    assert "HF_HUB_OFFLINE is set" in message and "cladebench load inquire-rerank" in message


def test_compare_pairs_rerank_runs_query_by_query(embedded, tmp_path, endpoint, monkeypatch, capsys):
    from cladebench.evaluate.compare import compare_runs

    path, model = embedded
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    vlm = f"openai-compatible:tiny-vlm@http://127.0.0.1:{endpoint.server_address[1]}/v1"
    for name, chosen in (("clip", model), ("clip-again", model), ("vlm", vlm)):
        assert main(["eval", "rerank", str(path), "--model", chosen, "--group-by", "none", "--device",
                     "cpu", "--out", str(tmp_path / name)]) == 0
    runs = [tmp_path / n / "run.json" for n in ("clip", "clip-again", "vlm")]
    comparison = compare_runs(runs, metric="ap@100", n_resamples=2000)
    (entry,) = comparison.metrics
    same, other = entry.differences
    assert same.paired.difference == 0 and same.paired.p_value == 1 and not same.holds
    records = [RunRecord.read(r) for r in runs]
    assert other.paired.difference == pytest.approx(records[2].metrics["ap@100"]["value"]
                                                    - records[0].metrics["ap@100"]["value"])
    assert other.paired.n == records[0].metrics["ap@100"]["n"]  # paired over the queries with a positive
    capsys.readouterr()
    assert main(["compare", *map(str, runs), "--metric", "mrr@100"]) == 0
    printed = capsys.readouterr().out
    assert "tied" in printed and "%" not in printed.split("mrr@100", 1)[1].splitlines()[0]


def test_a_cutoff_beyond_every_candidate_is_named_for_what_it_ranks(embedded, tmp_path, capsys):
    """``--rerank-k 1000000`` reported ``ap@1000000`` over queries of 12 candidates: INQUIRE's code ranks each
    query's whole list, so the run is the default's (``ap@100``, the same values), said once and recorded."""
    path, model = embedded
    runs = {k: run_eval(eval_config(dataset=str(path), model=model, out=tmp_path / f"k{k}", task="rerank",
                                    device="cpu", group_by="none", rerank_k=k))[0] for k in (100, 1_000_000)}
    err = capsys.readouterr().err
    assert err.count("--rerank-k 1000000 is more than any query's candidates (at most 12)") == 1, err
    capped = runs[1_000_000]
    assert not any("1000000" in name for name in capped.metrics)
    assert {n: m["value"] for n, m in capped.metrics.items()} == {n: m["value"] for n, m in runs[100].metrics.items()}
    task = capped.provenance["task"]
    assert (task["rerank_k"], task["rerank_k_given"]) == (100, 1_000_000) and "capped at 100" in task["rerank_k_rule"]
    assert "rerank_k_given" not in runs[100].provenance["task"]


def test_a_cutoff_beyond_more_than_the_default_candidates_is_capped_at_the_most_a_query_has():
    from cladebench.tasks.rerank import _cutoff

    table = pa.table({"query_id": [1] * 150 + [2] * 40})
    assert _cutoff(1_000_000, table)["rerank_k"] == 150
    assert _cutoff(120, table) == {"rerank_k": 120}
    assert _cutoff(100, pa.table({"query_id": [1] * 8})) == {"rerank_k": 100}
