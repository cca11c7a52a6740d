"""The decoding workers of a local ``embed``: the main process reads each block's bytes from Lance (cheap) and
hands them to a pool of decoding processes; only the workers decode and preprocess, only the main process runs
the model.

Workers never touch Lance: its runtime is not fork-safe, while plain Pillow/torch-CPU code is, so workers can be
forked (milliseconds) instead of spawned (seconds of imports each). The pool starts before the first block is
decoded, and the first block is cut in one piece per worker: the model waits only for a fraction of one block,
and the next blocks are decoded while it encodes the first. At most ``workers * _PREFETCH_PER_WORKER`` blocks are
in flight, so memory stays flat on any dataset size.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import numpy as np

from cladebench.embed.core import decode_block

if TYPE_CHECKING:
    from multiprocessing.pool import AsyncResult

    import lance

    from cladebench.models.preprocessing import ImageTransform, Preprocessing


_PREFETCH_PER_WORKER = 3
_TRANSFORM: ImageTransform | None = None
"""A decoding worker's transform, built once by :func:`_init_worker` in each worker process."""


def _init_worker(preprocessing: Preprocessing) -> None:
    import signal

    import torch

    global _TRANSFORM
    torch.set_num_threads(1)  # leave the cores' math threads to the model
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    _TRANSFORM = preprocessing.build()


def _timed_decode(uuids: list[str], images: list[bytes | None], transform: ImageTransform) -> dict[str, object]:
    """:func:`decode_block`, with the CPU seconds it took (``cpu_seconds``): the cost the cores are split by."""
    started = time.process_time()
    block = decode_block(uuids, images, transform)
    block["cpu_seconds"] = time.process_time() - started
    return block


def _decode_in_worker(uuids: list[str], images: list[bytes | None]) -> dict[str, object]:
    assert _TRANSFORM is not None  # built by _init_worker, which the pool runs first
    return _timed_decode(uuids, images, _TRANSFORM)


def _joined(pieces: list[dict[str, object]]) -> dict[str, object]:
    """One decoded block from the decoded pieces of it, in order (the model sees the same batch)."""
    pixels = [cast(np.ndarray, piece["pixels"]) for piece in pieces if piece["pixels"] is not None]
    return {"uuids": [u for piece in pieces for u in cast(list[str], piece["uuids"])],
            "pixels": np.concatenate(pixels) if pixels else None,
            "failed": [f for piece in pieces for f in cast(list[tuple[str, str]], piece["failed"])],
            "cpu_seconds": sum(cast(float, piece["cpu_seconds"]) for piece in pieces)}


def _read_blocks(dataset: lance.LanceDataset, blocks: list[np.ndarray]
                 ) -> Iterator[tuple[list[str], list[bytes | None]]]:
    for block in blocks:
        rows = dataset.take(block, columns=["uuid", "image"])
        yield rows.column("uuid").to_pylist(), rows.column("image").to_pylist()


def _read_ahead(dataset: lance.LanceDataset, blocks: list[np.ndarray], ahead: int
                ) -> Iterator[tuple[list[str], list[bytes | None]]]:
    """:func:`_read_blocks`, ``ahead`` blocks read beforehand by a thread: Lance reads without holding the GIL,
    so the next block's bytes are read while the model encodes, not between two forwards."""
    import collections
    from concurrent.futures import Future, ThreadPoolExecutor

    source = _read_blocks(dataset, blocks)
    with ThreadPoolExecutor(1, thread_name_prefix="embed-read") as reader:
        pending: collections.deque[Future[tuple[list[str], list[bytes | None]] | None]] = collections.deque()
        while True:
            while len(pending) < ahead:
                pending.append(reader.submit(next, source, None))
            block = pending.popleft().result()
            if block is None:
                for future in pending:
                    future.cancel()
                return
            yield block


def decoded_blocks(dataset: lance.LanceDataset, blocks: list[np.ndarray], preprocessing: Preprocessing,
                    workers: int) -> Iterator[dict[str, object]]:
    """Decoded blocks in dataset order, decoded ahead by ``workers`` processes (inline when 0)."""
    if workers == 0:
        transform = preprocessing.build()
        for uuids, images in _read_blocks(dataset, blocks):
            yield _timed_decode(uuids, images, transform)
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
        in_flight: collections.deque[list[AsyncResult[dict[str, object]]]] = collections.deque()
        source = _read_ahead(dataset, blocks, ahead=2)  # started after the fork: no thread is forked
        exhausted, first = False, True
        while True:
            while not exhausted and len(in_flight) < workers * _PREFETCH_PER_WORKER:
                try:
                    uuids, images = next(source)
                except StopIteration:
                    exhausted = True
                    break
                step = max(1, -(-len(uuids) // workers) if first else len(uuids))
                first = False
                in_flight.append([pool.apply_async(_decode_in_worker, (uuids[i:i + step], images[i:i + step]))
                                  for i in range(0, len(uuids), step)])
            if not in_flight:
                return
            pieces = [piece.get() for piece in in_flight.popleft()]
            if exhausted and not in_flight:
                pool.close()  # the workers exit while the model encodes the last block, not after it
            yield pieces[0] if len(pieces) == 1 else _joined(pieces)


def decoding_workers(requested: int | None) -> int:
    """Decoding processes: the user's number, else one per core (at most 8). On a model-bound CPU run the
    prefetched blocks are soon decoded and the workers wait; on a decode-bound one every core decodes."""
    return max(0, requested) if requested is not None else min(8, os.cpu_count() or 1)


def model_threads(requested_workers: int | None, device: str, decode_cost: float, forward_cost: float) -> int:
    """The model's intra-op threads, from the costs of the first block.

    On a GPU the model costs the CPU nothing, so decoding gets every core. On a CPU both compete:
    ``decode_cost`` and ``forward_cost`` are CPU-seconds per image, and the cores are shared in
    proportion. A tiny model is decode-bound (all cores decode, the model keeps one thread); a ViT-B
    is model-bound (the model keeps every core, one worker at a time decodes ahead). Oversubscribing
    cores costs more than it seems: the model's OpenMP threads spin while a decoder holds their core.
    """
    import torch

    current_threads = torch.get_num_threads()
    if requested_workers is not None or device != "cpu":  # the user's split, or a GPU: the model keeps its threads
        return current_threads
    cores = os.cpu_count() or 1
    share = decode_cost / max(decode_cost + forward_cost, 1e-9)
    return min(current_threads, max(1, cores - int(np.floor(cores * share))))


__all__ = ["decoded_blocks", "decoding_workers", "model_threads"]
