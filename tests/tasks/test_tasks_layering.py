"""The tasks stage imports only from its own layer or lower ones, and the tasks share pieces through tasks.common.

Why: tasks predict and score; run records are the evaluation stage's job (``cladebench.evaluate``), so a task
that wrote one would pull that stage below itself. And a task module that took shared helpers from another task
(zero-shot used to be everyone's common module) couples two tasks that have nothing else in common.
"""

from __future__ import annotations

import ast
from pathlib import Path

import cladebench

TASKS_DIR = Path(cladebench.__file__).parent / "tasks"
HIGHER_STAGES = ("evaluate", "report", "synthetic", "demo", "cli", "__main__")


def _imports(path: Path) -> set[str]:
    """Every ``cladebench...`` module a file imports, lazy imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("cladebench"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("cladebench"):
            found.add(node.module or "")
    return found


def _task_modules() -> list[Path]:
    modules = sorted(TASKS_DIR.rglob("*.py"))
    assert len(modules) > 10, "the tasks package was not found where expected"
    return modules


def test_no_task_module_imports_a_higher_stage() -> None:
    upward = {
        f"{path.relative_to(TASKS_DIR)} imports {name}"
        for path in _task_modules() for name in _imports(path)
        if name.split(".")[1:2] and name.split(".")[1] in HIGHER_STAGES
    }
    assert not upward, sorted(upward)


def test_tasks_take_shared_pieces_from_common_not_from_zeroshot() -> None:
    users = {str(path.relative_to(TASKS_DIR)) for path in _task_modules()
             if path.name != "__init__.py" and "cladebench.tasks.zeroshot" in _imports(path)}
    assert not users, sorted(users)
