"""Run labels: the short name a person reads for a run (``bioclip-2``, ``bioclip · sci · photo``).

Why a module of its own: a run is named in many places (``eval``'s summary, ``report``'s tables and charts,
``compare``, ``compare-columns``) and a name that differs between them, or that is a whole checkpoint path, or
that is the same for two runs of one model with different settings, makes a leaderboard unreadable. So every
place takes its names from here, and the rules live in one place:

- a run's label is what ``--run-name`` gave, else :func:`default_label`: the model as the user named it (an alias
  as typed, the folder's name of a ``local-dir:`` checkpoint, ``NAME`` of ``openai-compatible:NAME@URL``, the
  repository's name of ``hf-hub:ORG/NAME``), or the column of a run on stored vectors with no model; then the
  settings that differ from the task's defaults and change its results (name style, templates, rank, shots ...),
  joined by :data:`SEPARATOR` (which settings, and how each is said, the task declares:
  :attr:`cladebench.tasks.Task.label_settings`). Full model ids and paths stay in the record's provenance;
- where several runs share a label, :func:`distinct_labels` adds what tells them apart (a setting that differs,
  the run's folder), so no two runs print alike;
- where a name must fit a column, :func:`short_names` cuts it without ever cutting two names to one string.

Example:
    >>> default_label("zeroshot", {"model": "bioclip", "name_style": "sci", "templates": "photo"}, {})
    'bioclip · sci · photo'
    >>> default_label("zeroshot", {"model": "local-dir:/ckpt/runs/tiny-clip"}, {})
    'tiny-clip'
    >>> short_names(["emb_bioclip2", "emb_bioclip2p5"], 12)
    {'emb_bioclip2': 'emb_bioclip2', 'emb_bioclip2p5': 'emb_bioclip…'}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from cladebench.errors import CladebenchError, UsageError
from cladebench.models.endpoint import ENDPOINT_PREFIX, parse_endpoint
from cladebench.models.registry import HF_HUB_PREFIX, LOCAL_DIR_PREFIX
from cladebench.tasks import LabelSetting, known_task

SEPARATOR = " · "
"""Between a label's model and each setting that sets the run apart: ``bioclip · sci · photo``."""

VALUE_WIDTH = 24
"""A setting's value longer than this (a custom template, a filter) is cut with an ellipsis in a label."""

UNKNOWN_MODEL = "?"
"""The label of a record that names neither a model nor a column (written by hand, or by a very old version)."""


def one_line(text: str) -> str:
    """``text`` with every line break or other control character (a terminal's escape sequences) made a space, and
    runs of spaces made one: what a label read from a record that ``--run-name`` did not check (written by hand, or
    received from someone) is printed as, so it can neither break a table's row nor drive the terminal."""
    return " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())


RUN_NAME_MAX = 100
"""Characters a ``--run-name`` may have: it heads a run's row in every table, a line or two of a cell."""


def check_run_name(name: str | None) -> None:
    """Refuse a ``--run-name`` that cannot name a run on one line: blank, longer than :data:`RUN_NAME_MAX`, or
    holding a line break or another control character (a report's table row or a terminal line would break on it)."""
    if name is None:
        return
    if not name.strip():
        raise UsageError("--run-name is empty; give a short name for the run (e.g. --run-name 'bioclip sci')")
    if len(name) > RUN_NAME_MAX:
        raise UsageError(f"--run-name is {len(name):,} characters long; at most {RUN_NAME_MAX}, as it names the run in "
                         "every table: give a short name (e.g. --run-name 'bioclip sci')")
    if any(not (character.isprintable() or character == " ") for character in name):
        raise UsageError(f"--run-name {name!r} holds a line break or a control character; give a name on one line")


# --- the model's part ------------------------------------------------------------------------------


def _path_name(text: str) -> str:
    """The last segment of a path, whichever separator it uses (``/ckpt/tiny-clip/`` -> ``tiny-clip``)."""
    return PurePath(text.replace("\\", "/").rstrip("/")).name or text


def model_label(name: str) -> str:
    """How a model name reads in a label: an alias or any short name as typed, a ``local-dir:`` checkpoint by its
    folder's name (never the whole path), an endpoint by its model ``NAME``, a Hub model by its repository's name,
    an open_clip architecture with a weights file as ``ARCH/FILE``.

    Example:
        >>> [model_label(n) for n in ("bioclip-2", "local-dir:/m/demo-clip/", "hf-hub:imageomics/bioclip@abc",
        ...                           "openai-compatible:Qwen2-VL-7B@http://127.0.0.1:8000/v1",
        ...                           "ViT-B-16/openai", "ViT-B-16//data/ckpt.pt")]
        ['bioclip-2', 'demo-clip', 'bioclip', 'Qwen2-VL-7B', 'ViT-B-16/openai', 'ViT-B-16/ckpt.pt']
    """
    name = name.strip()
    if name.startswith(LOCAL_DIR_PREFIX):
        return _path_name(name.removeprefix(LOCAL_DIR_PREFIX)) or name
    if name.startswith(ENDPOINT_PREFIX):
        try:
            return parse_endpoint(name).name
        except CladebenchError:  # a record from a version that checked less: its name up to the URL
            return name.removeprefix(ENDPOINT_PREFIX).partition("@")[0] or name
    if name.startswith(HF_HUB_PREFIX):
        return _path_name(name.removeprefix(HF_HUB_PREFIX).partition("@")[0]) or name
    architecture, slash, pretrained = name.partition("/")
    if slash and ("/" in pretrained or "\\" in pretrained or pretrained.startswith(("~", "."))):
        return f"{architecture}/{_path_name(pretrained)}"
    return name


def _run_model(config: Mapping[str, Any], provenance: Mapping[str, Any]) -> str:
    """The model part of a default label: the model as named on the command line, else the model handed in
    through the Python API, else the stored column evaluated without a model."""
    if config.get("model"):
        return model_label(str(config["model"]))
    recorded = provenance.get("model") or {}
    if recorded.get("named_by") == "--model" and recorded.get("id"):
        return model_label(str(recorded["id"]))
    column = (recorded.get("image_embeddings") or {}).get("column") or config.get("column")
    if column:
        return str(column)
    return model_label(str(recorded["id"])) if recorded.get("id") else UNKNOWN_MODEL


# --- the settings' part ----------------------------------------------------------------------------


def _shown(value: object) -> str:
    """A setting's value in a label: lists joined by commas, long text cut."""
    text = one_line(",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value))
    return text if len(text) <= VALUE_WIDTH else text[:VALUE_WIDTH - 1] + "…"


def said(setting: LabelSetting, value: object) -> str:
    """A setting's value as a label says it (:class:`~cladebench.tasks.LabelSetting`): ``sci``, ``scale 100``,
    ``5,10 shots``, ``labels birds.csv``."""
    shown = _shown(_path_name(str(value)) if setting.file else value)
    return setting.said.replace("{}", shown)


def label_settings(task: str) -> tuple[LabelSetting, ...]:
    """The settings ``task``'s labels name (none for a task this version does not know)."""
    known = known_task(task)
    return known.label_settings if known is not None else ()


def _plain(value: object) -> object:
    """A default as ``run.json`` records a value (tuples as lists), so the two compare equal."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def task_defaults(task: str) -> dict[str, object]:
    """The defaults of ``task``'s own config (empty for a task this version does not know)."""
    known = known_task(task)
    if known is None:
        return {}
    config = known.config
    out = {}
    for spec in dataclasses.fields(config):
        if spec.default is not dataclasses.MISSING:
            out[spec.name] = _plain(spec.default)
        elif spec.default_factory is not dataclasses.MISSING:
            out[spec.name] = _plain(spec.default_factory())
    return out


def setting_parts(task: str, config: Mapping[str, object]) -> list[str]:
    """The settings of a run that set it apart from the task's defaults, each as a label says it."""
    defaults = task_defaults(task)
    parts = []
    revision = config.get("revision")
    if revision:  # another revision than the pinned one is other weights
        parts.append(f"rev {str(revision)[:7]}")
    for setting in label_settings(task):
        if setting.field not in config or setting.field not in defaults:
            continue
        value = config[setting.field]
        if value is None or _plain(value) == defaults[setting.field]:
            continue
        parts.append(said(setting, value))
    return parts


def default_label(task: str, config: Mapping[str, object], provenance: Mapping[str, object]) -> str:
    """A run's label when ``--run-name`` gave none, from what its record holds: the model, then each setting that
    differs from the task's defaults."""
    return SEPARATOR.join([_run_model(config, provenance), *setting_parts(task, config)])


# --- several runs at once --------------------------------------------------------------------------

_NOT_TELLING = frozenset({"out", "device", "run_name", "label", "task", "given", "is_benchmark"})
"""Config fields that never tell two runs apart in a label (where the record went, where the text tower ran, the
name given, how the config was built; ``label`` is how records written before ``run_name`` stored it)."""


def _told(key: str, value: object) -> str:
    if key in ("dataset", "prior_dataset", "labels") and value:
        value = _path_name(str(value))
    return f"{key.replace('_', '-')} {_shown(value)}"


def _telling(value: object, key: str, defaults: Mapping[str, object]) -> bool:
    """Whether a setting's value says something in a label: set, and not the task's default."""
    return value is not None and not (key in defaults and _plain(value) == defaults[key])


def distinct_labels(labels: Sequence[str], configs: Sequence[Mapping[str, object]], folders: Sequence[str],
                    tasks: Sequence[str] | None = None) -> list[str]:
    """The labels of several runs (a report's, a comparison's), made distinct where two or more runs of one task
    share one: first by the config fields that differ between those runs (at most two, e.g. ``dataset
    birds.lance``), each named only on the runs where it is set and not the task's default (``bioclip`` beside
    ``bioclip · where x > 1``, never ``where None``), then by the folder each run was written to, and last by its
    position. Runs of different ``tasks`` are never told apart by each other's settings (a report names them
    under their own task). Runs with distinct labels keep them as they are."""
    out = list(labels)
    run_tasks = list(tasks) if tasks is not None else [""] * len(labels)
    shared: dict[tuple[str, str], list[int]] = {}
    for index, label in enumerate(labels):
        shared.setdefault((run_tasks[index], label), []).append(index)
    for (task, label), members in shared.items():
        if len(members) < 2:
            continue
        defaults = task_defaults(task) if task else {}

        keys = dict.fromkeys(k for i in members for k in configs[i] if k not in _NOT_TELLING)
        differing = [k for k in keys if len({repr(configs[i].get(k)) for i in members}) > 1
                     and any(_telling(configs[i].get(k), k, defaults) for i in members)][:2]
        for i in members:
            out[i] = SEPARATOR.join([label, *(_told(k, configs[i].get(k)) for k in differing
                                            if _telling(configs[i].get(k), k, defaults))])
        if len({out[i] for i in members}) < len(members):  # the same settings: where each run was written
            for i in members:
                out[i] = f"{out[i]} ({folders[i]})"
        if len({out[i] for i in members}) < len(members):  # the same folder name too: their order
            for position, i in enumerate(members, start=1):
                out[i] = f"{out[i]} #{position}"
    return out


def short_names(names: Sequence[str], width: int) -> dict[str, str]:
    """Each name cut to at most ``width`` characters for a table's column, an ellipsis marking the cut, never two
    different names to the same string: names are cut at the end where that keeps them apart, else in the middle
    (keeping both ends: ``emb_bioc…p5a``), else left whole. Equal names stay equal.

    Example:
        >>> short_names(["emb_bioclip2p5a", "emb_bioclip2p5b"], 12)
        {'emb_bioclip2p5a': 'emb_bioc…p5a', 'emb_bioclip2p5b': 'emb_bioc…p5b'}
    """
    distinct = list(dict.fromkeys(names))
    keep = max(width - 1, 1)

    def end(name: str) -> str:
        return name if len(name) <= width else name[:keep] + "…"

    def middle(name: str) -> str:
        tail = keep // 3
        if len(name) <= width or not tail:
            return end(name)
        return name[:keep - tail] + "…" + name[-tail:]

    for cut in (end, middle):
        shortened = {name: cut(name) for name in distinct}
        if len(set(shortened.values())) == len(distinct):
            return shortened
    return {name: name for name in distinct}
