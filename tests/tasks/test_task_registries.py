"""Every pluggable name -> thing table of the tasks is a cladebench.registry.Registry, and every fixed one a read-only
mapping looked up with registry.look_up, so a mistyped name fails the same way everywhere: a usage error (exit 2)
that lists the known names and suggests the closest."""

from __future__ import annotations

import subprocess
import sys
import typing
from types import MappingProxyType

import pytest

from cladebench.errors import UnknownNameError
from cladebench.registry import Registry
from cladebench.tasks import TASKS, get_task
from cladebench.tasks.fewshot import METHODS, SIMPLESHOT_PROTOCOLS, FewShotConfig
from cladebench.tasks.geo.fusion import FUSIONS
from cladebench.tasks.lineage.config import AUTO_CONDITIONS, CONDITION_CHOICES, LineageConfig
from cladebench.tasks.lineage.parse import STRATEGIES
from cladebench.tasks.lineage.targets import CONDITIONS
from cladebench.tasks.lineage.task import PREDICTOR_NEEDS, PREDICTORS
from cladebench.tasks.rerank import SCORER_NEEDS, SCORERS


@pytest.mark.parametrize("registry", [TASKS, METHODS, FUSIONS, STRATEGIES, PREDICTORS, SCORERS],
                         ids=["TASKS", "METHODS", "FUSIONS", "STRATEGIES", "PREDICTORS", "SCORERS"])
def test_each_pluggable_table_is_a_registry(registry: object) -> None:
    assert isinstance(registry, Registry)


@pytest.mark.parametrize("table", [SIMPLESHOT_PROTOCOLS, CONDITIONS, CONDITION_CHOICES, AUTO_CONDITIONS,
                                   SCORER_NEEDS, PREDICTOR_NEEDS],
                         ids=["SIMPLESHOT_PROTOCOLS", "CONDITIONS", "CONDITION_CHOICES", "AUTO_CONDITIONS",
                              "SCORER_NEEDS", "PREDICTOR_NEEDS"])
def test_each_fixed_table_is_read_only(table: MappingProxyType) -> None:
    assert isinstance(table, MappingProxyType)
    with pytest.raises(TypeError):
        table["new"] = None  # type: ignore[index]


def test_the_conditions_choices_are_the_table_s_keys() -> None:
    assert typing.get_args(typing.get_type_hints(LineageConfig)["conditions"]) == tuple(CONDITION_CHOICES)
    assert all(set(c or ()) <= set(CONDITIONS) for c in (*CONDITION_CHOICES.values(), *AUTO_CONDITIONS.values()))


BUILTIN_TASKS = ("zeroshot", "fewshot", "retrieval", "rerank", "lineage", "geo")


def test_the_builtin_entries_are_registered() -> None:
    assert [get_task(name).name for name in BUILTIN_TASKS] == list(BUILTIN_TASKS)
    assert set(TASKS) == set(BUILTIN_TASKS)
    assert list(METHODS) == ["simpleshot", "simpleshot-biobench", "linear", "knn"]
    assert set(FUSIONS) == {"product", "embedding_sum"} and set(SCORERS) == set(PREDICTORS) == {"clip", "vlm"}
    assert set(SCORER_NEEDS) == set(SCORERS) and set(PREDICTOR_NEEDS) == set(PREDICTORS)
    assert list(CONDITIONS) == ["hint", "nohint"] and next(iter(STRATEGIES)) == "json"


def test_a_mistyped_task_suggests_the_closest() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown task 'zeroshoot'.*Did you mean 'zeroshot'") as caught:
        get_task("zeroshoot")
    assert caught.value.exit_code == 2


def test_a_mistyped_fewshot_method_fails_when_the_config_is_made() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown few-shot method 'simpelshot'.*Did you mean 'simpleshot'"):
        FewShotConfig(methods=("simpelshot",))


def test_a_task_asked_for_imports_its_own_module_alone() -> None:
    """A zero-shot run imported every task's module (geo's scipy, lineage's parsers) to find its own."""
    script = ("import sys\nfrom cladebench.tasks import get_task\nget_task('zeroshot')\n"
              "print(sorted(m for m in sys.modules if m.startswith('cladebench.tasks.') or m == 'scipy'))")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "cladebench.tasks.zeroshot" in loaded
    assert not any(name in loaded for name in ("scipy", "tasks.geo", "tasks.lineage", "tasks.rerank")), loaded
