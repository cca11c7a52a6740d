"""``cladebench export wandb``: each checked run of a suite or of run records as one Weights & Biases run, offline
unless ``WANDB_MODE`` says otherwise (``wandb sync DIR/wandb/offline-run-*`` uploads them later).

Through wandb's own ``wandb.init``, so the runs are what W&B writes for any run: the same params and identity as
``export mlflow`` (:mod:`.tracked`) in the run's config, every metric with a value and its interval bounds in its
summary (the keys of :func:`~.tracked.metric_key`), and an artifact of type ``cladebench-run`` holding
``run.json``, ``metric_keys.json`` and the run's report. A run's W&B id is made from the project and the record's
SHA-256, so a run is one W&B run: offline, a run folder of that id under ``DIR/wandb`` means it was logged already;
online, W&B itself refuses a second run of an id that exists (``resume='never'``), which is said as logged before.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from cladebench.environment import variable
from cladebench.errors import CladebenchError
from cladebench.export.checked import ExportedRun, exported_results
from cladebench.export.tracked import (
    REPORT_MISSING,
    Logged,
    report_available,
    run_metrics,
    run_params,
    run_tags,
    side_files,
    without_value,
)

DEFAULT_PROJECT = "cladebench"
OFFLINE_MODES = frozenset({"offline", "dryrun"})
"""``WANDB_MODE`` values under which runs are written to disk for a later ``wandb sync``."""


def _require_wandb() -> None:
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise CladebenchError("W&B export needs wandb: pip install 'cladebench[wandb]'") from None


def wandb_id(project: str, run: ExportedRun) -> str:
    """The W&B id of ``run`` in ``project``: 32 hex digits of the SHA-256 of both, the same at every export."""
    return hashlib.sha256(f"{project}\0{run.sha256}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class WandbLogged(Logged):
    """What ``export wandb`` did (:class:`~.tracked.Logged`), and how: W&B's mode and the folder of its runs."""

    mode: str
    folder: Path
    """Where offline runs are written (``FOLDER/wandb/offline-run-*``)."""


def export_to_wandb(paths: Sequence[str | Path], *, project: str = DEFAULT_PROJECT, entity: str | None = None,
                    folder: str | Path | None = None, model: str | None = None) -> WandbLogged:
    """Log each checked run of ``paths`` as a W&B run of ``project`` (offline unless ``WANDB_MODE`` says
    otherwise), its files under ``folder`` (``WANDB_DIR``, else the working folder)."""
    _require_wandb()
    mode = variable("WANDB_MODE") or "offline"
    if mode == "disabled":
        raise CladebenchError("WANDB_MODE=disabled: W&B would log nothing; unset it (offline by default) or set "
                              "WANDB_MODE=online")
    exported = exported_results([Path(p) for p in paths], model=model)
    root = Path(folder or variable("WANDB_DIR") or ".").absolute()
    root.mkdir(parents=True, exist_ok=True)
    report = report_available()
    left_out = list(exported.left_out) + ([] if report else [REPORT_MISSING])
    logged: list[tuple[ExportedRun, str]] = []
    already: list[tuple[ExportedRun, str]] = []
    import wandb

    try:
        for run in exported.runs:
            run_id = wandb_id(project, run)
            if mode in OFFLINE_MODES and any((root / "wandb").glob(f"offline-run-*-{run_id}")):
                already.append((run, run_id))
                continue
            if _log_one(run, run_id, project=project, entity=entity, root=root, mode=mode, report=report):
                logged.append((run, run_id))
                left_out.extend(line for line in [without_value(run)] if line)
            else:
                already.append((run, run_id))
    finally:
        wandb.teardown()  # W&B's service process ends with the export
    return WandbLogged(logged=logged, already=already, left_out=left_out, mode=mode, folder=root)


_Mode = Literal["online", "offline", "disabled", "shared"]
"""The modes ``wandb.init`` takes (``$WANDB_MODE`` is checked against them by W&B itself)."""

def _log_one(run: ExportedRun, run_id: str, *, project: str, entity: str | None, root: Path, mode: str,
             report: bool) -> bool:
    """Log one run; False when W&B (online) has a run of that id already."""
    import wandb

    settings = wandb.Settings(console="off", silent=True, save_code=False, disable_git=True,
                              x_save_requirements=False, x_disable_stats=True)
    try:
        logging = wandb.init(project=project, entity=entity, dir=str(root), id=run_id, mode=cast(_Mode, mode),
                             name=str(run.first.get("label") or run.first.get("model")), tags=["cladebench"],
                             config={**run_params(run), **run_tags(run)}, settings=settings,
                             resume=None if mode in OFFLINE_MODES else "never", reinit="create_new")
    except wandb.errors.UsageError as error:
        if "resume='never'" in str(error) or "already exists" in str(error):
            return False
        raise CladebenchError(f"W&B cannot log {run.path}: {error}") from None
    except wandb.errors.Error as error:
        raise CladebenchError(f"W&B cannot log {run.path}: {error}") from None
    try:
        values, keys = run_metrics(run)
        logging.summary.update(values)
        artifact = wandb.Artifact(f"cladebench-run-{run.sha256[:16]}", type="cladebench-run",
                                  metadata=run_tags(run))
        with tempfile.TemporaryDirectory(prefix="cladebench-wandb-") as folder:
            for path in side_files(run, keys, Path(folder), report):
                artifact.add_file(str(path), name=path.name)
            logging.log_artifact(artifact)
            logging.finish()
    except BaseException:
        _discard(logging)
        raise
    return True


def _discard(logging: Any) -> None:
    """A run that failed half-way is finished as failed and, offline, its folder removed: a later export logs it
    again instead of finding half of it."""
    folder = getattr(logging.settings, "sync_dir", None)
    try:
        logging.finish(exit_code=1)
    finally:
        if folder and Path(folder).name.startswith("offline-run-"):
            shutil.rmtree(folder, ignore_errors=True)
