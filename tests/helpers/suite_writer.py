"""A writer of a suite's results table for the concurrency test: run in a process of its own (spawned), it merges
rows one run at a time, as a suite does after each run."""

from __future__ import annotations

from pathlib import Path

from cladebench.evaluate.suite.results import SCHEMA, update_results


def write_rows(root: str, prefix: str, count: int) -> None:
    """Merge ``count`` one-row runs keyed ``<prefix><i>`` into the table in ``root``, one update each."""
    for i in range(count):
        row = {name: None for name in SCHEMA.names}
        row.update(benchmark="b", task="t", protocol="p", model=prefix, key=f"{prefix}{i}", status="finished",
                   metric="m", value=float(i))
        update_results(Path(root), [f"{prefix}{i}"], [row])
