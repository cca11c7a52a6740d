"""The evaluation plan: a command line or a Python call resolved once into what will be evaluated.

Why a module of its own: every later step (the task run, the run record, the suite, ``compare`` and ``report``)
must agree on what was evaluated, and they can only agree if it is decided in one place. :func:`plan_eval` takes
an eval config and decides, before any model loads: whether the dataset names a benchmark (and where its data is,
with the digest of its files), the model the name means, the task and its settings, which of those the user gave
and which the benchmark's protocol filled, the rows selected and the groups they split into. Everything that can be
checked without a model is checked here, each check once. Nothing downstream resolves a name again.

A benchmark's protocol fills only the settings the user did not give. A setting given that differs from the
protocol runs as asked; the plan lists it in :attr:`EvalPlan.off_protocol`, the console says so in one line, and
the run record marks the run as off protocol.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from cladebench import store
from cladebench.benchmarks import (
    Benchmark,
    Located,
    apply_protocol,
    check_model_has_column,
    get_benchmark,
    locate,
    named_benchmark,
)
from cladebench.config import GIVEN, config_to_dict, field_default
from cladebench.evaluate.checks import check_before_model, check_model_can, check_model_given
from cladebench.evaluate.record import check_out_outside_dataset
from cladebench.evaluate.reviewed import ReviewedLabels, reviewed_labels
from cladebench.evaluate.selection import (
    MixedScriptName,
    and_filters,
    check_breakdown_values,
    check_unique_uuids,
    exposure_filter,
    mixed_script_names,
    select_groups,
    selection_filter,
)
from cladebench.models import registry as model_registry
from cladebench.models.spec import ModelSpec
from cladebench.store.versions import fingerprint_selecting
from cladebench.tasks.configs import TaskSettings

if TYPE_CHECKING:
    import lance
    from _typeshed import DataclassInstance

    from cladebench.evaluate.configs import EvalConfig
    from cladebench.tasks import Task

_Settings = TypeVar("_Settings", bound="DataclassInstance")


@dataclass(frozen=True)
class EvalPlan:
    """What one evaluation runs, fully resolved: built by :func:`plan_eval`, read by everything after it."""

    config: EvalConfig
    """The eval config as run: the user's settings, the benchmark's protocol where the user gave none."""
    task: Task
    """The registered task (:class:`cladebench.tasks.Task`)."""
    settings: TaskSettings
    """The task's own config, filled from :attr:`config`."""
    spec: ModelSpec | None
    """The model ``--model`` names, resolved once (None: a stored column evaluated without a model, or a model
    handed in that carries no spec)."""
    uri: str
    """The dataset opened: the path given, the benchmark's built or published dataset, or the reviewed clone."""
    located: Located | None
    """Where a named benchmark's data was found (source, release, mirror folder and its files' digest)."""
    given: frozenset[str]
    """The settings the user gave (options typed, keywords passed)."""
    off_protocol: Mapping[str, Mapping[str, object]]
    """Setting -> the protocol's value and the one run, for each given setting that departs from the benchmark's
    protocol (empty for a dataset that is no benchmark)."""
    where: str | None
    """The row filter evaluated: the user's ``--where`` and the training-exposure options."""
    group_column: str | None
    """The partition column whose values are evaluated separately (None: one pooled evaluation)."""
    groups: tuple[str | None, ...]
    """Its values among the selected rows (``(None,)`` when pooled)."""
    group_filters: Mapping[str, str]
    """Each group's SQL filter."""
    rows_without_group: int
    """Selected rows with no value in the partition column: in no group, so not evaluated (said, and recorded)."""
    rows_selected: int
    """Rows the filter, the exposure options and ``--within`` select (each uuid once: checked)."""
    dataset: lance.LanceDataset | None = dataclasses.field(default=None, repr=False, compare=False)
    """The dataset at :attr:`uri`, opened once here; every later step reads this handle (a run that embeds the
    benchmark first reopens it once, as the data changed)."""
    fingerprint: str = ""
    """The whole dataset's fingerprint, from the one read of its uuid column that also checked the selected
    rows' uuids (the record keeps it)."""
    label_sets: Mapping[str | None, object] = dataclasses.field(default_factory=dict)
    """Group (None when pooled) -> the label set the task scores against
    (:class:`~cladebench.tasks.common.PlannedLabelSet`): built once here, before any model, from the selection;
    handed to the task and read by the record. Empty for a task without one (:attr:`without_label_set` says why)
    and for a tree-of-life set (its labels come with the text vectors the run loads)."""
    mixed_script: Mapping[str, MixedScriptName] = dataclasses.field(default_factory=dict)
    """Names of the selected rows that mix scripts, with their rows (:func:`~.selection.mixed_script_names`)."""
    reviewed: ReviewedLabels | None = None
    """The experts' labels a ``--labels-from-reviews`` run scores against (None otherwise)."""
    rows_without_review: int = 0
    """Selected rows no reviewer agreed on (with ``--labels-from-reviews``): not scored, and counted as such."""

    @property
    def without_label_set(self) -> str | None:
        """Why the plan holds no label set (None when it holds one per group)."""
        if self.label_sets:
            return None
        if self.task.label_set is not None:
            return "the tree-of-life set is read with the text vectors the run loads"
        return self.task.without_label_set or "the task scores against no label set"

    @property
    def benchmark(self) -> str | None:
        """The named benchmark evaluated, or None for a dataset given by path or URI."""
        return None if self.located is None else self.located.name

    def group_where(self, group: str | None) -> str | None:
        """The filter selecting one group's rows (the whole selection when pooled)."""
        return self.where if group is None else and_filters(self.where, self.group_filters[group])

    def group_settings(self, group: str | None, settings: TaskSettings | None = None) -> TaskSettings:
        """The task settings (:attr:`settings`, or ``settings`` given) of one group's run: its filter in place."""
        return dataclasses.replace(self.settings if settings is None else settings, where=self.group_where(group))

    def provenance(self) -> dict[str, object]:
        """What the run record keeps of the plan: which settings were given, which the protocol filled, where
        the run departs from it, and why it holds no label set when it holds none."""
        return {"given": sorted(self.given), "benchmark": self.benchmark,
                "off_protocol": {name: dict(values) for name, values in self.off_protocol.items()},
                "without_label_set": self.without_label_set,
                "mixed_script_names": {name: dict(entry) for name, entry in self.mixed_script.items()}}


def given_settings(config: EvalConfig) -> frozenset[str]:
    """The settings the user gave: the config's :data:`~cladebench.config.GIVEN` names when it was built from a
    command line or by :func:`~cladebench.evaluate.run.eval_config`; else (a config class called directly) each
    setting whose value differs from its default, the best that can be known."""
    named = getattr(config, GIVEN, ())
    if named:
        return frozenset(named)
    out = set()
    for field in dataclasses.fields(config):
        if not field.init or field.name == GIVEN:
            continue
        default = field_default(field)
        if default is dataclasses.MISSING or getattr(config, field.name) != default:
            out.add(field.name)
    return frozenset(out)


def plan_eval(config: EvalConfig, *, encoder: object = None, located: Located | None = None) -> EvalPlan:
    """Resolve and check ``config`` into the plan of its run, reading the dataset's schema and the selected rows'
    group column but loading no model. ``encoder`` is a model handed in (the Python API, a suite's built model):
    its own spec stands for ``--model``. ``located`` is the named benchmark's data when the caller found it already
    (a suite, once per benchmark)."""
    from cladebench.tasks import DEFAULT_TASK, get_task

    given = given_settings(config)
    benchmark = _benchmark(config)
    protocol_config, off_protocol = apply_protocol(config, benchmark, given)
    config = cast("EvalConfig", protocol_config)  # the class given, the protocol's settings filled in
    check_out_outside_dataset(config.out, config.dataset)
    store.check_writable(config.out, folder=True)  # a read-only or file --out is found before any work
    task = get_task(config.task or DEFAULT_TASK)
    settings = task_config(task.config, config)
    spec = (getattr(encoder, "spec", None) if encoder is not None
            else None if config.model is None else model_registry.resolve_model(config.model, revision=config.revision))
    check_model_given(task, settings, model_named=config.model is not None or encoder is not None)
    check_model_can(task, spec)  # a text-needing task on an image-only model: refused before anything loads
    if benchmark is None:
        located = None
    elif located is None or located.name != benchmark.name:
        located = locate(benchmark, config)
    uri = config.dataset if located is None else located.uri
    dataset = store.open_dataset(uri)
    if benchmark is not None:  # before anything is written (the reviewed clone below)
        assert located is not None  # a benchmark's data is always located above
        check_model_has_column(benchmark, located, config, spec, dataset)
    reviewed = reviewed_labels(uri, config.out) if config.labels_from_reviews else None
    if reviewed is not None:  # the task runs on a clone holding the reviewed labels; only reviewed rows are scored
        uri = reviewed.uri
        dataset = store.open_dataset(uri)
    where = and_filters(settings.where, exposure_filter(config, dataset))
    check_before_model(dataset, config, settings, where)  # columns, filter, group-by: seconds before a model
    # One read of the uuid column: the selected rows (counted, each uuid once) and the whole dataset's fingerprint.
    fingerprint, selected = fingerprint_selecting(dataset, selection_filter(dataset, where, settings))
    group_column, groups, rows_without_group, group_filters = select_groups(dataset, uri, config, settings, where,
                                                                            len(selected))
    rows_selected = check_unique_uuids(selected, uri)
    check_breakdown_values(dataset, config.breakdown, selection_filter(dataset, where, settings))
    plan = EvalPlan(config=config, task=task, settings=settings, spec=spec, uri=uri, located=located, given=given,
                    off_protocol=off_protocol, where=where, group_column=group_column, groups=tuple(groups),
                    group_filters=group_filters, rows_without_group=rows_without_group, rows_selected=rows_selected,
                    dataset=dataset, fingerprint=fingerprint, reviewed=reviewed,
                    mixed_script=mixed_script_names(dataset, selection_filter(dataset, where, settings)),
                    rows_without_review=0 if reviewed is None else reviewed.unreviewed(selected))
    return dataclasses.replace(plan, label_sets=_label_sets(plan))


def _benchmark(config: EvalConfig) -> Benchmark | None:
    """The benchmark the config's dataset names: as :func:`~cladebench.evaluate.configs.eval_config` decided it
    when it did, else decided here (:func:`~cladebench.benchmarks.named_benchmark`)."""
    decided = getattr(config, "is_benchmark", None)
    if decided is None:
        return named_benchmark(config.dataset, data=getattr(config, "data", None))
    return get_benchmark(config.dataset) if decided else None


def _label_sets(plan: EvalPlan) -> dict[str | None, object]:
    """Each group's label set, for a task that scores against one (empty otherwise, or for a tree-of-life set)."""
    if plan.task.label_set is None:
        return {}
    out = {}
    for group in plan.groups:
        planned = plan.task.label_set(plan.dataset, plan.group_settings(group))
        if planned is None:
            return {}
        out[group] = planned
    return out


def task_config(task_config_class: type[_Settings], config: object) -> _Settings:
    """The task's own config, filled from the eval config's fields of the same name."""
    names = {f.name for f in dataclasses.fields(task_config_class)}
    return task_config_class(**{k: v for k, v in config_to_dict(config).items() if k in names})


def off_protocol_line(plan: EvalPlan) -> str | None:
    """The one console line of a run that departs from its benchmark's protocol, or None."""
    if not plan.off_protocol:
        return None
    parts = [f"--{name.replace('_', '-')} {_shown(v['run'])} (protocol: {_shown(v['protocol'])})"
             for name, v in plan.off_protocol.items()]
    return f"off protocol: {plan.benchmark} run as asked with {'; '.join(parts)}; the record marks it"


def _shown(value: object) -> str:
    return " ".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def comparability_key(plan: EvalPlan, infos: Mapping[str | None, Mapping[str, Any]],
                      label_sets: Mapping[str | None, Mapping[str, object]], evaluated_fingerprint: str
                      ) -> dict[str, object]:
    """What a paired comparison of two runs needs to be equal: the task, the rows evaluated, the label set (its
    hash, and its taxa's whatever their name style) and rank, the split (its fingerprint) and shots for few-shot,
    the gallery rule for retrieval. Two runs whose keys differ score different things; ``compare`` says how, in
    words, and pairs nothing it cannot."""
    settings = plan.settings
    splits = {str(g): (info.get("split") or {}) for g, info in infos.items()}
    label_hashes = {str(g): labels.get("labels_sha256") for g, labels in label_sets.items()}
    taxa = {str(g): labels.get("taxa_sha256") for g, labels in label_sets.items()}  # whatever the name style
    key: dict[str, object] = {
        "task": plan.task.name,
        "rows_sha256": evaluated_fingerprint,
        "groups": [g for g in plan.groups if g is not None and g in infos],
        "label_set_sha256": _digest(label_hashes),
        "label_sets_sha256": label_hashes,
        "taxa_sha256": _digest(taxa) if any(taxa.values()) else None,
        "taxa_sets_sha256": taxa if any(taxa.values()) else None,
        "rank": settings.label_rank(),
        "split_sha256": _digest({g: s.get("fingerprint") or {k: v for k, v in s.items() if k != "kind"}
                                 for g, s in splits.items()}),
        "shots": list(settings.shot_counts()) or None,
        "gallery": None,
    }
    if plan.task.gallery_rule is not None:
        key["gallery"] = {"rule": plan.task.gallery_rule,
                          "group_key": settings.group_keys().get("--group-key"), "rank": key["rank"]}
    return key


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
