"""What the demo's steps share: their context, their registry and the few helpers every step uses.

Why it exists: each group of steps lives in its own module (the sample suite, the fine-grained tasks, the other
tasks, the report); they register here, in the order the package imports them, and read what earlier steps
left in the context, without importing each other or the package that runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from cladebench import store
from cladebench.console import note
from cladebench.registry import Registry

if TYPE_CHECKING:
    from cladebench.demo.config import DemoConfig
    from cladebench.synthetic import World


@dataclass(frozen=True)
class DemoModel:
    """One model the demo evaluates: how runs of it are labelled, and where its vectors are stored."""

    label: str
    """The label its runs carry in the report and the summary (``demo``, ``demo · early``)."""
    model: str
    """The model id it is loaded by (a ``local-dir:`` checkpoint in the cache)."""
    column: str
    """The fine-grained suite's column holding its image embeddings."""
    slug: str
    """Its part of a run folder's name (``demo``, ``demo-early``)."""


@dataclass
class DemoContext:
    """What the steps share: the config, the world, the output directory and the summary being built."""

    config: DemoConfig
    world: World
    out_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)
    models: list[DemoModel] = field(default_factory=list)
    """The models the embed step stored vectors of, the demo model first; empty when it was skipped."""

    def dataset_path(self, name: str) -> Path:
        return self.out_dir / f"{name}.lance"

    def run_dir(self, name: str) -> Path:
        return self.out_dir / "runs" / name


DemoStep = Callable[[DemoContext], dict[str, Any]]
DEMO_STEPS: Registry[DemoStep] = Registry("demo step")
"""Demo steps by name, run in registration order (``@DEMO_STEPS.register(name)``); each returns a JSON-ready
summary of what it did."""

NO_EMBEDDINGS = {"skipped": "no embeddings (the embed step was skipped)"}
"""What a task step returns when the embed step could not run (no torch)."""


def say(message: str) -> None:
    """A progress line on stderr (stdout holds the summary)."""
    note(message)


def in_batches(make: Callable[[int, int], pa.Table], total: int, batch: int, label: str) -> Iterator[pa.Table]:
    """Render and yield a table in batches, so memory stays flat and the progress bar moves."""
    from cladebench.progress import progress_bar

    with progress_bar(total=total, desc=label, unit="img", leave=False) as bar:
        for start in range(0, total, batch):
            table = make(start, min(batch, total - start))
            bar.update(table.num_rows)
            yield table


def dataset_summary(path: Path) -> dict[str, object]:
    ds = store.open_dataset(path)
    return {"path": str(path), "rows": ds.count_rows(), "version": ds.version, "fingerprint": store.fingerprint(ds)}
