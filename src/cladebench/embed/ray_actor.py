"""The worker side of ``embed --ray``: a Ray Data actor that encodes whole fragments into uncommitted column files.

Each actor holds one model. For a fragment it reads the images, decodes them in threads a block ahead of the
model, encodes them in the same blocks the single-process path uses, and writes the fragment's new column
with Lance's ``merge_columns`` without committing it; only the fragment's metadata, its failures and its norm
statistics (:class:`NormSums`, mergeable across fragments) travel back to the driver
(:mod:`cladebench.embed.ray`), which commits the column once.
"""

from __future__ import annotations

import base64
import json
import pickle
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from cladebench import store
from cladebench.embed.core import NormSums, check_uuid_values, decode_block
from cladebench.errors import CladebenchError, SchemaError
from cladebench.raycluster import exit_if_marked

if TYPE_CHECKING:
    from lance.fragment import LanceFragment

    from cladebench.embed.config import EmbedConfig

FAULT_MARKER_ENV = "CLADEBENCH_EMBED_RAY_FAULT"
"""Fault-injection point for tests, unset in normal use: the path of a marker file. The first actor that
finds the file, having encoded a block, removes it and ends its own worker process (``os._exit``), as a
worker killed mid-fragment would."""


# --- norm statistics, combined across fragments ---------------------------------------------------


# --- the actor --------------------------------------------------------------------------------------


def _fragment_blocks(fragment: LanceFragment, batch_size: int) -> Iterator[tuple[list[str], list[bytes | None]]]:
    """The fragment's rows as blocks of exactly ``batch_size`` (the last shorter), whatever Lance's batches."""
    uuids: list[str] = []
    images: list[bytes | None] = []
    for batch in fragment.to_batches(columns=["uuid", "image"], batch_size=batch_size):
        uuids.extend(batch.column("uuid").to_pylist())
        images.extend(batch.column("image").to_pylist())
        while len(uuids) >= batch_size:
            yield uuids[:batch_size], images[:batch_size]
            del uuids[:batch_size], images[:batch_size]
    if uuids:
        yield uuids, images


class FragmentEncoder:
    """A Ray Data actor: one model, encoding whole fragments into uncommitted column files."""

    def __init__(self, *, uri: str, version: int, storage_options: dict[str, str] | None, config: EmbedConfig,
                 column: str, dim: int, field_metadata: dict[str, object], revision: str | None, threads: int) -> None:
        # An error here is kept and reported by every call: Ray passes an exception from a worker to the driver
        # only as text, so errors meant for the user travel as results and the driver raises them.
        self.error: CladebenchError | None = None
        try:
            self._load(uri=uri, version=version, storage_options=storage_options, config=config, column=column,
                       dim=dim, field_metadata=field_metadata, revision=revision, threads=threads)
        except CladebenchError as exc:
            self.error = exc

    def _load(self, *, uri: str, version: int, storage_options: dict[str, str] | None, config: EmbedConfig,
              column: str, dim: int, field_metadata: dict[str, object], revision: str | None, threads: int) -> None:
        import torch

        from cladebench.models import load_encoder

        torch.set_num_threads(max(1, threads))
        self.threads = max(1, threads)
        self.encoder = load_encoder(config.model, revision=config.revision, preprocessing=config.preprocessing,
                                    device=config.device, precision=config.precision)
        described = self.encoder.describe()
        if described.get("revision") != revision:
            raise CladebenchError(f"model {config.model} loaded at revision {described.get('revision')} on a Ray "
                                  f"worker, but at {revision} on the driver: every node must see the same files")
        self.device = str(described.get("device", ""))
        self.transform = self.encoder.preprocessing.build()
        self.dataset = store.open_dataset(uri, version=version, storage_options=storage_options)
        self.batch_size = config.batch_size
        self.field = store.embedding_field(column, dim, field_metadata)
        self.dim = dim

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list[object]]:
        results = [self._result(int(fid)) for fid in batch["fragment_id"]]
        return {key: [r[key] for r in results] for key in results[0]}

    def _result(self, fragment_id: int) -> dict[str, object]:
        try:
            if self.error is not None:
                raise self.error
            return {**self.encode_fragment(fragment_id), "error": "", "error_type": ""}
        except CladebenchError as exc:  # its class travels by name, so the driver exits with the same code
            return {"fragment_id": fragment_id, "fragment": "", "schema": "", "rows": 0, "failed_uuids": [],
                    "failed_reasons": [], "norms": "", "device": "", "seconds": 0.0, "error": str(exc),
                    "error_type": type(exc).__name__}

    def _encoded_blocks(self, fragment: LanceFragment, failures: list[tuple[str, str]], sums: NormSums
                        ) -> Iterator[tuple[list[str], list[np.ndarray | None]]]:
        """Blocks in fragment order: uuids and their vectors (None for a failed image), decoded ahead in threads."""
        import torch

        with ThreadPoolExecutor(self.threads) as pool:
            pending: list[Any] = []
            source = _fragment_blocks(fragment, self.batch_size)
            exhausted = False
            while True:
                while not exhausted and len(pending) < 2 * self.threads:
                    block = next(source, None)
                    if block is None:
                        exhausted = True
                        break
                    pending.append((block[0], pool.submit(decode_block, block[0], block[1], self.transform)))
                if not pending:
                    return
                uuids, future = pending.pop(0)
                item = future.result()
                vectors = (self.encoder.encode_images(torch.from_numpy(item["pixels"]))
                           if item["pixels"] is not None else np.zeros((0, self.dim), np.float32))
                sums.add(vectors)
                failures.extend(item["failed"])
                by_uuid = dict(zip(item["uuids"], vectors, strict=True))
                exit_if_marked(FAULT_MARKER_ENV)
                yield uuids, [by_uuid.get(u) for u in uuids]

    def encode_fragment(self, fragment_id: int) -> dict[str, object]:
        import tempfile

        started = time.perf_counter()
        fragment = self.dataset.get_fragment(fragment_id)
        if fragment is None:
            raise CladebenchError(f"{self.dataset.uri} fragment {fragment_id}: gone (the dataset changed while read)")
        failures: list[tuple[str, str]] = []
        sums = NormSums()
        rows = fragment.count_rows()
        # Encode first, then write: Lance calls the column function from inside its own reader, where reading
        # Lance again is not allowed. The vectors wait in a memory-mapped file on the worker's local disk.
        with tempfile.TemporaryDirectory(prefix="cladebench-embed-") as scratch:
            vectors = np.lib.format.open_memmap(Path(scratch) / "vectors.npy", mode="w+", dtype=np.float32,
                                                shape=(rows, self.dim))
            valid = np.zeros(rows, bool)
            order: list[str] = []
            seen: set[str] = set()
            for uuids, encoded in self._encoded_blocks(fragment, failures, sums):
                check_uuid_values(pa.array(uuids, pa.string()), len(order), f"{self.dataset.uri} fragment "
                                  f"{fragment_id}")  # the driver checked them; a fragment changed since is caught
                for row_uuid, vector in zip(uuids, encoded, strict=True):
                    if row_uuid in seen:
                        raise SchemaError(f"{self.dataset.uri}: duplicate uuid {row_uuid!r} in fragment {fragment_id};"
                                          " embeddings are joined by uuid")
                    seen.add(row_uuid)
                    if vector is not None:
                        vectors[len(order)] = vector
                        valid[len(order)] = True
                    order.append(row_uuid)
            if len(order) != rows:
                raise CladebenchError(f"{self.dataset.uri} fragment {fragment_id}: read {len(order)} rows of "
                                      f"{rows} (the fragment changed while read)")
            metadata, lance_schema = fragment.merge_columns(_ColumnFromOrder(order, vectors, valid, self.field),
                                                            ["uuid"], self.batch_size, pa.schema([self.field]))
            del vectors
        return {
            "fragment_id": fragment_id,
            "fragment": json.dumps(metadata.to_json()),
            "schema": base64.b64encode(pickle.dumps(lance_schema)).decode(),
            "rows": rows,
            "failed_uuids": [u for u, _ in failures],
            "failed_reasons": [r for _, r in failures],
            "norms": json.dumps(sums.__dict__),
            "device": self.device,
            "seconds": time.perf_counter() - started,
        }


class _ColumnFromOrder:
    """The column function for ``merge_columns``: serves encoded rows in fragment order, checking each uuid.

    Lance first calls it with a sample of the fragment's first rows (to learn the schema), then with every
    batch in order; a batch starting at the first row starts over.
    """

    def __init__(self, order: list[str], vectors: np.ndarray, valid: np.ndarray, field: pa.Field) -> None:
        self.order, self.vectors, self.valid = order, vectors, valid
        self.schema = pa.schema([field])
        self.dim = field.type.list_size
        self.cursor = 0

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        uuids = batch.column("uuid").to_pylist()
        start = self.cursor if uuids and self.cursor < len(self.order) and self.order[self.cursor] == uuids[0] else 0
        stop = start + len(uuids)
        if self.order[start:stop] != uuids:
            raise CladebenchError(f"rows {start}..{stop} of the fragment came back in another order than they were "
                                  "encoded in")
        self.cursor = stop
        mask = pa.array(~self.valid[start:stop])
        values = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(self.vectors[start:stop]).ravel()),
                                                   self.dim, mask=mask)
        return pa.RecordBatch.from_arrays([values], schema=self.schema)
