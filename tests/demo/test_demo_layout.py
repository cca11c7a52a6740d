"""The demo package's shape: its config is its own (the CLI imports it, never the other way), its registries
answer a typo with the known names, and no demo module imports the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cladebench.demo
from cladebench.errors import UnknownNameError

DEMO_DIR = Path(cladebench.demo.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy and TYPE_CHECKING imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_demo_module_imports_the_cli() -> None:
    importers = [str(path.relative_to(DEMO_DIR)) for path in sorted(DEMO_DIR.rglob("*.py"))
                 if any(name == "cladebench.cli" or name.startswith("cladebench.cli.")
                        for name in _imported_modules(path))]
    assert importers == []


def test_the_cli_builds_the_demo_verb_from_the_demos_own_config() -> None:
    import cladebench.cli  # noqa: F401  (registers the verbs)
    from cladebench.cli.verbs import VERBS
    from cladebench.demo.config import DemoConfig

    assert VERBS["demo"].config is DemoConfig


def test_a_mistyped_demo_step_names_the_closest() -> None:
    from cladebench.demo import DEMO_STEPS

    assert list(DEMO_STEPS)[:3] == ["fine-grained", "co-observed", "subset"]  # registration order is run order
    with pytest.raises(UnknownNameError, match="Did you mean 'rerank'"):
        DEMO_STEPS.get_named("rernk")


def test_a_mistyped_vision_tower_names_the_closest() -> None:
    from cladebench.demo.model import VISION_TOWERS, DemoModelConfig

    assert set(VISION_TOWERS) == {"resnet", "vit"}
    with pytest.raises(UnknownNameError, match="Did you mean 'resnet'"):
        DemoModelConfig(vision_tower="resnt")


def test_demo_modules_stay_short() -> None:
    lengths = {str(p.relative_to(DEMO_DIR)): len(p.read_text(encoding="utf-8").splitlines())
               for p in DEMO_DIR.rglob("*.py")}
    assert max(lengths.values()) <= 500, lengths
