"""Whether two runs can be paired, and what a stored number was computed on, in words.

Why a module of its own: :func:`~cladebench.evaluate.compare.compare_runs`, the report and the suite's board ask
the same question of two run records (the same rows, label set, rank, split, shots and gallery?), from the records
alone, before any prediction is read."""

from __future__ import annotations

from typing import Any

from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.run import GROUP_SEPARATOR

COMPARABILITY_KEYS = ("rows_sha256", "label_set", "rank", "split_sha256", "shots", "gallery")
"""What two runs must share to be paired: the rows evaluated, the label set (its taxa, whatever their name style),
its rank, the split and shots, and the gallery a query searches."""


def _scoped(value: object, group: str) -> Any:
    """A provenance entry for one group of a grouped run: its own entry where the record keeps one per group."""
    if isinstance(value, dict) and group and isinstance(value.get(group), dict):
        return value[group]
    return value


def comparability_of(record: RunRecord, group: str = "") -> dict[str, Any]:
    """What decides whether two runs can be paired (:data:`COMPARABILITY_KEYS`), for the whole run or one group.

    Read from the record's ``provenance.comparability`` (``evaluate.plan.comparability_key``; a version-1 record
    is given one when it is read, :mod:`~cladebench.evaluate.record_versions`): the rows, the label set and taxa
    of the group (or of the pooled run), the rank (else the label set's, for a task with no rank setting), the
    shots and the gallery's group key; the split is the group's own drawn split where it has one. Each fact has
    one form; a fact a record does not hold is None (None equals None).
    """
    provenance = record.provenance
    stored = provenance.get("comparability") or {}
    label_set = _label_set_entry(record, group)
    task = provenance.get("task") or {}
    split = (_scoped(provenance.get("split_by_group"), group) if group else None) or provenance.get("split") or {}
    facts = {
        "rows_sha256": stored.get("rows_sha256"),
        "label_set_sha256": _own(stored.get("label_sets_sha256"), group),
        "rank": stored.get("rank") or label_set.get("rank") or task.get("rank"),
        "split_sha256": split.get("fingerprint"),
        "shots": stored.get("shots"),
        "gallery": (stored.get("gallery") or {}).get("group_key"),
    }
    # Only a drawn split (few-shot, geo: one with a fingerprint) is a fact: the key's digest of splits of kind
    # "none" differs between a grouped and a pooled run, though neither drew anything.
    splits = [provenance.get("split"), *(provenance.get("split_by_group") or {}).values()]
    if facts["split_sha256"] is None and not group and any((s or {}).get("fingerprint") for s in splits):
        facts["split_sha256"] = stored.get("split_sha256")
    if isinstance(facts["shots"], (list, tuple)):
        facts["shots"] = sorted(int(k) for k in facts["shots"]) or None
    facts["taxa_sha256"] = _own(stored.get("taxa_sets_sha256"), group)
    facts["label_set"] = facts["taxa_sha256"] or facts["label_set_sha256"]
    return facts


def _own(per_group: object, group: str) -> str | None:
    """One group's entry of a per-group digest of the comparability key (a pooled run's, ``"None"``, stands for
    every group it is asked about), or None where the record keeps none (a task whose labels are not taxa)."""
    if not isinstance(per_group, dict):
        return None
    found = per_group.get(group or "None", per_group.get("None") if group else None)
    return str(found) if found else None


def _shots_words(record: RunRecord, group: str, shots: object) -> str:
    label_set = _label_set_entry(record, group)
    size, candidates = label_set.get("size"), label_set.get("candidates")
    rank = label_set.get("rank") or "class"
    shots = shots if isinstance(shots, list) else [shots]
    if size is not None and candidates is not None and size < candidates:  # the most shots decide the classes
        return f"{max(shots)}-shot scores {size} of {candidates} {rank}"
    return "/".join(str(k) for k in shots) + "-shot"


def incomparable(reference: RunRecord, other: RunRecord, group: str = "") -> str | None:
    """What keeps ``other`` from being paired with ``reference`` (on one group), in words, or None.

    The rows evaluated are not among the reasons: :func:`compare_runs` refuses runs on different rows unless told
    to pair the rows they share (``intersect``)."""
    a, b = comparability_of(reference, group), comparability_of(other, group)
    reasons = []
    if a["rank"] != b["rank"]:
        reasons.append(f"{b['rank'] or 'no'} rank vs {a['rank'] or 'no'} rank")
    if a["shots"] != b["shots"]:
        reasons.append(f"{_shots_words(other, group, b['shots'])} vs {_shots_words(reference, group, a['shots'])}")
    elif a["rank"] == b["rank"] and a["taxa_sha256"] and b["taxa_sha256"]:
        # Both records name their taxa: the same taxa under scientific and common names are one label set (such
        # runs compare the name styles on the same images and taxa, which is what that comparison is for).
        if a["taxa_sha256"] != b["taxa_sha256"]:
            reasons.append(_other_taxa(reference, other, group, a["rank"]))
    elif a["label_set_sha256"] != b["label_set_sha256"] and a["rank"] == b["rank"]:
        sizes = [label_set_size(record, group) for record in (other, reference)]
        styles = [_name_style(record, group) for record in (other, reference)]
        # Taxa unknown (a version-1 record): its label strings' digest differs between name styles of the same
        # taxa, so two styles with as many labels are taken as one label set.
        if sizes[0] != sizes[1] or styles[0] == styles[1] or None in styles:
            told = f" ({sizes[0]} vs {sizes[1]} labels)" if None not in sizes else ""
            reasons.append(f"different label sets{told}")
    if a["split_sha256"] != b["split_sha256"] and a["shots"] == b["shots"]:
        reasons.append("different few-shot splits (support and query images drawn differently)")
    if a["gallery"] != b["gallery"]:
        reasons.append(f"gallery without same-{b['gallery']} images vs without same-{a['gallery']} images")
    return "; ".join(reasons) or None


TAXA_NAMED = 3
"""Labels named in words when two runs' taxa differ (the rest are counted)."""


def _other_taxa(reference: RunRecord, other: RunRecord, group: str, rank: object) -> str:
    """``different taxa (9 vs 12 species; only in this run: A, B; only in the reference: C and 2 more)``: the
    labels are named where both runs list theirs in one name style."""
    sizes = [label_set_size(record, group) for record in (other, reference)]
    said = f"{sizes[0]} vs {sizes[1]} {rank or 'labels'}" if None not in sizes else ""
    entries = [_label_set_entry(record, group) for record in (other, reference)]
    listed = [entry.get("labels") for entry in entries]
    styles = [_name_style(record, group) for record in (other, reference)]
    mine_listed, theirs_listed = listed
    if isinstance(mine_listed, list) and isinstance(theirs_listed, list) and styles[0] == styles[1]:
        mine, theirs = set(map(str, mine_listed)), set(map(str, theirs_listed))
        for words, names in (("only in this run", mine - theirs), ("only in the reference", theirs - mine)):
            if names:
                shown = sorted(names)[:TAXA_NAMED]
                more = len(names) - len(shown)
                said += f"{'; ' if said else ''}{words}: {', '.join(shown)}{f' and {more} more' if more else ''}"
    return f"different taxa ({said})" if said else "different taxa"


def _label_set_entry(record: RunRecord, group: str) -> dict[str, Any]:
    return (_scoped(record.provenance.get("label_sets"), group) if group else None) \
        or record.provenance.get("label_set") or {}


def _name_style(record: RunRecord, group: str) -> str | None:
    style = _label_set_entry(record, group).get("name_style") or (record.provenance.get("prompts") or {}).get(
        "name_style") or record.config.get("name_style")
    return str(style) if style else None


def label_set_size(record: RunRecord, group: str = "") -> int | None:
    """Labels a run (one group of it) was scored against, or None where the record does not say."""
    label_set = _label_set_entry(record, group)
    size = label_set.get("size", label_set.get("labels_count"))
    return int(size) if isinstance(size, int) else None


def computed_on(record: RunRecord, metric: str, unit: str | None = None) -> str:
    """What one stored number was computed on, in words: ``45 images, 9 classes``, ``5 reps of 120 query images,
    3 classes``, ``250 queries``. ``unit`` names what the task's paired test resamples (images by default)."""
    estimate = record.metrics.get(metric)
    if not estimate:
        return ""
    group = metric.rpartition(GROUP_SEPARATOR)[0]
    parts = []
    n = estimate.get("n")
    if "per_repetition" in estimate or "query_examples" in estimate:  # a mean over repetitions
        queries = estimate.get("query_examples")
        parts.append(f"{n} reps" + (f" of {queries:,} {unit or 'query images'} in all" if queries else ""))
    elif isinstance(n, int) and isinstance(estimate.get("images"), int):  # a mean over some of the images
        parts.append(f"{n:,} mistakes of {estimate['images']:,} {unit or 'images'}")
    elif isinstance(n, int):
        parts.append(f"{n:,} {unit or 'images'}")
    classes = estimate.get("classes") or label_set_size(record, group if group else "")
    if classes:
        parts.append(f"{classes:,} classes")
    return ", ".join(parts)
