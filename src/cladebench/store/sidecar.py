"""A dataset's own ``embedding_models.json``: what made each ``emb_*`` column, and a checksum of its vectors.

Why a checksum: the field metadata and the sidecar name the model a column was embedded with, but another tool
can swap two columns, or overwrite one's vectors, and leave both untouched; the run would then score one model's
vectors under another's name. So every writer of a column (``embed``, ``subset``, an appended cohort) records here
the SHA-256 of the column's vectors (:func:`vectors_sha256`), with the rows it covers, and every read of the column
by a task (:func:`check_vectors`) recomputes it and refuses the column when it differs (exit 4).

The checksum covers the rows that have a vector, in uuid order (a row added without one, or rows a Lance
operation reorders, leave it as it was), as the uuids and the vectors' bytes as stored. It is computed once per
dataset version and column in a process: a suite reads one column many times.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench.errors import SchemaError, reading
from cladebench.paths import atomic_write
from cladebench.store.schema import EMBEDDING_PREFIX, EMBEDDING_SIDECAR
from cladebench.store.sql import sql_identifier

if TYPE_CHECKING:
    import lance

CHECKSUM_KEY = "vectors_sha256"
"""The sidecar entry's key for the checksum of the column's vectors."""

ROWS_KEY = "vectors_rows"
"""The sidecar entry's key for the number of rows the checksum covers (rows with a vector)."""


def sidecar_path(uri: str) -> Path | None:
    """``<dataset>/embedding_models.json`` of a local dataset; None for a remote one (it keeps none)."""
    from cladebench.store.dataset import is_remote

    if is_remote(str(uri)):
        return None
    return Path(str(uri).removeprefix("file://")) / EMBEDDING_SIDECAR


def read_sidecar(uri: str) -> dict[str, dict[str, Any]]:
    """The entries by column (empty when there is no sidecar); an unreadable one is a :class:`SchemaError`."""
    path = sidecar_path(uri)
    if path is None or not path.is_file():
        return {}
    with reading(path):
        text = path.read_text(encoding="utf-8")
    try:
        entries = json.loads(text)
    except ValueError as exc:
        raise SchemaError(f"{path}: not readable JSON ({exc}); it describes the dataset's embedding columns: "
                          "re-embed them (cladebench embed --overwrite) to write it again") from None
    if not isinstance(entries, dict):
        raise SchemaError(f"{path}: holds {type(entries).__name__}, not an object of columns")
    return {str(k): v for k, v in entries.items() if isinstance(v, dict)}


_COMPUTED: dict[tuple[object, ...], tuple[str, int]] = {}
"""(uri, its versions folder's identity, version, column) -> checksum and rows, computed once in this process (a
version never changes; a dataset written anew at the same path has a new versions folder)."""


def vectors_sha256(dataset: lance.LanceDataset, column: str) -> tuple[str, int]:
    """SHA-256 of the column's vectors (rows with one, in uuid order) and the number of those rows."""
    path = sidecar_path(dataset.uri)
    try:
        stat = (path.parent / "_versions").stat() if path is not None else None
    except OSError:
        stat = None
    folder = None if stat is None else (stat.st_ino, stat.st_mtime_ns)
    key = (str(dataset.uri), folder, int(dataset.version), column)
    if key not in _COMPUTED:
        _COMPUTED[key] = _vectors_sha256(dataset, column)
    return _COMPUTED[key]


def _vectors_sha256(dataset: lance.LanceDataset, column: str) -> tuple[str, int]:
    import numpy as np
    import pyarrow.compute as pc

    from cladebench.store.dataset import read

    table = read(dataset, columns=["uuid", column], where=f"{sql_identifier(column)} IS NOT NULL")
    table = table.take(pc.sort_indices(table.column("uuid")))
    uuids, values = hashlib.sha256(), table.column(column).combine_chunks()
    for uuid in table.column("uuid").to_pylist():
        uuids.update(str(uuid).encode() + b"\0")
    flat = values.flatten().to_numpy(zero_copy_only=False)
    lengths = pc.list_value_length(values).to_numpy(zero_copy_only=False) if len(values) else np.zeros(0)
    digest = hashlib.sha256(uuids.digest())
    digest.update(np.ascontiguousarray(lengths, dtype="<i8").tobytes())
    digest.update(np.ascontiguousarray(flat, dtype=flat.dtype.newbyteorder("<")).tobytes())
    return digest.hexdigest(), table.num_rows


def write_sidecar(uri: str, entries: Mapping[str, Mapping[str, Any]], *, written: Iterable[str]) -> None:
    """Write the sidecar of the dataset at ``uri``: ``entries`` for the embedding columns it has, the checksum of
    each column in ``written`` (those whose vectors or rows the writer changed) computed now with its rows with a
    vector (``valid_rows``), the others' kept as
    recorded (a column changed outside cladebench must not be blessed by the next write). A column the dataset
    no longer has loses its entry: the sidecar describes exactly the columns and rows the dataset holds."""
    from cladebench.store.dataset import open_dataset

    path = sidecar_path(uri)
    if path is None:
        return
    dataset = open_dataset(uri)
    refresh = set(written)
    out = {}
    for column in dataset.schema.names:
        if not column.startswith(EMBEDDING_PREFIX) or column not in entries:
            continue
        out[column] = dict(entries[column])
        if column in refresh:
            checksum, rows = vectors_sha256(dataset, column)
            out[column].update({CHECKSUM_KEY: checksum, ROWS_KEY: rows, "valid_rows": rows})
    if not out:
        path.unlink(missing_ok=True)
        return
    atomic_write(path, (json.dumps(out, indent=2, sort_keys=True) + "\n").encode())


def check_vectors(dataset: lance.LanceDataset, column: str) -> None:
    """Refuse (exit 4) a column whose vectors are not those its sidecar entry recorded: swapped with another
    column, or overwritten by another tool. A column without a recorded checksum (written before checksums, or
    by another tool with no sidecar) is read as it is."""
    entry = read_sidecar(dataset.uri).get(column) or {}
    recorded = entry.get(CHECKSUM_KEY)
    if not recorded:
        return
    checksum, rows = vectors_sha256(dataset, column)
    if checksum == recorded:
        return
    model = entry.get("model") or "its model"
    counted = entry.get(ROWS_KEY)
    rows_said = f"{rows:,} rows with a vector, {int(counted):,} recorded; " if counted is not None and int(
        counted) != rows else ""
    raise SchemaError(f"{dataset.uri}: column {column!r} does not hold the vectors {EMBEDDING_SIDECAR} records for "
                      f"{model} ({rows_said}checksum differs): it was changed, or swapped with another column, "
                      f"outside cladebench; re-embed it (cladebench embed {dataset.uri} --model {model} "
                      f"--column {column} --overwrite)")
