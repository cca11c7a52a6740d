"""Run records: predictions + metrics + provenance, written as ``run.json`` and ``predictions.parquet``.

A number without its provenance cannot be compared or reproduced. A run record says which rows
(dataset URI, version, fingerprint of the whole dataset and of the evaluated rows in order), which
split and sampling unit, which label set, which model and revision and preprocessing, which prompts
and name style, which metric definitions, which software, and which command produced it. The
Fine-Grained Challenges card asks every evaluation to state split, sampling unit, label set, model
revision, prompts and metric; here they are filled in automatically.

Nothing secret is recorded: every string of a record (model ids, endpoint URLs, dataset URIs, the
command line) passes through :func:`cladebench.provenance.redact` when the record is written and when it is
read, so credentials in a URL (``http://user:pass@host/v1``, ``?api_key=...``, a presigned URL's
signature) never reach ``run.json`` or a report made from it. API keys from the environment are never
put into a record at all.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UsageError, environment_error
from cladebench.evaluate.jsonsafe import record_json
from cladebench.evaluate.labels import default_label, one_line
from cladebench.evaluate.record_versions import RECORD_VERSION, current_shape
from cladebench.metrics import METRIC_DEFINITIONS
from cladebench.paths import held_lock
from cladebench.provenance import redact

if TYPE_CHECKING:
    import lance

RUN_FILE = "run.json"
PREDICTIONS_FILE = "predictions.parquet"


def dataset_provenance(dataset: lance.LanceDataset, uri: str, *, where: str | None,
                       evaluated_uuids: list[str], fingerprint: str | None = None) -> dict[str, Any]:
    """Identity of the data: URI, version, tags at that version, whole-dataset and evaluated-rows fingerprints.
    ``fingerprint``: the whole dataset's, when the caller has read it already (an evaluation's plan has)."""
    tags = [name for name, version in store.tags(dataset).items() if version == dataset.version]
    return {
        "uri": uri,
        "version": dataset.version,
        "tags": tags,
        "rows": dataset.count_rows(),
        "fingerprint": store.fingerprint(dataset) if fingerprint is None else fingerprint,
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
    label: str | None = None
    """The short name a person reads for the run in reports and comparisons (``--run-name``); left out, the default
    of :func:`cladebench.evaluate.labels.default_label` is filled in, from the config and provenance. The model id
    stays in provenance."""
    inspection: dict[str, object] = field(default_factory=dict)
    """Tables for a person to look at, per group: e.g. genus-only rows' predicted species and least certain images."""
    created_at: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
    record_version: int = RECORD_VERSION
    """The shape of the record (:mod:`cladebench.evaluate.record_versions`: an older one is lifted when read)."""

    def __post_init__(self) -> None:
        label = None if self.label is None else one_line(self.label)  # a record's label was not checked
        self.label = label or one_line(default_label(self.task, self.config or {}, self.provenance or {}))

    def redact_secrets(self) -> None:
        """Strip credentials from every URL in the record, in place (see :mod:`cladebench.provenance`)."""
        self.metrics, self.provenance = redact(self.metrics), redact(self.provenance)
        self.config, self.inspection = redact(self.config), redact(self.inspection)
        self.label = redact(self.label)

    def write(self, out_dir: str | Path, predictions: pa.Table) -> Path:
        """Write ``run.json`` and ``predictions.parquet`` into ``out_dir`` (created); returns run.json's path.

        The record is redacted first (in place, so what the caller prints afterwards is redacted too)."""
        self.redact_secrets()
        out = Path(out_dir)
        try:  # a read-only or full disk, a file where the folder goes: one line and exit 1, no temp file left
            out.mkdir(parents=True, exist_ok=True)
            with held_lock(out, wait_s=WRITE_LOCK_WAIT_S,
                           busy=f"another run is writing its record to {out} (waited {WRITE_LOCK_WAIT_S:.0f} s); "
                                "wait for it to finish or give this run another --out"):
                # Not paths.atomic_write: the pair is one commit (run.json records the SHA-256 of the predictions
                # as written, and neither is renamed before both are whole), which one file's writer cannot do.
                # Both files are written in full first, then renamed one after the other: a kill leaves the
                # previous pair or the new one (at worst for the instant between the renames, new predictions
                # beside the old run.json, which its SHA-256 then refuses), never a half-written file.
                predictions_path, run_path = out / PREDICTIONS_FILE, out / RUN_FILE
                predictions_tmp, run_tmp = out / f".{PREDICTIONS_FILE}.tmp", out / f".{RUN_FILE}.tmp"
                try:
                    pq.write_table(predictions, predictions_tmp)
                    digest = hashlib.sha256(predictions_tmp.read_bytes()).hexdigest()
                    self.provenance["predictions"] = {"file": PREDICTIONS_FILE, "rows": predictions.num_rows,
                                                      "sha256": digest}
                    text = record_json(asdict(self))  # never a bare NaN: non-finite numbers become null, listed
                    run_tmp.write_text(text, encoding="utf-8")
                    os.replace(predictions_tmp, predictions_path)
                    os.replace(run_tmp, run_path)
                finally:
                    predictions_tmp.unlink(missing_ok=True)
                    run_tmp.unlink(missing_ok=True)
        except OSError as exc:
            raise (environment_error(exc, out) or exc) from None
        return run_path

    def model_name(self) -> str:
        """The run's model as its record names it; a stored column evaluated without a model is named by its
        column, and a record naming neither (written by hand or by an old version) gives '?'."""
        model = self.provenance.get("model") or {}
        if model.get("id"):
            return str(model["id"])
        column = (model.get("image_embeddings") or {}).get("column")
        return f"column {column} (no model named)" if column else "?"

    @classmethod
    def read(cls, path: str | Path) -> RunRecord:
        """Read a ``run.json`` (or the directory holding it), lifted to the current shape
        (:func:`~cladebench.evaluate.record_versions.current_shape`; a newer version is a :class:`SchemaError`)."""
        path = Path(path)
        if path.is_dir():
            path = path / RUN_FILE
        record = cls(**current_shape(checked_shape(json.loads(path.read_text())), source=str(path)))
        record.redact_secrets()  # a run.json is a file anyone can edit: what is read is redacted as what is written
        return record

    @classmethod
    def read_given(cls, path: str | Path) -> RunRecord:
        """:meth:`read` for a path a user gave (``compare``, ``report``): no file there is a
        :class:`CladebenchError`, a file that is not a run record a :class:`SchemaError`, each one line naming
        ``path`` as given."""
        try:
            return cls.read(path)
        except FileNotFoundError:
            raise CladebenchError(f"no run record at {path}") from None
        except (ValueError, TypeError) as exc:
            raise SchemaError(f"{path} is not a run record: {exc}") from None

    @staticmethod
    def given_once(paths: Sequence[str | Path]) -> None:
        """Refuse (:class:`UsageError`) a run record given twice (a folder and its ``run.json`` are one): beside
        itself it ties on every metric, as two runs that agree would, which is never what was asked."""
        seen: dict[Path, str | Path] = {}
        for path in paths:
            file = (Path(path) / RUN_FILE if Path(path).is_dir() else Path(path)).resolve()
            if file in seen:
                raise UsageError(f"{path} is the run record {seen[file]} given twice: give each run once")
            seen[file] = path

    def predictions(self, path: str | Path) -> pa.Table:
        """The per-example predictions beside a ``run.json``, checked against the SHA-256 the record gives them
        (a truncated or edited file is a :class:`CladebenchError`, never a silently different report)."""
        path = Path(path)
        directory = path if path.is_dir() else path.parent
        info = self.provenance["predictions"]
        file = directory / info["file"]
        expected = info.get("sha256")
        if expected:
            digest = hashlib.sha256()
            with open(file, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            if digest.hexdigest() != expected:
                raise CladebenchError(f"{file}: SHA-256 {digest.hexdigest()[:16]}… is not the {expected[:16]}… that "
                                      f"{directory / RUN_FILE} records: the predictions were changed or cut short "
                                      "after the run; rerun the evaluation")
        return pq.read_table(file)


PROVENANCE_SECTIONS = ("dataset", "rows", "plan", "comparability", "exposure", "groups", "split", "label_set",
                       "label_sets", "model", "prompts", "task", "task_by_group", "split_by_group", "metrics",
                       "software", "predictions", "labels_from_reviews", "published_embeddings")
"""Parts of a record's provenance that are objects (or null) wherever they are read."""


def checked_shape(data: object) -> dict[str, Any]:
    """``data`` read from a run.json when its parts are what a record holds (an object of metric objects, the
    provenance, config and inspection as objects); else a ValueError saying which part is not. A run.json is a
    file anyone can edit: every reader of a record may then take ``metrics[name]["value"]`` and
    ``provenance["model"]`` as the objects they are, without a check of its own."""
    if not isinstance(data, dict):
        raise ValueError(f"it holds a JSON {type(data).__name__}, not an object")
    for part in ("metrics", "provenance", "config", "inspection"):
        if part in data and not isinstance(data[part], dict):
            raise ValueError(f"its {part} is a JSON {_json_type(data[part])}, not an object")
    for name, estimate in (data.get("metrics") or {}).items():
        if not isinstance(estimate, dict):
            raise ValueError(f"its metric {name} is a JSON {_json_type(estimate)}, not an object")
    provenance = data.get("provenance") or {}
    for section in PROVENANCE_SECTIONS:
        if provenance.get(section) is not None and not isinstance(provenance[section], dict):
            raise ValueError(f"its provenance's {section} is a JSON {_json_type(provenance[section])}, not an object")
    return data


def _json_type(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


WRITE_LOCK_WAIT_S = 600.0
"""How long a run waits for another run writing its record to the same folder before it refuses (writing a record
takes well under a second; the wait covers a slow disk, not a stuck process)."""


def check_out_outside_dataset(out: str | Path, dataset: str) -> None:
    """Refuse an output folder that is, or lies inside, the local dataset being evaluated: run.json and
    predictions.parquet would be written among Lance's own files (and a later ``--overwrite`` of the dataset
    would take the run with it). A remote dataset cannot hold a local folder."""
    from cladebench.paths import relation
    from cladebench.store import is_remote

    if is_remote(str(dataset)):
        return
    root = Path(str(dataset).removeprefix("file://")).resolve()
    try:
        where = Path(out).resolve()
    except (OSError, RuntimeError):  # a link loop: inside nothing, and refused by the writability check next
        return
    if relation(where, root) in ("is", "is inside"):
        raise UsageError(f"--out {out} is inside the dataset {dataset}: the run record would be written among the "
                         "dataset's own files; choose a folder outside it")


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
