"""Fixtures of the serve tests: one dataset with runs for the whole session (embedding and two evaluations take
a while), and a server over it per test module; the review tests' datasets (their own, and the demo's), made
afresh for each module that asks (each writes reviews into it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def _tiny_model(root: Path) -> str:
    """The tiny CLIP (seed 0) written under ``root``, as a ``local-dir:`` model name; skips without torch."""
    pytest.importorskip("torch")
    from cladebench.models.tiny import write_tiny_model

    return "local-dir:" + str(write_tiny_model(root / "tiny-clip", seed=0))


@pytest.fixture(scope="session")
def serve_data(tmp_path_factory: pytest.TempPathFactory) -> object:
    """:class:`helpers.serve_data.ServeData`: 48 synthetic photos (one hostile), emb_tiny, two zero-shot runs."""
    from helpers.serve_data import write_serve_data

    root = tmp_path_factory.mktemp("serve")
    return write_serve_data(root, _tiny_model(root))


@pytest.fixture(scope="module")
def review_data(tmp_path_factory: pytest.TempPathFactory) -> object:
    """:class:`helpers.review_data.ReviewData`: 32 synthetic photos (every fourth genus-only), emb_tiny, one run."""
    from helpers.review_data import write_review_data

    root = tmp_path_factory.mktemp("review")
    return write_review_data(root, _tiny_model(root))


@pytest.fixture(scope="module")
def demo_review_data(tmp_path_factory: pytest.TempPathFactory) -> object:
    """:class:`helpers.review_data.ReviewData` of the demo's fine-grained dataset (8 photos, then its genus-only
    rows), emb_tiny, one run."""
    from helpers.review_data import write_demo_review_data

    root = tmp_path_factory.mktemp("demo-review")
    return write_demo_review_data(root, _tiny_model(root))


@pytest.fixture(scope="module")
def served(serve_data: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, object]]:
    """(URL, Started) of a real server on 127.0.0.1 over ``serve_data``, thumbnails in a fresh folder."""
    from helpers.serve_data import running

    with running(serve_data, thumbnails=tmp_path_factory.mktemp("thumbs")) as server:
        yield server


@pytest.fixture
def shots() -> Path:
    """Where browser tests save their screenshots (looked at by a person after a change to the pages)."""
    folder = Path("/tmp/shots19")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
