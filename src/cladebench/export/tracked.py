"""What an experiment tracker's run holds of a cladebench run, whichever tracker logs it (MLflow, W&B): its params,
its identity (tags), metric keys a tracker takes, and the files logged beside it.

Why a module of its own: ``export mlflow`` and ``export wandb`` must describe one run alike (a run found in both
trackers reads the same), so what they log is decided here once and each tracker's module only speaks its client.

Metric keys: MLflow takes letters, digits, ``_ - . /`` and spaces (``:`` too, but not on Windows), and no empty
or ``.``/``..`` path segment; W&B takes any key but reads ``/`` as a section. So every other character becomes
``_`` (``ap@100`` -> ``ap_100``, ``category=Aves/ap@100`` -> ``category_Aves/ap_100``), and two names of one run
that would then meet get the first 8 hex digits of the SHA-256 of the name appended. ``metric_keys.json`` (logged
beside the run) maps each key back to the metric's name as the record writes it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cladebench import __version__
from cladebench.export.checked import ExportedRun

SHA256_TAG = "cladebench.record_sha256"
"""The tag that names the cladebench run a tracker's run holds: the SHA-256 of its ``run.json``."""
PARAM_MAX = 6000
"""Longest param value MLflow stores; a longer setting is cut, with its full value in run.json."""
REPORT_MISSING = ("the runs' reports (report.md) are not logged: reports need jinja2 and matplotlib, pip install "
                  "'cladebench[report]'")
_NOT_IN_KEY = re.compile(r"[^A-Za-z0-9_\-. /]")


@dataclass(frozen=True)
class Logged:
    """What an export to a tracker did, to say it: the runs logged now and those the tracker held already, each with
    the tracker's id of the run that holds it, and what was left out. Each tracker's export adds where they went."""

    logged: list[tuple[ExportedRun, str]]
    """Runs logged now, each with the tracker's run id."""
    already: list[tuple[ExportedRun, str]]
    """Runs the tracker held already (the same record SHA-256), with the id of the run holding each."""
    left_out: list[str]
    """What was not logged, one line each."""


def metric_key(name: str) -> str:
    """``name`` as a tracker's metric key: characters MLflow refuses become ``_``, empty and dot segments too.

    Example:
        >>> metric_key("category=Aves & co/ap@100")
        'category_Aves _ co/ap_100'
    """
    segments = [s if s not in (".", "..") else "_" for s in _NOT_IN_KEY.sub("_", name).split("/")]
    return "/".join(s for s in segments if s) or "_"


def metric_keys(names: Sequence[str]) -> dict[str, str]:
    """Each metric name -> its key, unique within the run (a clash gets a digest of the name)."""
    taken: dict[str, int] = {}
    for name in names:
        taken[metric_key(name)] = taken.get(metric_key(name), 0) + 1
    return {name: metric_key(name) if taken[metric_key(name)] == 1
            else f"{metric_key(name)}_{hashlib.sha256(name.encode()).hexdigest()[:8]}" for name in names}


def run_metrics(run: ExportedRun) -> tuple[dict[str, float], dict[str, str]]:
    """Key -> value of every metric with a value (``KEY.low`` and ``KEY.high`` its interval), and name -> key."""
    valued = [row for row in run.rows if row["value"] is not None]
    keys = metric_keys([str(row["metric"]) for row in valued])
    metrics: dict[str, float] = {}
    for row in valued:
        key = keys[str(row["metric"])]
        metrics[key] = row["value"]
        metrics.update({f"{key}.{bound}": row[bound] for bound in ("low", "high") if row[bound] is not None})
    return metrics, keys


def without_value(run: ExportedRun) -> str | None:
    """The line that says how many metrics of ``run`` have no value to log, or None."""
    missing = sum(row["value"] is None for row in run.rows)
    if not missing:
        return None
    return (f"{run.first['benchmark']} ({run.first['protocol']}) with {run.first['model']}: {missing} metrics "
            "without a value not logged (`cladebench results` says why)")


def run_params(run: ExportedRun) -> dict[str, str]:
    """Model, its id and revision, benchmark, task, protocol, label, and each task setting as ``setting.NAME``."""
    first = run.first
    params = {name: first.get(name) for name in ("model", "model_id", "revision", "benchmark", "task", "protocol",
                                                 "label")}
    params.update({f"setting.{name}": json.dumps(value, default=str) if not isinstance(value, str) else value
                   for name, value in run.settings.items()})
    return {key: str(value)[:PARAM_MAX] for key, value in params.items() if value is not None}


def run_tags(run: ExportedRun) -> dict[str, str]:
    """The run's identity: its record's SHA-256, the dataset's fingerprints, URI and version, the run key."""
    dataset: Mapping = run.record.provenance.get("dataset") or {}
    tags = {SHA256_TAG: run.sha256, "cladebench.dataset_fingerprint": dataset.get("fingerprint"),
            "cladebench.evaluated_fingerprint": dataset.get("evaluated_fingerprint"),
            "cladebench.dataset_uri": dataset.get("uri"), "cladebench.dataset_version": dataset.get("version"),
            "cladebench.run_key": run.first.get("key"), "cladebench.version": __version__,
            "cladebench.off_protocol": run.first.get("off_protocol")}
    return {key: str(value) for key, value in tags.items() if value is not None}


def start_ms(run: ExportedRun) -> int | None:
    """When the run was recorded, in milliseconds since the epoch (None when its record does not say)."""
    try:
        return int(dt.datetime.fromisoformat(str(run.record.created_at)).timestamp() * 1000)
    except ValueError:
        return None


def report_available() -> bool:
    """Whether the report extra is there to write each run's report.md."""
    try:
        import jinja2  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def side_files(run: ExportedRun, keys: Mapping[str, str], folder: Path, report: bool) -> list[Path]:
    """The files logged beside a run: its ``run.json``, ``metric_keys.json`` (key -> metric name) written into
    ``folder``, and with ``report`` its Markdown report written there."""
    mapping = folder / "metric_keys.json"
    mapping.write_text(json.dumps({key: name for name, key in keys.items()}, indent=1, ensure_ascii=False))
    files = [run.path, mapping]
    if report:
        from cladebench.report import write_report

        files.append(write_report([run.path], folder / "report.md", format="md"))
    return files
