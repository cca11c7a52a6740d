"""``embed`` in this process: decoding workers feed the model block by block, finished rows are staged as Parquet
parts, and one Lance ``merge`` commits the column.

Why it is built this way is told in the package docstring (:mod:`cladebench.embed`); what it shares with the Ray
path (checks, lock, staging state, decoding, column metadata) is in :mod:`cladebench.embed.core`; the decoding
workers that feed the model are :mod:`cladebench.embed.decoding`.
"""

from __future__ import annotations

import json
import time
import uuid as uuidlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cladebench import console, store
from cladebench.embed.config import EmbedSummary
from cladebench.embed.core import (
    all_failed,
    check_no_other_staging,
    check_uuid_values,
    column_metadata,
    commit_conflict,
    exclusive_run,
    read_state,
    remove_staging,
    rows_without_vector,
    run_key,
    staging_dir,
    unproven_note,
    write_failures,
    write_sidecar,
)
from cladebench.embed.decoding import decoded_blocks, decoding_workers, model_threads
from cladebench.embed.fill import check_fill_settings, commit_fill
from cladebench.errors import CladebenchError, SchemaError
from cladebench.paths import atomic_write, atomic_write_parquet

if TYPE_CHECKING:

    import lance

    from cladebench.embed.config import EmbedConfig
    from cladebench.models import Encoder


class _Staging:
    """Parquet parts of finished rows for one column, written atomically; the resume point."""

    def __init__(self, directory: Path, run_key: dict[str, object], dim_hint: int | None = None) -> None:
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
            atomic_write(self.state_path, json.dumps({"run_key": self.run_key}).encode())
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
        atomic_write_parquet(self.directory / name, table, durable=True)

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


# --- the run ---------------------------------------------------------------------------------------


def _norm_statistics(vectors: np.ndarray) -> dict[str, float]:
    if len(vectors) == 0:
        return {}
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    return {"mean": float(norms.mean()), "std": float(norms.std()), "min": float(norms.min()),
            "max": float(norms.max())}


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


def embed_locally(config: EmbedConfig, encoder: Encoder | None, storage_options: dict[str, str] | None
                   ) -> EmbedSummary:
    """Run ``embed`` in this process (see the package docstring); ``encoder`` may be a loaded model."""
    started = time.perf_counter()
    with exclusive_run(config, storage_options) as (uri, dataset, column, fill):
        fragment_uuids, present = _fragment_uuids(dataset, uri)
        check_no_other_staging(uri, column, ray=False, restart=config.restart)
        return _encode_and_commit(config, encoder, storage_options, uri, dataset, column, fragment_uuids, present,
                                  started, fill)


def _encode_and_commit(config: EmbedConfig, encoder: Encoder | None, storage_options: dict[str, str] | None,
                       uri: str, dataset: lance.LanceDataset, column: str, fragment_uuids: list[list[str]],
                       present: set[str], started: float, fill: set[str] | None) -> EmbedSummary:
    import torch

    from cladebench.models import load_encoder
    from cladebench.progress import progress_bar

    if encoder is None:
        encoder = load_encoder(config.model, revision=config.revision, preprocessing=config.preprocessing,
                               device=config.device, precision=config.precision)
    described = encoder.describe()
    key = run_key(described, config)
    if fill:
        check_fill_settings(dataset, column, key, len(fill))
    staging = _Staging(staging_dir(uri, column), key, dim_hint=encoder.dim)
    done, note = staging.open(config.restart)
    if note:
        console.note(f"cladebench embed: {note}")
    wanted = fill or present  # the rows this run encodes: every row, or those of the column without a vector
    blocks, total_rows = _pending_blocks(fragment_uuids, done | (present - wanted), config.batch_size)
    pending_rows = sum(len(b) for b in blocks)
    resumed = len(wanted) - pending_rows  # staged rows of uuids the dataset no longer has are not counted

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

    bar = progress_bar(total=pending_rows, desc=f"embed {column}", unit="img", enabled=config.progress, smoothing=0.1)
    threads_before = torch.get_num_threads()
    embedding_started = time.perf_counter()
    try:
        decoded = decoded_blocks(dataset, blocks, encoder.preprocessing,
                                  decoding_workers(config.workers))
        first = next(decoded, None)
        if first is not None:
            # The first block's costs split the CPU cores between decoding and the model's threads.
            decode_cost = cast(float, first["cpu_seconds"]) / max(1, len(blocks[0]))
            wall_started = time.perf_counter()
            consume(first)
            forward_cost = (time.perf_counter() - wall_started) * threads_before / max(1, len(blocks[0]))
            torch.set_num_threads(model_threads(config.workers, encoder.device, decode_cost, forward_cost))
        for item in decoded:
            consume(item)
    except BaseException:
        flush()  # keep what is finished: the rerun resumes from here
        bar.close()
        raise
    finally:
        torch.set_num_threads(threads_before)
    embedding_seconds = time.perf_counter() - embedding_started
    flush()
    bar.close()

    staged = _exactly_once(staging.read(), wanted)
    model = described.get("model_id", config.model)
    if not fill and staged.num_rows == total_rows and staged.column("embedding").null_count == total_rows:
        error = all_failed(uri, column, staged.select(["uuid", "error"]).rename_columns(["uuid", "reason"]), model,
                           column_exists=column in dataset.schema.names)
        staging.remove()  # nothing worth resuming: a rerun after the images are fixed decodes them again
        raise error
    if fill:
        summary = commit_fill(uri, dataset, column, staged, described, config, storage_options, len(fill))
    else:
        summary = _commit(uri, dataset, column, staged, encoder, described, config, storage_options, total_rows)
    staging.remove()
    arrived = len(rows_without_vector(store.open_dataset(uri, storage_options=storage_options), uri, column))
    if arrived:
        console.warn(f"cladebench embed: {arrived:,} row(s) were added to {uri} while this run encoded version "
                     f"{dataset.version}; they have no vector in {column!r} yet: run embed again (without --overwrite) "
                     "to encode only them")
    seconds = time.perf_counter() - started
    return EmbedSummary(
        column=column, rows=summary["rows"], valid=summary["valid"], failed=summary["failed"],
        encoded_now=encoded_now, resumed=resumed, seconds=round(seconds, 3),
        embedding_seconds=round(embedding_seconds, 3),
        rows_per_second=round(encoded_now / embedding_seconds, 2) if embedding_seconds > 0 else 0.0,
        version=summary["version"], failures_path=summary["failures_path"], metadata=summary["metadata"],
        arrived=arrived,
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


def _commit(uri: str, dataset: lance.LanceDataset, column: str, staged: pa.Table, encoder: Encoder,
            described: dict[str, Any], config: EmbedConfig, storage_options: dict[str, str] | None,
            total_rows: int) -> dict[str, object]:
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
    for attempt in range(3):  # another process appending at this very moment: merge into what it committed
        current = store.open_dataset(uri, storage_options=storage_options)
        try:
            current.merge(table, left_on="uuid")
            break
        except OSError as exc:
            if not commit_conflict(exc):
                raise
            if attempt == 2:
                raise CladebenchError(f"{uri} kept changing while the column was committed; every row is staged: "
                                      "rerun to commit it") from None
    current = store.open_dataset(uri, storage_options=storage_options)
    write_sidecar(uri, column, dim, metadata)
    return {"rows": total_rows, "valid": metadata["valid_rows"], "failed": metadata["failed_rows"],
            "version": current.version, "failures_path": str(failures_path) if failures_path else None,
            "metadata": metadata}
