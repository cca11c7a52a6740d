"""The shape of the code and of its tests, checked from the source text (nothing is imported).

- Tests mirror the package: each folder of ``tests/`` (but ``helpers``) is named after a package of
  ``src/cladebench``, and each test module in it imports that package (lazy imports count); a test module at the
  top of ``tests/`` is about the foundation, the CLI or several packages, so it does not import just one package.
- No test module imports another test module: shared pieces live in ``tests/helpers`` or ``tests/conftest.py``.
- The import graph of ``src/cladebench`` (imports inside functions included) has no cycle, and no module imports a
  later stage than its own (:data:`LAYERS`: foundation, metrics, models, store, embed, curate, tasks, evaluate,
  report, synthetic, demo, cli).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src" / "cladebench"
PACKAGE = "cladebench"

LAYERS: dict[str, int] = {
    "taxonomy": 1, "metrics": 2, "models": 3, "store": 4, "embed": 5, "curate": 6, "tasks": 7, "evaluate": 8,
    "report": 9, "synthetic": 10, "demo": 11, "cli": 12, "__main__": 12,
}
"""Stage of each top-level package (or module) of cladebench, lowest first; any other top-level module is the
foundation (stage 1). A module may import from its own stage or a lower one."""
FOUNDATION = 1

NOT_TESTS = {"helpers", "__pycache__"}
"""Folders of tests/ that hold no tests of a package."""


# --- reading imports -------------------------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, module: str) -> Iterator[tuple[str, list[str]]]:
    """Every ``import M`` (as ``(M, [])``) and ``from M import a, b`` (as ``(M, [a, b])``) of ``path``, at any depth
    of the file (so imports inside functions count), relative imports resolved against ``module``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            yield source, [alias.name for alias in node.names]


def _imported_names(path: Path, module: str) -> set[str]:
    """Every module name the imports of ``path`` name: ``M`` and, for ``from M import x``, ``M.x``."""
    return {name for source, names in _imports(path, module) for name in (source, *(f"{source}.{n}" for n in names))}


def src_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports. ``from M import x`` points at the module ``M.x`` when there is
    one, else at ``M``; a name that is not a module counts as its nearest enclosing module."""
    files = {_module_name(path): path for path in sorted(SRC.rglob("*.py"))}

    def nearest(name: str) -> str:
        while name not in files:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets = set()
        for source, names in _imports(path, module):
            if source != PACKAGE and not source.startswith(PACKAGE + "."):
                continue
            if not names:
                targets.add(nearest(source))
            for name in names:
                targets.add(f"{source}.{name}" if f"{source}.{name}" in files else nearest(source))
        targets.discard(module)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def layer(module: str) -> int | None:
    """The stage of a module of cladebench; None for a top-level package no stage names."""
    parts = module.split(".")
    if len(parts) == 1:  # cladebench/__init__.py
        return FOUNDATION
    top = parts[1]
    if top in LAYERS:
        return LAYERS[top]
    is_package = (SRC / top).is_dir()
    return None if is_package else FOUNDATION


def test_module_names() -> None:
    assert _module_name(SRC / "__init__.py") == "cladebench"
    assert _module_name(SRC / "report" / "sections" / "base.py") == "cladebench.report.sections.base"
    assert layer("cladebench.errors") == FOUNDATION and layer("cladebench.report.render") == 9
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# --- the source --------------------------------------------------------------------------------------------------


def test_the_import_graph_has_no_cycle() -> None:
    graph = src_graph()
    assert "cladebench.report.sections.base" in graph  # the graph was read
    found = cycles(graph)
    described = ["; ".join(f"{a} imports {b}" for a in c for b in sorted(graph[a]) if b in c) for c in found]
    assert not found, "import cycles (lazy imports included):\n" + "\n".join(described)


def test_no_module_imports_a_later_stage() -> None:
    graph = src_graph()
    unplaced = sorted({m.split(".")[1] for m in graph if layer(m) is None})
    assert not unplaced, f"top-level packages in no stage (add them to LAYERS): {unplaced}"
    upward = sorted(f"{a} (stage {layer(a)}) imports {b} (stage {layer(b)})" for a, targets in graph.items()
                    for b in targets if layer(b) > layer(a))  # type: ignore[operator]
    assert not upward, "imports of a later stage:\n" + "\n".join(upward)


# --- the tests ---------------------------------------------------------------------------------------------------


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if not set(p.relative_to(TESTS).parts) & NOT_TESTS)


def _imports_of_test(path: Path) -> set[str]:
    return set(_imported_names(path, "tests." + ".".join(path.relative_to(TESTS).with_suffix("").parts)))


def test_test_modules_were_found() -> None:
    modules = _test_modules()
    assert TESTS / "test_shape.py" in modules and TESTS / "report" / "test_report.py" in modules


def test_no_test_module_imports_another_test_module() -> None:
    offenders = []
    for path in _test_modules():
        for name in sorted(_imports_of_test(path)):
            first = name.split(".")[0]
            if first.startswith("test_") or first in {"conftest", "tests"}:
                offenders.append(f"{path.relative_to(TESTS)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_every_test_folder_is_a_package_of_cladebench() -> None:
    folders = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in NOT_TESTS)
    assert folders  # tests/ has package folders
    strays = [name for name in folders if not (SRC / name / "__init__.py").is_file()]
    assert not strays, f"folders of tests/ that name no package of src/cladebench: {strays}"


SHARED = {"errors", "cli", "__main__"}
"""What tests of any package import (the error types, the CLI that drives a verb); not a test's subject."""


def _subjects(path: Path) -> set[str]:
    """Top-level modules and packages of cladebench a test module imports, but :data:`SHARED`."""
    return {n.split(".")[1] for n in _imports_of_test(path) if n.startswith(PACKAGE + ".")} - SHARED


def test_every_test_module_lives_in_the_folder_of_the_package_it_tests() -> None:
    """In tests/<package>/: the module imports that package, drives the CLI, or names the package in its text (a
    test of the package's files). At the top of tests/: the module drives the CLI, or is not about one package
    alone."""
    misplaced = []
    for path in _test_modules():
        relative = path.relative_to(TESTS)
        imported = {n.split(".")[1] for n in _imports_of_test(path) if n.startswith(PACKAGE + ".")}
        if len(relative.parts) > 1:
            folder = relative.parts[0]
            if not ({folder, "cli", "__main__"} & imported or f"{PACKAGE}.{folder}" in path.read_text("utf-8")):
                misplaced.append(f"{relative}: neither imports cladebench.{folder} nor drives the CLI")
        elif ({"cli", "__main__"} & imported) or len(subjects := _subjects(path)) != 1:
            continue  # a test of the CLI, of the foundation with packages, or of several packages
        elif (SRC / (only := subjects.pop())).is_dir():
            misplaced.append(f"{relative}: tests only cladebench.{only}; move it to tests/{only}/")
    assert not misplaced, "\n".join(misplaced)
