"""The small real suite the export tests share (written once per session: a suite of two tiny models)."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def export_suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("torch")
    pytest.importorskip("open_clip")
    from helpers.export_suite import build_export_suite

    root = tmp_path_factory.mktemp("export-suite")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CLADEBENCH_CACHE_DIR", str(root / "cache"))
        patch.delenv("CLADEBENCH_MIRROR", raising=False)
        return {**build_export_suite(root), "cache": root / "cache"}
