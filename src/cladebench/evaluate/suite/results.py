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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from cladebench.errors import CladebenchError, SchemaError
from cladebench.escaping import markdown_cell
from cladebench.evaluate.record import RUN_FILE, RunRecord
from cladebench.evaluate.selection import LEFT_OUT
from cladebench.evaluate.suite.plan import PlannedRun
from cladebench.metrics import display_scale
from cladebench.paths import atomic_write_parquet, held_lock

if TYPE_CHECKING:
    from cladebench.evaluate.suite.board import Column

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
    pa.field("off_protocol", pa.string()), pa.field("current", pa.bool_()), pa.field("superseded", pa.string()),
])
"""Columns: what was run (benchmark, task, protocol: the task and the run's own settings, settings: every setting as
JSON, the model as named, its id and revision), the number (metric, value, low, high, n), the run (label, run: its
run.json relative to the suite folder, key), status (finished or skipped, with the reason), and off_protocol (the
settings in which the run departs from its benchmark's protocol, e.g. ``methods=simpleshot (protocol:
simpleshot,linear,knn)``; null on protocol), current and superseded (whether the row is of the newest run of its
benchmark, model and protocol, and if not which run replaced it and why: :func:`with_currency`)."""
ADDED_COLUMNS = frozenset({"off_protocol", "current", "superseded"})
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
    return metric_rows(record, {**_what(planned), "off_protocol": off_protocol_text(record)},
                       os.path.relpath(run_path, root))


def metric_rows(record: RunRecord, what: dict[str, Any], run: str) -> list[dict[str, Any]]:
    """One row per metric of ``record``: ``what`` names the run (benchmark, protocol, model...), ``run`` its
    ``run.json``; the number, interval and count as the record stores them."""
    rows = []
    for metric, estimate in record.metrics.items():
        estimate = estimate or {}
        n = estimate.get("n")
        rows.append({**what, "metric": metric, "value": _finite(estimate.get("value")),
                     "low": _finite(estimate.get("low")), "high": _finite(estimate.get("high")),
                     "n": int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else None,
                     "label": record.label, "run": run, "status": "finished",
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
    return with_currency(table.select(SCHEMA.names).cast(SCHEMA), Path(root))


def _dataset_of(root: Path, run: str | None) -> Any:
    """The evaluated data a run record names (its rows' fingerprint and the benchmark's source), or None."""
    if not run or not (root / run).is_file():
        return None
    try:
        data = json.loads((root / run).read_text(encoding="utf-8")).get("provenance", {}).get("dataset") or {}
    except (OSError, ValueError, AttributeError):
        return None
    return data.get("evaluated_fingerprint"), json.dumps(data.get("benchmark_source"), sort_keys=True, default=str)


def _why_superseded(row: dict[str, Any], newer: dict[str, Any], root: Path | None) -> str:
    """What changed between a row's run and the newer run of the same benchmark, model and protocol."""
    if (row["model_id"], row["revision"]) != (newer["model_id"], newer["revision"]):
        change = f"the model changed ({row['model_id']}@{row['revision']} -> {newer['model_id']}@{newer['revision']})"
    elif row["settings"] != newer["settings"]:
        change = "the settings changed"
    elif root is not None and None not in (old := _dataset_of(root, row["run"]), new := _dataset_of(root,
                                                                                                   newer["run"])):
        change = "the data changed" if old != new else "the model's files or the metric definitions changed"
    else:
        change = "the data, the model's files or the metric definitions changed"
    by = f"the run {newer['run']}" if newer["run"] else "a skipped run"
    return f"by {by}, recorded {newer['recorded_at']}: {change}"


def with_currency(table: pa.Table, root: Path | None = None) -> pa.Table:
    """``table`` with ``current`` and ``superseded`` set: a row is current when it belongs to the newest run (by
    time recorded) of its benchmark, model and protocol; a row of an older run (on data since changed,
    other weights, another revision) is superseded, saying by which run and why, so no reader averages stale
    numbers with fresh ones. ``root``: the suite folder, whose run records tell a data change apart."""
    rows = table.to_pylist()
    newest: dict[tuple[object, ...], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: str(r.get("recorded_at") or "")):
        newest[(row["benchmark"], row["model"], row["protocol"])] = row
    for row in rows:  # runs recorded at the same moment cannot be ordered: each is current
        newer = newest[(row["benchmark"], row["model"], row["protocol"])]
        current = newer["key"] == row["key"] or str(newer.get("recorded_at") or "") == str(row.get("recorded_at")
                                                                                          or "")
        row["current"], row["superseded"] = current, None if current else _why_superseded(row, newer, root)
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def update_results(root: Path, keys: Sequence[str], rows: Sequence[dict[str, object]]) -> Path:
    """Replace every row of the runs ``keys`` by ``rows``, keep every other row, and write the table whole."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with held_lock(root / LOCK_FILE):  # waits for another suite's merge, which takes milliseconds
        table = read_results(root)
        replaced = set(keys)
        kept = table.filter(pa.array([k not in replaced for k in table.column("key").to_pylist()], pa.bool_()))
        merged = with_currency(pa.concat_tables([kept, pa.Table.from_pylist(list(rows), schema=SCHEMA)]), root)
        order = sorted(range(merged.num_rows), key=_sort_key(merged))
        return atomic_write_parquet(root / RESULTS_FILE, merged.take(pa.array(order, pa.int64())))


def _sort_key(table: pa.Table) -> Any:
    columns = [table.column(c).to_pylist() for c in ("benchmark", "protocol", "model", "metric")]
    return lambda i: tuple(column[i] or "" for column in columns)


def require_results(root: Path) -> pa.Table:
    """The table of a suite folder a user named, each number checked against its run record and the record
    against its predictions (:func:`checked_against_records`); none there is a one-line error."""
    root = Path(root)
    if not (root / RESULTS_FILE).is_file():
        run_folder = root.parent if root.name == RUN_FILE and root.is_file() else root
        suite = next((p for p in list(run_folder.resolve().parents)[:4] if (p / RESULTS_FILE).is_file()), None)
        within = f" (the suite folder holding it is {suite})" if suite is not None else ""
        if (run_folder / RUN_FILE).is_file():
            raise CladebenchError(f"{root} is a run, not a suite folder{within}: `results` reads a suite's results "
                                  f"table; for the run, write its report: cladebench report {run_folder} "
                                  "--out-file report.html")
        if suite is not None:
            raise CladebenchError(f"{root} is inside the suite folder {suite}: give that folder (cladebench results "
                                  f"{suite})")
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


def shown(metric: str, value: float | None) -> str:
    """A value on its display scale, with two decimals and its unit, as every table of the suite prints it."""
    if value is None:
        return "n/a"
    scale, unit = display_scale(metric)
    return f"{scale * value:.2f}{unit}"


def interval_text(metric: str, low: float | None, high: float | None) -> str:
    """``[low, high]`` on the display scale (empty without an interval)."""
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


@dataclass(frozen=True)
class Pivot:
    """Models × benchmarks as every format of ``cladebench results`` shows it (Markdown here, LaTeX in
    :mod:`cladebench.export.latex`): decided once, so the formats never disagree on a number or a mark."""

    columns: list[Column]
    """Each benchmark's headline (one per challenge group of a grouped benchmark), in registry order."""
    models: list[str]
    """The models, in the order they entered the table."""
    cells: dict[tuple[str, int], Mapping[str, Any]]
    """(model, column index) -> the model's latest row for the column (finished or unverified, as checked)."""
    marks: dict[tuple[str, int], str]
    """(model, column index) -> its mark against the best of the column (best, tied, worse, ...)."""
    units: dict[int, str]
    """Column index -> what its paired test resamples (``images``, ``queries``); absent when none ran."""
    notes: list[str]
    """Why runs were not compared, and rows of benchmarks this version does not know."""
    off_protocol: list[str]
    """How runs in the table depart from their benchmark's protocol."""
    skipped: list[Mapping[str, Any]]
    """The rows of skipped runs (benchmark, protocol, model and reason): said under every table, never dropped."""
    refused: list[Mapping[str, Any]]
    """One row per run whose numbers did not check and that no cell shows (the newest of a cell is shown as
    refused): said under the table, with why."""


def pivot(table: pa.Table, root: Path, metric: str | None = None) -> Pivot:
    """Models × benchmarks: each benchmark's headline (one column per challenge group), or ``metric``
    (``mistake_severity_species``), each model's latest run,
    and its mark against the best model of the column (best / tied / worse, as the suite's report marks them:
    :func:`~cladebench.evaluate.marks.marks_against_best` over the runs in ``root``)."""
    from cladebench.evaluate.marks import marks_against_best
    from cladebench.evaluate.suite.board import board_columns, latest_rows

    every = table.to_pylist()
    rows = [r for r in every if r.get("current") is not False]  # a replaced run never stands in
    # The columns and models of every finished run, replaced ones too: a model whose newest run does not check
    # keeps its row, and its cell (from the current runs only) says unverified.
    columns, models, notes = board_columns(every, metric)
    latest = latest_rows(rows)
    cells: dict[tuple[str, int], Mapping[str, Any]] = {}
    marks: dict[tuple[str, int], str] = {}
    units: dict[int, str] = {}
    for index, column in enumerate(columns):
        cells.update({(m, index): latest[key] for m in models
                      if (key := (column.benchmark, m, column.protocol, column.metric)) in latest})
        present = [(m, cells[(m, index)]) for m in models
                   if (m, index) in cells and cells[(m, index)]["status"] == "finished"]
        found = marks_against_best(column.metric, [root / row["run"] for _, row in present],
                                   [{"value": row["value"]} for _, row in present], n_resamples=PIVOT_RESAMPLES)
        if found.unit:
            units[index] = found.unit
        marks.update({(present[i][0], index): mark for i, mark in found.marks.items()})
        said = [f"{present[i][0]}: {why}" for i, why in found.unpaired.items()]
        notes.extend(f"{column.title} {column.metric.rpartition('/')[2]}: {note}"
                     for note in [*said, *([found.note] if found.note else [])])
    off = sorted({r["off_protocol"] for r in rows if r.get("off_protocol")})
    skipped = [r for r in rows if r["status"] not in ("finished", "unverified")]
    in_cells = {row["run"] for row in cells.values()}
    refused = list({r["run"]: r for r in rows if r["status"] == "unverified" and r["run"] not in in_cells}.values())
    return Pivot(columns, models, cells, marks, units, list(dict.fromkeys(notes)), off, skipped, refused)


def format_pivot(table: pa.Table, root: Path, metric: str | None = None) -> str:
    """:func:`pivot` as Markdown: value, interval and mark in each cell; the full table is ``--view rows``."""
    board = pivot(table, root, metric)
    what = "the benchmark's headline metric" if metric is None else metric
    if not board.columns and metric is not None:
        return (f"No finished run reports {metric} (`cladebench results DIR --view rows` shows every metric of "
                "every run).")
    if not board.columns:
        return ("No finished run gives a benchmark's headline yet (`cladebench results DIR --view rows` shows every "
                "row).")
    heads = (markdown_cell(f"{c.title} {c.metric.rpartition('/')[2]}") for c in board.columns)
    lines = ["| model | " + " | ".join(heads) + " |",
             "|---|" + "---|" * len(board.columns)]
    for model in board.models:
        cells = []
        for index, _ in enumerate(board.columns):
            row = board.cells.get((model, index))
            if row is None:
                cells.append("")
            elif row["status"] != "finished":
                cells.append(f"unverified ({row['reason']})")
            elif row["value"] is None:
                cells.append(f"n/a ({row['reason']})" if row["reason"] else "n/a")
            else:
                interval = interval_text(row["metric"], row["low"], row["high"])
                mark = board.marks.get((model, index))
                unit = (f", paired by {board.units[index]}" if index in board.units
                        and mark in ("best", "tied", "worse") else "")
                cells.append(f"{shown(row['metric'], row['value'])} {interval}".strip()
                             + (f" ({mark}{unit})" if mark else ""))
        lines.append("| " + " | ".join(markdown_cell(c) for c in [model, *cells]) + " |")
    refused = [f"{r['model']} on {r['benchmark']} ({r['protocol']}): {r['reason']}" for r in board.refused]
    return "\n".join([*lines, *(f"\n{note}" for note in board.notes),
                      *([f"\nNot shown, its numbers did not check: {'; '.join(refused)}"] if refused else []),
                      *([f"\nOff protocol: {'; '.join(board.off_protocol)}"] if board.off_protocol else []),
                      f"\nEach cell: {what} of the model's latest run under its protocol, with "
                      f"its interval (unadjusted) and its mark: {MARKS_MEANING} The rows behind it: --view rows."])


MARKS_MEANING = ("best of the column; tied with the best (paired bootstrap, "
                 f"{PIVOT_RESAMPLES:,} resamples of the units named, not significant after Holm's correction, alpha "
                 "0.05, one family per column); worse (Holm-adjusted p at most 0.05); differs (a holding difference "
                 "whose sign the values do not show); not tested (no paired test for the metric); not compared (the "
                 "notes say why).")
"""What each mark of the pivot means, as every format's legend says it."""


def format_results(table: pa.Table, format: str, *, superseded: bool = False) -> str:
    """The table as Markdown (values on their display scale, skipped runs in a table of their own, each row said
    current or superseded and why), CSV or JSON (every column, values as stored; the current rows only unless
    ``superseded``, so a script reading it never averages a stale number with its replacement)."""
    rows = table.to_pylist()
    if format in ("json", "csv") and not superseded:
        rows = [r for r in rows if r.get("current") is not False]
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
    lines = ["| benchmark | protocol | model | metric | value | interval | n | label | run | current |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in finished:
        interval = interval_text(r["metric"], r["low"], r["high"]) or _why(r["reason"])
        protocol = r["protocol"] + (f" (off protocol: {r['off_protocol']})" if r.get("off_protocol") else "")
        state = "yes" if r.get("current") is not False else f"no: superseded {r['superseded']}"
        cells = (r["benchmark"], protocol, r["model"], r["metric"], shown(r["metric"], r["value"]), interval,
                 r["n"], r["label"], r["run"], state)
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
