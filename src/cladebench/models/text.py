"""Zero-shot class embeddings from prompt templates, encoded once per model and label set, cached on disk.

A class's text embedding is CLIP's zero-shot classifier construction (Radford et al. 2021; open_clip's
``build_zero_shot_classifier``; pybioclip): encode the label in every template, L2-normalise each,
average, normalise again. With 80 templates and 10,000 species that is 800,000 forward passes, so the
result is kept in the cache keyed by everything it depends on:

- model id and the revision actually loaded (a Hub commit or a hash of local weights),
- precision (fp16 text embeddings differ from fp32 ones in the last digits),
- the templates after placeholder normalisation, and the label strings, in order.

Image preprocessing plays no part. Files: ``<cache>/text_embeddings/<k[:2]>/<k>.npy`` (float32, one
unit row per label) and ``<k>.json`` describing the key. Each is written to a temporary file and
renamed into place, so a crash or a concurrent writer never leaves a torn file, and the ``.npy`` is
written last, so its presence means the entry is complete.

A label set at tree-of-life scale (the 1.1M species of the iNaturalist taxonomy) takes hours to encode on a
CPU, so it is encoded in blocks (``block_labels``): each finished block is written whole into
``<k>.parts/``, a rerun after an interruption encodes only the blocks that are missing (resume), a progress
bar counts labels, and the blocks are joined into the one ``<k>.npy`` at the end (the parts folder, which
this module made, is then removed). One process encodes a label set in blocks at a time (an ``flock`` on
``<k>.lock``, released however the process ends): a second one waits for it, then reads the entry. A killed
run's temporary files (kill -9 leaves them) are removed by the next one, and never read. ``mmap=True`` returns
the entry memory-mapped, so a caller that reads it block by block (:mod:`cladebench.tasks.streaming`) never
holds it whole.

This module needs no torch: it works with anything that has ``model_id``, ``revision`` and
``encode_texts``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

from cladebench.console import note
from cladebench.errors import CladebenchError
from cladebench.paths import atomic_write, held_lock
from cladebench.templates import PLACEHOLDER, get_templates

CACHE_KIND = "class_text_embeddings/v1"
"""Part of every key: bump it when the construction changes, and old entries stop matching."""

TEXTS_PER_CHUNK = 8192
"""Texts encoded before their rows are reduced, so memory stays bounded for large label sets."""


class TextEncoder(Protocol):
    """What :func:`class_text_embeddings` needs from an encoder."""

    model_id: str
    revision: str | None

    def encode_texts(self, texts: Sequence[str], batch_size: int = 256) -> np.ndarray: ...


def text_cache_key(model_id: str, revision: str | None, templates: Sequence[str], labels: Sequence[str],
                   precision: str = "fp32") -> str:
    """SHA-256 hex of everything a class-embedding matrix depends on."""
    payload = {"kind": CACHE_KIND, "model_id": model_id, "revision": revision, "precision": precision,
               "templates": list(templates), "labels": list(labels)}
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    # cladebench.store.embeddings.normalise_rows(matrix, dtype=None, floor=tiny) in effect: models sit below the
    # store in the layers, so the text tower cannot import it and keeps this one line.
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, np.finfo(np.float32).tiny)


def _encode_classes(encode: Callable[[list[str]], np.ndarray], labels: Sequence[str],
                    templates: Sequence[str]) -> np.ndarray:
    """Normalise each prompt's embedding, average over templates, normalise again; chunked over labels."""
    per_chunk = max(1, TEXTS_PER_CHUNK // len(templates))
    rows = []
    for start in range(0, len(labels), per_chunk):
        chunk = labels[start:start + per_chunk]
        texts = [t.replace(PLACEHOLDER, label) for label in chunk for t in templates]
        embedded = np.asarray(encode(texts), dtype=np.float32)
        embedded = _unit_rows(embedded).reshape(len(chunk), len(templates), -1)
        rows.append(_unit_rows(embedded.mean(axis=1)))
    return np.concatenate(rows).astype(np.float32, copy=False)


def text_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """Where text embeddings are cached: ``cache_dir``, or ``$CLADEBENCH_CACHE_DIR/text_embeddings``."""
    if cache_dir is not None:
        return Path(cache_dir)
    from cladebench.cache import cache_dir as default_cache_dir

    return default_cache_dir("text_embeddings")


def _facts_path(model_id: str, revision: str | None, precision: str, cache_dir: str | Path | None = None) -> Path:
    key = hashlib.sha256(json.dumps([model_id, revision, precision]).encode("utf-8")).hexdigest()
    return text_cache_dir(cache_dir) / "models" / f"{key}.facts"  # JSON, named apart from the entries' .json


def model_facts(model_id: str, revision: str | None, precision: str = "fp32", *,
                cache_dir: str | Path | None = None) -> dict[str, Any]:
    """What an earlier build of the model told (its learned logit scale, its text dimension), remembered beside the
    text embeddings so that a run whose labels are all cached needs no weights; empty when nothing is known."""
    try:
        facts = json.loads(_facts_path(model_id, revision, precision, cache_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: facts[k] for k in ("logit_scale", "dim") if isinstance(facts, dict) and k in facts}


def remember_model_facts(encoder: TextEncoder, precision: str, dim: int, cache_dir: str | Path | None = None) -> None:
    """Keep the built model's learned logit scale and dimension for later runs (nothing for an encoder without a
    finite scale, such as a test double)."""
    scale = getattr(encoder, "logit_scale", None)
    try:
        scale = float(scale) if scale is not None else None
    except (TypeError, ValueError):
        scale = None
    if scale is None or not np.isfinite(scale):
        return
    path = _facts_path(encoder.model_id, encoder.revision, precision, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"model_id": encoder.model_id, "revision": encoder.revision,
                                   "precision": precision, "logit_scale": scale, "dim": dim}))


def class_text_embeddings(encoder: TextEncoder, labels: Sequence[str], templates: Sequence[str] | str, *,
                          cache_dir: str | Path | None = None, batch_size: int = 256,
                          block_labels: int | None = None, progress: bool = False,
                          mmap: bool = False) -> np.ndarray:
    """Unit class embeddings, float32 (len(labels), dim): CLIP's template ensemble, encoded once and cached.

    ``templates`` is a set name (``openai-imagenet``), one template, or a sequence of templates (see
    :mod:`cladebench.templates`). A second call with the same model, revision, precision, templates
    and labels reads the cache and never calls the encoder. ``block_labels``: encode that many labels at a
    time, each block kept on disk as it finishes, so an interrupted run resumes (see the module docstring);
    ``progress``: a progress bar over the labels; ``mmap``: return the cached array memory-mapped.
    """
    if isinstance(labels, str):
        raise TypeError("labels must be a sequence of strings, not one string")
    labels = [str(label) for label in labels]
    resolved = get_templates(templates)
    precision = str(getattr(encoder, "precision", "fp32"))
    key = text_cache_key(encoder.model_id, encoder.revision, resolved, labels, precision)
    folder = text_cache_dir(cache_dir) / key[:2]
    array_path, info_path = folder / f"{key}.npy", folder / f"{key}.json"

    cached = _read_entry(array_path, len(labels), mmap)
    if cached is not None:
        return cached

    if not labels:
        return np.zeros((0, int(getattr(encoder, "dim", 0))), dtype=np.float32)

    def encode(chunk: Sequence[str]) -> np.ndarray:
        vectors = _encode_classes(lambda texts: encoder.encode_texts(texts, batch_size=batch_size), chunk, resolved)
        bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
        if bad.size:  # NaN scores every image as anything (a sort's arbitrary first); never cached for the next run
            raise CladebenchError(f"{encoder.model_id} gives non-finite text embeddings for {bad.size} label(s), "
                                  f"first {chunk[int(bad[0])]!r}: its text tower is broken (its weights, or a float16 "
                                  "overflow); check the model")
        return vectors

    folder.mkdir(parents=True, exist_ok=True)
    if block_labels is None or len(labels) <= block_labels:
        embeddings = encode(labels)
        _write_entry(info_path, array_path, _entry_info(key, encoder, precision, resolved, labels,
                                                        int(embeddings.shape[1])),
                     lambda handle: np.save(handle, embeddings, allow_pickle=False))
        remember_model_facts(encoder, precision, int(embeddings.shape[1]), cache_dir)
        return embeddings
    # Blocks take hours at tree-of-life scale: one process encodes a label set at a time (a second waits, then reads
    # the finished entry), so none removes the parts folder while another still writes or joins its blocks.
    def waiting() -> None:
        if progress:
            note("text embeddings: another process is encoding the same labels; waiting for it to finish")

    with held_lock(folder / f"{key}.lock", on_wait=waiting):
        cached = _read_entry(array_path, len(labels), mmap)  # written by the process this one waited for
        if cached is not None:
            return cached
        _remove_stale_temporaries(folder, key)
        parts = _encode_in_blocks(encode, labels, block_labels, folder / f"{key}.parts", progress)
        dim = int(np.load(parts[0], mmap_mode="r").shape[1])
        _write_entry(info_path, array_path, _entry_info(key, encoder, precision, resolved, labels, dim),
                     lambda handle: _join_parts(handle, parts, len(labels), dim))
        remember_model_facts(encoder, precision, dim, cache_dir)
        shutil.rmtree(folder / f"{key}.parts", ignore_errors=True)  # the blocks this function wrote, now joined
    return np.load(array_path, mmap_mode="r") if mmap else np.load(array_path)


def _read_entry(array_path: Path, n_labels: int, mmap: bool) -> np.ndarray | None:
    """The cached entry as float32 (memory-mapped when asked), or None when there is none or it does not read as
    ``n_labels`` rows (it is then encoded again and replaced)."""
    if not array_path.is_file():
        return None
    try:
        cached = np.load(array_path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except (OSError, ValueError, EOFError):
        return None
    if cached.ndim != 2 or cached.shape[0] != n_labels:
        return None
    return cached if mmap and cached.dtype == np.float32 else cached.astype(np.float32, copy=False)


def _entry_info(key: str, encoder: TextEncoder, precision: str, templates: Sequence[str], labels: Sequence[str],
                dim: int) -> dict[str, object]:
    """The ``<k>.json`` beside an entry: what its key was made of, readable by a person."""
    return {
        "key": key, "kind": CACHE_KIND, "model_id": encoder.model_id, "revision": encoder.revision,
        "precision": precision, "templates": list(templates), "n_labels": len(labels),
        "labels_sha256": hashlib.sha256("\n".join(labels).encode("utf-8")).hexdigest(),
        "first_labels": list(labels[:5]), "dim": dim,
    }


def _write_entry(info_path: Path, array_path: Path, info: dict[str, object],
                 write: Callable[[BinaryIO], object]) -> None:
    """The description first, then the array: the ``.npy`` present means the entry is whole."""
    atomic_write(info_path, json.dumps(info, indent=2, ensure_ascii=False))
    atomic_write(array_path, write)


def _remove_stale_temporaries(folder: Path, key: str) -> None:
    """Temporary files of this entry left by a killed run (:func:`atomic_write`'s ``.<name>.<id>.tmp``): under the
    key's lock no other writer of them is alive, so they are this module's leftovers, never read, and removed."""
    for name in (f"{key}.npy", f"{key}.json"):
        for leftover in folder.glob(f".{name}.*.tmp"):
            leftover.unlink(missing_ok=True)


def _encode_in_blocks(encode: Callable[[Sequence[str]], np.ndarray], labels: Sequence[str], block: int,
                      parts_dir: Path, progress: bool) -> list[Path]:
    """Encode ``labels`` ``block`` at a time into ``parts_dir/<first label>.npy``, skipping blocks already there
    (a resumed run); each block is written whole (:func:`atomic_write`), so a part present is a part done."""
    from cladebench.progress import progress_bar

    parts_dir.mkdir(parents=True, exist_ok=True)
    starts = range(0, len(labels), block)
    paths = [parts_dir / f"{start:012d}.npy" for start in starts]

    def done(path: Path, size: int) -> bool:
        try:
            return path.is_file() and np.load(path, mmap_mode="r").shape[0] == size
        except (OSError, ValueError):
            return False  # a part that does not read is encoded again

    sizes = [min(block, len(labels) - start) for start in starts]
    finished = [done(path, size) for path, size in zip(paths, sizes, strict=True)]
    with progress_bar(total=len(labels), initial=sum(s for s, f in zip(sizes, finished, strict=True) if f),
                      unit="labels", desc="text embeddings", enabled=progress) as bar:
        for start, path, size, ready in zip(starts, paths, sizes, finished, strict=True):
            if ready:
                continue
            rows = encode(labels[start:start + size])

            def save(handle: BinaryIO, rows: np.ndarray = rows) -> None:
                np.save(handle, rows, allow_pickle=False)

            atomic_write(path, save)
            bar.update(size)
    return paths


def _join_parts(handle: BinaryIO, parts: Sequence[Path], n: int, dim: int) -> None:
    """Write one ``.npy`` of (n, dim) float32 from the blocks, one block in memory at a time."""
    np.lib.format.write_array_header_2_0(handle, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                                                  "fortran_order": False, "shape": (n, dim)})
    for path in parts:
        handle.write(np.ascontiguousarray(np.load(path), dtype=np.float32).tobytes())
