"""The synthetic package's shape: modules of one job that import each other, never the package, which presents
the public API on purpose."""

from __future__ import annotations

import ast
from pathlib import Path

import cladebench.synthetic as synthetic

PACKAGE_DIR = Path(synthetic.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_submodules_import_their_siblings_not_the_package() -> None:
    offenders = [str(path.relative_to(PACKAGE_DIR)) for path in sorted(PACKAGE_DIR.glob("*.py"))
                 if path.name != "__init__.py" and "cladebench.synthetic" in _imported_modules(path)]
    assert offenders == []


def test_the_package_presents_the_world_and_its_parts() -> None:
    for name in synthetic.__all__:
        assert getattr(synthetic, name) is not None, name
    assert synthetic.make_world.__module__ == "cladebench.synthetic.world"
    world = synthetic.make_world(synthetic.WorldConfig(seed=0, branching=(2, 1, 1, 1, 1, 1, 2), names="generated"))
    assert isinstance(world, synthetic.WorldTables)  # the tables are a part of the world's API
    assert world.to_table(1).schema.metadata[synthetic.SCHEMA_METADATA_KEY]


def test_synthetic_modules_stay_short() -> None:
    lengths = {str(p.relative_to(PACKAGE_DIR)): len(p.read_text(encoding="utf-8").splitlines())
               for p in PACKAGE_DIR.glob("*.py")}
    assert max(lengths.values()) <= 500, lengths
