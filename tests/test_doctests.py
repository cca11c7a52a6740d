"""The examples in docstrings run, so they stay true as the code changes.

Every module of the package is collected automatically (a new module's examples run without anyone
adding it to a list). A module that cannot be imported because an optional extra is not installed is
skipped with the reason; any other import failure fails the test.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import cladebench


def _package_modules() -> list[str]:
    """Names (relative to `cladebench`) of every module and subpackage of the package."""
    found = pkgutil.walk_packages(cladebench.__path__, prefix="cladebench.")
    return sorted(info.name.removeprefix("cladebench.") for info in found)


MODULES = _package_modules()

# Modules known to carry examples. The collection must find them all, and each must still have
# examples, so that a renamed module or emptied docstring does not quietly drop its checks.
KNOWN_WITH_EXAMPLES = [
    "config", "curate.fetch", "metrics", "paths", "evaluate.compare_columns", "metrics.retrieval", "store.search",
    "store", "synthetic", "taxonomy.lineage", "templates", "models.vlm", "models", "models.preprocessing",
    "models.registry",
    "curate.sources", "benchmarks.crypticbio.source", "benchmarks.inquire.source", "benchmarks.coobserved.source",
    "tasks.lineage.parse", "curate.inat_export", "curate.builders", "tasks.geo.prior",
    "benchmarks.coobserved.builder.config", "benchmarks.coobserved.builder.sampling", "synthetic.inat_export",
    "benchmarks.crypticbio.cryptic_groups", "benchmarks.crypticbio.builder.filters", "report",
    "benchmarks.finegrained.builder.config", "benchmarks.finegrained.builder.checks",
    "report.escaping", "report.formatting", "report.calibration", "registry", "curate.builders.duckdb_errors",
    "curate.staging", "curate.skeleton", "errors", "evaluate.jsonsafe", "provenance", "escaping",
]


def _import_or_skip(name: str) -> ModuleType:
    """Import `name`; skip when a third-party dependency (an optional extra) is missing.

    A missing module that is part of `cladebench` itself is a real error and is raised, not skipped.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing == "cladebench" or missing.startswith("cladebench."):
            raise
        pytest.skip(f"{name} needs {missing!r}, which is not installed (optional extra): {error}")


def test_collection_finds_the_known_modules() -> None:
    missing = sorted(set(KNOWN_WITH_EXAMPLES) - set(MODULES))
    assert not missing, f"modules with examples not collected: {missing}"
    assert len(MODULES) > len(KNOWN_WITH_EXAMPLES)


def test_a_missing_optional_dependency_skips() -> None:
    with pytest.raises(pytest.skip.Exception, match="not_an_installed_extra_xyz"):
        _import_or_skip("not_an_installed_extra_xyz")


def test_a_missing_package_module_fails_rather_than_skips() -> None:
    with pytest.raises(ModuleNotFoundError):
        _import_or_skip("cladebench.no_such_module_xyz")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = _import_or_skip(f"cladebench.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    if name in KNOWN_WITH_EXAMPLES:
        assert result.attempted > 0, f"{name} lost its examples: restore them or drop it from KNOWN_WITH_EXAMPLES"
    assert result.failed == 0
