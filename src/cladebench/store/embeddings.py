"""Embedding columns as the tasks read them: valid rows and their vectors, the failures table beside a column,
the columns benchmarks publish without our metadata, and the one row normaliser.

Embeddings are raw in storage, normalised in use: ``embed`` writes the model's raw outputs, and every reader
that compares by cosine normalises rows with :func:`normalise_rows` at the moment of use. These helpers live
with the store, below ``embed`` and the tasks, so that a task reads a column without importing the code that
writes it.

Published columns: Fine-Grained Challenges ships ``emb_bioclip``, ``emb_bioclip2`` and ``emb_bioclip2p5``:
vectors made by the Imageomics models, as plain lists. Evaluating them with the matching model saves encoding
the images again, but only if the column is known to hold that model's vectors: :data:`PUBLISHED_EMBEDDING_COLUMNS`
says which model each name stands for. The publisher records the model and its revision twice, in each field's
Arrow metadata and in a sidecar beside the ``.lance`` folder (``challenges.embedding_models.json`` next to
``challenges.lance``); :func:`published_metadata` reads both, and :func:`check_published_embeddings` refuses a
column whose recorded model or revision is not the one cladebench pins (vectors of other weights are not
comparable with the pinned model's text tower, and a benchmark's numbers would silently describe another model).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.errors import SchemaError, reading
from cladebench.models.registry import HF_HUB_PREFIX, resolve_model
from cladebench.models.spec import ModelSpec
from cladebench.registry import Registry
from cladebench.store.sql import sql_identifier

if TYPE_CHECKING:
    import lance
    import numpy as np
    import pyarrow as pa
    from numpy.typing import DTypeLike

# numpy, pyarrow and the store's modules that need them are imported in the functions that use them: the command
# line's help reaches this module (the published columns' names), and reads none of them.

STATE_DIR = "_cladebench"
"""The folder inside a local dataset where cladebench keeps what belongs to it but is not a column: the
failures tables of embedding columns, the staging and locks of ``embed`` runs."""

PUBLISHED_EMBEDDING_COLUMNS: Registry[str] = Registry("published embedding column")
"""Column name -> model alias (or id) of the model that made the published vectors."""


def register_published_column(column: str, model: str) -> None:
    """Declare that a published ``column`` holds embeddings of ``model`` (an alias or model id)."""
    PUBLISHED_EMBEDDING_COLUMNS.add(column, model)


for _column, _model in (("emb_bioclip", "bioclip"), ("emb_bioclip2", "bioclip-2"), ("emb_bioclip2p5", "bioclip-2.5")):
    register_published_column(_column, _model)


PUBLISHED_SIDECAR_SUFFIX = ".embedding_models.json"
"""The publisher's sidecar sits beside the ``.lance`` folder and is named after it:
``data/challenges.lance`` -> ``data/challenges.embedding_models.json``."""

_MODEL_KEYS = ("model", "model_id", "model_name")
"""Keys a publisher may name the model with (field metadata or sidecar entry); the first present wins."""
_REVISION_KEYS = ("revision", "model_revision", "hf_revision")
"""Keys a publisher may name the model's revision with; the first present wins."""


def published_sidecar_path(uri: str) -> Path | None:
    """The publisher's sidecar beside a local ``.lance`` folder, or None (remote URI, or no such file)."""
    from cladebench.store.dataset import is_remote

    if is_remote(uri):
        return None
    folder = Path(uri.removeprefix("file://"))
    path = folder.with_name(folder.name.removesuffix(".lance") + PUBLISHED_SIDECAR_SUFFIX)
    return path if path.is_file() else None


MAX_SIDECAR_BYTES = 16 * 1024 * 1024
"""The largest sidecar read: a few entries take a few kilobytes, so a bigger file is not one (and reading a file of
gigabytes, or a link to an endless device, whole into memory would take the machine down)."""


def read_published_sidecar(path: str | Path) -> dict[str, dict[str, object]]:
    """The sidecar's entries by column. Accepted shapes: ``{column: entry}``, ``{"columns": {column: entry}}`` and
    a list of entries that each name their ``column``. Anything else (including a file over
    :data:`MAX_SIDECAR_BYTES`, or JSON nested too deep to parse) is a :class:`SchemaError` naming the file."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SIDECAR_BYTES + 1)
        if len(raw) > MAX_SIDECAR_BYTES:
            raise SchemaError(f"{path}: over {MAX_SIDECAR_BYTES // (1024 * 1024)} MiB, not a JSON sidecar of "
                              "embedding models (one short entry per embedding column)")
        text = raw.decode("utf-8")
        if not text.strip():  # an empty file records nothing: no entry, as "{}"
            return {}
        data = json.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
        raise SchemaError(f"{path}: not a readable JSON sidecar of embedding models ({reason})") from None
    if isinstance(data, dict) and isinstance(data.get("columns"), (dict, list)):
        data = data["columns"]
    if isinstance(data, list) and all(isinstance(e, dict) and isinstance(e.get("column"), str) for e in data):
        data = {e["column"]: e for e in data}
    if not isinstance(data, dict) or not all(isinstance(e, dict) for e in data.values()):
        raise SchemaError(f"{path}: expected one entry (an object) per embedding column, keyed by the column's name")
    return {str(column): dict(entry) for column, entry in data.items()}


def _recorded(entry: Mapping[str, object] | None, keys: Sequence[str]) -> str | None:
    """The first non-empty value of ``keys`` in a record, as text (an empty revision means none was recorded)."""
    for key in keys:
        value = (entry or {}).get(key)
        text = "" if value is None else str(value).strip()
        if text:
            return text
    return None


_HUB_SPELLINGS = ("https://huggingface.co/", "http://huggingface.co/", "huggingface.co/", HF_HUB_PREFIX, "hf_hub:",
                  "hf://")
"""Ways a tool writes that a model lives on the Hugging Face Hub, before its ``ORG/NAME``."""


def model_spelling(name: str) -> str:
    """A model name as compared across tools: case, white space, a Hub prefix or URL (:data:`_HUB_SPELLINGS`), a
    revision after ``@``, a trailing ``/`` or ``.git`` ignored (``https://huggingface.co/Imageomics/BioCLIP@main``
    and ``hf-hub:imageomics/bioclip`` are one spelling); a local path keeps its case."""
    text = name.strip()
    if text.startswith(("local-dir:", "/", ".", "~")):  # a path: its case is its own
        return text.rstrip("/")
    text = text.lower()
    for prefix in _HUB_SPELLINGS:
        text = text.removeprefix(prefix)
    return text.partition("@")[0].rstrip("/").removesuffix(".git")


def names_model(recorded: str, spec: ModelSpec, alias: str | None = None) -> bool:
    """Whether a recorded model name is ``spec``'s model in any spelling (its id, ``ORG/NAME``, a Hub URL, its
    alias): a column another tool recorded under a spelling of the model's id holds that model's vectors."""
    known = {model_spelling(spec.id), *(model_spelling(a) for a in (alias, spec.alias) if a)}
    return model_spelling(recorded) in known


def _names_model(recorded: str, alias: str, spec: ModelSpec) -> bool:
    return names_model(recorded, spec, alias)


_COMMIT_LENGTHS = (40, 64)
"""Hex digits of a full git commit name (SHA-1, SHA-256): only of such a name is a shorter one an abbreviation."""


def _same_revision(a: str, b: str) -> bool:
    """Two revisions name the same commit: equal (case aside), or one an abbreviation (7+ hex digits) of the other,
    a full commit name. A revision that merely starts with the other (``<pin>deadbeef``, ``<pin>-dirty``) is
    another revision: equal means equal."""
    a, b = a.strip().lower(), b.strip().lower()
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return (len(short) >= 7 and len(long) in _COMMIT_LENGTHS and all(c in "0123456789abcdef" for c in long)
            and long.startswith(short))


def published_metadata(column: str, recorded: Mapping[str, object] | None = None, *,
                       sidecar_entry: Mapping[str, object] | None = None) -> dict[str, object]:
    """What a published column holds, in the shape ``cladebench embed`` writes; empty when the column is not a
    published one, or when its field metadata (``recorded``, decoded) already names the model as cladebench
    spells it (a column ``cladebench embed`` wrote: its own record stands).

    The revision is the one the publisher recorded, in the field metadata or the sidecar entry, or None when
    neither records one. Checking it against the pin is :func:`check_published_embeddings`'s job.
    """
    alias = PUBLISHED_EMBEDDING_COLUMNS.get(column)
    if alias is None:
        return {}
    spec = resolve_model(alias)
    named = _recorded(recorded, _MODEL_KEYS)
    if named == spec.id or (named is not None and not _names_model(named, alias, spec)):
        return {}  # cladebench's own record, or another model's vectors under a published name: read as recorded
    revision = _recorded(recorded, _REVISION_KEYS) or _recorded(sidecar_entry, _REVISION_KEYS)
    return {**(recorded or {}), "model": spec.id, "revision": revision,
            "source": (recorded or {}).get("source") or "published with the dataset"}


def load_published_sidecar(path: Path, name: str) -> tuple[dict[str, dict[str, object]] | None, str | None]:
    """The sidecar at ``path`` (:func:`read_published_sidecar`), or None and why it was not read: missing, a
    folder in its place, or not a regular file (a FIFO would block the read forever). ``name`` is how messages
    call it."""
    if path.is_dir():
        return None, f"{name} is a folder, not a file"
    if not path.exists():
        return None, f"there is no {name}"
    if not path.is_file():
        return None, f"{name} is not a regular file"
    return read_published_sidecar(path), None


def check_published_embeddings(dataset: lance.LanceDataset, *, sidecar: Mapping[str, Mapping[str, object]] | None,
                               sidecar_name: str, uri: str | None = None,
                               sidecar_absent: str | None = None) -> dict[str, dict[str, object]]:
    """Each published column of ``dataset`` with the model and revision its publisher recorded, checked.

    A :class:`SchemaError` (one line) when a record names another model than the column's name stands for,
    when the field metadata and the sidecar (``sidecar_name`` in messages) disagree on the revision, or when the
    recorded revision is not the one cladebench pins for the model: such vectors are not the pinned model's,
    and scoring them against its text tower, or reporting them under its name, would be wrong. A column whose
    publisher records no revision is kept, with ``revision`` None and ``pinned`` False, as the record says.

    A column is ``verified`` only when the sidecar's entry for it records the pinned revision too: the release
    records it twice, and one record alone (the field metadata of a mirror without the sidecar, an empty one, or
    one keyed by other columns) proves less. Such a column is still read, with ``unverified_reason`` saying why
    (``sidecar_absent``: why no sidecar was read), for the console and the run record (:func:`unverified_note`).
    """
    from cladebench.store.schema import embedding_metadata

    uri = uri or dataset.uri
    checked: dict[str, dict[str, object]] = {}
    for field in dataset.schema:
        alias = PUBLISHED_EMBEDDING_COLUMNS.get(field.name)
        if alias is None:
            continue
        spec = resolve_model(alias)
        field_record = embedding_metadata(field)
        entry = (sidecar or {}).get(field.name)
        records = {"its Arrow field metadata": field_record, sidecar_name: entry}
        for where, record in records.items():
            named = _recorded(record, _MODEL_KEYS)
            if named is not None and not _names_model(named, alias, spec):
                raise SchemaError(f"{uri}: column {field.name!r} is recorded in {where} as embeddings of {named!r}, "
                                  f"which is no spelling of {alias} (id {spec.id}), the model the benchmark "
                                  "publishes there; refusing to read it")
        revisions = {where: rev for where, record in records.items()
                     if (rev := _recorded(record, _REVISION_KEYS)) is not None}
        found = list(revisions.items())
        if len(found) == 2 and not _same_revision(found[0][1], found[1][1]):
            raise SchemaError(f"{uri}: column {field.name!r}: {found[0][0]} records revision {found[0][1]} of "
                              f"{alias} but {found[1][0]} records {found[1][1]}; the release is inconsistent")
        if found and spec.revision and not _same_revision(found[0][1], spec.revision):
            raise SchemaError(f"{uri}: column {field.name!r} holds {alias} embeddings of revision {found[0][1]} "
                              f"(as {found[0][0]} records), but cladebench pins {alias} at {spec.revision}; "
                              "refusing vectors of other weights")
        if sidecar is None:
            why = sidecar_absent or f"no {sidecar_name} was read"
        elif entry is None:
            why = f"{sidecar_name} has no entry for it " + (f"(its entries: {', '.join(sorted(sidecar)[:5])})"
                                                            if sidecar else "(it is empty)")
        elif sidecar_name not in revisions:
            why = f"{sidecar_name} records no revision for it"
        else:
            why = None
        checked[field.name] = {"model": spec.id, "alias": alias, "revision": found[0][1] if found else None,
                               "pinned_revision": spec.revision, "recorded_in": sorted(revisions),
                               "pinned": bool(found), "verified": why is None, "unverified_reason": why}
    return checked


def unverified_note(checked: Mapping[str, Mapping[str, object]]) -> str | None:
    """One line on the published columns :func:`check_published_embeddings` could not verify, or None."""
    parts = [f"{column} ({entry.get('unverified_reason')})" for column, entry in checked.items()
             if not entry.get("verified", True)]
    if not parts:
        return None
    return (f"published embedding column(s) not verified against the pinned model revisions: {'; '.join(parts)}; "
            "they are read as the models their names stand for, and the run record marks them unverified")

# --- the state beside a dataset -----------------------------------------------------------------------


def state_dir(uri: str) -> Path:
    """Where cladebench keeps a dataset's failures tables, staging and locks: ``<dataset>/_cladebench`` for a
    local dataset; for a remote one (``s3://``), a folder named after the URI in this machine's cache."""
    from cladebench.store.dataset import is_remote

    if is_remote(uri):
        from cladebench.cache import cache_dir

        return cache_dir() / "staging" / hashlib.sha256(uri.encode()).hexdigest()[:16]
    return Path(uri.removeprefix("file://")) / STATE_DIR


def failures_path(uri: str, column: str, *, name: str | None = None) -> Path:
    """The failures table of an embedding column (``name``: the file's name without ``.parquet`` when it is not
    the column's)."""
    return state_dir(uri) / "failures" / f"{name or column}.parquet"


def failures(uri: str, column: str) -> pa.Table:
    """The failures table of an embedding column: uuid, reason, column, model (empty when none failed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = failures_path(uri, column)
    if not path.exists():
        return pa.table({"uuid": pa.array([], pa.string()), "reason": pa.array([], pa.string())})
    with reading(path):
        return pq.read_table(path)


# --- reading vectors ------------------------------------------------------------------------------------


def _is_float_vector(t: pa.DataType) -> bool:
    import pyarrow as pa

    lists = pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t)
    return lists and pa.types.is_floating(t.value_type)


def valid_embeddings(dataset: lance.LanceDataset, column: str, *, where: str | None = None,
                     columns: Sequence[str] = ("uuid",), dim: int | None = None) -> tuple[pa.Table, np.ndarray]:
    """Rows with an embedding in ``column`` and the raw vectors as an (n, dim) float32 array.

    A column that is not a list of floats, whose vectors are not all one width, whose width differs from the
    ``dim`` its field metadata declares, or from ``dim`` when given (e.g. a text tower's width), is a
    :class:`SchemaError` naming it: scores over such vectors would be wrong or fail halfway. So is a column whose
    vectors are not those the dataset's sidecar recorded (:func:`~cladebench.store.sidecar.check_vectors`).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from cladebench.store.dataset import read

    if column not in dataset.schema.names:
        raise SchemaError(f"{dataset.uri} has no column {column!r}")
    found = dataset.schema.field(column)
    if not _is_float_vector(found.type):
        raise SchemaError(f"{dataset.uri}: column {column!r} has type {found.type}; an embedding column holds a "
                          "list of floats per row")
    from cladebench.store.sidecar import check_vectors

    check_vectors(dataset, column)
    declared = (found.metadata or {}).get(b"dim")
    expected = {"its field metadata": int(declared)} if declared is not None and declared.strip().isdigit() else {}
    if dim is not None:
        expected["the model"] = dim
    name = sql_identifier(column)
    table = read(dataset, columns=[*columns, column],
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



def normalise_rows(vectors: np.ndarray, *, dtype: DTypeLike | None = "float32", floor: float = 1e-12) -> np.ndarray:
    """Each row L2-normalised (embeddings are raw in storage, normalised in use), computed in ``dtype``.

    ``dtype=None`` keeps the input's own dtype. A row's norm is raised to at least ``floor`` before the
    division, so an all-zero row comes back all zero; ``floor=0`` leaves it as the division makes it (NaN),
    for callers that refuse such rows before, or want them to show. The last axis is the vector's.

    Example:
        >>> import numpy as np
        >>> normalise_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    import numpy as np

    vectors = np.asarray(vectors, dtype=dtype)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, floor)
