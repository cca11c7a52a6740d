"""Running a suite: each planned run reused, skipped with its reason, or evaluated by ``run_eval``, benchmark by
benchmark, with the results table brought up to date as runs finish.

Why a module of its own: this is the part that meets time and failure. A run counts as finished only when its
``run.json`` is there (``RunRecord.write`` renames it into place whole) and agrees with its predictions
(:func:`~cladebench.evaluate.verify.verify_record`: the file there, its SHA-256, every metric recomputed), so a
Ctrl-C at any moment leaves finished runs, which a rerun reuses, and an unfinished one, which it computes again; a
record edited by hand or whose predictions are gone is run again, saying why. A run that cannot run (no challenge
group with enough unseen images for 5 shots, an endpoint on a task that takes encoders, a model without vectors in
a published dataset) is recorded as skipped (``skipped.json``, whole) with the reason and not tried again unless
asked; a run where only some groups are too small finishes, its record and results rows carrying those groups' gaps
and reasons. A failure that may pass (a remote that cannot be reached, data not found, a model that cannot be built
now) is shown but not recorded. Every evaluation goes through :func:`cladebench.evaluate.run.run_eval`, the code
``cladebench eval`` runs; a model is built once per suite (with eval's own builder) and handed to the runs that
score with it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench import store
from cladebench.console import note
from cladebench.curate.staging import MARKER_NAME, is_output_of, read_marker, write_marker
from cladebench.errors import EXIT_INTERRUPTED, CladebenchError, UsageError
from cladebench.evaluate.record import RUN_FILE, RunRecord
from cladebench.evaluate.run import load_model, run_eval
from cladebench.evaluate.suite.plan import PlannedRun, SuiteConfig, plan_suite
from cladebench.evaluate.suite.results import (
    RESULTS_FILE,
    finished_rows,
    read_results,
    skipped_row,
    update_results,
)
from cladebench.evaluate.verify import verify_record
from cladebench.paths import NOT_OURS, atomic_write, held_lock, write_refusal

if TYPE_CHECKING:
    from cladebench.benchmarks import Located

LOCK_FILE = ".suite.lock"
"""In the suite folder: held by the suite writing it (:func:`suite_lock`); it names the holder's pid."""
SKIP_FILE = "skipped.json"
"""Beside where a run's record would be: why the run could not run (written whole, read by later suites)."""
NOT_RECORDED_EXIT_CODES = frozenset({3, 5, 6, EXIT_INTERRUPTED})
"""Failures that may pass on another try (data not found, remote unreachable, a model that cannot be built now):
shown, never recorded as a skip, so the next suite tries again. A failure of the run itself (too few images for the
shots: a task's refusal, exit 1; a setting or model the benchmark refuses, exit 2; a schema error, exit 4) is
recorded."""


@dataclass
class SuiteSummary:
    """What a suite did."""

    runs: list[PlannedRun]
    """Every planned run, in order."""
    executed: list[str] = field(default_factory=list)
    """Keys of the runs evaluated by this suite."""
    reused: list[str] = field(default_factory=list)
    """Keys of the runs whose record an earlier suite wrote."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Key -> why the run did not run (this suite's skips and earlier recorded ones)."""
    results: Path | None = None
    """The results table."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def duration(seconds: float) -> str:
    """``1 h 5 min``, ``3 min 20 s``, ``12 s``."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def _finished(planned: PlannedRun, say: Callable[[str], None]) -> RunRecord | None:
    """The run's record when an earlier run finished it and the record agrees with its predictions; a record that
    does not (edited, its predictions gone or changed) counts as unfinished, and the suite says why it runs again."""
    path = planned.folder / RUN_FILE
    if not path.is_file():
        return None
    problem = verify_record(path)
    if problem is not None:
        say(f"[suite] {planned.benchmark.name} {planned.protocol} with {planned.model}: the finished run is run "
            f"again: {problem}")
        return None
    return RunRecord.read(path)


def _recorded_skip(planned: PlannedRun) -> tuple[str, str] | None:
    """The reason and time of an earlier suite's recorded skip of this run, if any."""
    path = planned.folder / SKIP_FILE
    if not path.is_file():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        return str(entry["reason"]), str(entry.get("recorded_at") or "")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _recorded(error: CladebenchError) -> bool:
    """Whether a run's failure is its own, recorded and not tried again unless asked: every failure but those of
    :data:`NOT_RECORDED_EXIT_CODES` (a full disk is exit 1 too: ``--retry-skipped`` runs such a run again)."""
    return error.exit_code not in NOT_RECORDED_EXIT_CODES


def _record_skip(planned: PlannedRun, reason: str, exit_code: int, when: str) -> None:
    planned.folder.mkdir(parents=True, exist_ok=True)
    atomic_write(planned.folder / SKIP_FILE, json.dumps(
        {"reason": reason, "exit_code": exit_code, "key": planned.key, "benchmark": planned.benchmark.name,
         "protocol": planned.protocol, "model": planned.model, "recorded_at": when}, indent=2) + "\n")


class _Models:
    """Each model built once per suite, when a run first scores with it (a build failure is kept and repeated)."""

    def __init__(self) -> None:
        self.built: dict[str, object] = {}

    def get(self, planned: PlannedRun) -> object:
        found = self.built.get(planned.model)
        if found is None:
            try:
                found = load_model(planned.spec, planned.config)
            except CladebenchError as error:
                found = error
            self.built[planned.model] = found
        if isinstance(found, CladebenchError):
            raise found
        return found


def _uses_encoder(task: str) -> bool:
    from cladebench.tasks import get_task

    return get_task(task).uses_encoder


WRITER = "suite"
"""The marker of a suite folder names this writer (:mod:`cladebench.curate.staging`'s marker, as every output's)."""
_SUITE_NAMES = frozenset({"runs", RESULTS_FILE, LOCK_FILE, "report.html"})
"""What a suite folder holds: one made before suites were marked is recognised by holding nothing else."""


def _made_by_a_suite(folder: Path) -> bool:
    return all(p.name in _SUITE_NAMES or p.name.startswith(".") for p in folder.iterdir())


def _check_suite_folder(out: Path) -> None:
    """Refuse (exit 1), before any run, an ``--out`` that holds anything but a suite: a dataset, a folder of the
    user's files or another command's output would get a table, a report and a lock written into it."""
    if write_refusal(out, folder=True, ours=lambda found: is_output_of(found, WRITER, legacy=_made_by_a_suite)) \
            != NOT_OURS:  # nothing there, empty, or a suite's: a file in its place is check_writable's to refuse
        return
    marker = read_marker(out)
    whose = f"its {MARKER_NAME} names `cladebench {marker.get('writer')}`" if marker is not None else \
        f"it holds {', '.join(sorted(p.name for p in out.iterdir())[:3])}"
    raise CladebenchError(f"{out} is not empty and is not a suite folder ({whose}); --out must be an empty folder "
                          "or one `cladebench suite` made, and nothing in it was touched: choose another --out")


def run_suite(config: SuiteConfig, *, progress: Callable[[str], None] | None = None,
              finished_run: Callable[[Path, list[dict[str, object]]], None] | None = None) -> SuiteSummary:
    """Run ``config``'s suite into ``config.out``; returns what was run, reused and skipped. Interrupted, the table
    keeps every run finished so far, and the next suite continues from there. ``finished_run``: called with the
    ``run.json`` and the table rows of each run as it finishes or is reused (``suite --mlflow`` logs it)."""
    planned = plan_suite(config)
    _refuse_same_weights(planned)
    store.check_writable(config.out, folder=True)
    _check_suite_folder(config.out)
    read_results(config.out)  # a results.parquet that is no suite's table is refused before any run, never replaced
    config.out.mkdir(parents=True, exist_ok=True)
    if read_marker(config.out) is None:
        write_marker(config.out, WRITER)
    with suite_lock(config.out):
        return _run_planned(config, planned, progress or (lambda line: None),
                            finished_run or (lambda path, rows: None))



@contextlib.contextmanager
def suite_lock(out: Path) -> Iterator[None]:
    """Hold the suite folder ``out`` for one suite at a time (:data:`LOCK_FILE`): a second suite on it waits, saying
    so in one line, and then reuses what the first finished (the same runs) and adds its own rows."""
    started = _now()

    def waiting() -> None:
        try:
            holder = " ".join((out / LOCK_FILE).read_text(encoding="utf-8", errors="replace").split())
        except OSError:
            holder = ""
        note(f"[suite] another cladebench suite{f' ({holder})' if holder else ''} is writing {out}; waiting for it "
             "to finish (Ctrl-C to stop)")

    with held_lock(out / LOCK_FILE, on_wait=waiting, note=f"pid {os.getpid()} on {socket.gethostname()} since "
                                                          f"{started}"):
        yield


def _run_planned(config: SuiteConfig, planned: list[PlannedRun], say: Callable[[str], None],
                 then: Callable[[Path, list[dict[str, object]]], None]) -> SuiteSummary:
    summary = SuiteSummary(runs=planned, results=config.out / RESULTS_FILE)
    finished = {p.key: _finished(p, say) for p in planned}
    recorded = {p.key: None if config.retry_skipped else _recorded_skip(p) for p in planned}
    to_run = {p.key for p in planned if finished[p.key] is None and recorded[p.key] is None and p.unsupported is None}
    benchmarks = list(dict.fromkeys(p.benchmark.name for p in planned))
    say(f"[suite] {len(config.model)} model{'s' * (len(config.model) != 1)} × {len(benchmarks)} benchmark"
        f"{'s' * (len(benchmarks) != 1)}: {len(planned)} runs, {len(planned) - len(to_run)} finished or skipped "
        f"before, {len(to_run)} to run")
    models = _Models()
    spent, executed_count = 0.0, 0
    left = len(to_run)
    for number, name in enumerate(benchmarks, start=1):
        runs = [p for p in planned if p.benchmark.name == name]
        started = time.monotonic()
        counts = {"run": 0, "reused": 0, "skipped": 0}
        located, location_error = _locate_once([p for p in runs if p.key in to_run])
        keys: list[str] = []
        rows: list[dict[str, object]] = []
        try:
            for p in runs:
                if p.key in to_run:
                    left -= 1
                record = finished[p.key]
                if record is not None:
                    summary.reused.append(p.key)
                    counts["reused"] += 1
                    keys.append(p.key)
                    mine = finished_rows(p, record, p.folder / RUN_FILE, config.out)
                    rows += mine
                    then(p.folder / RUN_FILE, mine)
                    continue
                earlier = recorded[p.key]
                reason = earlier[0] if earlier else p.unsupported or location_error
                when = earlier[1] if earlier else _now()
                if reason is None:
                    run_started = time.monotonic()
                    try:
                        encoder = models.get(p) if _uses_encoder(p.task) else None
                        record, path = run_eval(p.config, encoder=encoder, located=located)
                    except CladebenchError as error:
                        reason = str(error)
                        if _recorded(error):
                            _record_skip(p, reason, error.exit_code, when)
                    else:
                        (p.folder / SKIP_FILE).unlink(missing_ok=True)  # an earlier skip of this run, now run
                        summary.executed.append(p.key)
                        counts["run"] += 1
                        mine = finished_rows(p, record, path, config.out)
                        update_results(config.out, [p.key], mine)
                        then(path, mine)
                        continue
                    finally:
                        spent += time.monotonic() - run_started
                        executed_count += 1
                elif p.unsupported is not None and recorded[p.key] is None:
                    _record_skip(p, reason, 2, when)
                summary.skipped[p.key] = reason
                counts["skipped"] += 1
                keys.append(p.key)
                rows.append(skipped_row(p, reason, when))
        finally:
            if keys:  # reused and skipped runs, also when interrupted (evaluated ones are written as they finish)
                update_results(config.out, keys, rows)
        eta = (f"about {duration(spent / executed_count * left)} left for {left} run{'s' * (left != 1)}"
               if executed_count and left else "done" if not left else f"{left} runs left")
        say(f"[suite] {number}/{len(benchmarks)} {name}: {len(runs)} runs ({counts['run']} run, {counts['reused']} "
            f"reused, {counts['skipped']} skipped) in {duration(time.monotonic() - started)}; suite {eta}")
    if not (config.out / RESULTS_FILE).exists():
        update_results(config.out, [], [])
    return summary


def _locate_once(pending: list[PlannedRun]) -> tuple[Located | None, str | None]:
    """Find (and build once, when it is built from files) the data of a benchmark with runs to make, handed to each
    of its runs; why not, when it cannot be found."""
    if not pending:
        return None, None
    try:
        return pending[0].benchmark.locate(pending[0].data), None
    except CladebenchError as error:
        return None, str(error)


def _refuse_same_weights(planned: list[PlannedRun]) -> None:
    """Two --model names for the same weights would be one run under two names: a usage error."""
    by_id: dict[tuple[str, str | None], str] = {}
    for p in planned:
        other = by_id.setdefault((p.spec.id, p.spec.revision), p.model)
        if other != p.model:
            raise UsageError(f"--model {other} and --model {p.model} name the same model ({p.spec.id}); give it once")

