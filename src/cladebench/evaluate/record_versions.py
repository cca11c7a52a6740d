"""Record versions: one reader per older version of ``run.json`` lifts it to the current shape when it is read.

Why a module of its own: a field added to run records would otherwise leave a "written before" branch in every
reader (compare, the report, the suite, serve, export). Here each version's step fills what that version lacked,
once, so every other module reads only the current shape; a record of a newer version than this code knows is
refused (its fields may mean other things), never read as this one.

Versions:

- **1**: the first. It may lack the run's ``label`` (``--run-name``); its label sets may lack ``labels_sha256``
  (they name their digest ``sha256``) and their taxa's digest ``taxa_sha256``; its provenance may lack the
  ``comparability`` key the plan writes (:func:`cladebench.evaluate.plan.comparability_key`).
- **2**: every record has a ``label``, every label set a ``labels_sha256``, the provenance a ``comparability``
  key. A version-1 record's key is made from what it holds (its taxa are unknown: null), so it is paired and
  reported exactly as before.

Example:
    >>> old = {"task": "zeroshot", "record_version": 1, "config": {"model": "bioclip"}, "metrics": {},
    ...        "provenance": {"label_set": {"rank": "species", "sha256": "ab"}}}
    >>> lifted = current_shape(old)
    >>> lifted["record_version"], lifted["label"], lifted["provenance"]["comparability"]["label_sets_sha256"]
    (2, 'bioclip', {'None': 'ab'})
    >>> current_shape(lifted) == lifted
    True
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from cladebench.errors import SchemaError
from cladebench.evaluate.labels import default_label

RECORD_VERSION = 2
"""The version of the run records this code writes."""

FIRST_VERSION = 1
"""A record that names no version is of the first (the field was there from the start; a hand-made record)."""


_Json = dict[str, Any]
"""A run.json object as parsed (its values are checked where they are read)."""

def _label_set_entries(provenance: _Json) -> dict[str, _Json]:
    """The record's label sets by group as the comparability key names them (a pooled run's as ``"None"``)."""
    grouped = provenance.get("label_sets")
    if isinstance(grouped, dict) and grouped:
        return {str(group): entry for group, entry in grouped.items() if isinstance(entry, dict)}
    pooled = provenance.get("label_set")
    return {"None": pooled} if isinstance(pooled, dict) else {}


def _from_version_1(data: _Json) -> _Json:
    """Version 1 to 2: the label a new record would get, each label set's ``labels_sha256``, the comparability
    key made from the facts the record holds. Only what is missing is filled in."""
    provenance = data.setdefault("provenance", {})
    config = data.get("config") or {}
    if data.get("label") is None:
        data["label"] = default_label(str(data.get("task", "")), config, provenance)
    entries = _label_set_entries(provenance)
    for entry in entries.values():
        if entry.get("labels_sha256") is None and entry.get("sha256") is not None:
            entry["labels_sha256"] = entry["sha256"]
    if not isinstance(provenance.get("comparability"), dict) or not provenance["comparability"]:
        task = provenance.get("task") or {}
        exclusions = task.get("exclusions")
        # The whole run's rank, as version 1 was read: its pooled label set's, else the task's or config's (each
        # group's own label set gives that group's rank when it is asked for)
        pooled = provenance.get("label_set") if isinstance(provenance.get("label_set"), dict) else {}
        ranks = [pooled.get("rank"), task.get("rank"), config.get("rank")]
        groups = provenance.get("groups") or {}
        provenance["comparability"] = {
            "task": data.get("task"),
            "rows_sha256": (provenance.get("dataset") or {}).get("evaluated_fingerprint"),
            "groups": list(groups.get("values") or []),
            "label_set_sha256": None,  # a digest over the groups' label sets that version 1 did not keep
            "label_sets_sha256": {group: entry.get("labels_sha256") for group, entry in entries.items()},
            "taxa_sha256": None,  # version 1 did not keep the taxa: its label sets are known by their strings
            "taxa_sets_sha256": None,
            "rank": next((rank for rank in ranks if rank), None),
            "split_sha256": None,  # each split's own fingerprint stays in the record's split entries
            "shots": config.get("shots", task.get("shots")),
            "gallery": ({"rule": exclusions.get("rule"), "group_key": exclusions.get("group_key")}
                        if isinstance(exclusions, dict) else None),
        }
    return data


UPGRADES: dict[int, Callable[[_Json], _Json]] = {1: _from_version_1}
"""Version -> the step that lifts a record of that version to the next; one entry per version below the current."""


def current_shape(data: _Json, source: str = "the run record") -> _Json:
    """``data`` (a run.json's object, its parts checked to be objects) in the current shape: a copy lifted step by
    step from its version, or refused with a :class:`SchemaError` naming ``source`` when its version is not one
    this code knows (a newer cladebench wrote it, or it is not a version at all). Lifting a current record gives
    it back unchanged."""
    version = data.get("record_version", FIRST_VERSION)
    if isinstance(version, bool) or not isinstance(version, int) or not FIRST_VERSION <= version <= RECORD_VERSION:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > RECORD_VERSION
        raise SchemaError(f"{source}: record version {version!r} is not one this version of cladebench reads "
                          f"({FIRST_VERSION} to {RECORD_VERSION}"
                          + ("; a newer cladebench wrote it: upgrade cladebench to read it)" if newer else ")"))
    if version == RECORD_VERSION:
        return data
    lifted = copy.deepcopy(data)
    for step in range(version, RECORD_VERSION):
        lifted = UPGRADES[step](lifted)
    lifted["record_version"] = RECORD_VERSION
    return lifted
