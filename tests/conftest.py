"""Shared test setup: offline by default, opt-in markers, the real-format data folder, and fixtures that tests of
several packages use (a tiny CLIP model; tiny timm and DINOv2 backbones in their libraries' folder layouts; the
lineage task's VLM photos and endpoint). Helpers that are not
fixtures live in ``tests/helpers``.

Real-format files are found through ``helpers.realdata``; tests that need a file skip when it is absent.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_OPT_IN_MARKERS = {
    "network": "CLADEBENCH_NETWORK",
    "realweights": "CLADEBENCH_REALWEIGHTS",
}


def pytest_configure(config: pytest.Config) -> None:
    # Tests never reach the Hub unless network tests were asked for (and then only those).
    if os.environ.get("CLADEBENCH_NETWORK") != "1":
        os.environ["HF_HUB_OFFLINE"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from helpers.slow_lane import is_listed, slow_ids

    listed = slow_ids()
    for item in items:
        if is_listed(item.nodeid, listed):
            item.add_marker(pytest.mark.slow)
    for marker, variable in _OPT_IN_MARKERS.items():
        if os.environ.get(variable) == "1":
            continue
        skip = pytest.mark.skip(reason=f"{marker} test: set {variable}=1 to run it")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def realdata() -> Callable[[str], Path]:
    """``realdata("dir/file.csv")`` -> the path of a real-format file, or skip the test when it is absent."""
    from helpers.realdata import require

    def locate(relative_path: str) -> Path:
        path = require(relative_path)
        if not path.is_file():
            pytest.skip(f"real-format data not available: {path} is not a file")
        return path

    return locate


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random CLIP model written to a temporary folder, as a ``local-dir:`` model name (needs torch)."""
    from cladebench.models.tiny import write_tiny_model

    return "local-dir:" + str(write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-clip", seed=0))


@pytest.fixture(scope="module")
def tiny_timm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight timm ViT saved by ``timm.models.save_for_hf`` (:mod:`helpers.backbones`)."""
    pytest.importorskip("timm")
    from helpers.backbones import write_tiny_timm

    return write_tiny_timm(tmp_path_factory.mktemp("timm") / "tiny-timm")


@pytest.fixture(scope="module")
def tiny_dinov2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight DINOv2 and its image processor saved by ``save_pretrained`` (:mod:`helpers.backbones`)."""
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from helpers.backbones import write_tiny_dinov2

    return write_tiny_dinov2(tmp_path_factory.mktemp("dinov2") / "tiny-dinov2")


@pytest.fixture(scope="module")
def lineage_photos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """Two-organism photos for the lineage task's VLM path (:func:`helpers.lineage_vlm.write_vlm_photos`)."""
    from helpers.lineage_vlm import write_vlm_photos

    return write_vlm_photos(tmp_path_factory.mktemp("lineage-vlm") / "pairs.lance")


@pytest.fixture
def lineage_endpoint(lineage_photos: tuple[Path, dict, str]) -> Iterator[object]:
    """A chat endpoint on 127.0.0.1 that knows ``lineage_photos`` and answers in a different shape per photo."""
    from helpers.http_local import serving
    from helpers.lineage_vlm import LineageEndpoint

    with serving(LineageEndpoint(lineage_photos[1])) as server:
        yield server
