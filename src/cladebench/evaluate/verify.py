"""Whether a run record still says what its predictions say: the one check before a stored number is reused.

Why a module of its own: a ``run.json`` is a file anyone can edit, and its predictions can be deleted or replaced
after the run. A suite that reuses a finished run, and every table built from records, must not show a number the
predictions do not give. :func:`verify_record` reads the predictions (their SHA-256 checked against the record),
recomputes every metric with the task's own metrics function, group by group and breakdown by breakdown, and
compares value, interval and count with what the record stores.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError
from cladebench.evaluate.record import RUN_FILE, RunRecord
from cladebench.evaluate.run import BREAKDOWN_PREFIX, GROUP_SEPARATOR, breakdown_metrics
from cladebench.evaluate.selection import LEFT_OUT

TOLERANCE = 1e-9
"""Largest difference between a stored value and the recomputed one that still counts as equal (JSON round trip)."""


def recompute_metrics(record: RunRecord, table: pa.Table) -> dict[str, Any]:
    """Every metric of ``record`` computed again from its predictions ``table``, with the task's metrics function
    and the settings the record keeps (per group for a grouped run, breakdowns included)."""
    from cladebench.tasks import get_task
    from cladebench.tasks.common import Predictions

    task = get_task(record.task)
    provenance = record.provenance
    groups = provenance.get("groups") or {}
    left_out = groups.get("left_out") or {}
    breakdown = provenance.get("breakdown") or []
    evaluated = [g for g in groups.get("values") or [] if g not in left_out] if groups.get("column") else [None]
    out: dict[str, object] = {}
    for group in evaluated:
        if group is None:
            part, info, labels = table, provenance.get("task") or {}, provenance.get("label_set") or {}
        else:
            part = table.filter(pc.equal(table.column("group"), group).fill_null(False))
            info = (provenance.get("task_by_group") or {}).get(group) or {}
            labels = (provenance.get("label_sets") or {}).get(group) or {}
        predictions = Predictions(table=part, labels=list(labels.get("labels") or []), info=dict(info))
        by_value, _ = breakdown_metrics(task, predictions, breakdown)
        prefix = "" if group is None else f"{group}{GROUP_SEPARATOR}"
        out.update({prefix + name: estimate for name, estimate in {**task.metrics(predictions), **by_value}.items()})
    return out


def verify_record(path: str | Path) -> str | None:
    """None when the record at ``path`` (a ``run.json`` or its folder) and its predictions agree; else why not, in
    one line (unreadable, predictions missing, unchecked or changed, a metric whose stored value or count differs)."""
    path = Path(path)
    if not (path / RUN_FILE if path.is_dir() else path).is_file():
        return "its run record is missing"
    try:
        record = RunRecord.read(path)
    except (OSError, ValueError, TypeError, KeyError) as error:
        return f"its record cannot be read ({type(error).__name__}: {error})"
    return read_checked(path, record)[1]


def read_checked(path: str | Path, record: RunRecord) -> tuple[pa.Table | None, str | None]:
    """The predictions of ``record`` (read from beside ``path``) and None when every metric the record stores is
    what they give; else no table where they cannot be read, and why the record is not to be shown, in one line.

    A record without the SHA-256 of its predictions is refused: any predictions file beside it (another run's,
    another dataset's) would be read as its own. The verdict is kept per content of ``run.json``: it holds the
    predictions' SHA-256, which every read checks, so the same text with readable predictions is the same
    verdict (a report's leaderboard pairs each run many times)."""
    path = Path(path)
    run_file = path / RUN_FILE if path.is_dir() else path
    if not ((record.provenance.get("predictions") or {}).get("sha256")):
        return None, ("its run record gives no SHA-256 for its predictions, so they cannot be told from another "
                      "run's")
    try:
        table = record.predictions(path)
        key = hashlib.sha256(run_file.read_bytes()).hexdigest()
    except FileNotFoundError as error:
        return None, f"its predictions are missing ({Path(error.filename or '').name or 'no file'})"
    except CladebenchError as error:
        return None, str(error)
    except (OSError, ValueError, TypeError, KeyError, pa.ArrowException) as error:
        return None, f"its record or predictions cannot be read ({type(error).__name__}: {error})"
    if key not in _VERDICTS:
        _VERDICTS[key] = check_metrics(record, table)
    return table, _VERDICTS[key]


_VERDICTS: dict[str, str | None] = {}
"""SHA-256 of a run.json's text -> :func:`check_metrics` of it (see :func:`read_checked`)."""


def check_metrics(record: RunRecord, table: pa.Table) -> str | None:
    """None when every metric ``record`` stores is what its predictions ``table`` give; else the first that is
    not, in one line."""
    if record.provenance.get("breakdown") and not any(name.startswith(BREAKDOWN_PREFIX) for name in table.column_names):
        return "its predictions hold no breakdown values (written by an older version), so they cannot be checked"
    try:
        recomputed = recompute_metrics(record, table)
    except (CladebenchError, KeyError, ValueError, TypeError, pa.ArrowException) as error:
        return f"its metrics cannot be recomputed from its predictions ({type(error).__name__}: {error})"
    left_out_groups = ((record.provenance.get("groups") or {}).get("left_out") or {})
    for name, stored in record.metrics.items():
        stored = stored or {}
        if stored.get(LEFT_OUT):
            if _left_out_estimate(name, stored, left_out_groups):
                continue
            return (f"its {name} is marked left out, but is not the empty metric of a group its provenance "
                    "leaves out")
        again = recomputed.get(name)
        if again is None:
            return f"its metric {name} is not one its predictions give"
        if not _same(stored.get("value"), again.get("value")) or stored.get("n") != again.get("n"):
            return (f"its {name} reads {_shown(stored.get('value'))} on n = {stored.get('n')}, but its predictions "
                    f"give {_shown(again.get('value'))} on n = {again.get('n')}")
        if not all(_same(stored.get(key), again.get(key)) for key in ("low", "high")):  # shown beside the value
            return (f"its {name} interval reads [{_shown(stored.get('low'))}, {_shown(stored.get('high'))}], but "
                    f"its predictions give [{_shown(again.get('low'))}, {_shown(again.get('high'))}]")
        differing = next((key for key in sorted(set(stored) | set(again))
                          if not _same_part(stored.get(key), again.get(key))), None)
        if differing is not None:  # what a table says beside the value (classes, repetitions) is checked too
            return (f"its {name} holds {differing} = {_shown(stored.get(differing))}, but its predictions give "
                    f"{_shown(again.get(differing))}")
    missing = sorted(set(recomputed) - set(record.metrics))
    if missing:
        return f"its predictions give {missing[0]}, which the record does not list"
    return None


def _left_out_estimate(name: str, stored: dict[str, object], left_out_groups: Iterable[str]) -> bool:
    """Whether ``stored`` is what :func:`~cladebench.evaluate.selection.left_out_metrics` writes for a group the
    provenance leaves out: no value, interval or count. Such a metric has nothing to recompute; a number marked
    left out by hand would otherwise reach a table unchecked."""
    in_group = any(name.startswith(f"{group}{GROUP_SEPARATOR}") for group in left_out_groups)
    return in_group and not stored.get("n") and all(stored.get(key) is None for key in ("value", "low", "high"))


def _same_part(stored: object, again: object) -> bool:
    """:func:`_same` for any part of an estimate: numbers within the tolerance, lists and objects part by part,
    anything else equal."""
    if isinstance(again, (list, tuple)):
        return (isinstance(stored, list) and len(stored) == len(again)
                and all(_same_part(s, a) for s, a in zip(stored, again, strict=True)))
    if isinstance(again, dict):
        return isinstance(stored, dict) and all(_same_part(stored.get(k), again.get(k)) for k in {*stored, *again})
    if (isinstance(again, numbers.Real) and not isinstance(again, (bool, np.bool_))) or again is None:
        return _same(stored, again)
    return isinstance(stored, bool) == isinstance(again, (bool, np.bool_)) and stored == again


def _shown(value: object) -> str:
    """A value in a refusal: enough digits to tell two apart, not a float's every digit."""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _same(stored: object, again: numbers.Real | float | None) -> bool:
    """Equal values, a non-finite recomputed value matching the null that run.json writes for it."""
    if again is None or (isinstance(again, float) and not math.isfinite(again)):
        return stored is None or (isinstance(stored, float) and not math.isfinite(stored))
    if stored is None or isinstance(stored, bool) or not isinstance(stored, (int, float)):
        return False
    return abs(float(stored) - float(again)) <= TOLERANCE
