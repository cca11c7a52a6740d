"""``cladebench export mlflow``: each checked run of a suite or of run records as one run of an MLflow experiment.

Through MLflow's own client (:class:`mlflow.MlflowClient`; the ``mlflow-skinny`` package is enough), so any
tracking server or local store the lab runs takes them. Each MLflow run holds the cladebench run's params (model,
its id and revision, benchmark, task, protocol, label, and every task setting as ``setting.NAME``), its metrics
(every metric with a value: the value as ``results --format json`` gives it, and its interval as ``KEY.low`` and
``KEY.high``), its tags (the record's SHA-256, the dataset's and the evaluated rows' fingerprints, the run key, the
cladebench version) and two artifacts: ``run.json`` and the run's Markdown report. A run already in the experiment
(a run with the same record SHA-256 tag) is not logged again.

Metric keys are :func:`~cladebench.export.tracked.metric_key`'s (what MLflow takes); ``metric_keys.json`` (an
artifact) maps each back to the metric's name as the record writes it.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cladebench.environment import defaults
from cladebench.errors import CladebenchError
from cladebench.export.checked import ExportedRun, exported_results
from cladebench.export.tracked import (
    REPORT_MISSING,
    SHA256_TAG,
    Logged,
    report_available,
    run_metrics,
    run_params,
    run_tags,
    side_files,
    start_ms,
    without_value,
)

DEFAULT_EXPERIMENT = "cladebench"


def _require_mlflow() -> None:
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise CladebenchError("MLflow export needs mlflow: pip install 'cladebench[mlflow]'") from None


@contextlib.contextmanager
def _store_allowed(uri: str) -> Iterator[None]:
    """MLflow 3 refuses its file store unless ``MLFLOW_ALLOW_FILE_STORE`` says yes; a ``file:`` URI or a path the
    user names is that choice made, so it is allowed for this export alone."""
    local = uri.startswith("file:") or ("://" not in uri and ":" not in uri.split("/")[0])
    with defaults({"MLFLOW_ALLOW_FILE_STORE": "true"} if local else {}):
        yield


@dataclass(frozen=True)
class MlflowLogged(Logged):
    """What ``export mlflow`` did (:class:`~.tracked.Logged`), and where: the tracking URI and the experiment."""

    tracking_uri: str
    experiment: str


def _log_one(client: Any, experiment_id: str, run: ExportedRun, report: bool) -> tuple[str, list[str]]:
    from mlflow.entities import Metric, Param

    values, keys = run_metrics(run)
    start = start_ms(run)
    metrics = [Metric(key, value, start or 0, 0) for key, value in values.items()]
    created = client.create_run(experiment_id, start_time=start, tags=run_tags(run),
                                run_name=str(run.first.get("label") or run.first.get("model")))
    run_id = created.info.run_id
    try:
        params = [Param(k, v) for k, v in run_params(run).items()]
        for at in range(0, len(params), 100):  # MLflow's limits on one batch
            client.log_batch(run_id, params=params[at:at + 100])
        for at in range(0, len(metrics), 1000):
            client.log_batch(run_id, metrics=metrics[at:at + 1000])
        with tempfile.TemporaryDirectory(prefix="cladebench-mlflow-") as folder:
            for path in side_files(run, keys, Path(folder), report):
                client.log_artifact(run_id, str(path))
        client.set_terminated(run_id, "FINISHED")
    except BaseException:
        with contextlib.suppress(Exception):  # never a half-logged run that passes for a finished one
            client.set_terminated(run_id, "FAILED")
            client.delete_run(run_id)
        raise
    return run_id, [line for line in [without_value(run)] if line]


class Tracker:
    """An MLflow experiment opened once (created when absent), to which checked runs are logged one by one: what
    ``export mlflow`` and ``suite --mlflow`` (each run as it finishes) share."""

    def __init__(self, tracking_uri: str | None = None, experiment: str = DEFAULT_EXPERIMENT) -> None:
        _require_mlflow()
        from mlflow import MlflowClient
        from mlflow.tracking import get_tracking_uri

        self.uri = tracking_uri or get_tracking_uri()
        self.experiment = experiment
        self.report = report_available()
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
                     experiment: str = DEFAULT_EXPERIMENT, model: str | None = None) -> MlflowLogged:
    """Log each checked run of ``paths`` not yet in ``experiment`` (created when absent) of ``tracking_uri``
    (``MLFLOW_TRACKING_URI``, else MLflow's own default)."""
    _require_mlflow()
    exported = exported_results([Path(p) for p in paths], model=model)
    tracker = Tracker(tracking_uri, experiment)
    left_out = list(exported.left_out)
    if not tracker.report:
        left_out.append(REPORT_MISSING)
    logged: list[tuple[ExportedRun, str]] = []
    already: list[tuple[ExportedRun, str]] = []
    for run in exported.runs:
        run_id, new, said = tracker.log(run)
        (logged if new else already).append((run, run_id))
        left_out.extend(said)
    return MlflowLogged(logged=logged, already=already, left_out=left_out, tracking_uri=tracker.uri,
                        experiment=experiment)


def _hint(uri: str) -> str:
    if uri.startswith(("sqlite:", "postgresql:", "mysql:", "mssql:")):
        return (" (a database store needs the full mlflow package, pip install mlflow; mlflow-skinny logs to a "
                "tracking server or a file: store, --tracking-uri file:./mlruns)")
    return ""
