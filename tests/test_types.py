"""The type check's ground rules, read from the source text and the config (nothing of cladebench is imported).

mypy itself runs in ``.ci/run`` (a minute or two on the whole package); these checks keep what makes its answer
mean something: the config checks every module with no blanket exemption, the lazily presented names are typed
for their callers, and ``Any`` (a value the checker gives up on) does not spread.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from helpers.source_imports import SRC, module_name, source_files

ROOT = SRC.parent.parent

ANY_LIMIT = 370
"""Most ``Any`` (as a word, as ``grep -rwo Any src --include=*.py | wc -l`` counts) the package may hold: the
count when the check came in over the whole package (the code written before it held more than the 408 the first
typed modules were brought to). Lower it as types replace ``Any``; never raise it."""


def any_count(root: Path = SRC) -> int:
    return sum(len(re.findall(r"\bAny\b", path.read_text(encoding="utf-8"))) for path in root.rglob("*.py"))


def test_any_does_not_spread(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text("from typing import Any\nx: dict[str, Any] = {}  # Any, AnyStr, _Any\n")
    assert any_count(tmp_path) == 3
    found = any_count()
    assert found > 0  # the package was read
    assert found <= ANY_LIMIT, (f"{found} Any in src/cladebench (at most {ANY_LIMIT}): type the new values (pa.Table, "
                                "lance.LanceDataset, NDArray, a Protocol, object for a value checked before use)")


def _presented(tree: ast.Module) -> dict[str, set[str]] | None:
    """``present_lazily(__name__, {module: names})``'s argument, or None when the module does not call it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "present_lazily":
            return {module: set(names) for module, names in ast.literal_eval(node.args[1]).items()}
    return None


def _type_checking_imports(tree: ast.Module, package: str) -> dict[str, set[str]]:
    """Module of ``package`` -> names imported from it under a top-level ``if TYPE_CHECKING:``."""
    found: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and (statement.module or "").startswith(package + "."):
                    module = statement.module.removeprefix(package + ".")
                    found.setdefault(module, set()).update(alias.name for alias in statement.names)
    return found


def test_type_checking_imports_of_a_probe_are_read() -> None:
    tree = ast.parse("if TYPE_CHECKING:\n    from p.a import x, y\n    from q.b import z\n"
                     "__all__ = present_lazily(__name__, {'a': ('x', 'y')})\n")
    assert _presented(tree) == {"a": {"x", "y"}}
    assert _type_checking_imports(tree, "p") == {"a": {"x", "y"}}


def test_every_lazily_presented_name_is_typed_for_its_callers() -> None:
    """A package attribute :func:`cladebench.lazy.present_lazily` makes is invisible to a type checker; the
    ``__init__`` imports the same names from the same modules under ``TYPE_CHECKING`` (nothing at run time), so
    ``from cladebench.store import open_dataset`` keeps its type."""
    checked, wrong = 0, []
    for module, path in source_files().items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        presented = _presented(tree)
        if presented is None:
            continue
        checked += 1
        typed = _type_checking_imports(tree, module_name(path))
        if typed != presented:
            wrong.append(f"{module}: presents {presented}, imports under TYPE_CHECKING {typed}")
    assert checked >= 5  # the presenting packages were found
    assert not wrong, "\n".join(wrong)


def test_the_type_check_covers_the_package_with_no_blanket_exemption() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mypy = config["tool"]["mypy"]
    assert mypy["files"] == ["src"] and mypy["check_untyped_defs"] and mypy["warn_unused_ignores"]
    assert mypy["python_version"] == config["project"]["requires-python"].removeprefix(">=")
    for section in [mypy, *mypy.get("overrides", [])]:
        assert not section.get("ignore_errors") and not section.get("disable_error_code"), section
    for override in mypy.get("overrides", []):  # only third-party modules may go unchecked for missing types
        assert not any(name.startswith("cladebench") for name in override["module"]), override
    assert "mypy" in " ".join(config["project"]["optional-dependencies"]["dev"])
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^\.venv/bin/mypy\b", ci, re.M), "the type check is not a step of .ci/run"


def test_every_type_ignore_names_its_error_code() -> None:
    bare = [f"{module}:{number}" for module, path in source_files().items()
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if re.search(r"#\s*type:\s*ignore(?!\[[a-z-]+(, ?[a-z-]+)*\])", line)]
    assert not bare, "type: ignore without an error code ([code]):\n" + "\n".join(bare)
