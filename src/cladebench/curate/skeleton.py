"""One build, the same stages for every builder, run by one driver (:func:`run_build`).

A builder (``build <name>``, ``load images``) supplies only what is its own: the output it writes and what it
reads (:meth:`Builder.target`), how it reads its source (``read``), how it chooses rows (``choose``), and what it
writes of them with its card text (``write``, returning :class:`Built`). The driver owns everything around:

    target ─▶ staged_output ─▶ read ─▶ choose ─▶ write ─▶ reports ─▶ commit
    (checked    (killed runs'    one progress bar per        (left_out.parquet,  (renamed into
     first)      leftovers        stage, with its count       README.md,          place whole)
                 cleaned)         :meth:`Run.count`)          build.json)

Resumption is the driver's too: a killed run's staging folder is removed and a previous output put back
(:mod:`cladebench.curate.staging`), and fetched files stay in :meth:`Run.downloads`, so a rerun fetches only
what is missing. A builder's resources that must close before the publish (a DuckDB connection in the scratch
folder) are handed to :meth:`Run.enter`.

Example:
    >>> import tempfile
    >>> from dataclasses import dataclass
    >>> import pyarrow as pa
    >>> from cladebench.store.left_out import left_out_table
    >>> @dataclass(frozen=True)
    ... class Numbers:
    ...     out: Path
    ...     writer = "build numbers"
    ...     progress = False
    ...     def target(self): return OutputTarget(self.out, writer=self.writer)
    ...     def read(self, run): return list(range(6))
    ...     def choose(self, rows, run): return [r for r in rows if r % 2], [r for r in rows if not r % 2]
    ...     def write(self, chosen, run):
    ...         odd, even = chosen
    ...         _ = (run.staging / "rows.txt").write_text(" ".join(map(str, odd)))
    ...         left = pa.table({"n": [str(r) for r in even], "reason": ["even"] * len(even)})
    ...         card = lambda lines: "\\n".join(["# numbers", *lines])
    ...         return Built(Counted(len(odd)), left_out_table(left, key="n", stage="sample", detail=None), card)
    >>> @dataclass(frozen=True)
    ... class Counted:
    ...     rows: int
    ...     def as_dict(self): return summary_dict(self)
    >>> out = Path(tempfile.mkdtemp()) / "numbers"
    >>> run_build(Numbers(out))
    Counted(rows=3)
    >>> sorted(p.name for p in out.iterdir())
    ['.cladebench-output.json', 'README.md', 'build.json', 'left_out.parquet', 'rows.txt']
    >>> [line for line in (out / "README.md").read_text().splitlines() if "sample" in line]
    ['  sample: even: 3']
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from cladebench.curate.reports import write_reports
from cladebench.curate.staging import OutputTarget, staged_output, work_dir

if TYPE_CHECKING:
    import pyarrow as pa

class Summary(Protocol):
    """What a build returns: its ``build.json`` record is ``as_dict()``."""

    def as_dict(self) -> Mapping[str, object]: ...


S = TypeVar("S", bound=Summary)
R = TypeVar("R")
K = TypeVar("K")
T = TypeVar("T")

STAGES = ("read", "choose", "write", "report")
"""The stages every build goes through, in order; each draws one progress bar named after it."""


@dataclass(frozen=True)
class Built(Generic[S]):
    """What a builder's ``write`` stage hands the driver: its summary, its left-out rows and its card."""

    summary: S
    """What the build function returns; ``build.json`` is its ``as_dict()``."""
    left_out: pa.Table | None
    """:func:`cladebench.store.left_out.left_out_table`'s table (None: the builder wrote the record itself)."""
    card: Callable[[Sequence[str]], str]
    """The card's text, given the lines on the left-out record to show."""
    record_name: str = "build.json"
    """The record's file name (``load images`` writes ``load.json``)."""


class _Bar(Protocol):
    total: float | None

    def update(self, n: float = 1) -> object: ...


@dataclass
class Run:
    """One build in progress, as its stages see it: the staging folder, the clock, the stage's bar."""

    staging: Path
    """The hidden folder beside the output that becomes it once every stage is done."""
    started: float
    """``time.monotonic()`` when the build began (before the output was checked)."""
    progress: bool = True
    """Whether bars are drawn (``--quiet`` and a builder's ``progress=False`` turn them off)."""
    writer: str = ""
    """The builder's command (``build finegrained``): each stage's bar is named by it and the stage."""
    stage: str = ""
    """The stage running now."""
    counts: dict[str, int] = field(default_factory=dict)
    """Per stage, the count its bar shows (rows read, chosen, written)."""
    _bar: _Bar | None = None
    _exits: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def elapsed_s(self) -> float:
        """Seconds since the build began, to the millisecond."""
        return round(time.monotonic() - self.started, 3)

    def work_dir(self) -> Path:
        """Scratch space in the staging folder, removed before the publish (and with the folder after a kill)."""
        return work_dir(self.staging)

    def downloads(self, given: str | Path | None, *family: str) -> Path:
        """Where fetched files are kept across runs, so a rerun after a failure or Ctrl-C fetches only what is
        missing: the folder the user gave, or the cache's ``downloads/<family...>``."""
        if given is not None:
            return Path(given)
        from cladebench.cache import cache_dir

        return cache_dir("downloads", *family)

    def count(self, n: int, total: int | None = None) -> None:
        """Add ``n`` to this stage's count (and set what it counts towards, when known)."""
        self.counts[self.stage] = self.counts.get(self.stage, 0) + n
        if self._bar is not None:
            if total is not None:
                self._bar.total = total
            self._bar.update(n)

    def enter(self, resource: contextlib.AbstractContextManager[T]) -> T:
        """Enter ``resource`` until every stage is done (it closes before the publish, and on any failure)."""
        return self._exits.enter_context(resource)

    @contextlib.contextmanager
    def _stage(self, name: str) -> Iterator[None]:
        from cladebench.progress import progress_bar

        self.stage = name
        desc = f"{self.writer}: {name}" if self.writer else name
        with progress_bar(desc=desc, unit="row", enabled=self.progress) as bar:
            self._bar = bar
            try:
                yield
            finally:
                self._bar = None


class Builder(Protocol[R, K, S]):
    """What a builder supplies: one object per build (made from its config), the stages its own."""

    @property
    def writer(self) -> str:
        """The command its output's marker names (``"build finegrained"``)."""
        ...

    @property
    def progress(self) -> bool:
        """Whether the stages' bars are drawn."""
        ...

    def target(self) -> OutputTarget:
        """The output it writes and the inputs the output may not overlap; checked before anything is read."""
        ...

    def read(self, run: Run) -> R:
        """Read the raw source (names resolved, rows checked)."""
        ...

    def choose(self, read: R, run: Run) -> K:
        """Choose the rows (sampling, caps)."""
        ...

    def write(self, chosen: K, run: Run) -> Built[S]:
        """Fetch and screen what the rows need, write the table into ``run.staging``, and say what to report."""
        ...


def run_build(builder: Builder[R, K, S]) -> S:
    """Run ``builder``'s stages into its output, whole or not at all (see the module docstring)."""
    started = time.monotonic()
    with staged_output(builder.target()) as staging:  # checks the output and cleans a killed run's leftovers
        run = Run(staging, started, builder.progress, builder.writer)
        with run._exits:
            with run._stage("read"):
                read = builder.read(run)
            with run._stage("choose"):
                chosen = builder.choose(read, run)
            with run._stage("write"):
                built = builder.write(chosen, run)
        with run._stage("report"):
            write_reports(staging, built.left_out, built.card, built.summary.as_dict(), built.record_name)
            run.count(1)
    return built.summary


def summary_dict(summary: object) -> dict[str, object]:
    """A summary dataclass as its ``build.json`` record: every field, paths as text (a summary's ``as_dict``)."""
    assert dataclasses.is_dataclass(summary) and not isinstance(summary, type)
    return {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(summary).items()}


__all__ = ["STAGES", "Builder", "Built", "Run", "Summary", "run_build", "summary_dict"]
