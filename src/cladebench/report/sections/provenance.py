"""Provenance of every run: the facts that make its numbers comparable and reproducible.

What the Fine-Grained Challenges card asks every evaluation to state (split, sampling unit, label set,
model revision, prompts, metric) and what a reader needs to rerun it: the dataset (URI, version,
fingerprint of the whole dataset and of the evaluated rows), the filter, the model id and revision with
its image-embedding column, the prompt templates and name style, the metric definitions, the software
versions and the command. All are read from the run record as written; nothing is recomputed. Structured values
are shown as what they are: the task's settings as a table of their own, a mapping (the image preprocessing) as
``key: value`` entries, a list as its items, never as a JSON blob.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cladebench.report.runs import ReportRun
from cladebench.report.sections.base import ReportContext, register_section

if TYPE_CHECKING:
    from markupsafe import Markup


@dataclass(frozen=True)
class LabelSetRow:
    group: str
    kind: str
    size: object
    sha256: str
    source: str


Fact = str | tuple[tuple[str, str], ...]
"""A fact's value: text, or (key, text) entries for a mapping."""


@dataclass(frozen=True)
class RunProvenance:
    run: ReportRun
    facts: tuple[tuple[str, Fact], ...]
    """(what, value) in reading order; values are text, or (key, text) entries for a mapping."""
    settings: tuple[tuple[str, str], ...]
    """The task's settings as recorded (``provenance["task"]``): (setting, value as text)."""
    label_sets: tuple[LabelSetRow, ...]
    templates: tuple[str, ...]
    metrics: tuple[tuple[str, str], ...]
    """(metric, definition)."""
    software: tuple[tuple[str, str], ...]
    """(package, version)."""


def _text(value: object) -> str:
    """A value as text: a list of plain values as its items, a deeper structure as compact JSON."""
    if value is None:
        return "—"
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list, tuple)) for v in value):
        return ", ".join(_text(v) for v in value) if value else "none"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _entries(value: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """A mapping as (key, text) entries; a nested mapping's keys joined with a dot."""
    out: list[tuple[str, str]] = []
    for key, item in value.items():
        if isinstance(item, Mapping) and item:
            out.extend((f"{key}.{inner}", text) for inner, text in _entries(item))
        else:
            out.append((str(key), _text(item)))
    return tuple(out)


def _fact(value: object) -> Fact:
    return _entries(value) if isinstance(value, Mapping) else _text(value)


def _label_sets(provenance: Mapping[str, Any]) -> tuple[LabelSetRow, ...]:
    pooled = provenance.get("label_set")
    sets = {"all": pooled} if pooled else dict(provenance.get("label_sets") or {})
    return tuple(LabelSetRow(group=str(group), kind=str(s.get("rank") or s.get("kind") or "—"), size=s.get("size"),
                             sha256=str(s.get("sha256") or "—"), source=_text(s.get("source")))
                 for group, s in sets.items() if s)


def run_provenance(run: ReportRun) -> RunProvenance:
    """The provenance of one run, as rows to print."""
    record = run.record
    p = record.provenance
    dataset, model = p.get("dataset") or {}, p.get("model") or {}
    split, groups = p.get("split") or {}, p.get("groups") or {}
    embeddings = model.get("image_embeddings") or {}
    prompts = p.get("prompts") or {}
    predictions = p.get("predictions") or {}
    facts = [
        ("task", record.task),
        ("run record", str(run.path)),
        ("created", record.created_at),
        ("dataset", dataset.get("uri")),
        ("named benchmark", dataset.get("benchmark")),
        ("dataset version", dataset.get("version")),
        ("dataset tags", dataset.get("tags")),
        ("dataset rows", dataset.get("rows")),
        ("dataset fingerprint (sha256 of ordered uuids)", dataset.get("fingerprint")),
        ("row filter", dataset.get("where")),
        ("evaluated rows", dataset.get("evaluated_rows")),
        ("evaluated rows fingerprint", dataset.get("evaluated_fingerprint")),
        ("training exposure filter", p.get("exposure")),
        ("challenge groups", f"{groups.get('column')}: {', '.join(map(str, groups.get('values') or []))}"
                             if groups.get("column") else "none (pooled)"),
        ("breakdowns", p.get("breakdown") or None),
        ("split", split.get("kind")),
        ("split seed", split.get("seed")),
        ("sampling unit", split.get("sampling_unit")),
        ("model", model.get("id")),
        ("model revision", model.get("revision")),
        ("image embeddings", {k: v for k, v in embeddings.items() if k != "preprocessing"} or None),
        ("image preprocessing", embeddings.get("preprocessing")),
        ("text precision", model.get("text_precision")),
        ("logit scale", f"{model.get('logit_scale')} ({model.get('logit_scale_source')})"
                        if model.get("logit_scale") is not None else None),
        ("name style", prompts.get("name_style")),
        ("prompt template set", prompts.get("templates_name")),
        ("predictions", f"{predictions.get('file')}: {predictions.get('rows')} rows, sha256 {predictions.get('sha256')}"
                        if predictions else None),
        ("command", p.get("command")),
    ]
    return RunProvenance(
        run=run,
        facts=tuple((what, _fact(value)) for what, value in facts if value not in (None, "", [], {})),
        settings=_entries(p.get("task") or {}),
        label_sets=_label_sets(p),
        templates=tuple(str(t) for t in prompts.get("templates") or ()),
        metrics=tuple((str(k), str(v)) for k, v in (p.get("metrics") or {}).items()),
        software=tuple((str(k), str(v)) for k, v in (p.get("software") or {}).items()),
    )


LONG_VALUE = 240
"""A setting's value longer than this (a list of per-split choices) is folded in HTML, its start shown."""


@register_section("provenance", "Provenance", order=90, folded=True)
def provenance_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    return context.render("provenance", provenances=[run_provenance(run) for run in runs], long_value=LONG_VALUE)
