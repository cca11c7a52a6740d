"""The examples in docstrings run, so they stay true as the code changes."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "config", "download", "metrics", "paths", "representation", "retrieval_metrics", "search", "store", "synthetic",
    "taxonomy", "templates", "vlm", "models", "models.preprocessing", "models.registry", "sources",
    "sources.crypticbio", "sources.inquire", "sources.coobserved", "lineage_parse", "inat_export", "builders",
    "builders.coobserved", "geo_prior", "cryptic_groups", "builders.crypticbio",
    "builders.finegrained", "report", "report.escaping", "report.formatting", "report.calibration", "registry",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(f"cladebench.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples: drop it from the list"
    assert result.failed == 0
