"""What every export reads: the checked results of a suite folder or of run records, and what was left out and why.

Why a module of its own: a LaTeX table, a model card and an MLflow run must give the numbers ``cladebench results``
shows, so they read them the way it does (:func:`~cladebench.evaluate.suite.results.require_results`, each row
checked against its record and the record against its predictions) and never from anywhere else. A run record
given directly is verified the same way (:func:`~cladebench.evaluate.verify.verify_record`) and gives rows of the
same shape. A skipped run, a run whose numbers did not check, a run of another model: each is one line of
:attr:`Exported.left_out`, which every command prints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cladebench.errors import CladebenchError
from cladebench.evaluate.record import RUN_FILE, RunRecord
from cladebench.evaluate.suite.results import RESULTS_FILE, metric_rows, off_protocol_text, require_results

NOT_SETTINGS = frozenset({"out", "dataset", "data", "model", "revision", "task", "device", "given", "run_name"})
"""Fields of a record's config that are no task setting: where it read and wrote, the model and task (named apart),
where it ran, what was typed."""


@dataclass(frozen=True)
class ExportedRun:
    """One run to export: its record, its rows (one per metric, as the suite's results table gives them, checked)."""

    path: Path
    """Its ``run.json``."""
    record: RunRecord
    rows: list[dict[str, Any]]
    """One per metric: benchmark, task, protocol, model, model_id, revision, metric, value, low, high, n, reason..."""
    sha256: str
    """SHA-256 of the ``run.json`` bytes: the run's identity in a tracker (exporting it again finds it)."""

    @property
    def first(self) -> Mapping[str, Any]:
        """The row that names the run (every row names it alike)."""
        return self.rows[0]

    @property
    def settings(self) -> dict[str, Any]:
        """The task settings the run was made with (its config without paths, device and the model)."""
        return {k: v for k, v in sorted(self.record.config.items()) if k not in NOT_SETTINGS}

    def estimate(self, metric: str) -> Mapping[str, Any]:
        """The record's own entry for ``metric`` (its confidence and interval method beside the checked row)."""
        return self.record.metrics.get(metric) or {}


@dataclass(frozen=True)
class Exported:
    """The runs to export and one line for each run that is not exported."""

    runs: list[ExportedRun]
    left_out: list[str]


def exported_results(paths: Sequence[str | Path], *, model: str | None = None) -> Exported:
    """The finished, checked runs of ``paths`` (suite folders, ``run.json`` files or the folders holding them);
    with ``model``, only the runs of that model (as the suite names it, its id or the run's label)."""
    runs: list[ExportedRun] = []
    left_out: list[str] = []
    for given in map(Path, paths):
        if (given / RESULTS_FILE).is_file():
            found, missing = _suite_runs(given)
        else:
            found, missing = _given_run(given)
        runs.extend(found)
        left_out.extend(missing)
    if model is not None:
        mine = [r for r in runs if model in (r.first["model"], r.first["model_id"], r.first["label"])]
        others = sorted({str(r.first["model"]) for r in runs} - {str(r.first["model"]) for r in mine})
        if not mine:
            raise CladebenchError(f"no finished run of {model} in {', '.join(map(str, paths))}"
                                  + (f" (its models: {', '.join(others)})" if others else ""))
        if len(mine) < len(runs):
            left_out.append(f"{len(runs) - len(mine)} runs of other models ({', '.join(others)}): not {model}'s")
        runs = mine
    seen: dict[str, Path] = {}
    unique = []
    for run in runs:  # a run given twice (its folder and its suite) is exported once
        if run.sha256 not in seen:
            seen[run.sha256] = run.path
            unique.append(run)
    return Exported(unique, left_out)


def _what(row: Mapping[str, Any]) -> str:
    return f"{row['benchmark']} ({row['protocol']}) with {row['model']}"


def _suite_runs(root: Path) -> tuple[list[ExportedRun], list[str]]:
    rows = require_results(root).to_pylist()
    by_run: dict[str, list[dict[str, Any]]] = {}
    left_out = []
    for row in rows:
        if row["status"] == "skipped" or not row["run"]:
            left_out.append(f"{_what(row)}: skipped: {row['reason']}")
        else:
            by_run.setdefault(row["run"], []).append(row)
    runs = []
    for relative, mine in by_run.items():
        refused = next((r for r in mine if r["status"] != "finished"), None)
        if refused is not None:
            left_out.append(f"{_what(refused)}: not exported, its numbers did not check: {refused['reason']}")
            continue
        path = root / relative
        runs.append(ExportedRun(path, RunRecord.read(path), mine, _sha256(path)))
    return runs, left_out


def suite_run(path: Path, rows: Sequence[Mapping[str, Any]]) -> tuple[ExportedRun | None, str | None]:
    """A run a suite has just finished or reused (its ``run.json`` and the rows it put in the table), verified
    against its predictions as ``results`` would verify it; None and why when it does not check."""
    from cladebench.evaluate.verify import verify_record

    problem = verify_record(path)
    if problem is not None or not rows:
        return None, f"{path}: not exported, its numbers did not check: {problem or 'no metric'}"
    return ExportedRun(path, RunRecord.read(path), [dict(r) for r in rows], _sha256(path)), None


def _given_run(given: Path) -> tuple[list[ExportedRun], list[str]]:
    from cladebench.evaluate.verify import verify_record
    from cladebench.provenance import redact

    path = given / RUN_FILE if given.is_dir() else given
    if given.is_dir() and not path.is_file():
        raise CladebenchError(f"{given} is neither a suite folder (no {RESULTS_FILE}) nor a run's (no {RUN_FILE})")
    record = RunRecord.read_given(path)
    problem = verify_record(path)
    if problem is not None:
        return [], [f"{given}: not exported, its numbers did not check: {problem}"]
    dataset = record.provenance.get("dataset") or {}
    model = record.provenance.get("model") or {}
    what = {"benchmark": dataset.get("benchmark") or Path(str(dataset.get("uri") or "?")).name,
            "task": record.task, "protocol": record.task, "settings": None, "model": redact(record.config.get("model")),
            "model_id": record.model_name(), "revision": model.get("revision"), "key": None,
            "off_protocol": off_protocol_text(record)}
    rows = metric_rows(record, what, str(path))
    if not rows:
        return [], [f"{given}: not exported, its record holds no metric"]
    return [ExportedRun(path, record, rows, _sha256(path))], []


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
