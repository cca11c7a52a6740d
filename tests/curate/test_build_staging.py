"""Every builder writes its output through the one staged-output commit (cladebench.curate.staging).

The output checks (an existing folder someone else wrote, an output that is an input) run before any input is
read, with the same messages for every builder; a killed run's staging folder is cleaned by the next run of the
same builder; and no builder module carries its own temp-name, marker or rename sequence.
"""

from __future__ import annotations

import ast
import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import cladebench.benchmarks  # noqa: F401  (each benchmark family registers its builder)
import cladebench.curate.builders as builders_package
from cladebench.curate import skeleton
from cladebench.curate.builders import BUILDERS, get_builder
from cladebench.curate.staging import MARKER_NAME, STAGING_TAG, WORK_NAME
from cladebench.errors import CladebenchError, UsageError


def _coobserved(tmp_path: Path, out: Path, overwrite: bool) -> Any:
    config = get_builder("coobserved").config()
    return config(export_dir=tmp_path / "no-export", out=out, overwrite=overwrite)


def _crypticbio(tmp_path: Path, out: Path, overwrite: bool) -> Any:
    import yaml

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"dataset": {"metadata": str(tmp_path / "no-metadata.csv"), "out": str(out),
                                                "overwrite": overwrite}}), encoding="utf-8")
    return get_builder("crypticbio").config()(config=path)


def _finegrained(tmp_path: Path, out: Path, overwrite: bool) -> Any:
    config = get_builder("finegrained").config()
    return config(tmp_path / "no-catalog.parquet", provenance=tmp_path / "no-provenance.csv", out=out,
                  overwrite=overwrite)


def _cameratrap(tmp_path: Path, out: Path, overwrite: bool) -> Any:
    path = tmp_path / "cohort.json"
    path.write_text(json.dumps({"name": "c", "challenge_group": "P", "taxon": "genus:Peromyscus", "labels": ["p"],
                                "collections": [{"name": "a", "metadata": "no-metadata.json", "detections": "d.json",
                                                 "images": "images"}]}), encoding="utf-8")
    return get_builder("cameratrap").config()(path, out=out, overwrite=overwrite)


WRITERS = {"inat-coobserved": "coobserved", "fine-grained-challenges": "finegrained"}
"""The builders' names in their outputs' markers: the names the outputs were first written under, kept so that an
earlier output stays the builder's own (both names work on the command line)."""

CONFIGS: dict[str, Callable[[Path, Path, bool], Any]] = {
    "cameratrap": _cameratrap, "inat-coobserved": _coobserved, "crypticbio": _crypticbio,
    "fine-grained-challenges": _finegrained,
}


def test_every_registered_builder_is_covered_here():
    assert sorted(CONFIGS) == sorted(BUILDERS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_folder_of_someone_elses_files_is_refused_before_any_input_is_read(name, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    builder = get_builder(name)
    with pytest.raises(CladebenchError) as refused:  # the inputs do not exist: reading any would fail otherwise
        builder.build(CONFIGS[name](tmp_path, out, True))
    assert refused.value.exit_code == 1
    assert f"is not an output of `cladebench build {WRITERS.get(name, name)}`" in str(refused.value)
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]
    assert not [p for p in tmp_path.iterdir() if STAGING_TAG in p.name]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_an_existing_folder_without_overwrite_is_refused_the_same_way(name, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "rows.txt").write_text("1\n")
    with pytest.raises(CladebenchError, match="already exists and is not empty") as refused:
        get_builder(name).build(CONFIGS[name](tmp_path, out, False))
    assert refused.value.exit_code == 1


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_an_output_inside_an_input_is_a_usage_error(name, tmp_path):
    inputs = {"cameratrap": "no-metadata.json", "inat-coobserved": "no-export", "crypticbio": "no-metadata.csv",
              "fine-grained-challenges": "no-catalog.parquet"}
    out = tmp_path / inputs[name] / "out"
    with pytest.raises(UsageError):
        get_builder(name).build(CONFIGS[name](tmp_path, out, False))
    assert not out.exists()


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_killed_runs_staging_folder_is_cleaned_by_the_next_run_of_the_same_builder(name, tmp_path):
    out = tmp_path / "out"
    pid = _dead_pid()
    leftover = tmp_path / f".out{STAGING_TAG}{pid}-abc"
    (leftover / WORK_NAME).mkdir(parents=True)
    (leftover / MARKER_NAME).write_text(json.dumps({"writer": f"build {WRITERS.get(name, name)}", "pid": pid,
                                                    "host": socket.gethostname()}))
    other = tmp_path / f".out{STAGING_TAG}{pid}-xyz"  # another command's: not this builder's to remove
    other.mkdir()
    (other / MARKER_NAME).write_text(json.dumps({"writer": "demo", "pid": pid, "host": socket.gethostname()}))
    with pytest.raises(CladebenchError):  # the inputs do not exist; the cleaning happened before reading them
        get_builder(name).build(CONFIGS[name](tmp_path, out, False))
    assert not leftover.exists() and other.is_dir() and not out.exists()


def _names_used(path: Path) -> set[str]:
    """Every name, attribute and imported name in a module's code (its docstrings and comments left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
            if isinstance(node.value, ast.Name):
                names.add(f"{node.value.id}.{node.attr}")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(alias.name for alias in node.names)
            names.add(getattr(node, "module", None) or "")
    return names


def test_no_builder_module_has_its_own_temp_name_marker_or_rename_sequence():
    root = Path(builders_package.__file__).parent
    forbidden = {"mkdtemp", "mkstemp", "tempfile", "rename", "os.replace", "shutil.move", "rmtree", "write_marker",
                 "read_marker", "MARKER_NAME", "STAGING_TAG", "PREVIOUS_NAME", "commit"}
    found = {f"{path.relative_to(root)}: {name}" for path in sorted(root.rglob("*.py"))
             for name in _names_used(path) & forbidden}
    assert not found
    for name in CONFIGS:  # and each build goes through the one staged commit, the skeleton's driver
        module = sys.modules[get_builder(name).function().__module__]
        assert "run_build" in _names_used(Path(module.__file__ or "")), name
    assert "staged_output" in _names_used(Path(skeleton.__file__ or ""))
