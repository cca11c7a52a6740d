"""The tasks share pieces through tasks.common, never through another task.

Why: a task module that took shared helpers from another task (zero-shot used to be everyone's common module)
couples two tasks that have nothing else in common. (That no task module imports a later stage, such as the
evaluation that writes run records, is a rule for every stage: ``tests/test_shape.py``.)
"""

from __future__ import annotations

from pathlib import Path

import cladebench.tasks
from helpers.source_imports import cladebench_imports

TASKS_DIR = Path(cladebench.tasks.__file__).parent


def _task_modules() -> list[Path]:
    modules = sorted(TASKS_DIR.rglob("*.py"))
    assert len(modules) > 10, "the tasks package was not found where expected"
    return modules


def test_tasks_take_shared_pieces_from_common_not_from_zeroshot() -> None:
    users = {str(path.relative_to(TASKS_DIR)) for path in _task_modules()
             if path.name != "__init__.py" and "cladebench.tasks.zeroshot" in cladebench_imports(path)}
    assert not users, sorted(users)
