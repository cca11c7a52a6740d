"""Encode once: stream images from a Lance dataset through an encoder into a new ``emb_<key>`` column.

Why it is built this way:

- **The model never waits on decoding.** Rows are read and decoded by DataLoader worker processes
  (one Lance handle each), block by block, with prefetch; the main process only runs the model.
- **Resumable, and the dataset is valid at every moment.** Finished rows are staged as Parquet
  parts (each written to a temporary file and renamed into place, so a kill -9 leaves either a whole
  part or none) under ``<dataset>/_cladebench/staging/<column>/``. Nothing touches the dataset until
  every row is done; then one Lance ``merge`` commits the column as a new version. A rerun reads the
  staged uuids and encodes only the rest.
- **Failures are recorded, never dropped.** A corrupt, truncated or empty image gets a null
  embedding (the marker: it is not among the column's valid rows), a row in the failures table
  ``<dataset>/_cladebench/failures/<column>.parquet`` with its reason, and a count in the summary
  and in the field metadata.
- **Raw in storage, normalised in use.** The column holds the model's raw float32 outputs; the field
  metadata (and ``embedding_models.json`` beside the dataset) names the model, revision, dimension,
  preprocessing, precision, software versions and norm statistics.
- **On a cluster, the same column.** ``--ray`` hands fragments to a Ray actor pool instead
  (:mod:`cladebench.embed_ray`); both paths encode the same blocks, cut at fragment boundaries, so on the
  same device, precision and threads they write the same bits.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import sys
import time
import uuid as uuidlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cladebench import store
from cladebench.config import OPTION, bare_value
from cladebench.errors import CladebenchError, SchemaError
from cladebench.results import software_versions

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder

STATE_DIR = "_cladebench"


@dataclass(frozen=True)
class EmbedConfig:
    """Encode every image of a dataset once into an ``emb_<key>`` column."""

    dataset: str
    """Path or URI of the Lance dataset to add the column to."""
    model: str = field(metadata=OPTION)
    """Model: an alias (bioclip, bioclip-2, bioclip-2.5, clip-vit-b-16, ...), hf-hub:ORG/NAME, local-dir:PATH
    or NAME/PRETRAINED."""
    column: str | None = None
    """Name of the new column; emb_<key> derived from the model when omitted (bioclip-2.5 -> emb_bioclip2p5)."""
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
    """Discard rows staged by an earlier interrupted run instead of resuming from them."""
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


def check_no_other_staging(uri: str, column: str, *, ray: bool, restart: bool) -> None:
    """Refuse to start over rows an interrupted run of the other kind staged (or discard them with --restart)."""
    other = staging_dir(uri, column, fragments=not ray)
    if not other.exists():
        return
    staged = any(other.glob("fragment-*.json" if not ray else "part-*.parquet"))
    if restart or not staged:  # a run that stopped before finishing anything left nothing worth keeping
        shutil.rmtree(other)
        return
    kind, again = ("--ray run", "with --ray") if not ray else ("run without --ray", "without --ray")
    raise CladebenchError(f"an interrupted {kind} of {column!r} left staged rows in {other}; rerun {again} to "
                          "resume from them, or pass --restart to discard them")


def atomic_write(path: Path, data: bytes) -> None:
    """Write a small file as a temporary file renamed into place, so a kill leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class _Staging:
    """Parquet parts of finished rows for one column, written atomically; the resume point."""

    def __init__(self, directory: Path, run_key: dict[str, Any], dim_hint: int | None = None) -> None:
        self.directory = directory
        self.run_key = run_key
        self.dim = dim_hint

    @property
    def state_path(self) -> Path:
        return self.directory / "state.json"

    def open(self, restart: bool) -> set[str]:
        """Start or resume; returns the uuids already staged."""
        if restart and self.directory.exists():
            shutil.rmtree(self.directory)
        if self.state_path.exists():
            state = json.loads(self.state_path.read_text())
            if state.get("run_key") != self.run_key:
                raise CladebenchError(
                    f"{self.directory} holds rows staged by a different run ({state.get('run_key')}); "
                    "pass --restart to discard them"
                )
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write(self.state_path, json.dumps({"run_key": self.run_key}).encode())
        return set(self.read().column("uuid").to_pylist()) if self.parts() else set()

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
        dim = dims.pop() if dims else 1
        fixed = []
        for t in tables:
            if t.schema.field("embedding").type.list_size != dim:  # an all-failure part written before dim was known
                t = t.set_column(1, "embedding", pa.nulls(len(t), pa.list_(pa.float32(), dim)))
            fixed.append(t)
        return pa.concat_tables(fixed) if fixed else pa.table({"uuid": pa.array([], pa.string())})

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)



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


def _pending_blocks(dataset: lance.LanceDataset, done: set[str], batch_size: int) -> tuple[list[np.ndarray], int]:
    """Row offsets still to encode, in dataset order, cut into blocks; also the total row count.

    Blocks never span two fragments and start at each fragment's first pending row: ``--ray`` encodes
    fragment by fragment, and a model's output can depend on which images share its batch, so the
    same blocks on both paths give the same bits.
    """
    blocks: list[np.ndarray] = []
    seen: set[str] = set()
    offset = 0
    for fragment in dataset.get_fragments():
        pending: list[int] = []
        for batch in fragment.to_batches(columns=["uuid"], batch_size=65536):
            for row_uuid in batch.column(0).to_pylist():
                if row_uuid in seen:
                    raise SchemaError(f"{dataset.uri}: duplicate uuid {row_uuid!r}; embeddings are joined by uuid")
                seen.add(row_uuid)
                if row_uuid not in done:
                    pending.append(offset)
                offset += 1
        indices = np.asarray(pending, dtype=np.int64)
        blocks.extend(indices[i:i + batch_size] for i in range(0, len(indices), batch_size))
    return blocks, offset


def prepare(config: EmbedConfig, storage_options: dict[str, str] | None) -> tuple[str, lance.LanceDataset, str]:
    """The dataset's URI, the dataset and the column name, after the checks every run makes first."""
    uri = str(config.dataset)
    dataset = store.open_dataset(uri, storage_options=storage_options)
    column = config.column or column_for_model(config.model)
    if not column.startswith(store.EMBEDDING_PREFIX):
        raise SchemaError(f"column {column!r}: embedding columns are named {store.EMBEDDING_PREFIX}<key>")
    for required in ("uuid", "image"):
        if required not in dataset.schema.names:
            raise SchemaError(f"{uri} has no {required!r} column; embed needs uuid and image")
    if column in dataset.schema.names and not config.overwrite:
        raise CladebenchError(f"{uri} already has column {column!r}; pass --overwrite to recompute it")
    return uri, dataset, column


def run_key(described: dict[str, Any], config: EmbedConfig) -> dict[str, Any]:
    """What staged rows must agree on to be resumed: the same model, revision, preprocessing and precision."""
    return {"model": described.get("model_id", config.model), "revision": described.get("revision"),
            "preprocessing": described.get("preprocessing"), "precision": config.precision}


def embed_dataset(config: EmbedConfig, *, encoder: Encoder | None = None,
                  storage_options: dict[str, str] | None = None) -> EmbedSummary:
    """Run ``embed`` (see the module docstring); ``encoder`` may be passed to reuse a loaded model."""
    import torch
    from tqdm import tqdm

    from cladebench.models import load_encoder

    if config.ray is not None:
        from cladebench.embed_ray import embed_on_ray

        return embed_on_ray(config, encoder=encoder, storage_options=storage_options)
    started = time.perf_counter()
    uri, dataset, column = prepare(config, storage_options)
    check_no_other_staging(uri, column, ray=False, restart=config.restart)
    if encoder is None:
        encoder = load_encoder(config.model, revision=config.revision, preprocessing=config.preprocessing,
                               device=config.device, precision=config.precision)
    described = encoder.describe()
    staging = _Staging(staging_dir(uri, column), run_key(described, config), dim_hint=encoder.dim)
    done = staging.open(config.restart)
    blocks, total_rows = _pending_blocks(dataset, done, config.batch_size)
    resumed = len(done)

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

    pending_rows = sum(len(b) for b in blocks)
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

    staged = staging.read()
    summary = _commit(uri, dataset, column, staged, encoder, described, config, storage_options, total_rows)
    staging.remove()
    seconds = time.perf_counter() - started
    return EmbedSummary(
        column=column, rows=total_rows, valid=summary["valid"], failed=summary["failed"],
        encoded_now=encoded_now, resumed=resumed, seconds=round(seconds, 3),
        rows_per_second=round(encoded_now / seconds, 2) if seconds > 0 else 0.0,
        version=summary["version"], failures_path=summary["failures_path"], metadata=summary["metadata"],
    )


def _commit(uri: str, dataset: lance.LanceDataset, column: str, staged: pa.Table, encoder: Encoder,
            described: dict[str, Any], config: EmbedConfig, storage_options: dict[str, str] | None,
            total_rows: int) -> dict[str, Any]:
    """Merge the staged rows into the dataset as one new version, then write failures and the sidecar."""
    import pyarrow.compute as pc

    # Exactly once: a row staged twice (a part flushed just before a kill, then redone) keeps one copy.
    uuids = staged.column("uuid").to_pylist()
    keep = np.zeros(len(uuids), dtype=bool)
    first: dict[str, int] = {}
    for i, row_uuid in enumerate(uuids):
        first.setdefault(row_uuid, i)
    keep[list(first.values())] = True
    staged = staged.filter(pa.array(keep))
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


def write_failures(uri: str, column: str, failed: pa.Table, model: str) -> Path | None:
    """Write the failures table (uuid, reason, column, model) atomically; None when no row failed (and a table
    left by an earlier run of the column is removed: it no longer describes the column)."""
    path = _state_dir(uri) / "failures" / f"{column}.parquet"
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
    atomic_write(path, (json.dumps(entries, indent=2, sort_keys=True) + "\n").encode())


def failures(uri: str, column: str) -> pa.Table:
    """The failures table of an embedding column: uuid, reason, column, model (empty when none failed)."""
    path = _state_dir(uri) / "failures" / f"{column}.parquet"
    if not path.exists():
        return pa.table({"uuid": pa.array([], pa.string()), "reason": pa.array([], pa.string())})
    return pq.read_table(path)


def valid_embeddings(dataset: lance.LanceDataset, column: str, *, where: str | None = None,
                     columns: Sequence[str] = ("uuid",)) -> tuple[pa.Table, np.ndarray]:
    """Rows with an embedding in ``column`` and the raw vectors as an (n, dim) float32 array."""
    table = store.read(dataset, columns=[*columns, column],
                       where=f"({where}) AND {column} IS NOT NULL" if where else f"{column} IS NOT NULL")
    values = table.column(column).combine_chunks()
    if pa.types.is_fixed_size_list(values.type):
        dim = values.type.list_size
    else:  # published columns may be plain lists (of float16 or float32): every row must have one length
        lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False)
        dim = int(lengths[0]) if len(lengths) else 0
        bad = np.flatnonzero(lengths != dim)
        if bad.size:
            row = int(bad[0])
            where_row = f"uuid={table.column('uuid')[row]}" if "uuid" in table.column_names else f"#{row}"
            raise SchemaError(f"{dataset.uri}: column {column!r} row {where_row} has {lengths[row]} values where "
                              f"the first row has {dim}: not one embedding space")
    vectors = values.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float32, copy=False)
    bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
    if bad.size:  # NaN or inf (e.g. float16 overflow in a published column) would score as anything
        row = int(bad[0])
        where_row = f"uuid={table.column('uuid')[row]}" if "uuid" in table.column_names else f"#{row}"
        raise SchemaError(f"{dataset.uri}: column {column!r} has non-finite values in {bad.size} row(s), first "
                          f"{where_row}; re-embed those rows or filter them out with --where")
    return table.drop_columns([column]), vectors

