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

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.curate.builders.cards import markdown_cell
from cladebench.errors import CladebenchError, SchemaError
from cladebench.evaluate.record import RunRecord
from cladebench.evaluate.selection import LEFT_OUT
from cladebench.evaluate.suite.plan import PlannedRun
from cladebench.metrics import display_scale
from cladebench.paths import atomic_write_parquet, held_lock

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
    pa.field("off_protocol", pa.string()),
])
"""Columns: what was run (benchmark, task, protocol: the task and the run's own settings, settings: every setting as
JSON, the model as named, its id and revision), the number (metric, value, low, high, n), the run (label, run: its
run.json relative to the suite folder, key), status (finished or skipped, with the reason), and off_protocol (the
settings in which the run departs from its benchmark's protocol, e.g. ``methods=simpleshot (protocol:
simpleshot,linear,knn)``; null on protocol)."""
ADDED_COLUMNS = frozenset({"off_protocol"})
"""Columns added after the first tables were written: a table without them is read with them null."""


def _finite(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value) else None


def _what(planned: PlannedRun) -> dict[str, object]:
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in sorted(planned.settings.items())}
    return {"benchmark": planned.benchmark.name, "task": planned.task, "protocol": planned.protocol,
            "settings": json.dumps(settings, sort_keys=True, default=str), "model": planned.model,
            "model_id": planned.spec.id, "revision": planned.spec.revision, "key": planned.key}


def off_protocol_text(record: RunRecord) -> str | None:
    """How a run departs from its benchmark's protocol, in one short line (None when it does not)."""
    departures = (record.provenance.get("plan") or {}).get("off_protocol") or {}
    shown = [f"{name}={_setting(v.get('run'))} (protocol: {_setting(v.get('protocol'))})"
             for name, v in departures.items()]
    return "; ".join(shown) or None


def _setting(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def finished_rows(planned: PlannedRun, record: RunRecord, run_path: Path, root: Path) -> list[dict[str, object]]:
    """One row per metric of a finished run's record."""
    what = {**_what(planned), "off_protocol": off_protocol_text(record)}
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


def skipped_row(planned: PlannedRun, reason: str, when: str) -> dict[str, object]:
    """The row of a run that could not run, with why."""
    return {**_what(planned), "metric": None, "value": None, "low": None, "high": None, "n": None, "label": None,
            "run": None, "status": "skipped", "reason": reason, "recorded_at": when, "off_protocol": None}


def read_results(root: Path) -> pa.Table:
    """The suite folder's table (empty, with the schema, when there is none yet)."""
    path = Path(root) / RESULTS_FILE
    if not path.is_file():
        return SCHEMA.empty_table()
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise SchemaError(f"{path} is not a results table: {exc}") from None
    missing = [name for name in SCHEMA.names if name not in table.column_names and name not in ADDED_COLUMNS]
    if missing:
        raise SchemaError(f"{path} is not a suite's results table: no column {', '.join(missing)}")
    for name in ADDED_COLUMNS - set(table.column_names):
        table = table.append_column(SCHEMA.field(name), pa.nulls(table.num_rows, SCHEMA.field(name).type))
    return table.select(SCHEMA.names).cast(SCHEMA)


def update_results(root: Path, keys: Sequence[str], rows: Sequence[dict[str, object]]) -> Path:
    """Replace every row of the runs ``keys`` by ``rows``, keep every other row, and write the table whole."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with held_lock(root / LOCK_FILE):  # waits for another suite's merge, which takes milliseconds
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
    """The table of a suite folder a user named, each number checked against its run record and the record
    against its predictions (:func:`checked_against_records`); none there is a one-line error."""
    if not (Path(root) / RESULTS_FILE).is_file():
        raise CladebenchError(f"no results table at {Path(root) / RESULTS_FILE}: run `cladebench suite --model M "
                              f"--out {root}` first")
    return checked_against_records(read_results(root), Path(root))


def checked_against_records(table: pa.Table, root: Path) -> pa.Table:
    """The table with every finished row's number checked: its run record must agree with its predictions
    (:func:`~cladebench.evaluate.verify.verify_record`) and the row must give the record's value, interval and
    count. A row that does not is shown without a value, with status ``unverified`` and why, never as a number."""
    from cladebench.evaluate.verify import verify_record

    problems: dict[str, str | None] = {}
    records: dict[str, RunRecord] = {}
    rows = table.to_pylist()
    for row in rows:
        run = row["run"]
        if row["status"] != "finished" or not run:
            continue
        if run not in problems:
            problems[run] = verify_record(root / run)
            if problems[run] is None:
                records[run] = RunRecord.read(root / run)
        problem = problems[run] or _other_run(row, records[run])
        if problem is None:
            stored = records[run].metrics.get(row["metric"]) or {}
            value, n = stored.get("value"), stored.get("n")
            if not _same(row["value"], value) or (n is not None and row["n"] != n):
                problem = (f"results.parquet gives {row['value']} on n = {row['n']}, its run record {value} on "
                           f"n = {n}")
            elif not (_same(row["low"], stored.get("low")) and _same(row["high"], stored.get("high"))):
                problem = (f"results.parquet gives the interval [{row['low']}, {row['high']}], its run record "
                           f"[{stored.get('low')}, {stored.get('high')}]")
        if problem is not None:
            row.update(value=None, low=None, high=None, status="unverified", reason=problem)
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _other_run(row: dict[str, object], record: RunRecord) -> str | None:
    """Why a results row is not its run's own (it names another model, benchmark, task or label than the record
    it points to), or None: the pivot shows a number under the row's model, so that is checked as the number is."""
    from cladebench.provenance import redact

    own = {"model": redact(record.config.get("model")), "model_id": record.model_name(),
           "benchmark": (record.provenance.get("dataset") or {}).get("benchmark"), "task": record.task,
           "label": record.label}
    said = {"model": redact(row["model"]), **{k: row[k] for k in ("model_id", "benchmark", "task", "label")}}
    differing = next((k for k in own if said[k] != own[k]), None)
    if differing is None:
        return None
    return f"results.parquet gives {differing} {row[differing]}, its run record {own[differing]}"


def _same(row: float | None, stored: float | None) -> bool:
    """A results row's number and its record's: both absent, or equal within a JSON round trip."""
    from cladebench.evaluate.verify import TOLERANCE

    return (row is None) == (stored is None) and (row is None or stored is None or abs(row - stored) <= TOLERANCE)


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


PIVOT_RESAMPLES = 10_000
"""Bootstrap resamples behind each mark of the pivot (as ``compare`` and the suite's report)."""


def format_pivot(table: pa.Table, root: Path) -> str:
    """Models × benchmarks as Markdown: each benchmark's headline (one column per challenge group), each model's
    latest run, value and interval, and its mark against the best model of the column (best / tied / worse, as
    the suite's report marks them: :func:`~cladebench.evaluate.marks.marks_against_best` over the runs in
    ``root``); the full table is ``--view rows``."""
    from cladebench.evaluate.marks import marks_against_best
    from cladebench.evaluate.suite.board import board_columns, latest_rows

    rows = table.to_pylist()
    columns, models, notes = board_columns(rows)
    if not columns:
        return ("No finished run gives a benchmark's headline yet (`cladebench results DIR --view rows` shows every "
                "row).")
    latest = latest_rows(rows)
    heads = (markdown_cell(f"{c.title} {c.metric.rpartition('/')[2]}") for c in columns)
    lines = ["| model | " + " | ".join(heads) + " |",
             "|---|" + "---|" * len(columns)]
    marks: dict[tuple[str, int], str] = {}
    for index, column in enumerate(columns):
        present = [(m, latest[key]) for m in models
                   if (key := (column.benchmark, m, column.protocol, column.metric)) in latest
                   and latest[key]["status"] == "finished"]
        found = marks_against_best(column.metric, [root / row["run"] for _, row in present],
                                   [{"value": row["value"]} for _, row in present], n_resamples=PIVOT_RESAMPLES)
        unit = f", paired by {found.unit}" if found.unit else ""
        marks.update({(present[i][0], index): f"{mark}{unit if mark in ('best', 'tied', 'worse') else ''}"
                      for i, mark in found.marks.items()})
        said = [f"{present[i][0]}: {why}" for i, why in found.unpaired.items()]
        notes.extend(f"{column.title} {column.metric.rpartition('/')[2]}: {note}"
                     for note in [*said, *([found.note] if found.note else [])])
    for model in models:
        cells = []
        for index, column in enumerate(columns):
            row = latest.get((column.benchmark, model, column.protocol, column.metric))
            if row is None:
                cells.append("")
            elif row["status"] != "finished":
                cells.append(f"unverified ({row['reason']})")
            elif row["value"] is None:
                cells.append(f"n/a ({row['reason']})" if row["reason"] else "n/a")
            else:
                interval = _interval(row["metric"], row["low"], row["high"])
                mark = marks.get((model, index))
                cells.append(f"{_shown(row['metric'], row['value'])} {interval}".strip()
                             + (f" ({mark})" if mark else ""))
        lines.append("| " + " | ".join(markdown_cell(c) for c in [model, *cells]) + " |")
    off = sorted({r["off_protocol"] for r in rows if r.get("off_protocol")})
    return "\n".join([*lines, *(f"\n{note}" for note in dict.fromkeys(notes)),
                      *([f"\nOff protocol: {'; '.join(off)}"] if off else []),
                      "\nEach cell: the benchmark's headline metric of the model's latest run under its protocol, with "
                      "its interval (unadjusted) and its mark: best of the column; tied with the best (paired "
                      f"bootstrap, {PIVOT_RESAMPLES:,} resamples of the units named, not significant after Holm's "
                      "correction, alpha 0.05, one family per column); worse (Holm-adjusted p at most 0.05); "
                      "differs (a holding difference whose sign the values do not show); not tested (no paired "
                      "test for the metric); not compared (the notes say why). The rows behind it: --view rows."])


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
    unverified = [r for r in rows if r["status"] == "unverified"]
    skipped = [r for r in rows if r["status"] not in ("finished", "unverified")]
    lines = ["| benchmark | protocol | model | metric | value | interval | n | label | run |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in finished:
        interval = _interval(r["metric"], r["low"], r["high"]) or _why(r["reason"])
        protocol = r["protocol"] + (f" (off protocol: {r['off_protocol']})" if r.get("off_protocol") else "")
        cells = (r["benchmark"], protocol, r["model"], r["metric"], _shown(r["metric"], r["value"]), interval,
                 r["n"], r["label"], r["run"])
        lines.append("| " + " | ".join(markdown_cell(c) for c in cells) + " |")
    if unverified:
        lines += ["", "Not shown: the run record or its predictions do not give these numbers (run the suite again "
                  "to recompute them):", "", "| benchmark | protocol | model | metric | why |", "|---|---|---|---|---|"]
        for r in unverified:
            lines.append("| " + " | ".join(markdown_cell(r[c]) for c in ("benchmark", "protocol", "model", "metric",
                                                                     "reason")) + " |")
    if skipped:
        lines += ["", "Skipped runs:", "", "| benchmark | protocol | model | reason |", "|---|---|---|---|"]
        for r in skipped:
            lines.append("| " + " | ".join(markdown_cell(r[c]) for c in ("benchmark", "protocol", "model", "reason"))
                         + " |")
    return "\n".join(lines)
