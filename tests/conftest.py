"""Shared test setup: offline by default, opt-in markers, and the real-format data folder.

Real-format files (see ``shared/realdata/MANIFEST.md``) live beside the repository, not in it: CI clones
the repo with ``../shared`` next to its root. ``CLADEBENCH_REALDATA`` points elsewhere; tests that need
a file skip when it is absent rather than fail.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

REALDATA_ENV = "CLADEBENCH_REALDATA"
DEFAULT_REALDATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "realdata"

_OPT_IN_MARKERS = {
    "network": "CLADEBENCH_NETWORK",
    "realweights": "CLADEBENCH_REALWEIGHTS",
}


def pytest_configure(config: pytest.Config) -> None:
    # Tests never reach the Hub unless network tests were asked for (and then only those).
    if os.environ.get("CLADEBENCH_NETWORK") != "1":
        os.environ["HF_HUB_OFFLINE"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for marker, variable in _OPT_IN_MARKERS.items():
        if os.environ.get(variable) == "1":
            continue
        skip = pytest.mark.skip(reason=f"{marker} test: set {variable}=1 to run it")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


def realdata_dir() -> Path:
    """The real-format data folder: ``$CLADEBENCH_REALDATA`` or ``../shared/realdata``."""
    override = os.environ.get(REALDATA_ENV)
    return Path(override) if override else DEFAULT_REALDATA_DIR


@pytest.fixture(scope="session")
def realdata() -> Callable[[str], Path]:
    """``realdata("dir/file.csv")`` -> the path of a real-format file, or skip the test when it is absent."""

    def locate(relative_path: str) -> Path:
        path = realdata_dir() / relative_path
        if not path.is_file():
            pytest.skip(f"real-format data not available: {path} (set {REALDATA_ENV} or place ../shared/realdata)")
        return path

    return locate
