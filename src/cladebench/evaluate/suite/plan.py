"""What a suite runs: every benchmark's standard protocol for every model, as a list of runs each named by a key.

Why a module of its own: the runs a suite makes, and when two of them are the same run, decide what is reused and
what is computed; that is settled here, before anything is read or loaded, so that a bad ``--setting`` or an unknown
benchmark or model is refused at once (exit 2) rather than after an hour of runs.

A run is one entry of a protocol's :attr:`~cladebench.benchmarks.Protocol.runs` for one model: the
benchmark, its task, the settings the eval config is built with (the protocol's, the run's, the suite's
``--setting`` overrides), the model, and the data. Its **key** is the SHA-256 of what decides its numbers, by
content: the data's (a mirror's files digest, or the published source and release), the model's (its id, its
pinned revision, and for weights in local files their digest), the settings, and the version of the metric
definitions. The key names its folder (``runs/<benchmark>/<model>-<key>``): the same run in a later suite finds its
record there, and reuses it once the record is verified against its predictions (:mod:`~cladebench.evaluate.verify`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cladebench.benchmarks import BENCHMARKS, Benchmark, mirror_folder
from cladebench.benchmarks.base import mirror_digest
from cladebench.config import OPTION, setting_fields
from cladebench.errors import UsageError
from cladebench.evaluate.configs import EVAL_CONFIGS, EvalConfig, eval_config
from cladebench.models.registry import resolve_model
from cladebench.models.spec import ModelSpec, column_key
from cladebench.tiers import as_typed, parse_words, typed_setting, unknown_setting

KEY_VERSION = 2
"""Part of every run key: raised when what a run's settings mean changes, so old records are not reused for it."""

SUITE_FIXED = frozenset({"dataset", "out", "model", "task", "revision", "run_name", "device", "data"})
"""Eval fields the suite sets itself; a ``--setting`` may not name them."""


@dataclass(frozen=True)
class SuiteConfig:
    """Run every named benchmark's standard protocol for each model (FGC zero-shot per group and few-shot at 1 and
    5 shots, all rows and unseen only; CrypticBio zero-shot per name style; INQUIRE-Rerank; Co-Observed lineage),
    reusing every run already finished in --out; results.parquet and report.html accumulate across suites."""

    model: tuple[str, ...] = field(metadata=OPTION)
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
    mlflow: bool = False
    """Log each run to MLflow as it finishes (reused runs too): experiment 'cladebench' at $MLFLOW_TRACKING_URI,
    else MLflow's own default; a run logged before is not logged again (as `export mlflow`, which logs a suite
    folder afterwards)."""

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
    run: Mapping[str, object]
    """The protocol run's own settings (an entry of ``Protocol.runs``): how the run is told apart in tables."""
    settings: Mapping[str, object]
    """Every setting the eval config is built with besides the fixed ones (protocol, run, overrides)."""
    model: str
    """The model as the user named it."""
    spec: ModelSpec
    """What the name means (id, revision, kind)."""
    data: Path | None
    """The mirror folder read, or None for the published source."""
    key: str
    """SHA-256 of benchmark, task, settings, model and data by content: the run's identity."""
    folder: Path
    """Where its record is written: ``<out>/runs/<benchmark>/<model>-<key prefix>``."""
    config: EvalConfig
    """The eval config of the run, built (and checked) once when the suite is planned."""
    unsupported: str | None = None
    """Why the model cannot run this task (an endpoint on zero-shot, an image-only model on anything that needs a
    text tower); None when it can."""

    @property
    def protocol(self) -> str:
        """``fewshot · shots=5 · unseen_only``: the task and the run's own settings, as tables name the run."""
        return protocol_name(self.task, self.run)



def protocol_name(task: str, run: Mapping[str, object]) -> str:
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


def unsupported_reason(task: str, model: str, spec: ModelSpec) -> str | None:
    """Why ``model`` cannot run ``task`` (``needs a text tower``: a recorded skip of the cell), None when it can."""
    from cladebench.evaluate.checks import model_refusal
    from cladebench.tasks import get_task

    refusal = model_refusal(get_task(task), spec)
    named = model if model == spec.id else f"{model} ({spec.id})"
    return None if refusal is None else f"{task} {refusal}; {named} is {spec.traits.described}"


def parse_settings(given: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``NAME=VALUE`` words, read as `eval --setting` reads them (:func:`cladebench.tiers.parse_words`): name ->
    (the word as typed, the raw value); a field the suite sets itself is a usage error too."""
    out = parse_words(given)
    for name in out:
        if name in SUITE_FIXED:
            raise UsageError(f"--setting {name}: the suite sets {name} itself")
    return out


def _overrides(task: str, raw: Mapping[str, tuple[str, str]]) -> dict[str, object]:
    """The overrides that ``task``'s eval config takes, typed as its fields by the conversion `eval --setting`
    uses."""
    config_class = EVAL_CONFIGS.get_named(task)
    fields = {f.name for f in setting_fields(config_class)}
    return {name: typed_setting(config_class, name, value, f"--setting {as_typed(word)}")
            for name, (word, value) in raw.items() if name in fields}


def data_identity(benchmark: Benchmark, data: Path | None) -> dict[str, object]:
    """What a benchmark's data is, by content: a mirror's files digest (paths, sizes, modification times), or the
    published source at its pinned release. A mirror whose files change gets another identity, wherever it lies."""
    if data is not None:
        return {"mirror_sha256": mirror_digest(data)}
    return {"published": benchmark.source, "release": benchmark.release}


def weights_identity(spec: ModelSpec) -> dict[str, object]:
    """What a model's weights are: its id and pinned revision, and for weights in local files (a ``local-dir:``
    checkpoint, a ``pretrained=`` file) the digest of those files, so retraining into the same folder is a new
    model to the suite."""
    identity: dict[str, object] = {"id": spec.id, "revision": spec.revision}
    for candidate in (spec.id.removeprefix("local-dir:") if spec.id.startswith("local-dir:") else None,
                      spec.pretrained):
        path = Path(candidate) if candidate else None
        if path is not None and path.is_dir():
            identity["files_sha256"] = mirror_digest(path)
        elif path is not None and path.is_file():
            stat = path.stat()
            identity["file"] = f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return identity


@functools.cache
def metrics_version() -> str:
    """Digest of every metric definition, every task's loaded first (tasks define theirs on import, so a digest of
    what happens to be imported would change with the command): a change to what a metric means makes every run
    key new."""
    from cladebench.metrics import METRIC_DEFINITIONS  # here: the package defines the shared metrics on import
    from cladebench.tasks import all_tasks

    all_tasks()
    return hashlib.sha256(json.dumps(dict(METRIC_DEFINITIONS), sort_keys=True).encode()).hexdigest()


def run_key(benchmark: str, task: str, settings: Mapping[str, object], model: Mapping[str, object],
            data: Mapping[str, object]) -> str:
    """SHA-256 naming a run: the same benchmark, task, settings, model and data (each by content) and metric
    definitions give the same key, in any suite."""
    payload = {"version": KEY_VERSION, "metrics": metrics_version(), "benchmark": benchmark, "task": task,
               "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(settings.items())},
               "model": dict(model), "data": dict(data)}
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
    known = {f.name for t in tasks for f in setting_fields(EVAL_CONFIGS.get_named(t))} - SUITE_FIXED
    unknown = sorted(set(raw) - known)
    if unknown:
        raise unknown_setting(f"--setting {raw[unknown[0]][0]}", unknown[0], known,
                              f"no task of the suite ({', '.join(sorted(tasks))})")
    specs = {model: resolve_model(model) for model in config.model}
    weights = {model: weights_identity(spec) for model, spec in specs.items()}
    runs: list[PlannedRun] = []
    for benchmark in benchmarks:
        data = data_folder(benchmark, config.mirror)
        identity = data_identity(benchmark, data)
        for protocol in benchmark.protocols:
            overrides = _overrides(protocol.task, raw)
            for run in protocol.runs:
                for model, spec in specs.items():
                    settings = {**protocol.settings, **run, **overrides}
                    if "column" in protocol.settings and "column" not in overrides:
                        settings.pop("column")  # the model names the column holding its vectors, as in eval
                    key = run_key(benchmark.name, protocol.task, settings, weights[model], identity)
                    folder = (config.out / "runs" / benchmark.name
                              / f"{spec.column_key or column_key(model)}-{key[:12]}")
                    unsupported = unsupported_reason(protocol.task, model, spec)
                    # Built once, here: the eval checks of every setting run before any work.
                    eval_settings = eval_config(task=protocol.task, dataset=benchmark.name, model=model, out=folder,
                                                device=config.device, data=data, **settings)
                    runs.append(PlannedRun(benchmark=benchmark, task=protocol.task, run=dict(run), settings=settings,
                                           model=model, spec=spec, data=data, key=key, folder=folder,
                                           config=eval_settings, unsupported=unsupported))
    return runs
