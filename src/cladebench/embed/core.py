"""What both ``embed`` paths share: the column's name, the checks made before anything is written, the lock, the
staging folders' state, decoding a block, and how a finished column is described (field metadata, failures
table, sidecar).

The single-process path (:mod:`cladebench.embed.local`) and the Ray path (:mod:`cladebench.embed.ray`) both
build on this module and on nothing of each other, so that on the same device, precision and threads they
stage, check and describe a column the same way. See the package docstring for why the run is shaped so.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import socket
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cladebench import store
from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.models.registry import resolve_encoder
from cladebench.paths import atomic_write_parquet, held_lock
from cladebench.provenance import software_versions
from cladebench.store.datasets_card import write_datasets_card
from cladebench.store.embeddings import STATE_DIR, failures, failures_path, state_dir

if TYPE_CHECKING:
    import lance

    from cladebench.embed.config import EmbedConfig
    from cladebench.models.preprocessing import ImageTransform

COLUMN_PATTERN = re.compile(r"emb_[a-z0-9_]+")
"""What ``embed`` names a column: ``emb_`` and lower-case letters, digits and underscores. Such a name is a
plain SQL identifier, so every filter, index and reader takes it as it is."""

MAX_COLUMN_LENGTH = 128
"""Longest column name ``embed`` takes: the name is also part of file names (its lock, staging folder and
failures table), and most filesystems refuse a file name over 255 bytes."""


def column_for_model(model: str) -> str:
    """Default column name, the resolved model's (:attr:`cladebench.models.spec.ModelSpec.column`):
    ``bioclip-2.5`` -> ``emb_bioclip2p5``, ``hf-hub:org/My-Model`` -> ``emb_mymodel``."""
    return str(resolve_encoder(model).column)


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


# --- staging ---------------------------------------------------------------------------------------


def staging_dir(uri: str, column: str, *, fragments: bool = False) -> Path:
    """Where an unfinished run of ``column`` keeps its resume point: Parquet parts of finished rows (this
    process) or finished fragments (``--ray``); the two layouts never share a folder."""
    return state_dir(uri) / "staging" / (f"{column}.fragments" if fragments else column)


def read_state(directory: Path) -> dict[str, object] | None:
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


def unproven_note(count: int, what: str, state: dict[str, object] | None, run_key: dict[str, object]) -> str:
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
    return state_dir(uri) / "locks" / f"{column}.lock"


@contextmanager
def embedding_lock(uri: str, column: str) -> Iterator[Path]:
    """Hold the lock of ``column`` on ``uri`` for the duration, or refuse at once when another process holds it.

    :func:`~cladebench.paths.held_lock` on a lock file: the operating system releases it when the holder exits
    in any way (kill -9 too); the file itself stays, holding who held it last, empty of meaning once unlocked.
    """
    path = lock_path(uri, column)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):  # appending truncates nothing: a holder's note stays
            pass
    except OSError as exc:
        raise CladebenchError(f"cannot write {exc.filename or path}: {exc.strerror or exc}; embed keeps its "
                              f"lock and staged rows in {path.parent.parent}") from None
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    with held_lock(path, wait_s=0, note=f"pid {os.getpid()} on {socket.gethostname()} since {started}",
                   busy=lambda holder: f"another embed of {column!r} on {uri} is running ("
                                       f"{holder or 'pid not yet written'}); wait for it to finish, or stop it "
                                       f"(its lock: {path})"):
        yield path


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


# --- checks before anything is written ------------------------------------------------------------


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


def _is_binary(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or getattr(pa.types, "is_binary_view",
                                                                         lambda _: False)(t)


def check_dataset(dataset: lance.LanceDataset, uri: str) -> None:
    """What a dataset needs before a run touches anything: a string ``uuid``, binary ``image`` and some rows."""
    schema = dataset.schema
    for required, kind, ok in (("uuid", "string", store.is_string_type), ("image", "binary (the encoded image bytes)",
                                                                 _is_binary)):
        if required not in schema.names:
            raise SchemaError(f"{uri} has no {required!r} column; embed needs uuid and image")
        found = schema.field(required).type
        if not ok(found):
            raise SchemaError(f"{uri}: column {required!r} has type {found}; embed needs {kind}")
    if dataset.count_rows() == 0:
        raise CladebenchError(f"{uri} has no rows to embed")


def rows_to_fill(dataset: lance.LanceDataset, uri: str, column: str, *, overwrite: bool) -> set[str] | None:
    """None when the run makes the whole column (it is new, or ``overwrite``); else the rows it lacks a vector for
    (:func:`rows_without_vector`), and when there are none the column is finished: refused."""
    if column not in dataset.schema.names or overwrite:
        return None
    missing = rows_without_vector(dataset, uri, column)
    if not missing:
        raise CladebenchError(f"{uri} already has column {column!r} (every row has a vector or a recorded "
                              "failure); pass --overwrite to recompute it")
    return missing


def rows_without_vector(dataset: lance.LanceDataset, uri: str, column: str) -> set[str]:
    """The uuids of rows that ``column`` has no vector for and no recorded failure: rows added after its run read
    the dataset (by another process while it encoded, or by an append since). A run without ``--overwrite``
    encodes these and nothing else; a row whose image failed keeps its failure (decoding it again would fail
    again)."""
    if column not in dataset.schema.names:
        return set()
    missing = store.read(dataset, columns=["uuid"], where=f"{column} IS NULL").column("uuid").to_pylist()
    return set(missing) - set(failures(uri, column).column("uuid").to_pylist()) if missing else set()


def prepare(config: EmbedConfig, storage_options: dict[str, str] | None) -> tuple[str, lance.LanceDataset, str]:
    """The dataset's URI, the dataset and the column name, after the checks every run makes first (nothing is
    written before them)."""
    column = column_name(config)
    uri = str(config.dataset)
    dataset = store.open_dataset(uri, storage_options=storage_options)
    check_dataset(dataset, uri)
    return uri, dataset, column


@contextmanager
def exclusive_run(config: EmbedConfig, storage_options: dict[str, str] | None
                  ) -> Iterator[tuple[str, lance.LanceDataset, str, set[str] | None]]:
    """:func:`prepare`, then the column's lock (held until the block ends), then the dataset as it is under the
    lock, checked again, with the rows to fill (:func:`rows_to_fill`): a run that finished meanwhile may have
    added the column. The rows are read under the lock only: finding them reads the column's vectors."""
    uri, _, column = prepare(config, storage_options)
    check_writable(uri)
    with embedding_lock(uri, column):
        dataset = store.open_dataset(uri, storage_options=storage_options)
        check_dataset(dataset, uri)
        yield uri, dataset, column, rows_to_fill(dataset, uri, column, overwrite=config.overwrite)


def commit_conflict(exc: BaseException) -> bool:
    """Whether Lance refused a commit because another writer committed first (an append by another process while
    a run encoded): ``CommitConflictError`` from ``LanceDataset.commit``, a plain ``OSError`` saying so from
    ``merge``. Such a commit is made again on the new version; any other error is not this."""
    from lance.commit import CommitConflictError

    return isinstance(exc, CommitConflictError) or (isinstance(exc, OSError) and "commit conflict" in str(exc))


def run_key(described: dict[str, object], config: EmbedConfig) -> dict[str, object]:
    """What staged rows must agree on to be resumed: the same model, revision, preprocessing and precision."""
    return {"model": described.get("model_id", config.model), "revision": described.get("revision"),
            "preprocessing": described.get("preprocessing"), "precision": config.precision}


# --- decoding -------------------------------------------------------------------------------------


def decode_block(uuids: list[str], images: list[bytes | None], transform: ImageTransform) -> dict[str, object]:
    """Decode and preprocess one block; failures come back with their reasons instead of raising."""
    from cladebench.images import ImageDecodeError, decode_image

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


# --- describing the finished column --------------------------------------------------------------


@dataclass
class NormSums:
    """Count, sum, sum of squares, min and max of embedding norms: mergeable across fragments (``--ray``), and
    with a finished column's own statistics when a later run adds the vectors of rows that had none."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    low: float = float("inf")
    high: float = float("-inf")

    def add(self, vectors: np.ndarray) -> None:
        if len(vectors) == 0:
            return
        norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
        self.n += len(norms)
        self.total += float(norms.sum())
        self.squares += float(np.square(norms).sum())
        self.low = min(self.low, float(norms.min()))
        self.high = max(self.high, float(norms.max()))

    def merge(self, other: NormSums) -> None:
        self.n += other.n
        self.total += other.total
        self.squares += other.squares
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)

    @classmethod
    def from_stats(cls, stats: dict[str, Any], n: int) -> NormSums:
        """The sums behind a column's ``norm_stats`` of ``n`` vectors (what :meth:`to_stats` wrote)."""
        if n == 0 or not stats:
            return cls()
        mean, std = float(stats["mean"]), float(stats["std"])
        return cls(n=n, total=mean * n, squares=(std * std + mean * mean) * n, low=float(stats["min"]),
                   high=float(stats["max"]))

    def to_stats(self) -> dict[str, float]:
        """The ``norm_stats`` of the field metadata (population std, as the single-process path)."""
        if self.n == 0:
            return {}
        mean = self.total / self.n
        return {"mean": mean, "std": float(np.sqrt(max(0.0, self.squares / self.n - mean * mean))),
                "min": self.low, "max": self.high}




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


def column_metadata(uri: str, described: dict[str, object], config: EmbedConfig, *, norm_stats: dict[str, float],
                    valid: int, failed: int, failures_path: Path | None, source_version: int) -> dict[str, object]:
    """The field metadata of an embedding column: what made it, how, and what came out."""
    folder = state_dir(uri)
    metadata = {
        "model": described.get("model_id", config.model),
        "revision": described.get("revision") or "",
        "preprocessing": described.get("preprocessing", {}),
        "embedding": described.get("embedding"),  # which output of an image-only backbone is the vector
        "precision": config.precision,
        "device": described.get("device", ""),
        "logit_scale": described.get("logit_scale"),
        "software": software_versions(),
        "norm_stats": norm_stats,
        "normalized": False,
        "valid_rows": valid,
        "failed_rows": failed,
        "failures": str(failures_path.relative_to(folder.parent)) if failures_path and "://" not in uri
        else (str(failures_path) if failures_path else ""),
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "source_version": source_version,
    }
    return {k: v for k, v in metadata.items() if v is not None}


def write_failures(uri: str, column: str, failed: pa.Table, model: str, *, name: str | None = None) -> Path | None:
    """Write the failures table (uuid, reason, column, model) atomically; None when no row failed (and a table
    left by an earlier run of the column is removed: it no longer describes the column). ``name``: the file's
    name without ``.parquet`` when it is not the column's."""
    path = failures_path(uri, column, name=name)
    if failed.num_rows == 0:
        path.unlink(missing_ok=True)
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    table = failed.select(["uuid", "reason"])
    table = table.append_column("column", pa.array([column] * table.num_rows, pa.string()))
    table = table.append_column("model", pa.array([model] * table.num_rows, pa.string()))
    atomic_write_parquet(path, table)
    return path


def write_sidecar(uri: str, column: str, dim: int, metadata: dict[str, Any]) -> None:
    """``embedding_models.json`` beside the data: one entry per embedding column, as the FGC card has, with the
    checksum of its vectors (:mod:`cladebench.store.sidecar`)."""
    if store.is_remote(uri):
        return
    from cladebench.store.sidecar import read_sidecar
    from cladebench.store.sidecar import write_sidecar as write_entries

    entries = read_sidecar(uri)
    entries[column] = {"column": column, "dim": dim, **metadata}
    write_entries(uri, entries, written=[column])  # the checksum of its vectors, as they are now
    path = Path(uri.removeprefix("file://")) / store.EMBEDDING_SIDECAR
    write_datasets_card(path.parent, store.open_dataset(uri).schema)  # the new column, for Hugging Face `datasets`
