"""What a suite runs: every benchmark's standard protocol for every model, as a list of runs each named by a key.

Why a module of its own: the runs a suite makes, and when two of them are the same run, decide what is reused and
what is computed; that is settled here, before anything is read or loaded, so that a bad ``--setting`` or an unknown
benchmark or model is refused at once (exit 2) rather than after an hour of runs.

A run is one entry of a protocol's :attr:`~cladebench.evaluate.benchmarks.Protocol.runs` for one model: the
benchmark, its task, the settings the eval config is built with (the protocol's, the run's, the suite's
``--setting`` overrides), the model's canonical id and revision, and where the data is read from (a mirror folder,
or the published source). Its **key** is the SHA-256 of those, and names its folder
(``runs/<benchmark>/<model>-<key>``): the same run in a later suite finds its record there and is reused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from cladebench.config import OPTION, REPEATABLE
from cladebench.errors import UsageError
from cladebench.evaluate.benchmarks import BENCHMARKS, Benchmark, mirror_folder
from cladebench.evaluate.run import EVAL_CONFIGS, EvalConfig, eval_config
from cladebench.models.registry import resolve_model
from cladebench.models.spec import ModelSpec, column_key
from cladebench.registry import Registry

KEY_VERSION = 1
"""Part of every run key: raised when what a run's settings mean changes, so old records are not reused for it."""

SUITE_FIXED = frozenset({"dataset", "out", "model", "task", "revision", "label", "device", "data"})
"""Eval fields the suite sets itself; a ``--setting`` may not name them."""


@dataclass(frozen=True)
class SuiteConfig:
    """Run every named benchmark's standard protocol for each model (FGC zero-shot per group and few-shot at 1 and
    5 shots, all rows and unseen only; CrypticBio zero-shot per name style; INQUIRE-Rerank; Co-Observed lineage),
    reusing every run already finished in --out; results.parquet and report.html accumulate across suites."""

    model: tuple[str, ...] = field(metadata={**OPTION, **REPEATABLE})
    """Models to evaluate (same forms as for `eval`; repeat --model or give several); an endpoint
    (openai-compatible:NAME@URL) runs the tasks that take one (rerank, lineage) and skips the rest, saying why."""
    out: Path = field(metadata=OPTION)
    """Folder of the suite: runs/ (one record per run), results.parquet, report.html; a later suite into the same
    folder reuses its finished runs and extends the table."""
    benchmarks: tuple[str, ...] = ("all",)
    """Benchmarks to run ('all', or names from `cladebench benchmarks`)."""
    mirror: Path | None = None
    """A folder holding one mirror per benchmark, each named like it (as $CLADEBENCH_MIRROR); a benchmark without
    a folder there is read from $CLADEBENCH_MIRROR or its published source."""
    setting: tuple[str, ...] = ()
    """NAME=VALUE settings applied to every run whose task takes them (e.g. methods=simpleshot repetitions=1); they
    are part of each run's key, so runs with other settings are not reused for them."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where models run."""
    retry_skipped: bool = False
    """Run again the runs an earlier suite skipped (too few images, a task the model cannot do, ...)."""
    report: bool = True
    """Write report.html (leaderboard of every model and benchmark in the folder, then each benchmark's sections)."""
    progress: bool = True
    """A line on stderr as each benchmark finishes, with the time left for the whole suite."""

    def __post_init__(self) -> None:
        if not self.model:
            raise UsageError("--model needs at least one model")
        if len(set(self.model)) != len(self.model):
            raise UsageError(f"--model names a model twice: {' '.join(self.model)}")
        if not self.benchmarks:
            raise UsageError("--benchmarks needs 'all' or at least one benchmark name")
        for name in self.benchmarks:
            if name != "all":
                BENCHMARKS.get_named(name)  # an unknown name: exit 2 with the closest one
        parse_settings(self.setting)


@dataclass(frozen=True)
class PlannedRun:
    """One run of a suite: a protocol run of one benchmark for one model."""

    benchmark: Benchmark
    """The named benchmark."""
    task: str
    """The protocol's task."""
    run: Mapping[str, Any]
    """The protocol run's own settings (an entry of ``Protocol.runs``): how the run is told apart in tables."""
    settings: Mapping[str, Any]
    """Every setting the eval config is built with besides the fixed ones (protocol, run, overrides)."""
    model: str
    """The model as the user named it."""
    spec: ModelSpec
    """What the name means (id, revision, kind)."""
    data: Path | None
    """The mirror folder read, or None for the published source."""
    key: str
    """SHA-256 of benchmark, task, settings, model id, revision and data: the run's identity."""
    folder: Path
    """Where its record is written: ``<out>/runs/<benchmark>/<model>-<key prefix>``."""
    unsupported: str | None = None
    """Why the model cannot run this task (an endpoint on zero-shot); None when it can."""

    @property
    def protocol(self) -> str:
        """``fewshot · shots=5 · unseen_only``: the task and the run's own settings, as tables name the run."""
        return protocol_name(self.task, self.run)

    def eval_config(self, device: str) -> EvalConfig:
        """The config ``cladebench eval`` would build for this run (same class, same checks)."""
        return eval_config(task=self.task, dataset=self.benchmark.name, model=self.model, out=self.folder,
                           device=device, data=self.data, **self.settings)


def protocol_name(task: str, run: Mapping[str, Any]) -> str:
    """The task and a run's settings in one short stable string (``zeroshot · name_style=sci``)."""
    parts = [task]
    for name, value in run.items():
        if value is True:
            parts.append(name)
        elif isinstance(value, (tuple, list)):
            parts.append(f"{name}={','.join(map(str, value))}")
        else:
            parts.append(f"{name}={value}")
    return " · ".join(parts)


MODEL_KINDS: Registry[Callable[[], Collection[str]]] = Registry("task taking endpoints")
"""Task -> the model kinds it can score with, for tasks that take more than image-text encoders; every other task
takes ``clip`` models only."""


@MODEL_KINDS.register("rerank")
def _rerank_kinds() -> Collection[str]:
    from cladebench.tasks.rerank import SCORERS

    return tuple(SCORERS)


@MODEL_KINDS.register("lineage")
def _lineage_kinds() -> Collection[str]:
    from cladebench.tasks.lineage.task import PREDICTORS

    return tuple(PREDICTORS)


def model_kinds(task: str) -> Collection[str]:
    """The model kinds ``task`` scores with."""
    kinds = MODEL_KINDS.get(task)
    return kinds() if kinds is not None else ("clip",)


def parse_settings(given: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` words as a dict of raw values; a malformed word, a name given twice or a field the suite sets
    itself is a usage error."""
    out: dict[str, str] = {}
    for word in given:
        name, equals, value = word.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or not name:
            raise UsageError(f"--setting {word!r}: expected NAME=VALUE (e.g. repetitions=1)")
        if name in SUITE_FIXED:
            raise UsageError(f"--setting {name}: the suite sets {name} itself")
        if name in out:
            raise UsageError(f"--setting names {name} twice")
        out[name] = value
    return out


def _coerce(annotation: Any, text: str, name: str) -> Any:
    """``text`` as a value of the field's type (``1,5`` for a tuple of ints)."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if text.strip().lower() in ("none", "null", ""):
            return None
        annotation, origin = args[0], get_origin(args[0])
    if origin in (tuple, list):
        item = get_args(annotation)[0] if get_args(annotation) else str
        return tuple(_coerce(item, part.strip(), name) for part in text.split(",") if part.strip())
    if origin is Literal:
        if text not in get_args(annotation):
            raise UsageError(f"--setting {name}={text}: expected one of {', '.join(map(str, get_args(annotation)))}")
        return text
    if annotation is bool:
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise UsageError(f"--setting {name}={text}: expected true or false")
        return lowered in ("true", "1", "yes")
    if annotation in (int, float):
        try:
            return annotation(text)
        except ValueError:
            raise UsageError(f"--setting {name}={text}: expected a number ({annotation.__name__})") from None
    if annotation is Path:
        return Path(text)
    return text


def _overrides(task: str, raw: Mapping[str, str]) -> dict[str, Any]:
    """The overrides that ``task``'s eval config takes, typed as its fields."""
    config_class = EVAL_CONFIGS.get_named(task)
    hints = typing.get_type_hints(config_class)
    fields = {f.name for f in dataclasses.fields(config_class) if f.init}
    return {name: _coerce(hints[name], value, name) for name, value in raw.items() if name in fields}


def run_key(benchmark: str, task: str, settings: Mapping[str, Any], spec: ModelSpec, data: Path | None) -> str:
    """SHA-256 naming a run: the same benchmark, task, settings, model (id and revision) and data source give the
    same key, in any suite."""
    payload = {"version": KEY_VERSION, "benchmark": benchmark, "task": task,
               "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(settings.items())},
               "model": spec.id, "revision": spec.revision, "data": str(data) if data is not None else "published"}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def selected_benchmarks(names: Sequence[str]) -> list[Benchmark]:
    """The benchmarks named (every one for ``all``), each once, in registry order for ``all``."""
    if "all" in names:
        return list(BENCHMARKS.values())
    return [BENCHMARKS.get_named(name) for name in dict.fromkeys(names)]


def data_folder(benchmark: Benchmark, mirror_root: Path | None) -> Path | None:
    """Where ``benchmark`` is read from: its folder under the suite's ``--mirror`` root when there is one, else
    ``$CLADEBENCH_MIRROR/<name>`` when that exists, else None (the published source); resolved, for the key."""
    given = mirror_root / benchmark.name if mirror_root is not None else None
    folder = mirror_folder(benchmark, given if given is not None and given.is_dir() else None)
    return folder.resolve() if folder is not None else None


def plan_suite(config: SuiteConfig) -> list[PlannedRun]:
    """Every run of the suite, benchmark by benchmark, each protocol's runs for each model in the order given.
    Every eval config is built here (its checks run), so a setting no run can take is refused before any work."""
    raw = parse_settings(config.setting)
    benchmarks = selected_benchmarks(config.benchmarks)
    tasks = {p.task for b in benchmarks for p in b.protocols}
    unknown = sorted(set(raw) - {f.name for t in tasks for f in dataclasses.fields(EVAL_CONFIGS.get_named(t))})
    if unknown:
        raise UsageError(f"--setting {', '.join(unknown)}: no task of the suite ({', '.join(sorted(tasks))}) takes "
                         "it (see cladebench eval TASK --help)")
    specs = {model: resolve_model(model) for model in config.model}
    runs: list[PlannedRun] = []
    for benchmark in benchmarks:
        data = data_folder(benchmark, config.mirror)
        for protocol in benchmark.protocols:
            overrides = _overrides(protocol.task, raw)
            kinds = model_kinds(protocol.task)
            for run in protocol.runs:
                for model, spec in specs.items():
                    settings = {**protocol.settings, **run, **overrides}
                    if "column" in protocol.settings and "column" not in overrides:
                        settings.pop("column")  # the model names the column holding its vectors, as in eval
                    key = run_key(benchmark.name, protocol.task, settings, spec, data)
                    folder = (config.out / "runs" / benchmark.name
                              / f"{spec.column_key or column_key(model)}-{key[:12]}")
                    unsupported = None if spec.kind in kinds else (
                        f"{protocol.task} takes {' or '.join(sorted(kinds))} models; {model} is a {spec.kind} "
                        f"model ({spec.id})")
                    planned = PlannedRun(benchmark=benchmark, task=protocol.task, run=dict(run), settings=settings,
                                         model=model, spec=spec, data=data, key=key, folder=folder,
                                         unsupported=unsupported)
                    planned.eval_config(config.device)  # the eval checks of every setting, now
                    runs.append(planned)
    return runs
