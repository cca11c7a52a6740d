"""Encode once: stream images from a Lance dataset through an encoder into a new ``emb_<key>`` column.

Why it is built this way:

- **The model never waits on decoding.** Rows are read and decoded by DataLoader worker processes
  (one Lance handle each), block by block, with prefetch; the main process only runs the model.
- **Resumable, and the dataset is valid at every moment.** Finished rows are staged as Parquet
  parts (each written to a temporary file and renamed into place, so a kill -9 leaves either a whole
  part or none) under ``<dataset>/_cladebench/staging/<column>/``. Nothing touches the dataset until
  every row is done; then one Lance ``merge`` commits the column as a new version. A rerun reads the
  staged uuids and encodes only the rest, and only when the staging folder's ``state.json`` proves
  they were encoded with the same model, revision, preprocessing and precision: parts without that
  proof are discarded (and the run says how many), never resumed.
- **One run per dataset and column.** A run holds an exclusive lock on
  ``<dataset>/_cladebench/locks/<column>.lock`` (``fcntl.flock``) from before it stages anything until
  its column is committed. A second run of the same column refuses at once (exit 1, naming the holder's
  pid) rather than waiting: encoding may take hours, and a queued run would only recompute the column
  the first one commits. The operating system drops the lock when its process ends, however it ends
  (kill -9 included), so a stale lock file never blocks. For an ``s3://`` dataset the lock lives with
  the staging folder in this machine's cache folder: it keeps runs on this machine (or on machines
  sharing ``CLADEBENCH_CACHE_DIR`` on a file system with working ``flock``) apart, not runs on other
  machines.
- **Checked before anything is written.** The column name (``emb_[a-z0-9_]+``, so that it needs no
  quoting in any filter), the types of ``uuid`` (string) and ``image`` (binary), the uuids themselves
  (non-null, unique, no newline: as the store's writer checks them) and, for a local dataset, that its
  folder is writable.
- **Failures are recorded, never dropped.** A corrupt, truncated or empty image gets a null
  embedding (the marker: it is not among the column's valid rows), a row in the failures table
  ``<dataset>/_cladebench/failures/<column>.parquet`` with its reason, and a count in the summary
  and in the field metadata. When every image fails no column is committed: the failures table is
  written and the run ends with an error (a column of nothing but nulls would only hide the cause).
- **Raw in storage, normalised in use.** The column holds the model's raw float32 outputs; the field
  metadata (and ``embedding_models.json`` beside the dataset) names the model, revision, dimension,
  preprocessing, precision, software versions and norm statistics.
- **On a cluster, the same column.** ``--ray`` hands fragments to a Ray actor pool instead
  (:mod:`cladebench.embed.ray`); both paths encode the same blocks, cut at fragment boundaries, so on the
  same device, precision and threads they write the same bits.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import re
import shutil
import sys
import time
import uuid as uuidlib
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cladebench import store
from cladebench.config import OPTION, at_least, bare_value
from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.evaluate.record import software_versions

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder

STATE_DIR = "_cladebench"

COLUMN_PATTERN = re.compile(r"emb_[a-z0-9_]+")
"""What ``embed`` names a column: ``emb_`` and lower-case letters, digits and underscores. Such a name is a
plain SQL identifier, so every filter, index and reader takes it as it is."""

MAX_COLUMN_LENGTH = 128
"""Longest column name ``embed`` takes: the name is also part of file names (its lock, staging folder and
failures table), and most filesystems refuse a file name over 255 bytes."""


@dataclass(frozen=True)
class EmbedConfig:
    """Encode every image of a dataset once into an ``emb_<key>`` column."""

    dataset: str
    """Path or URI of the Lance dataset to add the column to."""
    model: str = field(metadata=OPTION)
    """Model: an alias (bioclip, bioclip-2, bioclip-2.5, clip-vit-b-16, ...), hf-hub:ORG/NAME, local-dir:PATH
    or NAME/PRETRAINED."""
    column: str | None = None
    """Name of the new column: emb_ followed by lower-case letters, digits and underscores (emb_[a-z0-9_]+, so
    that filters and SQL need no quoting); derived from the model when omitted (bioclip-2.5 -> emb_bioclip2p5)."""
    revision: str | None = None
    """Model revision to load instead of the pinned one."""
    preprocessing: Literal["openclip", "tol"] = "openclip"
    """openclip: the model's own resize + centre crop; tol: resize to a square without crop, as pybioclip does."""
    batch_size: int = 64
    """Images per forward pass."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the model runs; auto picks cuda, then mps, then cpu."""
    workers: int | None = None
    """Decoding worker processes; 0 decodes in the main process. Default: chosen from the measured cost of
    decoding and of the model on the first block (every core for decoding on a GPU)."""
    precision: Literal["fp32", "fp16", "bf16"] = "fp32"
    """Autocast precision of the forward pass; stored embeddings are always float32."""
    checkpoint_rows: int = 1024
    """Stage finished rows to disk at least this often, so an interrupted run loses at most this many."""
    overwrite: bool = False
    """Recompute the column when the dataset already has it."""
    restart: bool = False
    """Discard rows staged by an earlier interrupted run instead of resuming from them. (Rows staged with other
    settings, or whose settings cannot be proven, are discarded anyway.)"""
    progress: bool = True
    """Show a progress bar with rows/s and ETA."""
    ray: str | None = field(default=None, metadata=bare_value("default"))
    """Run on Ray: --ray alone finds the cluster as ray.init does (RAY_ADDRESS, then the latest cluster started on
    this machine, else a new local one); --ray ADDRESS connects to one (ray://head:10001, auto, local). Fragments
    are encoded by an actor pool (one model per actor, one GPU each when the cluster has GPUs) and the column is
    committed once by this process."""
    ray_actors: int | None = None
    """Model replicas on Ray. Default: one per GPU on a GPU cluster, else one per ray_cpus_per_actor CPUs."""
    ray_cpus_per_actor: int | None = None
    """CPUs each Ray actor reserves (its decoding threads and, on CPU, the model's threads). Default: 1 on a CPU
    cluster; on a GPU cluster the CPUs per GPU, at most 8."""

    def __post_init__(self) -> None:
        # Out-of-range counts are the user's mistake: refused here, naming the option, before a model is built
        # (a batch size of 0 would otherwise fail deep in the block planner as a bug).
        at_least("--batch-size", self.batch_size, 1)
        at_least("--checkpoint-rows", self.checkpoint_rows, 1)
        for option, value, minimum in (("--workers", self.workers, 0), ("--ray-actors", self.ray_actors, 1),
                                       ("--ray-cpus-per-actor", self.ray_cpus_per_actor, 1)):
            if value is not None:
                at_least(option, value, minimum)


@dataclass(frozen=True)
class EmbedSummary:
    """What one ``embed`` run did."""

    column: str
    rows: int
    """Rows in the dataset."""
    valid: int
    """Rows with an embedding."""
    failed: int
    """Rows whose image could not be decoded (null embedding, listed in the failures table)."""
    encoded_now: int
    """Rows encoded by this run (the rest were resumed from staging)."""
    resumed: int
    """Rows taken from an earlier interrupted run."""
    seconds: float
    rows_per_second: float
    version: int
    """Dataset version that holds the column."""
    failures_path: str | None
    metadata: dict[str, Any]
    runner: dict[str, Any] = field(default_factory=lambda: {"kind": "local"})
    """Where it ran: this process, or a Ray cluster with its actors and resources."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def column_for_model(model: str) -> str:
    """Default column name: ``bioclip-2.5`` -> ``emb_bioclip2p5``, ``hf-hub:org/My-Model`` -> ``emb_my_model``."""
    name = model
    for prefix in ("hf-hub:", "local-dir:"):
        if name.startswith(prefix):
            name = name[len(prefix):].rstrip("/")
            name = name.rsplit("/", 1)[-1]
    name = name.lower().replace(".", "p")
    if re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) and not name.startswith("vit"):
        name = name.replace("-", "")
    name = re.sub(r"[^a-z0-9]+", "_", name).strip("_")
    return store.EMBEDDING_PREFIX + (name or "model")


# --- staging ---------------------------------------------------------------------------------------


def _state_dir(uri: str) -> Path:
    if store.is_remote(uri):
        from cladebench.cache import cache_dir

        return cache_dir() / "staging" / hashlib.sha256(uri.encode()).hexdigest()[:16]
    return Path(uri.removeprefix("file://")) / STATE_DIR


def staging_dir(uri: str, column: str, *, fragments: bool = False) -> Path:
    """Where an unfinished run of ``column`` keeps its resume point: Parquet parts of finished rows (this
    process) or finished fragments (``--ray``); the two layouts never share a folder."""
    return _state_dir(uri) / "staging" / (f"{column}.fragments" if fragments else column)


def read_state(directory: Path) -> dict[str, Any] | None:
    """A staging folder's ``state.json`` (its run key), or None when it is missing or unreadable: then nothing
    in the folder can be proven to belong to any run."""
    try:
        state = json.loads((directory / "state.json").read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def remove_staging(directory: Path) -> None:
    """Remove a staging folder, its ``state.json`` first: a removal cut short by a kill leaves files without
    their proof, which the next run discards instead of resuming."""
    (directory / "state.json").unlink(missing_ok=True)
    shutil.rmtree(directory, ignore_errors=True)


def unproven_note(count: int, what: str, state: dict[str, Any] | None, run_key: dict[str, Any]) -> str:
    """What a run says when it discards staged work it cannot resume from."""
    if state is None:
        why = "has no state.json to prove which model and settings made it"
    else:
        why = f"was made with other settings ({state.get('run_key')}, this run: {run_key})"
    return f"discarded {count} staged {what}: it {why}; encoding those rows again"


def check_no_other_staging(uri: str, column: str, *, ray: bool, restart: bool) -> None:
    """Refuse to start over rows an interrupted run of the other kind staged (or discard them with --restart)."""
    other = staging_dir(uri, column, fragments=not ray)
    if not other.exists():
        return
    staged = read_state(other) is not None and any(other.glob("fragment-*.json" if not ray else "part-*.parquet"))
    if restart or not staged:  # nothing that run could resume from (nothing finished, or nothing provable)
        remove_staging(other)
        return
    kind, again = ("--ray run", "with --ray") if not ray else ("run without --ray", "without --ray")
    raise CladebenchError(f"an interrupted {kind} of {column!r} left staged rows in {other}; rerun {again} to "
                          "resume from them, or pass --restart to discard them")


# --- one run per dataset and column ---------------------------------------------------------------


def lock_path(uri: str, column: str) -> Path:
    """The lock file of ``column``'s runs (see the module docstring)."""
    return _state_dir(uri) / "locks" / f"{column}.lock"


@contextmanager
def embedding_lock(uri: str, column: str) -> Iterator[Path]:
    """Hold the lock of ``column`` on ``uri`` for the duration, or refuse at once when another process holds it.

    ``fcntl.flock`` on a lock file: the lock belongs to the open file, so the operating system releases it
    when the holder exits in any way (kill -9 too); the file itself stays, empty of meaning once unlocked.
    """
    import fcntl

    path = lock_path(uri, column)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115  (held open for the duration; appending truncates nothing)
    except OSError as exc:
        raise CladebenchError(f"cannot write {exc.filename or path}: {exc.strerror or exc}; embed keeps its "
                              f"lock and staged rows in {path.parent.parent}") from None
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = " ".join(handle.read().split()) or "pid not yet written"
            raise CladebenchError(f"another embed of {column!r} on {uri} is running ({holder}); wait for it to "
                                  f"finish, or stop it (its lock: {path})") from None
        except OSError as exc:  # a file system without locks (some network mounts)
            raise CladebenchError(f"cannot lock {path}: {exc.strerror or exc}") from None
        handle.seek(0)
        handle.truncate()
        started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        handle.write(f"pid {os.getpid()} on {os.uname().nodename} since {started}\n")
        handle.flush()
        yield path
    finally:
        handle.close()  # releases the lock


def check_writable(uri: str) -> None:
    """A local dataset's folders must be writable: the column is added to it and the run stages beside it.
    Checked before anything is encoded, so a read-only dataset fails in a second, not after the encoding."""
    if store.is_remote(uri):
        return
    root = Path(uri.removeprefix("file://"))
    for folder in (root, root / "data", root / "_versions", root / "_transactions", root / STATE_DIR):
        if folder.is_dir() and not os.access(folder, os.W_OK):
            raise CladebenchError(f"{folder} is not writable: embed adds a column to the dataset and stages its "
                                  f"work in {root / STATE_DIR}")


_UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}


def _unwritable(exc: OSError) -> CladebenchError | None:
    """A file-system refusal (permissions, read-only, full) as the user's one-line error; None for others."""
    if exc.errno not in _UNWRITABLE:
        return None
    verb = "cannot write" if exc.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT) else "cannot access"
    return CladebenchError(f"{verb} {exc.filename or 'a file of the run'}: {exc.strerror}")


class _Staging:
    """Parquet parts of finished rows for one column, written atomically; the resume point."""

    def __init__(self, directory: Path, run_key: dict[str, Any], dim_hint: int | None = None) -> None:
        self.directory = directory
        self.run_key = run_key
        self.dim = dim_hint

    @property
    def state_path(self) -> Path:
        return self.directory / "state.json"

    def open(self, restart: bool) -> tuple[set[str], str]:
        """Start or resume: the uuids already staged, and a note when staged parts were discarded.

        Parts are resumed only when ``state.json`` holds this run's key. Parts without it (a folder whose
        state was lost, or a removal cut short) or with another key are discarded: their rows were perhaps
        encoded with another model or preprocessing, and a column must be one model's, all through.
        """
        note = ""
        if self.directory.exists():
            state = read_state(self.directory)
            if not restart and (state is None or state.get("run_key") != self.run_key):
                parts = self.parts()
                if parts:
                    rows = sum(pq.read_metadata(p).num_rows for p in parts)
                    note = unproven_note(rows, "row(s)", state, self.run_key)
                restart = True
            if restart:
                remove_staging(self.directory)
        if not self.state_path.exists():
            self.directory.mkdir(parents=True, exist_ok=True)
            store.atomic_write(self.state_path, json.dumps({"run_key": self.run_key}).encode())
        return (set(self.read().column("uuid").to_pylist()) if self.parts() else set()), note

    def parts(self) -> list[Path]:
        return sorted(self.directory.glob("part-*.parquet"))

    def write(self, uuids: list[str], vectors: list[np.ndarray | None], errors: list[str | None]) -> None:
        if not uuids:
            return
        dim = next((v.shape[0] for v in vectors if v is not None), self.dim)
        if dim is None:  # a part of only failures before any success: dim unknown yet
            dim = 1
        flat = np.zeros((len(vectors), dim), dtype=np.float32)
        valid = np.ones(len(vectors), dtype=bool)
        for i, v in enumerate(vectors):
            if v is None:
                valid[i] = False
            else:
                flat[i] = v
        values = pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel()), dim, mask=pa.array(~valid))
        table = pa.table({"uuid": pa.array(uuids, pa.string()), "embedding": values,
                          "error": pa.array(errors, pa.string())})
        name = f"part-{time.time_ns():020d}-{uuidlib.uuid4().hex[:8]}.parquet"
        tmp = self.directory / f".{name}.tmp"
        pq.write_table(table, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, self.directory / name)

    def read(self) -> pa.Table:
        tables = [pq.read_table(p) for p in self.parts()]
        dims = {t.schema.field("embedding").type.list_size for t in tables if t.column("embedding").null_count < len(t)}
        if len(dims) > 1:
            raise CladebenchError(f"staged parts in {self.directory} disagree on the dimension: {sorted(dims)}")
        # With no vector at all (every image failed) the width is the model's: it is known, not 1.
        dim = dims.pop() if dims else (self.dim or 1)
        fixed = []
        for t in tables:
            if t.schema.field("embedding").type.list_size != dim:  # an all-failure part written before dim was known
                t = t.set_column(1, "embedding", pa.nulls(len(t), pa.list_(pa.float32(), dim)))
            fixed.append(t)
        return pa.concat_tables(fixed) if fixed else pa.table({"uuid": pa.array([], pa.string())})

    def remove(self) -> None:
        remove_staging(self.directory)


# --- decoding workers -----------------------------------------------------------------------------
#
# The main process reads each block's bytes from Lance (cheap) and hands them to a pool of decoding
# processes; only the workers decode and preprocess, only the main process runs the model. Workers
# never touch Lance: its runtime is not fork-safe, while plain Pillow/torch-CPU code is, so workers
# can be forked (milliseconds) instead of spawned (seconds of imports each). At most
# ``workers * _PREFETCH_PER_WORKER`` blocks are in flight, so memory stays flat on any dataset size.

_PREFETCH_PER_WORKER = 3
_TRANSFORM: Any = None


def _init_worker(preprocessing: Any) -> None:
    import signal

    import torch

    global _TRANSFORM
    torch.set_num_threads(1)  # leave the cores' math threads to the model
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    _TRANSFORM = preprocessing.build()


def _decode_block(uuids: list[str], images: list[bytes | None], transform: Any = None) -> dict[str, Any]:
    """Decode and preprocess one block; failures come back with their reasons instead of raising."""
    from cladebench.images import ImageDecodeError, decode_image

    transform = transform or _TRANSFORM
    ok_uuids: list[str] = []
    pixels: list[np.ndarray] = []
    failed: list[tuple[str, str]] = []
    for row_uuid, data in zip(uuids, images, strict=True):
        try:
            image = decode_image(data)
            pixels.append(transform(image).numpy())
            ok_uuids.append(row_uuid)
        except ImageDecodeError as exc:
            failed.append((row_uuid, exc.reason))
        except Exception as exc:  # a preprocessing failure on a decodable image is still this row's failure
            failed.append((row_uuid, f"preprocessing failed: {type(exc).__name__}: {exc}"))
    return {"uuids": ok_uuids, "pixels": np.stack(pixels) if pixels else None, "failed": failed}


def _read_blocks(dataset: lance.LanceDataset, blocks: list[np.ndarray]) -> Iterator[tuple[list[str], list[Any]]]:
    for block in blocks:
        rows = dataset.take(block, columns=["uuid", "image"])
        yield rows.column("uuid").to_pylist(), rows.column("image").to_pylist()


def _decoded_blocks(dataset: lance.LanceDataset, blocks: list[np.ndarray], preprocessing: Any,
                    workers: int) -> Iterator[dict[str, Any]]:
    """Decoded blocks in dataset order, decoded ahead by ``workers`` processes (inline when 0)."""
    if workers == 0:
        transform = preprocessing.build()
        for uuids, images in _read_blocks(dataset, blocks):
            yield _decode_block(uuids, images, transform)
        return
    import collections
    import multiprocessing
    import signal
    import warnings

    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    # Ctrl-C during the forks would be raised inside an at-fork hook, where Python swallows it and the
    # run would go on; blocked here, it is delivered as soon as the workers exist.
    blocked = hasattr(signal, "pthread_sigmask")
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if blocked else None
    try:
        with warnings.catch_warnings():
            # Lance warns before every fork; these workers never call Lance (see the note above).
            warnings.filterwarnings("ignore", message="lance is not fork-safe")
            pool = context.Pool(workers, initializer=_init_worker, initargs=(preprocessing,))
    finally:
        if previous_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    with pool:
        in_flight: collections.deque[Any] = collections.deque()
        source = _read_blocks(dataset, blocks)
        exhausted = False
        while True:
            while not exhausted and len(in_flight) < workers * _PREFETCH_PER_WORKER:
                try:
                    uuids, images = next(source)
                except StopIteration:
                    exhausted = True
                    break
                in_flight.append(pool.apply_async(_decode_block, (uuids, images)))
            if not in_flight:
                return
            yield in_flight.popleft().get()


@dataclass(frozen=True)
class _Plan:
    workers: int | None
    """Decoding processes (0: decode in the main process)."""
    threads: int
    """The model's intra-op threads in the main process."""


def _plan(requested_workers: int | None, device: str, decode_cost: float, forward_cost: float) -> _Plan:
    """Split the CPU cores between decoding workers and the model, from the costs of the first block.

    On a GPU the model costs the CPU nothing, so decoding gets every core. On a CPU both compete:
    ``decode_cost`` and ``forward_cost`` are CPU-seconds per image, and the cores are shared in
    proportion. A tiny model is decode-bound (all cores decode, the model keeps one thread); a ViT-B
    is model-bound (the model keeps every core, one worker decodes ahead). Oversubscribing cores
    costs more than it seems: the model's OpenMP threads spin while a decoder holds their core.
    """
    import torch

    cores = os.cpu_count() or 1
    current_threads = torch.get_num_threads()
    if requested_workers is not None:  # the user's split: the model keeps its threads
        return _Plan(workers=max(0, requested_workers), threads=current_threads)
    if device != "cpu":
        return _Plan(workers=min(8, cores), threads=current_threads)
    share = decode_cost / max(decode_cost + forward_cost, 1e-9)
    workers = max(1, min(8, int(np.ceil(cores * share))))
    threads = max(1, cores - int(np.floor(cores * share)))
    return _Plan(workers=workers, threads=min(current_threads, threads))


# --- the run ---------------------------------------------------------------------------------------


def _norm_statistics(vectors: np.ndarray) -> dict[str, float]:
    if len(vectors) == 0:
        return {}
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    return {"mean": float(norms.mean()), "std": float(norms.std()), "min": float(norms.min()),
            "max": float(norms.max())}


def check_uuid_values(uuids: pa.Array | pa.ChunkedArray, row_offset: int, uri: str) -> None:
    """Null uuids and uuids with a newline refused by the store's own check (:func:`store.check_uuid_values`),
    naming the first such row (counted from 0 in dataset order) and, for a newline, the uuid itself."""
    store.check_uuid_values(uuids, row_offset, f"{uri}: ", null_hint="; embed needs a unique uuid on every row",
                            show_value=True)


def check_uuids_streamed(dataset: lance.LanceDataset, uri: str) -> None:
    """:func:`check_uuid_values` over the whole dataset, one batch at a time (memory stays flat)."""
    offset = 0
    for fragment in dataset.get_fragments():
        for batch in fragment.to_batches(columns=["uuid"], batch_size=65536):
            check_uuid_values(batch.column(0), offset, uri)
            offset += batch.num_rows


def _fragment_uuids(dataset: lance.LanceDataset, uri: str) -> tuple[list[list[str]], set[str]]:
    """Every fragment's uuids, in dataset order, checked before anything is encoded: non-null, no newline,
    each once; and the set of them all (which rows staged parts may hold)."""
    out: list[list[str]] = []
    seen: set[str] = set()
    offset = 0
    for fragment in dataset.get_fragments():
        uuids: list[str] = []
        for batch in fragment.to_batches(columns=["uuid"], batch_size=65536):
            check_uuid_values(batch.column(0), offset, uri)
            for row_uuid in batch.column(0).to_pylist():
                if row_uuid in seen:
                    raise SchemaError(f"{uri}: duplicate uuid {row_uuid!r}; embeddings are joined by uuid")
                seen.add(row_uuid)
                uuids.append(row_uuid)
            offset += batch.num_rows
        out.append(uuids)
    return out, seen


def _pending_blocks(fragment_uuids: list[list[str]], done: set[str], batch_size: int
                    ) -> tuple[list[np.ndarray], int]:
    """Row offsets still to encode, in dataset order, cut into blocks; also the total row count.

    Blocks never span two fragments and start at each fragment's first pending row: ``--ray`` encodes
    fragment by fragment, and a model's output can depend on which images share its batch, so the
    same blocks on both paths give the same bits.
    """
    blocks: list[np.ndarray] = []
    offset = 0
    for uuids in fragment_uuids:
        indices = np.asarray([offset + i for i, row_uuid in enumerate(uuids) if row_uuid not in done], np.int64)
        offset += len(uuids)
        blocks.extend(indices[i:i + batch_size] for i in range(0, len(indices), batch_size))
    return blocks, offset


def column_name(config: EmbedConfig) -> str:
    """The column a run writes: ``--column`` or the model's default, checked against :data:`COLUMN_PATTERN`."""
    column = config.column or column_for_model(config.model)
    if not COLUMN_PATTERN.fullmatch(column):
        raise UsageError(f"--column {column!r}: an embedding column is named emb_ followed by lower-case letters, "
                         "digits and underscores (emb_[a-z0-9_]+)")
    if len(column) > MAX_COLUMN_LENGTH:
        raise UsageError(f"--column {column[:24]}...: an embedding column name is at most {MAX_COLUMN_LENGTH} "
                         f"characters, got {len(column)}")
    return column


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or getattr(pa.types, "is_binary_view",
                                                                         lambda _: False)(t)


def check_dataset(dataset: lance.LanceDataset, uri: str, column: str, *, overwrite: bool) -> None:
    """What a dataset needs before a run touches anything: a string ``uuid``, binary ``image``, some rows, and
    no ``column`` yet unless ``overwrite``."""
    schema = dataset.schema
    for required, kind, ok in (("uuid", "string", store.is_string_type), ("image", "binary (the encoded image bytes)",
                                                                 _is_binary)):
        if required not in schema.names:
            raise SchemaError(f"{uri} has no {required!r} column; embed needs uuid and image")
        found = schema.field(required).type
        if not ok(found):
            raise SchemaError(f"{uri}: column {required!r} has type {found}; embed needs {kind}")
    if column in schema.names and not overwrite:
        raise CladebenchError(f"{uri} already has column {column!r}; pass --overwrite to recompute it")
    if dataset.count_rows() == 0:
        raise CladebenchError(f"{uri} has no rows to embed")


def prepare(config: EmbedConfig, storage_options: dict[str, str] | None) -> tuple[str, lance.LanceDataset, str]:
    """The dataset's URI, the dataset and the column name, after the checks every run makes first (nothing is
    written before them)."""
    column = column_name(config)
    uri = str(config.dataset)
    dataset = store.open_dataset(uri, storage_options=storage_options)
    check_dataset(dataset, uri, column, overwrite=config.overwrite)
    return uri, dataset, column


@contextmanager
def exclusive_run(config: EmbedConfig, storage_options: dict[str, str] | None
                  ) -> Iterator[tuple[str, lance.LanceDataset, str]]:
    """:func:`prepare`, then the column's lock (held until the block ends), then the dataset as it is under the
    lock, checked again: a run that finished meanwhile may have added the column."""
    uri, _, column = prepare(config, storage_options)
    check_writable(uri)
    with embedding_lock(uri, column):
        dataset = store.open_dataset(uri, storage_options=storage_options)
        check_dataset(dataset, uri, column, overwrite=config.overwrite)
        yield uri, dataset, column


def run_key(described: dict[str, Any], config: EmbedConfig) -> dict[str, Any]:
    """What staged rows must agree on to be resumed: the same model, revision, preprocessing and precision."""
    return {"model": described.get("model_id", config.model), "revision": described.get("revision"),
            "preprocessing": described.get("preprocessing"), "precision": config.precision}


def embed_dataset(config: EmbedConfig, *, encoder: Encoder | None = None,
                  storage_options: dict[str, str] | None = None) -> EmbedSummary:
    """Run ``embed`` (see the module docstring); ``encoder`` may be passed to reuse a loaded model."""
    try:
        if config.ray is not None:
            from cladebench.embed.ray import embed_on_ray

            return embed_on_ray(config, encoder=encoder, storage_options=storage_options)
        return _embed_here(config, encoder, storage_options)
    except OSError as exc:
        error = _unwritable(exc)
        if error is None:
            raise
        raise error from exc


def _embed_here(config: EmbedConfig, encoder: Encoder | None, storage_options: dict[str, str] | None
                ) -> EmbedSummary:
    started = time.perf_counter()
    with exclusive_run(config, storage_options) as (uri, dataset, column):
        fragment_uuids, present = _fragment_uuids(dataset, uri)
        check_no_other_staging(uri, column, ray=False, restart=config.restart)
        return _encode_and_commit(config, encoder, storage_options, uri, dataset, column, fragment_uuids, present,
                                  started)


def _encode_and_commit(config: EmbedConfig, encoder: Encoder | None, storage_options: dict[str, str] | None,
                       uri: str, dataset: lance.LanceDataset, column: str, fragment_uuids: list[list[str]],
                       present: set[str], started: float) -> EmbedSummary:
    import torch
    from tqdm import tqdm

    from cladebench.models import load_encoder

    if encoder is None:
        encoder = load_encoder(config.model, revision=config.revision, preprocessing=config.preprocessing,
                               device=config.device, precision=config.precision)
    described = encoder.describe()
    staging = _Staging(staging_dir(uri, column), run_key(described, config), dim_hint=encoder.dim)
    done, note = staging.open(config.restart)
    if note:
        print(f"cladebench embed: {note}", file=sys.stderr)
    blocks, total_rows = _pending_blocks(fragment_uuids, done, config.batch_size)
    pending_rows = sum(len(b) for b in blocks)
    resumed = total_rows - pending_rows  # staged rows of uuids the dataset no longer has are not counted

    buffer_uuids: list[str] = []
    buffer_vectors: list[np.ndarray | None] = []
    buffer_errors: list[str | None] = []
    encoded_now = 0
    last_flush = time.monotonic()

    def flush() -> None:
        nonlocal last_flush
        staging.write(buffer_uuids, buffer_vectors, buffer_errors)
        buffer_uuids.clear()
        buffer_vectors.clear()
        buffer_errors.clear()
        last_flush = time.monotonic()

    def consume(item: dict[str, Any]) -> None:
        nonlocal encoded_now
        if item["pixels"] is not None:
            vectors = encoder.encode_images(torch.from_numpy(item["pixels"]))
            buffer_uuids.extend(item["uuids"])
            buffer_vectors.extend(list(vectors))
            buffer_errors.extend([None] * len(item["uuids"]))
        for row_uuid, reason in item["failed"]:
            buffer_uuids.append(row_uuid)
            buffer_vectors.append(None)
            buffer_errors.append(reason)
        count = len(item["uuids"]) + len(item["failed"])
        encoded_now += count
        bar.update(count)
        if len(buffer_uuids) >= config.checkpoint_rows or time.monotonic() - last_flush > 60:
            flush()

    bar = tqdm(total=pending_rows, desc=f"embed {column}", unit="img", disable=not config.progress,
               file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
    threads_before = torch.get_num_threads()
    try:
        plan = _Plan(workers=config.workers, threads=threads_before)
        if blocks:
            # The first block is decoded and encoded here, timed, to split the cores between decoding
            # workers and the model's threads (see _plan_cpu).
            transform = encoder.preprocessing.build()
            cpu_started = time.process_time()
            first = _decode_block(*next(_read_blocks(dataset, blocks[:1])), transform)
            decode_cost = (time.process_time() - cpu_started) / max(1, len(blocks[0]))
            wall_started = time.perf_counter()
            consume(first)
            forward_cost = (time.perf_counter() - wall_started) * threads_before / max(1, len(blocks[0]))
            plan = _plan(config.workers, encoder.device, decode_cost, forward_cost)
            torch.set_num_threads(plan.threads)
        for item in _decoded_blocks(dataset, blocks[1:], encoder.preprocessing, plan.workers or 0):
            consume(item)
    except BaseException:
        flush()  # keep what is finished: the rerun resumes from here
        bar.close()
        raise
    finally:
        torch.set_num_threads(threads_before)
    flush()
    bar.close()

    staged = _exactly_once(staging.read(), present)
    model = described.get("model_id", config.model)
    if staged.num_rows == total_rows and staged.column("embedding").null_count == total_rows:
        error = all_failed(uri, column, staged.select(["uuid", "error"]).rename_columns(["uuid", "reason"]), model,
                           column_exists=column in dataset.schema.names)
        staging.remove()  # nothing worth resuming: a rerun after the images are fixed decodes them again
        raise error
    summary = _commit(uri, dataset, column, staged, encoder, described, config, storage_options, total_rows)
    staging.remove()
    seconds = time.perf_counter() - started
    return EmbedSummary(
        column=column, rows=total_rows, valid=summary["valid"], failed=summary["failed"],
        encoded_now=encoded_now, resumed=resumed, seconds=round(seconds, 3),
        rows_per_second=round(encoded_now / seconds, 2) if seconds > 0 else 0.0,
        version=summary["version"], failures_path=summary["failures_path"], metadata=summary["metadata"],
    )


def _exactly_once(staged: pa.Table, present: set[str]) -> pa.Table:
    """Staged rows of the dataset's uuids (``present``), each once: a row staged twice (a part flushed just
    before a kill, then redone) keeps its first copy; a row the dataset no longer has is left out."""
    if "embedding" not in staged.column_names:  # nothing staged at all
        return staged
    keep = np.zeros(staged.num_rows, dtype=bool)
    first: dict[str, int] = {}
    for i, row_uuid in enumerate(staged.column("uuid").to_pylist()):
        if row_uuid in present:
            first.setdefault(row_uuid, i)
    keep[list(first.values())] = True
    return staged.filter(pa.array(keep))


def all_failed(uri: str, column: str, failed: pa.Table, model: str, *, column_exists: bool) -> CladebenchError:
    """Every image failed: write the failures table (uuid, reason) and return the one-line error that ends the
    run; no column is committed. When the column exists (``--overwrite``), its own failures table still
    describes it, so this run's goes beside it as ``<column>.not-committed.parquet``."""
    path = write_failures(uri, column, failed, model, name=f"{column}.not-committed" if column_exists else column)
    reason, count = Counter(failed.column("reason").to_pylist()).most_common(1)[0]
    reason = " ".join(str(reason).split())
    outcome = f"{column!r} was left as it was" if column_exists else f"{column!r} was not added"
    return CladebenchError(f"{uri}: none of the {failed.num_rows:,} images could be decoded, so {outcome} (most "
                           f"common reason, {count:,} row(s): {reason}); every row's reason is in {path}")


def _commit(uri: str, dataset: lance.LanceDataset, column: str, staged: pa.Table, encoder: Encoder,
            described: dict[str, Any], config: EmbedConfig, storage_options: dict[str, str] | None,
            total_rows: int) -> dict[str, Any]:
    """Merge the staged rows into the dataset as one new version, then write failures and the sidecar."""
    if staged.num_rows != total_rows:
        raise CladebenchError(
            f"{uri}: {staged.num_rows} rows staged for {total_rows} rows in the dataset; rerun to finish"
        )
    embeddings = staged.column("embedding").combine_chunks()
    dim = embeddings.type.list_size
    if dim != encoder.dim:
        raise CladebenchError(f"model {encoder.model_id} produced dimension {dim}, expected {encoder.dim}")
    valid_mask = pc.is_valid(embeddings).to_numpy(zero_copy_only=False)
    flat = embeddings.flatten().to_numpy(zero_copy_only=False)  # flatten() skips null slots
    valid_vectors = flat.reshape(-1, dim) if len(flat) else np.zeros((0, dim), np.float32)
    failures = staged.filter(pa.array(~valid_mask)).select(["uuid", "error"]).rename_columns(["uuid", "reason"])

    failures_path = write_failures(uri, column, failures, described.get("model_id", config.model))
    metadata = column_metadata(uri, described, config, norm_stats=_norm_statistics(valid_vectors),
                               valid=int(valid_mask.sum()), failed=failures.num_rows, failures_path=failures_path,
                               source_version=dataset.version)
    emb_field = store.embedding_field(column, dim, metadata)
    table = pa.Table.from_arrays([staged.column("uuid"), embeddings], schema=pa.schema(
        [pa.field("uuid", pa.string()), emb_field]))

    current = store.open_dataset(uri, storage_options=storage_options)
    if column in current.schema.names:
        current.drop_columns([column])
        current = store.open_dataset(uri, storage_options=storage_options)
    current.merge(table, left_on="uuid")
    current = store.open_dataset(uri, storage_options=storage_options)
    write_sidecar(uri, column, dim, metadata)
    return {"valid": metadata["valid_rows"], "failed": metadata["failed_rows"], "version": current.version,
            "failures_path": str(failures_path) if failures_path else None, "metadata": metadata}


def column_metadata(uri: str, described: dict[str, Any], config: EmbedConfig, *, norm_stats: dict[str, float],
                    valid: int, failed: int, failures_path: Path | None, source_version: int) -> dict[str, Any]:
    """The field metadata of an embedding column: what made it, how, and what came out."""
    state_dir = _state_dir(uri)
    metadata = {
        "model": described.get("model_id", config.model),
        "revision": described.get("revision") or "",
        "preprocessing": described.get("preprocessing", {}),
        "precision": config.precision,
        "device": described.get("device", ""),
        "logit_scale": described.get("logit_scale"),
        "software": software_versions(),
        "norm_stats": norm_stats,
        "normalized": False,
        "valid_rows": valid,
        "failed_rows": failed,
        "failures": str(failures_path.relative_to(state_dir.parent)) if failures_path and "://" not in uri
        else (str(failures_path) if failures_path else ""),
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "source_version": source_version,
    }
    return {k: v for k, v in metadata.items() if v is not None}


def write_failures(uri: str, column: str, failed: pa.Table, model: str, *, name: str | None = None) -> Path | None:
    """Write the failures table (uuid, reason, column, model) atomically; None when no row failed (and a table
    left by an earlier run of the column is removed: it no longer describes the column). ``name``: the file's
    name without ``.parquet`` when it is not the column's."""
    path = _state_dir(uri) / "failures" / f"{name or column}.parquet"
    if failed.num_rows == 0:
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    table = failed.select(["uuid", "reason"])
    table = table.append_column("column", pa.array([column] * table.num_rows, pa.string()))
    table = table.append_column("model", pa.array([model] * table.num_rows, pa.string()))
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    return path


def write_sidecar(uri: str, column: str, dim: int, metadata: dict[str, Any]) -> None:
    """``embedding_models.json`` beside the data: one entry per embedding column, as the FGC card has."""
    if store.is_remote(uri):
        return
    path = Path(uri.removeprefix("file://")) / store.EMBEDDING_SIDECAR
    entries = json.loads(path.read_text()) if path.exists() else {}
    entries[column] = {"column": column, "dim": dim, **metadata}
    store.atomic_write(path, (json.dumps(entries, indent=2, sort_keys=True) + "\n").encode())


def failures(uri: str, column: str) -> pa.Table:
    """The failures table of an embedding column: uuid, reason, column, model (empty when none failed)."""
    path = _state_dir(uri) / "failures" / f"{column}.parquet"
    if not path.exists():
        return pa.table({"uuid": pa.array([], pa.string()), "reason": pa.array([], pa.string())})
    return pq.read_table(path)


def _is_float_vector(t: pa.DataType) -> bool:
    lists = pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t)
    return lists and pa.types.is_floating(t.value_type)


def valid_embeddings(dataset: lance.LanceDataset, column: str, *, where: str | None = None,
                     columns: Sequence[str] = ("uuid",), dim: int | None = None) -> tuple[pa.Table, np.ndarray]:
    """Rows with an embedding in ``column`` and the raw vectors as an (n, dim) float32 array.

    A column that is not a list of floats, whose vectors are not all one width, whose width differs from the
    ``dim`` its field metadata declares, or from ``dim`` when given (e.g. a text tower's width), is a
    :class:`SchemaError` naming it: scores over such vectors would be wrong or fail halfway.
    """
    if column not in dataset.schema.names:
        raise SchemaError(f"{dataset.uri} has no column {column!r}")
    found = dataset.schema.field(column)
    if not _is_float_vector(found.type):
        raise SchemaError(f"{dataset.uri}: column {column!r} has type {found.type}; an embedding column holds a "
                          "list of floats per row")
    declared = (found.metadata or {}).get(b"dim")
    expected = {"its field metadata": int(declared)} if declared is not None and declared.strip().isdigit() else {}
    if dim is not None:
        expected["the model"] = dim
    name = store.sql_identifier(column)
    table = store.read(dataset, columns=[*columns, column],
                       where=f"({where}) AND {name} IS NOT NULL" if where else f"{name} IS NOT NULL")
    values = table.column(column).combine_chunks()
    if pa.types.is_fixed_size_list(values.type):
        width = values.type.list_size
    else:  # published columns may be plain lists (of float16 or float32): every row must have one length
        lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
        width = int(lengths[0]) if len(lengths) else next(iter(expected.values()), 0)
        bad = np.flatnonzero(lengths != width)
        if bad.size:
            row = int(bad[0])
            where_row = f"uuid={table.column('uuid')[row]}" if "uuid" in table.column_names else f"#{row}"
            raise SchemaError(f"{dataset.uri}: column {column!r} row {where_row} has {lengths[row]} values where "
                              f"the first row has {width}: not one embedding space")
    for source, want in expected.items():
        if table.num_rows and width != want:
            raise SchemaError(f"{dataset.uri}: column {column!r} holds vectors of width {width}, but {source} "
                              f"says {want}; re-embed the column (cladebench embed --overwrite)")
    if width == 0:
        return table.drop_columns([column]), np.zeros((0, 0), np.float32)
    vectors = values.flatten().to_numpy(zero_copy_only=False).reshape(-1, width).astype(np.float32, copy=False)
    bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
    if bad.size:  # NaN or inf (e.g. float16 overflow in a published column) would score as anything
        row = int(bad[0])
        where_row = f"uuid={table.column('uuid')[row]}" if "uuid" in table.column_names else f"#{row}"
        raise SchemaError(f"{dataset.uri}: column {column!r} has non-finite values in {bad.size} row(s), first "
                          f"{where_row}; re-embed those rows or filter them out with --where")
    return table.drop_columns([column]), vectors
