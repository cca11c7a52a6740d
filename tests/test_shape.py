"""The shape of the code and of its tests, checked from the source text (nothing is imported).

- Tests mirror the package: each folder of ``tests/`` (but ``helpers``) is named after a package of
  ``src/cladebench``, and each test module in it imports that package (lazy imports count); a test module at the
  top of ``tests/`` is about the foundation, the CLI or several packages, so it does not import just one package.
- No test module imports another test module: shared pieces live in ``tests/helpers`` or ``tests/conftest.py``.
- The import graph of ``src/cladebench`` (imports inside functions included) has no cycle, and no module imports a
  later stage than its own (:data:`LAYERS`: foundation, metrics, models, store, embed, curate, tasks, benchmarks,
  evaluate, report and export, synthetic, demo, serve, cli).
- No module imports the ``__init__`` of a package it is in when that ``__init__`` presents the package's API
  (imports its modules): it imports the sibling module that defines the name.
- Modules are at most :data:`MAX_LINES` lines, unless the module docstring says why it is one module.
- A benchmark family is one folder (``benchmarks/<family>``): outside it, its code names it in at most
  :data:`MOST_FAMILY_FILES` modules (where it is registered, and the few that write or read its files elsewhere).
- One home per policy: outside its home, no module reads the environment, takes a file lock, draws a progress
  bar, writes a line to stderr by hand (the CLI aside), escapes Markdown or HTML, or decides whether an output may
  be written, or lists name qualifiers (``sp.``, ``cf.``); and no module imports ``fcntl`` or ``msvcrt`` at
  import time. Each finder is shown to catch a planted
  offender.

The per-package layout tests (``tests/<package>/test_*_layout.py`` and the like) keep only what is particular to
their package; the import reader is :mod:`helpers.source_imports`.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from helpers.source_imports import (
    PACKAGE,
    SRC,
    TESTS,
    imported_names,
    imports,
    module_name,
    source_files,
    src_graph,
)

LAYERS: dict[str, int] = {
    "taxonomy": 1, "metrics": 2, "models": 3, "store": 4, "embed": 5, "curate": 6, "tasks": 7, "benchmarks": 8,
    "evaluate": 9, "report": 10, "export": 10, "synthetic": 11, "demo": 12, "serve": 13, "cli": 14, "__main__": 14,
}
"""Stage of each top-level package (or module) of cladebench, lowest first; any other top-level module is the
foundation (stage 1). A module may import from its own stage or a lower one."""
FOUNDATION = 1

NOT_TESTS = {"helpers", "__pycache__"}
"""Folders of tests/ that hold no tests of a package."""


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


def test_an_import_of_the_own_package_init_is_found(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from cladebench.store import schema\n"  # a sibling module: fine
                     "from cladebench.store import CANONICAL_SCHEMA\n"
                     "def f():\n    from cladebench import store\n")
    found = imports_of_own_init("cladebench.store.probe", probe, {"cladebench.store"})
    assert found == ["cladebench.store.probe imports cladebench.store (CANONICAL_SCHEMA)",
                     "cladebench.store.probe imports cladebench (store)"]


def test_module_names() -> None:
    assert module_name(SRC / "__init__.py") == "cladebench"
    assert module_name(SRC / "report" / "sections" / "base.py") == "cladebench.report.sections.base"
    assert layer("cladebench.errors") == FOUNDATION and layer("cladebench.report.render") == 10
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


def presenting_packages(graph: dict[str, set[str]]) -> set[str]:
    """Packages (but cladebench itself) whose ``__init__`` imports some of their own modules, or names them to
    :func:`cladebench.lazy.present_lazily`: it presents the package's API, so the package's modules must not
    import it."""
    files = source_files()
    packages = {m for m, path in files.items() if path.name == "__init__.py" and m != PACKAGE}
    return {p for p in packages if any(target.startswith(p + ".") for target in graph[p])
            or "present_lazily(__name__" in files[p].read_text(encoding="utf-8")}


def imports_of_own_init(module: str, path: Path, packages: set[str]) -> list[str]:
    """The imports in ``module`` of the ``__init__`` of a package it is in: ``import P``, ``from P import name`` where
    ``P.name`` is no module (``from P import submodule`` is the submodule's import), ``from parent import P``."""
    files = source_files()
    found = []
    for package in sorted(p for p in packages if module.startswith(p + ".")):
        parent, _, last = package.rpartition(".")
        for source, names in imports(path, module):
            through_init = ((source == package and (not names or any(f"{package}.{n}" not in files for n in names)))
                            or (source == parent and last in names))
            if through_init:
                found.append(f"{module} imports {source} ({', '.join(names) or 'the package'})")
    return found


def test_no_module_imports_the_init_of_its_own_package_when_that_presents_the_api() -> None:
    graph = src_graph()
    packages = presenting_packages(graph)
    assert {"cladebench.store", "cladebench.metrics", "cladebench.synthetic", "cladebench.embed"} <= packages
    found = [line for module, path in source_files().items() for line in imports_of_own_init(module, path, packages)]
    assert not found, "modules importing their own package's __init__ (import the sibling module instead):\n" + (
        "\n".join(found))


MAX_LINES = 500
"""A module longer than this says in its module docstring why it is one module (the words "one module")."""


def test_modules_stay_short_unless_their_docstring_says_why() -> None:
    files = source_files()
    assert len(files) > 100  # the package was read
    unexplained = []
    for module, path in files.items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_LINES and "one module" not in (ast.get_docstring(ast.parse(text)) or "").lower():
            unexplained.append(f"{module}: {lines} lines")
    assert not unexplained, (f"modules over {MAX_LINES} lines: split each along its jobs, or say in its module "
                             "docstring why it is one module:\n" + "\n".join(unexplained))


# --- the tests ---------------------------------------------------------------------------------------------------


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if not set(p.relative_to(TESTS).parts) & NOT_TESTS)


def _imports_of_test(path: Path) -> set[str]:
    return set(imported_names(path, "tests." + ".".join(path.relative_to(TESTS).with_suffix("").parts)))


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


def test_every_test_the_slow_list_names_exists() -> None:
    """An entry of ``tests/slow_tests.txt`` that names no test (renamed, removed) would quietly put its test back in
    the fast lane under a new name, or keep a dead line: each names a module, or a test function in it."""
    from helpers.slow_lane import slow_ids

    listed = slow_ids()
    assert len(listed) > 50  # the list was read
    defined: dict[str, set[str]] = {}
    for module in sorted({entry.partition("::")[0] for entry in listed}):
        path = TESTS.parent / module
        if path.is_file():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            functions = (ast.FunctionDef, ast.AsyncFunctionDef)
            defined[module] = {n.name for n in tree.body if isinstance(n, functions)} | {
                f"{c.name}::{n.name}" for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body
                if isinstance(n, functions)}
    missing = [entry for entry in sorted(listed) if (parts := entry.partition("::"))[0] not in defined
               or (parts[2] and parts[2] not in defined[parts[0]])]
    assert not missing, "tests/slow_tests.txt names tests that do not exist:\n" + "\n".join(missing)


def test_the_declared_python_floor_is_the_one_linted() -> None:
    """``requires-python`` and ruff's ``target-version`` name the same minimum: ruff then refuses syntax and
    standard-library names newer than the floor (``datetime.UTC`` is 3.11), so what is declared is what is checked."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    floor = project["project"]["requires-python"].removeprefix(">=")
    assert project["tool"]["ruff"]["target-version"] == "py" + floor.replace(".", "")
    major, minor = (int(part) for part in floor.split("."))
    assert sys.version_info >= (major, minor)


# --- one home per policy -----------------------------------------------------------------------------------------

Finder = Callable[[ast.AST], Iterator[tuple[int, str]]]
"""What in a module's syntax tree belongs to a policy's home only: (line, what) for each."""


def policy_offenders(find: Finder, home: set[str], files: dict[str, Path] | None = None) -> list[str]:
    """``module:line: what`` for each place outside the modules ``home`` (a name ending in ``.`` is a package, all
    its modules) where ``find`` finds the policy done again."""
    found = []
    for module, path in (source_files() if files is None else files).items():
        if any(module == h or (h.endswith(".") and module.startswith(h)) for h in home):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [f"{module}:{line}: {what}" for line, what in sorted(find(tree))]
    return found


def _planted(tmp_path: Path, text: str, module: str = "cladebench.store.probe") -> dict[str, Path]:
    probe = tmp_path / "probe.py"
    probe.write_text(text, encoding="utf-8")
    return {module: probe}


def _is_os_name(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" and (
        node.attr in names)


ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Reads and writes of the environment (``os.environ``, ``os.getenv``, ``from os import environ``)."""
    for node in ast.walk(tree):
        if _is_os_name(node, ENVIRONMENT_NAMES):
            yield node.lineno, f"os.{node.attr}"  # type: ignore[attr-defined]
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            yield from ((node.lineno, f"from os import {a.name}") for a in node.names if a.name in ENVIRONMENT_NAMES)


def test_the_environment_is_read_in_one_module() -> None:
    found = policy_offenders(environment_reads, {"cladebench.environment"})
    assert not found, ("environment variables are read through cladebench.environment (variable, flag, "
                       "hub_offline, defaults), so every flag means the same:\n" + "\n".join(found))


def test_a_second_reader_of_the_environment_is_found(tmp_path: Path) -> None:
    files = _planted(tmp_path, "import os\nfrom os import getenv\n"
                               "def offline():\n    return os.environ.get('HF_HUB_OFFLINE') == '1'\n")
    assert policy_offenders(environment_reads, {"cladebench.environment"}, files) == [
        "cladebench.store.probe:2: from os import getenv", "cladebench.store.probe:4: os.environ"]


LOCK_MODULES = {"fcntl", "msvcrt", "filelock", "portalocker"}
LOCK_CALLS = {"flock", "lockf", "locking"}
LOCK_HOME = {"cladebench.paths"}
"""Where the one lock lives (:func:`cladebench.paths.held_lock`)."""


def _imported_modules(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [node.module.split(".")[0]]
    return []


def lock_implementations(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Imports of a locking module and calls of a locking primitive, at any depth."""
    for node in ast.walk(tree):
        for name in _imported_modules(node):
            if name in LOCK_MODULES:
                yield node.lineno, f"imports {name}"  # type: ignore[attr-defined]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LOCK_CALLS:
            yield node.lineno, f"calls {node.func.attr}"


def module_level_imports(tree: ast.AST, names: set[str]) -> Iterator[tuple[int, str]]:
    """Imports of ``names`` that run when the module is imported (outside any function or class)."""
    work = list(getattr(tree, "body", []))
    while work:
        node = work.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        for name in _imported_modules(node):
            if name in names:
                yield node.lineno, f"imports {name} at import time"  # type: ignore[attr-defined]
        work.extend(ast.iter_child_nodes(node))


def test_there_is_one_file_lock() -> None:
    found = policy_offenders(lock_implementations, LOCK_HOME)
    assert not found, "a file lock is cladebench.paths.held_lock (portable, released on death):\n" + "\n".join(found)


def test_no_module_imports_a_platform_s_lock_module_at_import_time() -> None:
    """fcntl exists only on POSIX, msvcrt only on Windows: imported at import time, the module fails on the other."""
    found = policy_offenders(lambda tree: module_level_imports(tree, {"fcntl", "msvcrt"}), set())
    assert not found, "\n".join(found)


def test_a_second_lock_is_found(tmp_path: Path) -> None:
    files = _planted(tmp_path, "import fcntl\n"
                               "def lock(handle):\n    import msvcrt\n    fcntl.flock(handle, fcntl.LOCK_EX)\n")
    assert policy_offenders(lock_implementations, LOCK_HOME, files) == [
        "cladebench.store.probe:1: imports fcntl", "cladebench.store.probe:3: imports msvcrt",
        "cladebench.store.probe:4: calls flock"]
    assert policy_offenders(lambda tree: module_level_imports(tree, {"fcntl", "msvcrt"}), set(), files) == [
        "cladebench.store.probe:1: imports fcntl at import time"]


PROGRESS_MODULES = {"tqdm", "alive_progress", "progressbar", "enlighten"}


def progress_bars(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Imports of a progress bar library (``rich.progress`` too)."""
    for node in ast.walk(tree):
        for name in _imported_modules(node):
            if name in PROGRESS_MODULES:
                yield node.lineno, f"imports {name}"  # type: ignore[attr-defined]
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rich.progress"):
            yield node.lineno, "imports rich.progress"


def test_there_is_one_progress_bar() -> None:
    found = policy_offenders(progress_bars, {"cladebench.progress"})
    assert not found, ("a long loop's bar is cladebench.progress.progress_bar (counts and rates, off when stderr is "
                       "no terminal or with --quiet):\n" + "\n".join(found))


def _is_stderr(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in ("stderr", "__stderr__") and isinstance(n.value, ast.Name)
               and n.value.id == "sys" for n in ast.walk(node))


def stderr_lines(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Lines written to stderr by hand: ``print(..., file=sys.stderr)`` and ``sys.stderr.write(...)``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id == "print" and any(
                k.arg == "file" and _is_stderr(k.value) for k in node.keywords):
            yield node.lineno, "print(..., file=sys.stderr)"
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "write" and _is_stderr(node.func.value):
            yield node.lineno, "sys.stderr.write"


CONSOLE_HOME = {"cladebench.console", "cladebench.cli.", "cladebench.cli", "cladebench.__main__"}
"""The console, and the command line (whose errors and results are its own)."""


def test_notes_and_warnings_go_through_the_console() -> None:
    found = policy_offenders(stderr_lines, CONSOLE_HOME)
    assert not found, ("a note or warning for the user is cladebench.console.note or .warn (one place decides "
                       "where it goes and what --quiet drops):\n" + "\n".join(found))


def test_a_second_progress_bar_and_a_stray_stderr_line_are_found(tmp_path: Path) -> None:
    files = _planted(tmp_path, "import sys\nfrom tqdm.auto import tqdm\n"
                               "def f(stream=None):\n    print('x', file=stream or sys.stderr)\n"
                               "    sys.stderr.write('y')\n    print('result')\n")
    assert policy_offenders(progress_bars, {"cladebench.progress"}, files) == ["cladebench.store.probe:2: imports tqdm"]
    assert policy_offenders(stderr_lines, CONSOLE_HOME, files) == [
        "cladebench.store.probe:4: print(..., file=sys.stderr)", "cladebench.store.probe:5: sys.stderr.write"]
    assert policy_offenders(stderr_lines, CONSOLE_HOME, _planted(tmp_path, "import sys\nprint('e', file=sys.stderr)\n",
                                                                 "cladebench.cli.probe")) == []


ENTITIES = ("&lt;", "&gt;", "&amp;", "&quot;", "&#")
ESCAPING_HOME = {"cladebench.escaping"}
"""The Markdown escaper; HTML is markupsafe's (jinja2's autoescape, ``markupsafe.escape``), which has no home here."""


def hand_escaping(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """A Markdown or HTML escaper written again: a function named for escaping, a character replaced by its
    backslash escape or an entity, an entity written out, or the standard library's ``html.escape`` (a second
    HTML escaper beside markupsafe, with other entities)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "escape" in node.name.lower():
            yield node.lineno, f"defines {node.name}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and any(e in node.value for e in ENTITIES):
            yield node.lineno, f"writes the entity in {node.value!r}"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace"
              and len(node.args) == 2 and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                              for a in node.args)):
            old, new = (a.value for a in node.args)  # type: ignore[attr-defined]
            if old and new in ("\\" + old, "\\\\" + old):
                yield node.lineno, f"escapes {old!r} by hand"
        elif (isinstance(node, ast.Attribute) and node.attr == "escape" and isinstance(node.value, ast.Name)
              and node.value.id == "html") or (isinstance(node, ast.ImportFrom) and node.module == "html"):
            yield node.lineno, "uses html.escape"


def test_there_is_one_markdown_escaper_and_one_html_escaper() -> None:
    found = policy_offenders(hand_escaping, ESCAPING_HOME)
    assert not found, ("Markdown is escaped by cladebench.escaping.markdown_escape, HTML by markupsafe:\n"
                       + "\n".join(found))


def test_a_second_escaper_is_found(tmp_path: Path) -> None:
    files = _planted(tmp_path, "import html\n"
                               "def cell(text):\n    return html.escape(text).replace('|', '\\\\|')\n"
                               "def escape_md(text):\n    return text.replace('<', '&lt;')\n")
    assert policy_offenders(hand_escaping, ESCAPING_HOME, files) == [
        "cladebench.store.probe:3: escapes '|' by hand", "cladebench.store.probe:3: uses html.escape",
        "cladebench.store.probe:4: defines escape_md", "cladebench.store.probe:5: writes the entity in '&lt;'"]


WRITE_CHECK_HOME = {"cladebench.paths"}
"""Where "may this output be written" is decided (:func:`cladebench.paths.write_refusal`)."""


def output_decisions(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """A condition that decides again whether an output is there and empty (``out.exists() and
    any(out.iterdir())``): each caller asks :func:`cladebench.paths.write_refusal` and words its own refusal."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            calls = {n.func.attr for n in ast.walk(node.test) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute)}
            if "iterdir" in calls and calls & {"exists", "is_dir"}:
                yield node.lineno, "decides whether an output is there and empty"


def test_one_function_decides_whether_an_output_may_be_written() -> None:
    found = policy_offenders(output_decisions, WRITE_CHECK_HOME)
    assert not found, "ask cladebench.paths.write_refusal (one rule for every output):\n" + "\n".join(found)


def test_a_second_output_check_is_found(tmp_path: Path) -> None:
    files = _planted(tmp_path, "def check(out):\n    if out.exists() and any(out.iterdir()):\n"
                               "        raise ValueError(f'{out} already exists')\n"
                               "    if out.is_file():\n        pass\n")
    assert policy_offenders(output_decisions, WRITE_CHECK_HOME, files) == [
        "cladebench.store.probe:2: decides whether an output is there and empty"]


# --- a task is one object ----------------------------------------------------------------------------------------

TASKS_MODULE = SRC / "tasks" / "__init__.py"
TASK_NAME_HOMES = ("cladebench.tasks", "cladebench.benchmarks", "cladebench.demo")
"""Where a task may be named: its own package and the registry, the benchmark protocols (a benchmark names the task
it runs), the demo (a script of runs)."""
TASK_NAMES_NOT_YET: dict[str, str] = {}
"""Modules that still name tasks, and why they may for now (issue 39 item 3 reworks them)."""
MOST_TASK_NAMES = 3
"""Task-name literals allowed outside :data:`TASK_NAME_HOMES` (issue 39: a task's facts are asked of the task)."""


def builtin_task_names() -> set[str]:
    """The keys of ``_BUILTIN_TASKS`` in ``tasks/__init__.py``, read from its source."""
    for node in ast.walk(ast.parse(TASKS_MODULE.read_text(encoding="utf-8"))):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and (
                node.target.id == "_BUILTIN_TASKS") and isinstance(node.value, ast.Dict):
            return {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
    raise AssertionError(f"no _BUILTIN_TASKS table in {TASKS_MODULE}")


def task_name_literals(tree: ast.AST, names: set[str]) -> Iterator[tuple[int, str]]:
    """String literals that are a task's name. A key read from a row or a request (``row["lineage"]``,
    ``body.get("lineage")``) names a field, not a task, and is not counted."""
    fields = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript):
            fields.add(id(node.slice))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and (
                node.args):
            fields.add(id(node.args[0]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in fields:
            yield node.lineno, repr(node.value)


def task_names_outside(files: dict[str, Path]) -> list[str]:
    """``module:line: 'name'`` for each task-name literal in a module that may know tasks (the tasks' stage or a
    later one), outside :data:`TASK_NAME_HOMES` and :data:`TASK_NAMES_NOT_YET`."""
    names = builtin_task_names()
    found = []
    for module, path in files.items():
        stage = layer(module)
        if stage is None or stage < LAYERS["tasks"] or module in TASK_NAMES_NOT_YET or any(
                module == home or module.startswith(home + ".") for home in TASK_NAME_HOMES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [f"{module}:{line}: {what}" for line, what in sorted(task_name_literals(tree, names))]
    return found


def test_the_program_asks_a_task_rather_than_naming_it() -> None:
    found = task_names_outside(source_files())
    assert len(found) <= MOST_TASK_NAMES, (
        "a task's facts are declared on its Task (tasks/__init__.py) and asked of it, never looked up by its name:\n"
        + "\n".join(found))


def test_a_task_named_outside_its_package_is_found(tmp_path: Path) -> None:
    files = _planted(tmp_path, "PICKERS = {'zeroshot': 1}\n"
                               "def shown(run, row):\n    return run.task == 'geo' and row['lineage'] and "
                               "row.get('rerank')\n", module="cladebench.report.probe")
    assert task_names_outside(files) == ["cladebench.report.probe:1: 'zeroshot'", "cladebench.report.probe:3: 'geo'"]
    assert task_names_outside({"cladebench.taxonomy.probe": files["cladebench.report.probe"],
                               "cladebench.tasks.probe": files["cladebench.report.probe"]}) == []
    assert builtin_task_names() == {"zeroshot", "fewshot", "retrieval", "rerank", "lineage", "geo"}


QUALIFIER_HOME = {"cladebench.taxonomy.qualifiers"}
"""Where the one list of name qualifiers lives (:data:`cladebench.taxonomy.qualifiers.QUALIFIERS`)."""
QUALIFIER_WORDS = {"sp", "spp", "cf", "aff", "nr", "ssp", "subsp", "var"}
"""Qualifier words (lower case, no full stop) whose listing, two or more in one literal, is a second list."""


def qualifier_lists(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """A set, list, tuple or dict literal naming two qualifiers or more (``{"sp.", "spp."}``, ``x in ("cf", "aff")``):
    a second list would let ``Peromyscus sp.`` mean the genus in one place and a label in another."""
    for node in ast.walk(tree):
        items = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(
            node, (ast.Set, ast.List, ast.Tuple)) else []
        words = {i.value.lower().removesuffix(".") for i in items
                 if isinstance(i, ast.Constant) and isinstance(i.value, str)}
        if len(words & QUALIFIER_WORDS) >= 2:
            yield node.lineno, f"lists qualifiers {sorted(words & QUALIFIER_WORDS)}"


def test_there_is_one_list_of_name_qualifiers() -> None:
    found = policy_offenders(qualifier_lists, QUALIFIER_HOME)
    assert not found, ("name qualifiers are read by cladebench.taxonomy.names.parse_name (one meaning for a "
                       "name):\n" + "\n".join(found))


def test_a_second_list_of_qualifiers_is_found(tmp_path: Path) -> None:
    files = _planted(tmp_path, "def unnamed(word):\n    return word.lower() in ('sp.', 'spp', 'species')\n"
                               "NOTE = 'trailing sp./spp. dropped'\n")
    assert policy_offenders(qualifier_lists, QUALIFIER_HOME, files) == [
        "cladebench.store.probe:2: lists qualifiers ['sp', 'spp']"]


# --- a benchmark family is one folder ----------------------------------------------------------------------------

FAMILIES = SRC / "benchmarks"
FAMILY_NAMES: dict[str, str] = {
    "crypticbio": r"crypticbio",
    "finegrained": r"finegrained|fine[-_]grained[-_]challenges",
    "coobserved": r"co[-_]?observed",
    "inquire": r"inquire",
}
"""Each family's folder under ``benchmarks/`` -> what names it (case aside): its benchmarks, builder, source and
aliases (``crypticbio-common``, ``fine-grained-challenges``, ``finegrained``, ``inat-coobserved``, ``inquire-rerank``)
and its modules and functions (``FineGrainedBuildConfig``, ``read_inquire_queries``)."""
MOST_FAMILY_FILES = 8
"""Modules outside a family's folder that may name it (issue 39: where it is registered, and the few that write
or read its files for another stage)."""
FAMILY_NAMES_NOT_YET: dict[str, str] = {}
"""Modules (a name ending in ``.``: a package) that name a family outside its folder and are not counted, and why."""


def family_names(tree: ast.AST, pattern: str) -> Iterator[tuple[int, str]]:
    """Where code names a family: an identifier, an imported module or name, or a string literal without a space
    (a registered name, a module path, a file name) that matches ``pattern``. Prose (docstrings, comments, messages,
    metric definitions) is documentation and is not counted."""
    found = re.compile(pattern, re.IGNORECASE)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = [] if any(c.isspace() for c in node.value) else [node.value]
        elif isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words = [node.name]
        elif isinstance(node, ast.alias):
            words = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            words = [node.module or ""]
        elif isinstance(node, ast.arg):
            words = [node.arg]
        elif isinstance(node, ast.keyword):
            words = [node.arg or ""]
        else:
            continue
        for word in words:
            if found.search(word):
                yield getattr(node, "lineno", 0), word


def modules_naming_families(files: dict[str, Path]) -> dict[str, list[str]]:
    """Family -> the modules outside its folder (and outside :data:`FAMILY_NAMES_NOT_YET`) that name it."""
    named: dict[str, list[str]] = {family: [] for family in FAMILY_NAMES}
    for module, path in sorted(files.items()):
        if any(module.startswith(skip) if skip.endswith(".") else module == skip for skip in FAMILY_NAMES_NOT_YET):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for family, pattern in FAMILY_NAMES.items():
            folder = f"{PACKAGE}.benchmarks.{family}"
            if module == folder or module.startswith(folder + "."):
                continue
            if next(family_names(tree, pattern), None) is not None:
                named[family].append(module)
    return named


def test_every_family_folder_says_what_names_it() -> None:
    folders = {p.name for p in FAMILIES.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(FAMILY_NAMES), "add each family's folder and its names to FAMILY_NAMES"


def test_a_benchmark_family_is_named_only_in_a_few_modules_outside_its_folder() -> None:
    named = modules_naming_families(source_files())
    assert named["inquire"]  # the source was read
    crowded = {family: modules for family, modules in named.items() if len(modules) > MOST_FAMILY_FILES}
    assert not crowded, ("a benchmark family's code lives in its folder (src/cladebench/benchmarks/<family>); "
                         f"named outside it in more than {MOST_FAMILY_FILES} modules:\n"
                         + "\n".join(f"{family}: {', '.join(modules)}" for family, modules in crowded.items()))


def test_a_family_named_in_code_is_found_and_its_prose_is_not(tmp_path: Path) -> None:
    files = _planted(tmp_path, '"""CrypticBio\'s cryptic_group, as INQUIRE defines AP."""\n'
                               "from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS\n"
                               "K = {'inquire-rerank': 100}\nWHY = 'as the INQUIRE paper reports it'\n"
                               "def read_inat_coobserved(path):\n    pass\n", module="cladebench.report.probe")
    assert modules_naming_families(files) == {"crypticbio": ["cladebench.report.probe"], "finegrained": [],
                                              "coobserved": ["cladebench.report.probe"],
                                              "inquire": ["cladebench.report.probe"]}
    inside = {"cladebench.benchmarks.crypticbio.probe": files["cladebench.report.probe"],
              "cladebench.benchmarks.crypticbio": files["cladebench.report.probe"]}
    assert modules_naming_families(inside)["crypticbio"] == []
