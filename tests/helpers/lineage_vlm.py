"""The lineage task's VLM path in tests: a synthetic world of two-organism photos and an OpenAI-compatible chat
endpoint on 127.0.0.1 that knows the photos and answers in a different shape per photo (JSON, prose, a code
fence, a refusal, the other organism), recording what it named so a test can score the answers afresh.

Shared by the lineage task tests and the ``eval`` CLI test of lineage with a VLM (through the fixtures
``lineage_photos`` and ``lineage_endpoint`` of tests/conftest.py).
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa

from cladebench import store
from cladebench.synthetic import WorldConfig, make_world
from cladebench.taxonomy import RANK_COLUMNS, Lineage
from helpers.http_local import read_chat, send_json, text_reply

WORLD = WorldConfig(seed=1, names="generated", branching=(2, 2, 1, 2, 1, 2, 2))
"""32 species; pairs diverge at kingdom, phylum, order, genus or species (class and family have one child)."""


def name_at(lineage: Lineage, rank: int) -> str | None:
    names = lineage.names
    return names[rank]  # the species rank holds the binomial


def first_difference(a: Lineage, b: Lineage) -> int:
    return next(r for r in range(7) if a.names[r] != b.names[r])


def hint_of(lineage: Lineage, divergence: int) -> str:
    return " > ".join(n for n in lineage.names[: divergence + 1] if n)


VLM_PHOTOS = 15


class LineageEndpoint(ThreadingHTTPServer):
    """An OpenAI-compatible chat endpoint that knows the photos and answers in a different shape per photo."""

    def __init__(self, photos: dict[str, list[Lineage]]) -> None:
        super().__init__(("127.0.0.1", 0), LineageHandler)
        self.photos = photos
        """sha256 of the image bytes -> the photo's two lineages."""
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.answers: dict[tuple[str, int | None], dict[int, str | None]] = {}
        """(image sha256, target index or None for the no-hint question) -> the names the answer gives."""


def mode_of(photos: dict[str, list[Lineage]], digest: str) -> int:
    """Which shape of answer a photo gets: its position, modulo the five shapes."""
    return list(photos).index(digest) % 5


def lineage_text(names: dict[int, str | None]) -> dict[str, str | None]:
    return {RANK_COLUMNS[r]: n for r, n in names.items()}


def answer(server: LineageEndpoint, digest: str, prompt: str
           ) -> tuple[str, tuple[str, int | None], dict[int, str | None]]:
    pair = server.photos[digest]
    if "belongs to" not in prompt:  # no hint: always organism 0, as "Rank: Name" lines
        names = {r: name_at(pair[0], r) for r in range(7)}
        return "\n".join(f"{RANK_COLUMNS[r].title()}: {n}" for r, n in names.items()), (digest, None), names
    hint = prompt.split("belongs to ", 1)[1].split(". Name its", 1)[0]
    divergence = first_difference(*pair)
    index = next(i for i in (0, 1) if hint_of(pair[i], divergence) == hint)
    truth, other = pair[index], pair[1 - index]
    ranks = range(divergence + 1, 7)
    right = {r: name_at(truth, r) for r in ranks}
    mode = mode_of(server.photos, digest)
    if mode == 0:  # JSON as asked
        return json.dumps(lineage_text(right)), (digest, index), right
    if mode == 1:  # prose with Rank: Name lines, names in odd case
        lines = [f"**{RANK_COLUMNS[r].title()}**: {n.upper() if r < 6 else n}" for r, n in right.items()]
        return "I think:\n" + "\n".join(lines) + "\nThat is my best guess.", (digest, index), right
    if mode == 2:  # a code fence, the genus left out but implied by the binomial in the species field
        shown = {r: n for r, n in right.items() if r != 5}
        return "```json\n" + json.dumps(lineage_text(shown)) + "\n```", (digest, index), right
    if mode == 3:
        return "I am not able to identify organisms in photos.", (digest, index), {}
    named = {r: name_at(other, r) for r in ranks}  # the other organism, below the hint
    return json.dumps(lineage_text(named)), (digest, index), named


class LineageHandler(BaseHTTPRequestHandler):
    server: LineageEndpoint

    def do_POST(self) -> None:
        request = read_chat(self)
        text, key, names = answer(self.server, request.image_sha256, request.text)
        with self.server.lock:
            self.server.requests.append(request.body)
            self.server.answers[key] = names
        send_json(self, 200, text_reply(text))

    def log_message(self, format: str, *args: object) -> None:
        pass


def write_vlm_photos(path: Path) -> tuple[Path, dict[str, list[Lineage]], str]:
    """VLM_PHOTOS photos with images; the last one with ranks below its hint has a corrupt image (it must never
    reach the endpoint, and its targets are scored wrong). Returns the dataset, the photos' lineages by image
    sha256, and the corrupt photo's uuid."""
    table = make_world(WORLD).pair_table(VLM_PHOTOS, seed=4)
    pairs = [[Lineage.from_row(o) for o in pair] for pair in table.column("organisms").to_pylist()]
    corrupt = max(i for i, pair in enumerate(pairs) if first_difference(*pair) < 6)
    images = table.column("image").to_pylist()
    images[corrupt] = b"\xff\xd8 not a jpeg"
    table = table.set_column(table.column_names.index("image"), "image", pa.array(images, pa.large_binary()))
    store.write_dataset(table, path)
    known = {hashlib.sha256(image).hexdigest(): pair for image, pair in zip(images, pairs, strict=True)}
    return path, known, table.column("uuid").to_pylist()[corrupt]
