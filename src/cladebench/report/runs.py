"""The runs a report is made of: each run record with its predictions, read once and shared by every section."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError, SchemaError
from cladebench.evaluate.labels import distinct_labels
from cladebench.evaluate.record import RUN_FILE, RunRecord
from cladebench.report.formatting import is_breakdown, split_metric


@dataclass(frozen=True, eq=False)
class ReportRun:
    """One run record in a report (compared by identity: it holds a whole predictions table)."""

    index: int
    """Position in the report, from 1: the run is called ``[index]`` everywhere."""
    path: Path
    """The run.json read."""
    record: RunRecord
    """Metrics, provenance and config as stored."""
    predictions: pa.Table | None
    """The per-example predictions beside run.json; None when they cannot be read (see ``predictions_note``)."""
    predictions_note: str | None = None
    """Why the predictions are missing, for the sections that need them."""
    distinct_label: str | None = None
    """The record's label made distinct from the other runs' of the report where two share one (set by
    :func:`load_runs`); None: the record's label as it is."""

    @property
    def task(self) -> str:
        return self.record.task

    @property
    def model_id(self) -> str:
        return str((self.record.provenance.get("model") or {}).get("id") or "unknown model")

    @property
    def dataset(self) -> dict[str, object]:
        """The dataset part of the provenance (URI, version, fingerprints, evaluated rows)."""
        return dict(self.record.provenance.get("dataset") or {})

    @property
    def label(self) -> str:
        """The run's label (``bioclip-2``, ``bioclip · sci · photo``), distinct within the report; the full model id
        is in :attr:`model_id` and the provenance section."""
        return self.distinct_label or str(self.record.label)

    @property
    def name(self) -> str:
        """``[1] bioclip-2``: how charts and tables name the run (its number and its label)."""
        return f"[{self.index}] {self.label}"

    @property
    def label_rank(self) -> str | None:
        """Rank of the run's labels (species for most zero-shot runs), when its task has one."""
        provenance = self.record.provenance
        label_sets = [provenance.get("label_set"), *(provenance.get("label_sets") or {}).values()]
        rank = next((s.get("rank") for s in label_sets if s and s.get("rank")), None)
        return str(rank or self.record.config.get("rank") or "") or None

    @cached_property
    def groups(self) -> tuple[str, ...]:
        """The run's challenge groups, as its provenance lists them (empty for a pooled run).

        Read from the provenance rather than guessed from metric names, because a group's name may hold
        anything, ``=`` included, which would make ``GROUP/metric`` look like a breakdown ``column=value/metric``.
        A record without the list falls back to the metric prefixes that are not breakdowns.
        """
        listed = (self.record.provenance.get("groups") or {}).get("values")
        if listed is not None:
            return tuple(str(g) for g in listed)
        prefixes = (split_metric(name)[0] for name in self.record.metrics)
        return tuple(dict.fromkeys(p for p in prefixes if p and not is_breakdown(p)))

    def breakdowns(self) -> list[str]:
        """Metric prefixes that are breakdowns (``column=value``), in record order."""
        prefixes = (split_metric(name)[0] for name in self.record.metrics)
        return list(dict.fromkeys(p for p in prefixes if p and p not in self.groups))

    @cached_property
    def examples_key(self) -> str | None:
        """Digest of the set of evaluated uuids: runs with the same key were evaluated on the same examples."""
        if self.predictions is None or "uuid" not in self.predictions.column_names:
            return None
        uuids = sorted(str(u) for u in pc.unique(self.predictions.column("uuid")).to_pylist())
        return hashlib.sha256("\n".join(uuids).encode()).hexdigest()

    def column(self, name: str) -> list[Any]:
        """A predictions column as a Python list (empty when there is no such column)."""
        if self.predictions is None or name not in self.predictions.column_names:
            return []
        return self.predictions.column(name).to_pylist()


def _run_file(path: Path) -> Path:
    return path / RUN_FILE if path.is_dir() else path


def load_run(index: int, path: str | Path) -> ReportRun:
    """Read one run record and its predictions, every stored metric checked against them
    (:func:`~cladebench.evaluate.verify.read_checked`); a missing record is a :class:`CladebenchError`, a record
    whose numbers its predictions do not give (edited, predictions missing, changed or without their SHA-256) a
    :class:`~cladebench.errors.SchemaError` naming the run and what does not match."""
    from cladebench.evaluate.verify import read_checked

    path = _run_file(Path(path))
    record = RunRecord.read_given(path)
    table, problem = read_checked(path, record)
    if problem is not None or table is None:
        raise SchemaError(f"{path}: {problem}")
    return ReportRun(index=index, path=path, record=record, predictions=table)


def load_runs(paths: Sequence[str | Path], *, left_out: list[str] | None = None) -> tuple[ReportRun, ...]:
    """Every run, numbered from 1 in the order given. A run :func:`load_run` refuses is an error, unless
    ``left_out`` is given: then the run is skipped, keeping the others' numbers, and ``[N] PATH: why`` is appended
    to it (a report of twenty runs still shows the nineteen whose numbers hold, and says which one it left out)."""
    if not paths:
        raise CladebenchError("a report needs at least one run record")
    runs = []
    for index, path in enumerate(paths, start=1):
        try:
            runs.append(load_run(index, path))
        except SchemaError as error:
            if left_out is None:
                raise
            left_out.append(f"[{index}] left out: {error}")
    if not runs:
        raise SchemaError("no run to report: " + "; ".join(left_out or ()))
    RunRecord.given_once(paths)
    labels = distinct_labels([str(run.record.label) for run in runs], [run.record.config for run in runs],
                             [run.path.resolve().parent.name for run in runs], [run.task for run in runs])
    return tuple(dataclasses.replace(run, distinct_label=label) for run, label in zip(runs, labels, strict=True))


def by_task(runs: Sequence[ReportRun]) -> dict[str, list[ReportRun]]:
    """Runs grouped by task, tasks in the order their first run appears."""
    out: dict[str, list[ReportRun]] = {}
    for run in runs:
        out.setdefault(run.task, []).append(run)
    return out


POOLED_SUMMARY = ("a pooled summary run scores every group's images as one benchmark, against every group's taxa at "
                  "once: a summary beside the per-group runs, not a benchmark of its own")
"""What a pooled run beside grouped ones is, said where such runs appear (the answer, the leaderboard)."""


def is_pooled_summary(run: ReportRun, runs: Sequence[ReportRun]) -> bool:
    """A pooled run (no groups) beside grouped runs of its task."""
    return not run.groups and any(other.groups for other in runs if other.task == run.task)
