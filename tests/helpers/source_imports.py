"""Who imports whom in ``src/cladebench``, read from the source text (nothing of cladebench is imported): the one
reader of imports for the tests of the code's shape (``tests/test_shape.py``) and the per-package layout tests.

Imports inside functions and under ``TYPE_CHECKING`` count, relative imports are resolved.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
SRC = TESTS.parent / "src" / "cladebench"
PACKAGE = "cladebench"


def module_name(path: Path) -> str:
    """``src/cladebench/store/schema.py`` -> ``cladebench.store.schema`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, module: str) -> Iterator[tuple[str, list[str]]]:
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


def imported_names(path: Path, module: str) -> set[str]:
    """Every module name the imports of ``path`` name: ``M`` and, for ``from M import x``, ``M.x``."""
    return {name for source, names in imports(path, module) for name in (source, *(f"{source}.{n}" for n in names))}


def cladebench_imports(path: Path) -> set[str]:
    """:func:`imported_names` of a file of ``src/cladebench``, only the names inside cladebench."""
    return {n for n in imported_names(path, module_name(path)) if n == PACKAGE or n.startswith(PACKAGE + ".")}


def source_files() -> dict[str, Path]:
    """Module name -> file, for every module of ``src/cladebench``."""
    return {module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def src_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports. ``from M import x`` points at the module ``M.x`` when there is
    one, else at ``M``; a name that is not a module counts as its nearest enclosing module."""
    files = source_files()

    def nearest(name: str) -> str:
        while name not in files:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets = set()
        for source, names in imports(path, module):
            if source != PACKAGE and not source.startswith(PACKAGE + "."):
                continue
            if not names:
                targets.add(nearest(source))
            for name in names:
                targets.add(f"{source}.{name}" if f"{source}.{name}" in files else nearest(source))
        targets.discard(module)
        graph[module] = targets
    return graph


__all__ = ["PACKAGE", "SRC", "TESTS", "cladebench_imports", "imported_names", "imports", "module_name",
           "source_files", "src_graph"]
