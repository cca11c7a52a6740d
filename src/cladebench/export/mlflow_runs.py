"""``cladebench export mlflow``: each checked run of a suite or of run records as one run of an MLflow experiment.

Through MLflow's own client (:class:`mlflow.MlflowClient`; the ``mlflow-skinny`` package is enough), so any
tracking server or local store the lab runs takes them. Each MLflow run holds the cladebench run's params (model,
its id and revision, benchmark, task, protocol, label, and every task setting as ``setting.NAME``), its metrics
(every metric with a value: the value as ``results --format json`` gives it, and its interval as ``KEY.low`` and
``KEY.high``), its tags (the record's SHA-256, the dataset's and the evaluated rows' fingerprints, the run key, the
cladebench version) and two artifacts: ``run.json`` and the run's Markdown report. A run already in the experiment
(a run with the same record SHA-256 tag) is not logged again.

Metric keys: MLflow takes letters, digits, ``_ - . /`` and spaces (``:`` too, but not on Windows), and no empty
or ``.``/``..`` path segment, so every other character becomes ``_`` (``ap@100`` -> ``ap_100``,
``category=Aves/ap@100`` -> ``category_Aves/ap_100``), and two names of one run that would then meet get the first
8 hex digits of the SHA-256 of the name appended. ``metric_keys.json`` (an artifact) maps each key back to the
metric's name as the record writes it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cladebench import __version__
from cladebench.errors import CladebenchError
from cladebench.export.checked import ExportedRun, exported_results

SHA256_TAG = "cladebench.record_sha256"
"""The tag that names the cladebench run an MLflow run holds: the SHA-256 of its ``run.json``."""
DEFAULT_EXPERIMENT = "cladebench"
_NOT_IN_KEY = re.compile(r"[^A-Za-z0-9_\-. /]")
PARAM_MAX = 6000
"""Longest param value MLflow stores; a longer setting is cut, with its full value in run.json."""


def _require_mlflow() -> None:
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise CladebenchError("MLflow export needs mlflow: pip install 'cladebench[mlflow]'") from None


def metric_key(name: str) -> str:
    """``name`` as an MLflow metric key: characters MLflow refuses become ``_``, empty and dot segments too.

    Example:
        >>> metric_key("category=Aves & co/ap@100")
        'category_Aves _ co/ap_100'
    """
    segments = [s if s not in (".", "..") else "_" for s in _NOT_IN_KEY.sub("_", name).split("/")]
    return "/".join(s for s in segments if s) or "_"


def metric_keys(names: Sequence[str]) -> dict[str, str]:
    """Each metric name -> its key, unique within the run (a clash gets a digest of the name)."""
    keys: dict[str, str] = {}
    taken: dict[str, int] = {}
    for name in names:
        taken[metric_key(name)] = taken.get(metric_key(name), 0) + 1
    for name in names:
        key = metric_key(name)
        keys[name] = key if taken[key] == 1 else f"{key}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return keys


@contextlib.contextmanager
def _store_allowed(uri: str) -> Iterator[None]:
    """MLflow 3 refuses its file store unless ``MLFLOW_ALLOW_FILE_STORE`` says yes; a ``file:`` URI or a path the
    user names is that choice made, so it is allowed for this export alone."""
    local = uri.startswith("file:") or ("://" not in uri and ":" not in uri.split("/")[0])
    if not local or "MLFLOW_ALLOW_FILE_STORE" in os.environ:
        yield
        return
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


@dataclass(frozen=True)
class Logged:
    """What ``export mlflow`` did, to say it."""

    tracking_uri: str
    experiment: str
    logged: list[tuple[ExportedRun, str]]
    """Runs logged now, each with its MLflow run id."""
    already: list[tuple[ExportedRun, str]]
    """Runs found in the experiment already (same record SHA-256), with the MLflow run id holding them."""
    left_out: list[str]


def _params(run: ExportedRun) -> dict[str, str]:
    first = run.first
    params = {name: first.get(name) for name in ("model", "model_id", "revision", "benchmark", "task", "protocol",
                                                 "label")}
    params.update({f"setting.{name}": json.dumps(value, default=str) if not isinstance(value, str) else value
                   for name, value in run.settings.items()})
    return {key: str(value)[:PARAM_MAX] for key, value in params.items() if value is not None}


def _tags(run: ExportedRun) -> dict[str, str]:
    dataset = run.record.provenance.get("dataset") or {}
    tags = {SHA256_TAG: run.sha256, "cladebench.dataset_fingerprint": dataset.get("fingerprint"),
            "cladebench.evaluated_fingerprint": dataset.get("evaluated_fingerprint"),
            "cladebench.dataset_uri": dataset.get("uri"), "cladebench.dataset_version": dataset.get("version"),
            "cladebench.run_key": run.first.get("key"), "cladebench.version": __version__,
            "cladebench.off_protocol": run.first.get("off_protocol")}
    return {key: str(value) for key, value in tags.items() if value is not None}


def _start_ms(run: ExportedRun) -> int | None:
    try:
        return int(dt.datetime.fromisoformat(str(run.record.created_at)).timestamp() * 1000)
    except ValueError:
        return None


def _log_one(client: Any, experiment_id: str, run: ExportedRun, report: bool) -> tuple[str, list[str]]:
    from mlflow.entities import Metric, Param

    said = []
    valued = [row for row in run.rows if row["value"] is not None]
    keys = metric_keys([str(row["metric"]) for row in valued])
    start = _start_ms(run) or 0
    metrics = []
    for row in valued:
        key = keys[str(row["metric"])]
        metrics.append(Metric(key, row["value"], start, 0))
        metrics += [Metric(f"{key}.{bound}", row[bound], start, 0) for bound in ("low", "high")
                    if row[bound] is not None]
    created = client.create_run(experiment_id, start_time=_start_ms(run), tags=_tags(run),
                                run_name=str(run.first.get("label") or run.first.get("model")))
    run_id = created.info.run_id
    try:
        params = [Param(k, v) for k, v in _params(run).items()]
        for at in range(0, len(params), 100):  # MLflow's limits on one batch
            client.log_batch(run_id, params=params[at:at + 100])
        for at in range(0, len(metrics), 1000):
            client.log_batch(run_id, metrics=metrics[at:at + 1000])
        client.log_artifact(run_id, str(run.path))
        with tempfile.TemporaryDirectory(prefix="cladebench-mlflow-") as folder:
            mapping = Path(folder) / "metric_keys.json"
            mapping.write_text(json.dumps({keys[m]: m for m in keys}, indent=1, ensure_ascii=False))
            client.log_artifact(run_id, str(mapping))
            if report:
                from cladebench.report import write_report

                client.log_artifact(run_id, str(write_report([run.path], Path(folder) / "report.md", format="md")))
        if len(valued) < len(run.rows):
            said.append(f"{run.first['benchmark']} ({run.first['protocol']}) with {run.first['model']}: "
                        f"{len(run.rows) - len(valued)} metrics without a value not logged (`cladebench results` "
                        "says why)")
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        with contextlib.suppress(Exception):  # never a half-logged run that passes for a finished one
            client.set_terminated(run_id, "FAILED")
            client.delete_run(run_id)
        raise
    return run_id, said


class Tracker:
    """An MLflow experiment opened once (created when absent), to which checked runs are logged one by one: what
    ``export mlflow`` and ``suite --mlflow`` (each run as it finishes) share."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = DEFAULT_EXPERIMENT) -> None:
        _require_mlflow()
        from mlflow import MlflowClient
        from mlflow.tracking import get_tracking_uri

        self.uri = tracking_uri or get_tracking_uri()
        self.experiment = experiment
        self.report = _report_available()
        with self._talking():
            self.client = MlflowClient(tracking_uri=self.uri)
            found = self.client.get_experiment_by_name(experiment)
            self.experiment_id = found.experiment_id if found is not None else self.client.create_experiment(
                experiment)

    @contextlib.contextmanager
    def _talking(self) -> Iterator[None]:
        """MLflow's own errors (a store it cannot open, a server that refuses) as one line, exit 1."""
        from mlflow.exceptions import MlflowException

        try:
            with _store_allowed(self.uri):
                yield
        except MlflowException as error:
            from cladebench.evaluate.labels import one_line

            raise CladebenchError(f"MLflow cannot log to {self.uri}: {one_line(error.message)[:300]}"
                                  + _hint(self.uri)) from None

    def log(self, run: ExportedRun) -> tuple[str, bool, list[str]]:
        """Log ``run`` unless the experiment holds it already (its record SHA-256): the MLflow run id, whether it
        was logged now, and what was not logged."""
        with self._talking():
            existing = self.client.search_runs([self.experiment_id],
                                               filter_string=f"tags.`{SHA256_TAG}` = '{run.sha256}'", max_results=1)
            if existing:
                return existing[0].info.run_id, False, []
            run_id, said = _log_one(self.client, self.experiment_id, run, self.report)
        return run_id, True, said


def export_to_mlflow(paths: Sequence[str | Path], *, tracking_uri: str | None = None,
                     experiment: str = DEFAULT_EXPERIMENT, model: str | None = None) -> Logged:
    """Log each checked run of ``paths`` not yet in ``experiment`` (created when absent) of ``tracking_uri``
    (``MLFLOW_TRACKING_URI``, else MLflow's own default)."""
    _require_mlflow()
    exported = exported_results([Path(p) for p in paths], model=model)
    tracker = Tracker(tracking_uri, experiment)
    left_out = list(exported.left_out)
    if not tracker.report:
        left_out.append(REPORT_MISSING)
    logged, already = [], []
    for run in exported.runs:
        run_id, new, said = tracker.log(run)
        (logged if new else already).append((run, run_id))
        left_out.extend(said)
    return Logged(tracker.uri, experiment, logged, already, left_out)


REPORT_MISSING = ("the runs' reports (report.md) are not logged: reports need jinja2 and matplotlib, pip install "
                  "'cladebench[report]'")


def _hint(uri: str) -> str:
    if uri.startswith(("sqlite:", "postgresql:", "mysql:", "mssql:")):
        return (" (a database store needs the full mlflow package, pip install mlflow; mlflow-skinny logs to a "
                "tracking server or a file: store, --tracking-uri file:./mlruns)")
    return ""


def _report_available() -> bool:
    try:
        import jinja2  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
