"""What a named benchmark is: its source, its pinned release, its tasks with the protocol each is run by, and
where its data is found on this machine (the published source, or a local mirror of it).

Why a module of its own: each family's ``benchmark`` module (in its folder: :mod:`.crypticbio`, :mod:`.finegrained`,
:mod:`.inquire`, :mod:`.coobserved`) says where one family's data lives and how it becomes a dataset; what a
benchmark *is*, how a mirror folder is found and how a dataset is built into the cache once, without ever leaving
half of one, is the same for all of them.

A benchmark's data comes from one of two places:

- a **mirror**: a local folder in the benchmark's published layout, named by ``--data DIR`` or found as
  ``$CLADEBENCH_MIRROR/<benchmark name>`` (how tests and offline machines run every benchmark);
- the **published source**: a Lance dataset opened remotely at its release (Fine-Grained Challenges), or published
  files fetched once and built into the cache (CrypticBio, INQUIRE-Rerank, iNat Co-Observed).

A benchmark built from files is built once per source: the published files into ``benchmarks/<name>.lance`` in
the cache, a mirror into ``benchmarks/mirrors/<name>-<digest>.lance``, the digest naming the mirror's files
(paths, sizes, modification times), so a changed mirror is built again rather than read stale.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cladebench.cache import cache_dir
from cladebench.console import warn
from cladebench.environment import MIRROR, variable
from cladebench.errors import DatasetNotFoundError, UsageError
from cladebench.paths import held_lock, staged_folder
from cladebench.registry import Registry
from cladebench.store.embeddings import unverified_note

MIRROR_ENV = MIRROR
"""Environment variable (read through :mod:`cladebench.environment`) naming a folder that holds one mirror folder
per benchmark, each named like it."""


@dataclass(frozen=True)
class Protocol:
    """One task of a benchmark as its card or paper runs it."""

    task: str
    """The registered task (``zeroshot``, ``fewshot``, ...)."""
    settings: Mapping[str, object] = field(default_factory=dict)
    """Eval settings the protocol fixes; a single ``eval`` applies each one the user left at its default (a
    ``column`` only when no ``--model`` names the vectors)."""
    runs: tuple[Mapping[str, object], ...] = ({},)
    """The evaluations the standard protocol consists of, each as settings on top of :attr:`settings` (e.g. one per
    name style, or all rows and unseen rows only): what a suite runs for each model."""
    needs_model: bool = True
    """Whether the protocol scores with a model's text tower or endpoint (False: stored vectors suffice)."""


@dataclass(frozen=True)
class Headline:
    """The one number a benchmark is read by on a suite's leaderboard (one column per challenge group of a grouped
    benchmark: its groups are separate problems, never pooled)."""

    task: str
    """The protocol's task the number comes from."""
    metric: str
    """The metric's name without group prefix (``top1_species``, ``ap@100``)."""
    run: Mapping[str, object] = field(default_factory=dict)
    """Which of the protocol's :attr:`Protocol.runs` (e.g. ``{"name_style": "sci"}``); ``{}`` the first, all rows."""


@dataclass(frozen=True)
class PublishedFigure:
    """A number a paper or card publishes for a model under this benchmark's protocol, shown beside ours (marked
    published), never mixed into our results. Only figures read in the cited source belong here."""

    model: str
    """The model as ``--model`` names it (an alias such as ``bioclip-2``): shown beside runs of that model."""
    metric: str
    """The full metric name as our run records name it (``Peromyscus/top1_species``), on the headline's run."""
    value: float
    """The published value, on our scale (a fraction for accuracies: 0.5 is 50%)."""
    citation: str
    """Where it is published: paper or card, table, and the setting as the source states it."""
    low: float | None = None
    """The published interval's low end, when one is published."""
    high: float | None = None
    """The published interval's high end, when one is published."""


@dataclass(frozen=True)
class Located:
    """A benchmark's data found on this machine: the dataset to open and where it came from."""

    name: str
    """The benchmark's name (what ``eval`` and the run record call it)."""
    uri: str
    """The Lance dataset (a local path, or a remote URI with its release pinned in it)."""
    provenance: dict[str, Any]
    """Source, release, mirror folder, checked published embeddings: recorded in the run record."""


@dataclass(frozen=True, kw_only=True)
class Benchmark:
    """A published benchmark: where its data comes from, its release, its tasks and their protocols."""

    name: str
    """Its name: the second word of ``cladebench eval`` and the folder of its mirror."""
    description: str
    """One sentence: the data, and what the paper or card reports on it."""
    source: str
    """Where the publisher keeps it (a Hub dataset and the path in it)."""
    release: str | None
    """The release tag it is pinned to; None where the publisher tags none (the commit fetched is recorded)."""
    protocols: tuple[Protocol, ...]
    """Its tasks, the first the default of ``eval <name>``."""
    mirror_layout: str
    """What a mirror folder holds (the published layout), for messages and ``cladebench benchmarks``."""
    remote: bool = False
    """Opened where it is published (projection and filter pushdown) rather than built into the cache."""
    publishes_embeddings: bool = False
    """Its dataset carries image embeddings of named models (evaluated as they are; never embedded here)."""
    fetch: Callable[[Path], object] | None = None
    """Builds the dataset at the given path from the published files (network); None for a remote benchmark."""
    from_mirror: Callable[[Path, Path], object] | None = None
    """Builds the dataset at the second path from a mirror folder; None for a remote benchmark."""
    locate_remote: Callable[[Benchmark, Path | None], Located] | None = None
    """For a remote benchmark: the dataset in a mirror folder (given) or at its release (None), checked."""
    headline: Headline | None = None
    """The number a suite's leaderboard shows for it; None: its first protocol's first run and first metric."""
    published: tuple[PublishedFigure, ...] = ()
    """Figures its paper or card publishes for named models under :attr:`headline`, with their citations."""

    @property
    def task(self) -> str:
        """The default task (the first protocol's)."""
        return self.protocols[0].task

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(p.task for p in self.protocols)

    def protocol(self, task: str) -> Protocol:
        """The protocol of ``task``; a usage error naming the benchmark's tasks when it has none."""
        for protocol in self.protocols:
            if protocol.task == task:
                return protocol
        raise UsageError(f"benchmark {self.name} is evaluated with {', '.join(self.tasks)}, not {task}; run other "
                         "tasks on its dataset by path")

    def dataset_path(self) -> Path:
        """Where the dataset built from the published files lives in the cache."""
        return cache_dir("benchmarks") / f"{self.name}.lance"

    def locate(self, mirror: Path | None) -> Located:
        """The benchmark's data: from ``mirror`` when given, else from the published source (built once)."""
        if self.locate_remote is not None:
            located = self.locate_remote(self, mirror)
            note = unverified_note(located.provenance.get("published_embeddings") or {})
            if note:  # read, but on one record only: the person running it is told, as the record tells a reader
                warn(f"cladebench eval: {self.name}: {note}")
            return located
        assert self.fetch is not None and self.from_mirror is not None
        if mirror is not None:
            digest = mirror_digest(mirror)
            path = cache_dir("benchmarks", "mirrors") / f"{self.name}-{digest[:16]}.lance"
            build_once(path, lambda out: self.from_mirror(mirror, out))  # type: ignore[misc]
            return Located(self.name, str(path), {
                "kind": "mirror", "folder": str(mirror.resolve()), "files_sha256": digest, "source": self.source,
                "release": None, "pinned_release": self.release, "built": str(path)})
        path = self.dataset_path()
        fetched = build_once(path, self.fetch)
        return Located(self.name, str(path), {"kind": "published", "source": self.source, "release": self.release,
                                              "built": str(path), **({"fetched": fetched} if fetched else {})})

    def availability(self, mirror_root: Path | None) -> str:
        """Whether its data is here: mirrored (a folder under ``mirror_root``), built in the cache, or neither."""
        where = []
        if mirror_root is not None and (mirror_root / self.name).is_dir():
            where.append(f"mirrored ({mirror_root / self.name})")
        if self.remote:
            where.append("not mirrored: opened remotely, nothing to build" if not where else "")
        elif self.dataset_path().is_dir():
            where.append(f"built ({self.dataset_path()})")
        return "; ".join(w for w in where if w) or "not built (the first eval fetches and builds it)"


BENCHMARKS: Registry[Benchmark] = Registry("benchmark")
"""Benchmarks by name: each is also a second word of ``cladebench eval`` (``eval inquire-rerank --model M``)."""


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Add a benchmark to :data:`BENCHMARKS` under its name."""
    return BENCHMARKS.add(benchmark.name, benchmark)


def mirror_folder(benchmark: Benchmark, data: str | Path | None) -> Path | None:
    """The mirror to read ``benchmark`` from: ``data`` when given (it must be a folder), else the benchmark's
    folder under ``$CLADEBENCH_MIRROR`` when there is one, else None (the published source)."""
    if data is not None:
        folder = Path(data).expanduser()
        if not folder.is_dir():
            what = "a file, not a folder" if folder.exists() else "no such folder"
            raise DatasetNotFoundError(f"--data {data}: {what} (a mirror of {benchmark.name} is a folder holding "
                                       f"{benchmark.mirror_layout})")
        return folder
    root = variable(MIRROR_ENV)
    if root:
        folder = Path(root).expanduser() / benchmark.name
        if folder.is_dir():
            return folder
    return None


def mirror_digest(folder: Path) -> str:
    """SHA-256 of a mirror's files as listed (relative path, size, modification time), hidden ones left out: a
    mirror whose files change gets a new digest, so a dataset built from its old files is never read for it."""
    digest = hashlib.sha256()
    for root, folders, files in sorted(os.walk(folder)):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(root) / name
            stat = path.stat()
            digest.update(f"{path.relative_to(folder).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def build_once(path: Path, build: Callable[[Path], object]) -> object:
    """Build the dataset at ``path`` unless it is there: into a hidden sibling first, moved into place when the
    build has returned, so an interrupted or failed build leaves no dataset that a later run would read. The
    failures table a build writes beside its output (``<out>.failures.parquet``) moves along. Two processes
    building the same dataset at once (two suites or evals sharing a cache) take turns under a lock
    (``.<name>.lock`` beside it): the second finds the first's dataset and builds nothing. Returns what the build
    returned (None when the dataset was there)."""
    if path.is_dir():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    with held_lock(path.with_name(f".{path.name}.lock")):
        return None if path.is_dir() else _build(path, build)


def _build(path: Path, build: Callable[[Path], object]) -> object:
    failures = None
    try:
        with staged_folder(path, tag="partial") as partial:  # a killed build's folder goes with the next build
            failures = partial.with_name(partial.name + ".failures.parquet")
            result = build(partial)
            if failures.exists():
                os.replace(failures, path.with_name(path.name + ".failures.parquet"))
    finally:
        if failures is not None:
            failures.unlink(missing_ok=True)  # a failed build's table, never the one moved into place
    return _summary(result)


def _summary(result: object) -> object:
    """What of a build's return value the run record keeps (a revision fetched), JSON-friendly."""
    return result if isinstance(result, (dict, str)) or result is None else None
