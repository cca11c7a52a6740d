"""Run records: predictions + metrics + provenance, written as ``run.json`` and ``predictions.parquet``.

A number without its provenance cannot be compared or reproduced. A run record says which rows
(dataset URI, version, fingerprint of the whole dataset and of the evaluated rows in order), which
split and sampling unit, which label set, which model and revision and preprocessing, which prompts
and name style, which metric definitions, which software, and which command produced it. The
Fine-Grained Challenges card asks every evaluation to state split, sampling unit, label set, model
revision, prompts and metric; here they are filled in automatically.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench import __version__, store
from cladebench.metrics import METRIC_DEFINITIONS

if TYPE_CHECKING:
    import lance

RECORD_VERSION = 1
RUN_FILE = "run.json"
PREDICTIONS_FILE = "predictions.parquet"


NUMBER_CHANGING_PACKAGES = ("pylance", "pyarrow", "numpy", "scipy", "scikit-learn", "pillow", "torch", "torchvision",
                            "open_clip_torch")


def software_versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """Versions of the packages that can change a number (installed ones only), plus ``extra`` packages.

    One function for run records, embedding metadata, model descriptions and training records, so
    every artefact names its software the same way.
    """
    versions = {"cladebench": __version__, "python": platform.python_version(), "machine": platform.machine()}
    for package in (*NUMBER_CHANGING_PACKAGES, *extra):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def dataset_provenance(dataset: lance.LanceDataset, uri: str, *, where: str | None,
                       evaluated_uuids: list[str]) -> dict[str, Any]:
    """Identity of the data: URI, version, tags at that version, whole-dataset and evaluated-rows fingerprints."""
    tags = [name for name, version in store.tags(dataset).items() if version == dataset.version]
    return {
        "uri": uri,
        "version": dataset.version,
        "tags": tags,
        "rows": dataset.count_rows(),
        "fingerprint": store.fingerprint(dataset),
        "where": where,
        "evaluated_rows": len(evaluated_uuids),
        "evaluated_fingerprint": store.fingerprint_uuids(evaluated_uuids),
    }


@dataclass
class RunRecord:
    """One evaluation: what was run, on what, with which model, and what came out."""

    task: str
    """Registered task name."""
    metrics: dict[str, Any]
    """Metric name -> estimate (value, interval, n)."""
    provenance: dict[str, Any]
    """Dataset, split, label set, model, prompts, metric definitions, software, command."""
    config: dict[str, Any]
    """The task config as run."""
    inspection: dict[str, Any] = field(default_factory=dict)
    """Tables for a person to look at, per group: e.g. genus-only rows' predicted species and least certain images."""
    created_at: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    record_version: int = RECORD_VERSION

    def write(self, out_dir: str | Path, predictions: pa.Table) -> Path:
        """Write ``run.json`` and ``predictions.parquet`` into ``out_dir`` (created); returns run.json's path."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        predictions_path = out / PREDICTIONS_FILE
        tmp = out / f".{PREDICTIONS_FILE}.tmp"
        pq.write_table(predictions, tmp)
        os.replace(tmp, predictions_path)
        digest = hashlib.sha256(predictions_path.read_bytes()).hexdigest()
        self.provenance["predictions"] = {"file": PREDICTIONS_FILE, "rows": predictions.num_rows, "sha256": digest}
        run_path = out / RUN_FILE
        tmp = out / f".{RUN_FILE}.tmp"
        tmp.write_text(json.dumps(asdict(self), indent=2, default=str, ensure_ascii=False) + "\n")
        os.replace(tmp, run_path)
        return run_path

    @classmethod
    def read(cls, path: str | Path) -> RunRecord:
        """Read a ``run.json`` (or the directory holding it)."""
        path = Path(path)
        if path.is_dir():
            path = path / RUN_FILE
        return cls(**json.loads(path.read_text()))

    def predictions(self, path: str | Path) -> pa.Table:
        """The per-example predictions beside a ``run.json``."""
        path = Path(path)
        directory = path if path.is_dir() else path.parent
        return pq.read_table(directory / self.provenance["predictions"]["file"])


def metric_definitions(names: list[str]) -> dict[str, str]:
    """Definitions of the reported metrics (``top1_genus`` is defined by ``top1``)."""
    out = {}
    for name in names:
        # The longest registered name that the metric's name starts with: top1_genus -> top1,
        # balanced_accuracy_species -> balanced_accuracy.
        base = max((k for k in METRIC_DEFINITIONS if name == k or name.startswith(k + "_")), key=len, default="")
        out[name] = METRIC_DEFINITIONS.get(base, "")
    return out


def command_line() -> str:
    """The command that produced the record, as typed (best effort)."""
    return " ".join([os.path.basename(sys.argv[0]) or "python", *sys.argv[1:]])
