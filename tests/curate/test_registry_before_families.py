"""The builders' and sources' registries looked up from Python before :mod:`cladebench.benchmarks` is imported.

The families register their builders and sources from their own folders, which the curate layer may not import;
a fresh interpreter asking ``get_builder("crypticbio")`` first must be told what to import, not that the name is
unknown. Each check runs in a fresh interpreter, since this test session has imported every family already."""

from __future__ import annotations

import subprocess
import sys

import pytest

LOOKUP = """
import sys
from cladebench.curate.{module} import {function}
try:
    {function}({name!r})
except Exception as error:
    print(type(error).__name__, getattr(error, "exit_code", None), error)
else:
    print("found")
print("families imported" if "cladebench.benchmarks" in sys.modules else "")
"""


def _lookup(module: str, function: str, name: str, *, families_first: bool = False) -> str:
    code = ("import cladebench.benchmarks\n" if families_first else "") + LOOKUP.format(
        module=module, function=function, name=name)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    said, imported = done.stdout.strip().split("\n") if "\n" in done.stdout.strip() else (done.stdout.strip(), "")
    assert bool(imported) == families_first, "the lookup imported the families itself"
    return said


@pytest.mark.parametrize(("module", "function", "name"), [("builders", "get_builder", "crypticbio"),
                                                          ("sources", "get_source", "crypticbio")])
def test_a_family_name_looked_up_before_the_families_are_imported_says_what_to_import(
        module: str, function: str, name: str) -> None:
    said = _lookup(module, function, name)
    assert said.startswith("UnknownNameError 2 ")
    assert "import cladebench.benchmarks" in said
    assert _lookup(module, function, name, families_first=True) == "found"


def test_a_name_unknown_with_the_families_imported_gets_no_import_hint() -> None:
    said = _lookup("builders", "get_builder", "crypticbi", families_first=True)
    assert said.startswith("UnknownNameError 2 unknown builder 'crypticbi'")
    assert "Did you mean 'crypticbio'?" in said and "import cladebench.benchmarks" not in said
