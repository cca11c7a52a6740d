"""The report's pluggable parts are registries of one kind (`cladebench.registry.Registry`), and the sections
package registers every built-in section without an import cycle."""

from __future__ import annotations

import subprocess
import sys
from types import MappingProxyType

import pytest

from cladebench.errors import UnknownNameError
from cladebench.registry import Registry
from cladebench.tasks import all_tasks

pytest.importorskip("jinja2", reason="reports need jinja2 (the report extra)")
pytest.importorskip("matplotlib", reason="reports need matplotlib (the report extra)")

from cladebench.report.render import FORMATS, render_report
from cladebench.report.sections import SECTIONS, ordered_sections
from cladebench.report.sections.gallery import GALLERIES

BUILT_IN = ["suite", "leaderboard", "groups", "ranks", "mistakes", "calibration", "confusion", "rerank_ap", "lineage",
            "gallery", "provenance"]
"""Every built-in section, in page order."""


def test_report_registries_are_registries() -> None:
    for registry in (SECTIONS, GALLERIES):
        assert isinstance(registry, Registry), registry
    assert isinstance(FORMATS, MappingProxyType)  # a fixed table: read-only
    tasks = all_tasks()
    assert {task.error_gallery for task in tasks.values() if task.error_gallery} <= set(GALLERIES)
    assert all(task.headline for task in tasks.values())  # every built-in task names its headline metrics
    assert set(FORMATS) == {"html", "md"}


def test_every_built_in_section_is_registered_in_page_order() -> None:
    assert [section.name for section in ordered_sections()] == BUILT_IN


def test_a_section_module_imported_first_still_gets_every_section_registered() -> None:
    """A section module imported first (before the package's list) still finds the registry, and the package
    still registers all the others: the order of imports does not matter once the cycle is gone."""
    code = ("import cladebench.report.sections.ranks as r, cladebench.report.sections as s; "
            "print(r.__name__, ' '.join(x.name for x in s.ordered_sections()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "cladebench.report.sections.ranks " + " ".join(BUILT_IN) + "\n"


def test_an_unknown_format_names_the_known_ones_and_the_closest() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown report format 'htm'; known: html, md\. Did you mean 'html'"):
        render_report([], format="htm")
