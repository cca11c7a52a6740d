"""Lineage with a VLM whose answer is over the client's size cap: that question is one recorded status, the
others are answered, and nothing refused is cached. A real HTTP server on 127.0.0.1; no torch needed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cladebench import store
from cladebench.models import EndpointModel
from cladebench.synthetic import WorldConfig, make_world
from cladebench.tasks.lineage.config import LineageConfig
from cladebench.tasks.lineage.task import lineage
from cladebench.taxonomy import Lineage
from helpers.http_local import ChatEndpoint, ChatRequest, serving, text_reply

PHOTOS = 6
OVERSIZE = 2**20 + 1000  # just over VLMConfig.max_response_bytes, the default the lineage task uses


@pytest.fixture
def photos(tmp_path: Path) -> tuple[Path, str, str]:
    table = make_world(WorldConfig(seed=1, names="generated", branching=(2, 2, 1, 2, 1, 2, 2))).pair_table(
        PHOTOS, seed=4)
    path = tmp_path / "pairs.lance"
    store.write_dataset(table, path)
    # The photo whose answers are too large: the first whose organisms part above the species (something to ask).
    pairs = [[Lineage.from_row(o) for o in pair] for pair in table.column("organisms").to_pylist()]
    chosen = next(i for i, (a, b) in enumerate(pairs) if a.names[5] != b.names[5])
    image = table.column("image")[chosen].as_py()
    return path, table.column("uuid")[chosen].as_py(), hashlib.sha256(image).hexdigest()


@pytest.fixture
def endpoint(photos) -> Iterator[ChatEndpoint]:
    """Answers a JSON lineage, but too large an answer for the chosen photo."""
    def answer(request: ChatRequest) -> dict[str, Any]:
        huge = request.image_sha256 == photos[2]
        return text_reply("x" * OVERSIZE if huge else json.dumps({"species": "Nonesuch nomen"}))

    with serving(ChatEndpoint(answer)) as server:
        yield server


def test_an_oversized_answer_is_one_status_and_is_not_cached(photos, endpoint, tmp_path, monkeypatch) -> None:
    path, chosen, _ = photos
    monkeypatch.setenv("CLADEBENCH_CACHE_DIR", str(tmp_path / "cache"))
    model = EndpointModel.from_name(f"openai-compatible:m@http://127.0.0.1:{endpoint.server_address[1]}/v1")
    predictions = lineage(store.open_dataset(path), model, LineageConfig(vlm_concurrency=2))
    rows = [r for r in predictions.table.to_pylist() if r["scored"]]
    refused = [r for r in rows if r["uuid"] == chosen]
    assert refused and all(r["hint_status"] == "invalid_response" for r in refused)
    assert all("max_response_bytes" in r["hint_answer"] for r in refused)
    assert all(r["hint_exact"] is False for r in refused)
    others = [r for r in rows if r["uuid"] != chosen]
    assert others and all(r["hint_status"] != "invalid_response" for r in others)
    assert predictions.info["statuses"]["hint"]["invalid_response"] == len(refused)

    asked = endpoint.requests
    lineage(store.open_dataset(path), model, LineageConfig(vlm_concurrency=2))
    assert endpoint.requests - asked == len(refused)  # only the refused questions are asked again
    cached = "".join(p.read_text() for p in (tmp_path / "cache").rglob("*.json"))
    assert "x" * 1000 not in cached
