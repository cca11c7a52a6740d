"""The results table of a suite folder: one row per benchmark × protocol × model × metric, accumulated across suites.

Why a module of its own: the table outlives every suite that writes it (adding a model next week extends it), and
two suites may write one folder at once. So each update is a merge under a lock: the rows of the runs being
written replace that run's earlier rows (by run key), every other row is kept, and the whole table is written with
:func:`cladebench.paths.atomic_write_parquet` (a reader sees the old table or the new one, never half of one).

A finished run gives one row per metric of its record, with the value, interval, n, the run's label and the path
of its ``run.json`` (relative to the suite folder, so the folder can be moved); a metric of a challenge group the
task left out (too few images for the shots), or one the task could not define (top-5 over five labels, most
answers unusable), has no value and the task's reason. A skipped run gives one row with
``status`` ``skipped``, no metric and the reason. :func:`format_results` prints the table for ``cladebench
results``.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import html
import io
import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.errors import CladebenchError, SchemaError
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.selection import LEFT_OUT
from cladebench.evaluate.suite.plan import PlannedRun
from cladebench.metrics import display_scale
from cladebench.paths import atomic_write_parquet

RESULTS_FILE = "results.parquet"
"""The table's file in the suite folder."""
LOCK_FILE = ".results.lock"
"""Held (``flock``) while the table is read, merged and replaced, so concurrent suites never drop each other's rows."""

SCHEMA = pa.schema([
    pa.field("benchmark", pa.string()), pa.field("task", pa.string()), pa.field("protocol", pa.string()),
    pa.field("settings", pa.string()), pa.field("model", pa.string()), pa.field("model_id", pa.string()),
    pa.field("revision", pa.string()), pa.field("metric", pa.string()), pa.field("value", pa.float64()),
    pa.field("low", pa.float64()), pa.field("high", pa.float64()), pa.field("n", pa.int64()),
    pa.field("label", pa.string()), pa.field("run", pa.string()), pa.field("key", pa.string()),
    pa.field("status", pa.string()), pa.field("reason", pa.string()), pa.field("recorded_at", pa.string()),
])
"""Columns: what was run (benchmark, task, protocol: the task and the run's own settings, settings: every setting as
JSON, the model as named, its id and revision), the number (metric, value, low, high, n), the run (label, run: its
run.json relative to the suite folder, key), and status (finished or skipped, with the reason)."""


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value) else None


def _what(planned: PlannedRun) -> dict[str, Any]:
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(planned.settings.items())}
    return {"benchmark": planned.benchmark.name, "task": planned.task, "protocol": planned.protocol,
            "settings": json.dumps(settings, sort_keys=True, default=str), "model": planned.model,
            "model_id": planned.spec.id, "revision": planned.spec.revision, "key": planned.key}


def finished_rows(planned: PlannedRun, record: RunRecord, run_path: Path, root: Path) -> list[dict[str, Any]]:
    """One row per metric of a finished run's record."""
    what = _what(planned)
    relative = os.path.relpath(run_path, root)
    rows = []
    for metric, estimate in record.metrics.items():
        estimate = estimate or {}
        n = estimate.get("n")
        rows.append({**what, "metric": metric, "value": _finite(estimate.get("value")),
                     "low": _finite(estimate.get("low")), "high": _finite(estimate.get("high")),
                     "n": int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else None,
                     "label": record.label, "run": relative, "status": "finished",
                     # a group the task left out, or a value undefined by construction: no value, and why
                     "reason": estimate.get(LEFT_OUT) or estimate.get("reason"),
                     "recorded_at": record.created_at})
    return rows


def skipped_row(planned: PlannedRun, reason: str, when: str) -> dict[str, Any]:
    """The row of a run that could not run, with why."""
    return {**_what(planned), "metric": None, "value": None, "low": None, "high": None, "n": None, "label": None,
            "run": None, "status": "skipped", "reason": reason, "recorded_at": when}


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold the suite folder's results lock (waits for another suite's merge, which takes milliseconds)."""
    root.mkdir(parents=True, exist_ok=True)
    handle = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


def read_results(root: Path) -> pa.Table:
    """The suite folder's table (empty, with the schema, when there is none yet)."""
    path = Path(root) / RESULTS_FILE
    if not path.is_file():
        return SCHEMA.empty_table()
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise SchemaError(f"{path} is not a results table: {exc}") from None
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise SchemaError(f"{path} is not a suite's results table: no column {', '.join(missing)}")
    return table.select(SCHEMA.names).cast(SCHEMA)


def update_results(root: Path, keys: Sequence[str], rows: Sequence[dict[str, Any]]) -> Path:
    """Replace every row of the runs ``keys`` by ``rows``, keep every other row, and write the table whole."""
    root = Path(root)
    with _locked(root):
        table = read_results(root)
        replaced = set(keys)
        kept = table.filter(pa.array([k not in replaced for k in table.column("key").to_pylist()], pa.bool_()))
        merged = pa.concat_tables([kept, pa.Table.from_pylist(list(rows), schema=SCHEMA)])
        order = sorted(range(merged.num_rows), key=_sort_key(merged))
        return atomic_write_parquet(root / RESULTS_FILE, merged.take(pa.array(order, pa.int64())))


def _sort_key(table: pa.Table) -> Any:
    columns = [table.column(c).to_pylist() for c in ("benchmark", "protocol", "model", "metric")]
    return lambda i: tuple(column[i] or "" for column in columns)


def require_results(root: Path) -> pa.Table:
    """The table of a suite folder a user named; none there is a one-line error."""
    if not (Path(root) / RESULTS_FILE).is_file():
        raise CladebenchError(f"no results table at {Path(root) / RESULTS_FILE}: run `cladebench suite --model M "
                              f"--out {root}` first")
    return read_results(root)


def _shown(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    scale, unit = display_scale(metric)
    return f"{scale * value:.2f}{unit}"


def _interval(metric: str, low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return ""
    scale, _ = display_scale(metric)
    return f"[{scale * low:.2f}, {scale * high:.2f}]"


def _why(reason: str | None) -> str:
    """Why a row has no value: a left-out group's reason, or the task's own (undefined, not reported) as it is."""
    if not reason:
        return ""
    return reason if reason.startswith(("undefined", "not reported")) else f"left out: {reason}"


def _md_cell(value: Any) -> str:
    """A value as one Markdown table cell: a backslash kept as one (``\\``, so ``\\|`` in a label cannot end the
    cell), a pipe escaped, line breaks as spaces, and ``<``, ``>``, ``&`` as entities (a label is shown as text,
    never read as HTML by a Markdown renderer)."""
    text = html.escape(str("" if value is None else value), quote=False)
    text = text.replace("\\", "\\\\").replace("|", "\\|")
    return " ".join(text.splitlines())  # \n, \r\n, \r and the other line breaks


def format_results(table: pa.Table, format: str) -> str:
    """The table as Markdown (values on their display scale, skipped runs in a table of their own), CSV or JSON
    (every column, values as stored)."""
    rows = table.to_pylist()
    if format == "json":
        return json.dumps(rows, indent=2)
    if format == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=SCHEMA.names, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue().rstrip("\n")
    finished = [r for r in rows if r["status"] == "finished"]
    skipped = [r for r in rows if r["status"] != "finished"]
    lines = ["| benchmark | protocol | model | metric | value | interval | n | label | run |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in finished:
        interval = _interval(r["metric"], r["low"], r["high"]) or _why(r["reason"])
        cells = (r["benchmark"], r["protocol"], r["model"], r["metric"], _shown(r["metric"], r["value"]), interval,
                 r["n"], r["label"], r["run"])
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    if skipped:
        lines += ["", "Skipped runs:", "", "| benchmark | protocol | model | reason |", "|---|---|---|---|"]
        for r in skipped:
            lines.append("| " + " | ".join(_md_cell(r[c]) for c in ("benchmark", "protocol", "model", "reason"))
                         + " |")
    return "\n".join(lines)
