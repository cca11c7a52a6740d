"""The Lance store: the canonical schema, validated writes, indices, versions, and the fingerprint.

Every benchmark lives in one Lance dataset whose columns follow :data:`CANONICAL_COLUMNS`. Writes are
checked before a byte is written (so a bad table never produces a half-written dataset), and Lance's
own commit protocol keeps the previous version readable if a write dies midway. The fingerprint
identifies exactly which examples, in which order, a number was computed on.

Example:
    >>> import pyarrow as pa, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.lance")
    >>> table = pa.table({"uuid": ["a", "b"], "image": pa.array([b"x", b"y"], pa.large_binary())})
    >>> ds = write_dataset(table, path)
    >>> ds.count_rows(), fingerprint(ds) == fingerprint_uuids(["a", "b"])
    (2, True)
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import uuid as uuidlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import (
    CladebenchError,
    DatasetNotFoundError,
    RemoteUnavailableError,
    SchemaError,
    UsageError,
    environment_error,
)
from cladebench.taxonomy import RANK_COLUMNS

if TYPE_CHECKING:
    import lance

SCHEMA_VERSION = "1"
SCHEMA_METADATA_KEY = b"cladebench.schema_version"
EMBEDDING_PREFIX = "emb_"
GROUP_SUFFIX = "_group"
EMBEDDING_SIDECAR = "embedding_models.json"


@dataclass(frozen=True)
class ColumnSpec:
    """One column of the canonical schema."""

    name: str
    """Column name."""
    type: pa.DataType
    """Arrow type the column is stored as."""
    required: bool
    """Whether a table must bring this column; optional columns are added as nulls when absent."""
    doc: str
    """What the column holds; the README's schema table is written from these."""


CANONICAL_COLUMNS: tuple[ColumnSpec, ...] = (
    ColumnSpec("uuid", pa.string(), True, "Unique id of the example (row); non-null, unique, no newline."),
    ColumnSpec("image", pa.large_binary(), True, "Encoded image bytes, exactly as fetched or rendered."),
    ColumnSpec("image_format", pa.string(), False, "Format of `image`: `jpeg`, `webp`, `png`, ..."),
    *(
        ColumnSpec(c, pa.string(), False,
                   "Specific epithet, lower case (the binomial is `scientific_name`)." if c == "species"
                   else f"Name at rank {c}; null when unknown.")
        for c in RANK_COLUMNS
    ),
    ColumnSpec("scientific_name", pa.string(), False, "\"Genus species\", or the deepest known name."),
    ColumnSpec("common_name", pa.string(), False, "Vernacular name, when known."),
    ColumnSpec("taxon_id", pa.int64(), False, "Taxon id in the source taxonomy (iNaturalist for iNat data)."),
    ColumnSpec("latitude", pa.float64(), False, "Decimal degrees, WGS84, in [-90, 90]."),
    ColumnSpec("longitude", pa.float64(), False, "Decimal degrees, WGS84, in [-180, 180]."),
    ColumnSpec("observed_on", pa.date32(), False, "Date the organism was observed."),
    ColumnSpec("source_dataset", pa.string(), False, "Where the row came from (`inaturalist`, `eol`, ...)."),
    ColumnSpec("source_id", pa.string(), False, "Id in the source (observation or photo id); split grouping key."),
    ColumnSpec("source_url", pa.string(), False, "URL of the source record or image."),
    ColumnSpec("license_name", pa.string(), False, "License of the image (`cc-by-nc`, `cc0`, ...)."),
    ColumnSpec("license_link", pa.string(), False, "URL of the license text."),
    ColumnSpec("attribution", pa.string(), False, "Attribution string the license requires."),
    ColumnSpec("seen_in_training", pa.list_(pa.string()), False,
               "Ids of models whose training data contained this image."),
)
CANONICAL_BY_NAME: dict[str, ColumnSpec] = {c.name: c for c in CANONICAL_COLUMNS}
REQUIRED_COLUMNS: tuple[str, ...] = tuple(c.name for c in CANONICAL_COLUMNS if c.required)
CANONICAL_SCHEMA = pa.schema(
    [pa.field(c.name, c.type, nullable=not c.required) for c in CANONICAL_COLUMNS],
    metadata={SCHEMA_METADATA_KEY: SCHEMA_VERSION.encode()},
)

# Casts that cannot lose information; anything else is a schema error rather than a silent change.
_LOSSLESS: dict[pa.DataType, tuple[pa.DataType, ...]] = {
    pa.string(): (pa.large_string(), pa.string_view()),
    pa.large_binary(): (pa.binary(), pa.binary_view()),
    pa.int64(): (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32()),
    pa.float64(): (pa.float16(), pa.float32(), pa.int8(), pa.int16(), pa.int32()),
    # Timestamps are not here: casting one to a date drops the time of day (and, for zoned ones, shifts the day).
    pa.date32(): (pa.date64(),),
    pa.list_(pa.string()): (pa.list_(pa.large_string()), pa.large_list(pa.string())),
}


# --- embedding columns ---------------------------------------------------------------------------


def embedding_type(dim: int) -> pa.DataType:
    """Arrow type of an ``emb_*`` column: ``FixedSizeList<float32>[dim]``."""
    return pa.list_(pa.float32(), dim)


def embedding_field(key: str, dim: int, metadata: Mapping[str, Any]) -> pa.Field:
    """An ``emb_<key>`` field whose metadata names the model (``model`` is required).

    Values are stored as JSON strings when they are not strings already, so lists and numbers
    (norm statistics, versions) survive the round trip through Arrow's bytes-only metadata.
    """
    name = key if key.startswith(EMBEDDING_PREFIX) else EMBEDDING_PREFIX + key
    meta = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}
    meta["dim"] = str(dim)
    if not meta.get("model"):
        raise SchemaError(f"embedding column {name!r}: field metadata must name the 'model'")
    return pa.field(name, embedding_type(dim), metadata=meta)


def embedding_metadata(field: pa.Field) -> dict[str, Any]:
    """Decode an ``emb_*`` field's metadata; JSON values come back as Python objects."""
    out: dict[str, Any] = {}
    for key, value in (field.metadata or {}).items():
        text = value.decode()
        try:
            # Numbers, booleans, lists and objects were JSON-encoded by embedding_field.
            decoded = json.loads(text)
        except json.JSONDecodeError:
            decoded = text
        out[key.decode()] = decoded if isinstance(decoded, (int, float, bool, list, dict)) else text
    return out


def embedding_columns(schema: pa.Schema) -> list[str]:
    """Names of the embedding columns in a schema."""
    return [f.name for f in schema if f.name.startswith(EMBEDDING_PREFIX)]


def group_columns(schema: pa.Schema) -> list[str]:
    """Names of the grouping columns (``*_group``, e.g. ``challenge_group``, ``cryptic_group``)."""
    return [f.name for f in schema if f.name.endswith(GROUP_SUFFIX)]


# --- validation ----------------------------------------------------------------------------------


def _describe_type(t: pa.DataType) -> str:
    return str(t)


def _conform_column(name: str, array: pa.ChunkedArray, expected: pa.DataType) -> pa.ChunkedArray:
    found = array.type
    if found == expected:
        return array
    if pa.types.is_null(found) or found in _LOSSLESS.get(expected, ()):
        return array.cast(expected)
    raise SchemaError(f"column {name!r}: expected type {_describe_type(expected)}, found {_describe_type(found)}")


def _check_embedding(field: pa.Field, expected: pa.Field | None) -> pa.Field:
    t = field.type
    if not (pa.types.is_fixed_size_list(t) and t.value_type == pa.float32()):
        raise SchemaError(
            f"column {field.name!r}: expected type fixed_size_list<float32>[D] for an embedding column, "
            f"found {_describe_type(t)}"
        )
    if expected is not None and expected.type != t:
        raise SchemaError(
            f"column {field.name!r}: expected type {_describe_type(expected.type)} (the dataset's dimension "
            f"{expected.type.list_size}), found {_describe_type(t)} (dimension {t.list_size})"
        )
    meta = dict(field.metadata or {})
    if expected is not None and not meta:
        meta = dict(expected.metadata or {})
    if not meta.get(b"model"):
        raise SchemaError(f"column {field.name!r}: embedding field metadata must name the 'model'")
    expected_model = (expected.metadata or {}).get(b"model") if expected is not None else None
    if expected_model and meta[b"model"] != expected_model:
        # Vectors of two models in one column are not comparable; a new model gets its own emb_<key>.
        raise SchemaError(
            f"column {field.name!r}: the dataset's embeddings are from model {expected_model.decode()!r}, "
            f"the new rows' from {meta[b'model'].decode()!r}"
        )
    declared = meta.get(b"dim")
    if declared is not None and int(declared) != t.list_size:
        raise SchemaError(
            f"column {field.name!r}: field metadata says dim {int(declared)}, values have dimension {t.list_size}"
        )
    meta[b"dim"] = str(t.list_size).encode()
    return field.with_metadata(meta)


def _first_bad_row(mask: pa.ChunkedArray | pa.Array) -> int | None:
    indices = pc.indices_nonzero(pc.fill_null(mask, False))
    return None if len(indices) == 0 else indices[0].as_py()


def is_string_type(t: pa.DataType) -> bool:
    """Whether ``t`` holds text (``string``, ``large_string`` or ``string_view``): what a uuid column must be."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def check_uuid_type(schema: pa.Schema, name: str) -> None:
    """Refuse a schema without a text ``uuid`` column (:func:`is_string_type`); ``name`` names the dataset."""
    if "uuid" not in schema.names:
        raise SchemaError(f"{name} has no 'uuid' column ({CANONICAL_BY_NAME['uuid'].doc})")
    found = schema.field("uuid").type
    if not is_string_type(found):
        raise SchemaError(f"{name}: column 'uuid': expected type string, found {_describe_type(found)} "
                          "(uuids are text; write the dataset again with cladebench)")


def check_uuid_values(uuid: pa.ChunkedArray | pa.Array, row_offset: int, source: str, *, null_hint: str = "",
                      show_value: bool = False) -> None:
    """Refuse a null uuid or one with a newline, naming the first such row (``row_offset`` + its index).

    Rows are joined by uuid and the fingerprint is the uuids one per line, so every writer and reader of uuids
    checks them here. ``source`` prefixes the message (``"<uri>: "``); ``null_hint`` is appended to the null
    uuid's message; ``show_value`` puts the offending uuid in the newline's message.
    """
    bad = _first_bad_row(pc.is_null(uuid))
    if bad is not None:
        raise SchemaError(f"{source}row {row_offset + bad}, column 'uuid': null uuid{null_hint}")
    bad = _first_bad_row(pc.match_substring(uuid, "\n"))
    if bad is not None:
        value = f" {uuid[bad].as_py()!r}" if show_value else ""
        raise SchemaError(f"{source}row {row_offset + bad}, column 'uuid': uuid{value} contains a newline")


def _check_values(table: pa.Table, row_offset: int, source: str) -> None:
    check_uuid_values(table.column("uuid"), row_offset, source)
    for name, low, high in (("latitude", -90.0, 90.0), ("longitude", -180.0, 180.0)):
        if name in table.column_names:
            column = table.column(name)
            # NaN compares false with everything, so it is caught explicitly: a missing coordinate is null.
            outside = pc.or_(pc.or_(pc.less(column, low), pc.greater(column, high)), pc.is_nan(column))
            bad = _first_bad_row(outside)
            if bad is not None:
                raise SchemaError(
                    f"{source}row {row_offset + bad}, column {name!r}: {column[bad].as_py()} is outside "
                    f"[{low}, {high}] (write a missing coordinate as null)"
                )


def conform(table: pa.Table, *, existing: pa.Schema | None = None, add_missing: bool = True,
            row_offset: int = 0, source: str = "") -> pa.Table:
    """Check a table against the canonical schema (and an existing dataset's schema) and return it conformed.

    Lossless casts (``int32`` to ``int64``, ``string`` to ``large_string`` and back, ...) are applied;
    anything else is a :class:`SchemaError` that names the column, the expected and the found type,
    or the row and field of a bad value. Canonical columns the table lacks are added as nulls when
    ``add_missing``; when appending (``existing`` given) the result has exactly the existing columns in
    the existing order.
    """
    for name in REQUIRED_COLUMNS:
        if name not in table.column_names:
            raise SchemaError(
                f"{source}missing required column {name!r} ({CANONICAL_BY_NAME[name].doc}); "
                f"table has {table.column_names}"
            )
    if table.column_names.count("uuid") != 1 or len(set(table.column_names)) != len(table.column_names):
        raise SchemaError(f"{source}duplicate column names in {table.column_names}")
    if not (pa.types.is_string(table.schema.field("uuid").type) or pa.types.is_large_string(
            table.schema.field("uuid").type)):
        raise SchemaError(
            f"{source}column 'uuid': expected type string, found {_describe_type(table.schema.field('uuid').type)}"
        )
    existing_fields = {f.name: f for f in existing} if existing is not None else {}
    if existing is not None:
        extra = [c for c in table.column_names if c not in existing_fields]
        if extra:
            raise SchemaError(
                f"{source}column(s) {extra} are not in the dataset; add new columns with add_columns, not append"
            )
    columns: dict[str, pa.ChunkedArray] = {}
    fields: dict[str, pa.Field] = {}
    for field in table.schema:
        array = table.column(field.name)
        if field.name.startswith(EMBEDDING_PREFIX):
            checked = _check_embedding(field, existing_fields.get(field.name))
            fields[field.name], columns[field.name] = checked, array
            continue
        expected_field = existing_fields.get(field.name)
        if field.name in CANONICAL_BY_NAME:
            expected = CANONICAL_BY_NAME[field.name].type
        elif expected_field is not None:
            expected = expected_field.type
        else:
            expected = field.type
        columns[field.name] = _conform_column(field.name, array, expected)
        nullable = field.name not in REQUIRED_COLUMNS
        fields[field.name] = pa.field(field.name, expected, nullable=nullable, metadata=field.metadata)
    if existing is not None:
        order = [f.name for f in existing]
        for name in order:
            if name not in columns:
                if not existing_fields[name].nullable or name in REQUIRED_COLUMNS:
                    raise SchemaError(f"{source}missing required column {name!r}")
                columns[name] = pa.chunked_array([pa.nulls(table.num_rows, existing_fields[name].type)])
                fields[name] = existing_fields[name]
    else:
        order = list(table.column_names)
        if add_missing:
            for spec in CANONICAL_COLUMNS:
                if spec.name not in columns:
                    columns[spec.name] = pa.chunked_array([pa.nulls(table.num_rows, spec.type)])
                    fields[spec.name] = pa.field(spec.name, spec.type)
                    order.append(spec.name)
        canonical_order = [c.name for c in CANONICAL_COLUMNS if c.name in columns]
        order = canonical_order + [n for n in order if n not in CANONICAL_BY_NAME]
    metadata = dict(existing.metadata or {}) if existing is not None else dict(table.schema.metadata or {})
    metadata[SCHEMA_METADATA_KEY] = SCHEMA_VERSION.encode()
    schema = pa.schema([fields[n] for n in order], metadata=metadata)
    out = pa.Table.from_arrays([columns[n] for n in order], schema=schema)
    _check_values(out, row_offset, source)
    return out


def _duplicates(uuids: pa.ChunkedArray | pa.Array) -> list[str]:
    counts = pc.value_counts(uuids)
    dup = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    return dup.to_pylist()[:5]


# --- opening -------------------------------------------------------------------------------------

_REMOTE_HOSTS = {"hf": ("huggingface.co", 443)}


def is_remote(uri: str) -> bool:
    """Whether ``uri`` names an object store or hub (``s3://``, ``hf://``, ...) rather than a local path."""
    return "://" in uri and urlparse(uri).scheme not in ("", "file")


_ENDPOINT_OPTIONS = ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url")
"""Storage-option keys that name an S3-compatible endpoint (Lance's object store takes any of them)."""


def _check_remote_reachable(uri: str, timeout_s: float = 3.0,
                            storage_options: Mapping[str, str] | None = None) -> None:
    """Fail within seconds, with a message, when a remote URI cannot be reached (offline machines).

    The endpoint probed is the one Lance will use: from the storage options, else from the environment.
    """
    scheme = urlparse(uri).scheme
    if scheme == "hf" and os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise RemoteUnavailableError(
            f"cannot open {uri}: HF_HUB_OFFLINE is set, so hf:// datasets are not fetched. "
            "Unset it when online, or pass a local copy (see `cladebench subset`)."
        )
    # AWS_ENDPOINT_URL is the AWS SDKs' name, AWS_ENDPOINT object_store's; Lance honours both.
    s3 = scheme in ("s3", "s3a")
    given = {k.lower(): v for k, v in (storage_options or {}).items()}
    endpoint = next((given[k] for k in _ENDPOINT_OPTIONS if given.get(k)), None) if s3 else None
    endpoint = endpoint or ((os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT")) if s3 else None)
    if endpoint:
        parsed = urlparse(endpoint)
        host, port = parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)
    elif s3:
        host, port = "s3.amazonaws.com", 443
    elif scheme in _REMOTE_HOSTS:
        host, port = _REMOTE_HOSTS[scheme]
    else:
        return  # gs://, az://, ...: let Lance decide, with its own timeouts
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RemoteUnavailableError(
            f"cannot open {uri}: {host}:{port} is not reachable from this machine ({exc}). "
            "Is it offline? Work on a local copy instead (`cladebench subset URI --where ... --out DIR` when online)."
        ) from None


def _storage_options(uri: str, storage_options: Mapping[str, str] | None) -> dict[str, str] | None:
    if not is_remote(uri):
        return dict(storage_options) if storage_options else None
    options = {"connect_timeout": "10s", "timeout": "120s"}
    options.update(storage_options or {})
    return options


def open_dataset(uri: str | Path, *, version: int | str | None = None,
                 storage_options: Mapping[str, str] | None = None) -> lance.LanceDataset:
    """Open a Lance dataset at a local path, ``hf://`` or ``s3://`` URI, optionally at a version or tag.

    A path that holds no Lance dataset raises :class:`DatasetNotFoundError`; a remote URI this
    machine cannot reach raises :class:`RemoteUnavailableError` within seconds.
    """
    import lance

    uri = str(uri)
    if is_remote(uri):
        _check_remote_reachable(uri, storage_options=storage_options)
    else:
        path = Path(uri.removeprefix("file://"))
        if not path.exists():
            raise DatasetNotFoundError(f"no dataset at {uri}: the path does not exist")
        if not (path / "_versions").is_dir():
            raise DatasetNotFoundError(f"{uri} is not a Lance dataset (it has no _versions directory)")
    try:
        return lance.dataset(uri, version=version, storage_options=_storage_options(uri, storage_options))
    except (ValueError, OSError) as exc:
        message = str(exc).split(", /")[0]  # Lance appends Rust source locations
        if version is not None and ("not found" in message.lower() or "version" in message.lower()):
            raise DatasetNotFoundError(f"{uri} has no version or tag {version!r}: {message}") from None
        if is_remote(uri):
            raise RemoteUnavailableError(f"cannot open {uri}: {message}") from None
        raise DatasetNotFoundError(f"cannot open {uri} as a Lance dataset: {message}") from None


def _is_lance_dataset(path: Path) -> bool:
    return (path / "_versions").is_dir()


# --- writing -------------------------------------------------------------------------------------

WriteMode = Literal["create", "append", "overwrite"]


def _batches(data: pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch | pa.Table]) -> Iterator[pa.Table]:
    if isinstance(data, pa.Table):
        yield data
        return
    for item in data:
        yield item if isinstance(item, pa.Table) else pa.Table.from_batches([item])


def _existing_uuids(dataset: lance.LanceDataset) -> set[str]:
    uuids: set[str] = set()
    for batch in dataset.to_batches(columns=["uuid"], batch_size=65536):
        uuids.update(batch.column(0).to_pylist())
    return uuids


def write_dataset(
    data: pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch | pa.Table],
    uri: str | Path,
    *,
    mode: WriteMode = "create",
    storage_options: Mapping[str, str] | None = None,
    max_rows_per_file: int = 1 << 20,
) -> lance.LanceDataset:
    """Validate and write rows to a Lance dataset; ``mode`` is ``create``, ``append`` or ``overwrite``.

    Every batch is conformed (:func:`conform`) and uuids are checked for duplicates, within the new
    rows and against the dataset when appending, before the commit. Any error leaves the dataset as
    it was: Lance commits a new version only after all data files are written, and a failed
    ``create`` removes the directory it started.
    """
    import lance

    uri = str(uri)
    local = not is_remote(uri)
    existing_ds = None
    if local:
        _check_local_target(Path(uri.removeprefix("file://")), mode)
    elif mode != "append":  # append checks through open_dataset
        _check_remote_reachable(uri, storage_options=storage_options)
    if mode == "append":
        existing_ds = open_dataset(uri, storage_options=storage_options)
    existing_schema = existing_ds.schema if existing_ds is not None else None
    existing_uuids = _existing_uuids(existing_ds) if existing_ds is not None else set()

    source = f"{uri}: "
    first: list[pa.Table] = []
    iterator = _batches(data)
    # The first batch fixes the schema of the write (and of the dataset, when creating).
    for table in iterator:
        first.append(conform(table, existing=existing_schema, source=source))
        break
    if not first:
        raise SchemaError(f"{source}no rows to write")
    schema = first[0].schema

    written: set[str] = set()

    def checked() -> Iterator[pa.RecordBatch]:
        offset = 0
        for index, table in enumerate(_chain(first, iterator)):
            conformed = table if index == 0 else conform(
                table, existing=existing_schema or schema, add_missing=False, row_offset=offset, source=source
            )
            uuids = conformed.column("uuid")
            dups = _duplicates(uuids)
            if dups:
                raise SchemaError(f"{source}duplicate uuid(s) {dups} in the rows being written")
            batch_uuids = uuids.to_pylist()
            in_dataset = [u for u in batch_uuids if u in existing_uuids]
            if in_dataset:
                raise SchemaError(f"{source}duplicate uuid(s) {in_dataset[:5]}: already in the dataset")
            repeated = [u for u in batch_uuids if u in written]
            if repeated:
                raise SchemaError(f"{source}duplicate uuid(s) {repeated[:5]} in the rows being written")
            written.update(batch_uuids)
            offset += conformed.num_rows
            yield from conformed.to_batches()

    created_dir = local and mode in ("create", "overwrite") and not Path(uri).exists()
    reader = pa.RecordBatchReader.from_batches(schema, checked())
    try:
        return lance.write_dataset(
            reader, uri, schema=schema, mode=mode,
            storage_options=_storage_options(uri, storage_options), max_rows_per_file=max_rows_per_file,
        )
    except BaseException as exc:
        if created_dir and Path(uri).exists() and not _is_lance_dataset(Path(uri)):
            shutil.rmtree(uri, ignore_errors=True)
        error = _write_error(exc, uri, environment=local)
        if error is exc:
            raise
        raise error from None


def _check_local_target(path: Path, mode: WriteMode) -> None:
    """Refuse, before writing anything, a target that is a file or a directory we would clobber."""
    if path.exists() and not path.is_dir():
        raise DatasetNotFoundError(f"{path} is a file, not a Lance dataset (a directory)")
    if mode == "create" and path.exists() and any(path.iterdir()):
        raise CladebenchError(f"{path} already exists; use mode='overwrite' to replace it or mode='append'")
    if mode == "overwrite" and path.exists() and any(path.iterdir()) and not _is_lance_dataset(path):
        raise DatasetNotFoundError(f"{path} is not a Lance dataset (it has no _versions directory); not overwriting it")


def _chain(first: list[pa.Table], rest: Iterator[pa.Table]) -> Iterator[pa.Table]:
    yield from first
    yield from rest


def _unwrap_schema_error(exc: BaseException) -> CladebenchError | None:
    """Lance re-raises errors from the batch iterator wrapped; find ours again."""
    node: BaseException | None = exc
    while node is not None:
        if isinstance(node, CladebenchError):
            return node
        node = node.__cause__ or node.__context__
    text = str(exc)
    for marker in ("SchemaError: ", "CladebenchError: "):
        if marker in text:
            return SchemaError(text.split(marker, 1)[1].split("\n")[0])
    return None


def append(data: pa.Table | Iterable[pa.RecordBatch | pa.Table], uri: str | Path, **kwargs: Any) -> lance.LanceDataset:
    """Append validated rows to an existing dataset (see :func:`write_dataset`)."""
    return write_dataset(data, uri, mode="append", **kwargs)


# --- identity, versions, indices -----------------------------------------------------------------


def fingerprint_uuids(uuids: Iterable[str]) -> str:
    """The fingerprint's definition: SHA-256 over each uuid's UTF-8 bytes followed by one ``\\n`` byte.

    In row order, with no separator other than the newline after every uuid (so the last uuid is
    followed by a newline too). Hex digest, lower case. Uuids cannot contain newlines (the store
    rejects them), so the encoding is unambiguous.
    """
    digest = hashlib.sha256()
    for uuid in uuids:
        digest.update(uuid.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def fingerprint(dataset: lance.LanceDataset, *, where: str | None = None) -> str:
    """SHA-256 of the dataset's uuids in row order (see :func:`fingerprint_uuids`), streamed.

    A dataset whose uuids are not text, or hold a null or a newline (one written by other tools: the
    store's writer refuses them), has no unambiguous fingerprint: a :class:`SchemaError` names the row.
    """
    where = check_filter(where)
    check_uuid_type(dataset.schema, getattr(dataset, "uri", "the dataset"))
    digest = hashlib.sha256()
    scanner = dataset.scanner(columns=["uuid"], filter=where, batch_size=65536, scan_in_order=True)
    offset = 0
    for batch in scanner.to_batches():
        column = batch.column(0)
        check_uuid_values(column, offset, f"{getattr(dataset, 'uri', 'the dataset')}: ")
        uuids = column.to_pylist()
        if uuids:
            digest.update(("\n".join(uuids) + "\n").encode("utf-8"))
        offset += len(uuids)
    return digest.hexdigest()


def versions(dataset: lance.LanceDataset) -> list[dict[str, Any]]:
    """Versions of the dataset, oldest first: ``version`` and ``timestamp``."""
    return [{"version": v["version"], "timestamp": str(v["timestamp"])} for v in dataset.versions()]


def tag(dataset: lance.LanceDataset, name: str, version: int | None = None) -> None:
    """Tag a version (the current one by default) so it can be reopened by name."""
    dataset.tags.create(name, dataset.version if version is None else version)


def tags(dataset: lance.LanceDataset) -> dict[str, int]:
    """Tag name -> version."""
    return {name: info["version"] for name, info in dataset.tags.list().items()}


VectorMetric = Literal["cosine", "l2", "dot"]


def create_vector_index(dataset: lance.LanceDataset, column: str, *, metric: VectorMetric = "cosine",
                        num_partitions: int | None = None) -> lance.LanceDataset:
    """Build an IVF_FLAT index on an ``emb_*`` column (cosine by default: raw vectors, normalised in use).

    ``num_partitions`` defaults to about sqrt(rows), the usual IVF rule of thumb, at least 1.
    """
    field = _field(dataset, column)
    if not pa.types.is_fixed_size_list(field.type):
        raise SchemaError(f"column {column!r}: a vector index needs fixed_size_list<float32>, found {field.type}")
    rows = dataset.count_rows()
    if num_partitions is None:
        num_partitions = max(1, min(4096, int(rows**0.5)))
    return dataset.create_index(column, index_type="IVF_FLAT", metric=metric, num_partitions=num_partitions,
                                replace=True)


ScalarIndexKind = Literal["BTREE", "BITMAP"]


def create_scalar_index(dataset: lance.LanceDataset, column: str, kind: ScalarIndexKind = "BTREE") -> None:
    """Build a scalar index: BTREE for many distinct values (uuid, taxon_id), BITMAP for few (groups, ranks)."""
    _field(dataset, column)
    if kind not in ("BTREE", "BITMAP"):
        raise SchemaError(f"unknown scalar index kind {kind!r}; use BTREE or BITMAP")
    dataset.create_scalar_index(column, index_type=kind, replace=True)


def _field(dataset: lance.LanceDataset, column: str) -> pa.Field:
    try:
        return dataset.schema.field(column)
    except KeyError:
        raise SchemaError(f"column {column!r} is not in the dataset; it has {dataset.schema.names}") from None


def indices(dataset: lance.LanceDataset) -> list[dict[str, Any]]:
    """The dataset's indices: name, type and columns."""
    out = []
    for index in dataset.describe_indices():
        out.append({
            "name": index.name,
            "type": getattr(index, "index_type", None) or str(getattr(index, "type", "")),
            "columns": list(getattr(index, "field_names", None) or getattr(index, "fields", []) or []),
        })
    return out


# --- filters -------------------------------------------------------------------------------------

_QUOTES = "'\"`"


def sql_identifier(column: str) -> str:
    """``column`` as Lance's SQL filters take it: as it is when it is a plain identifier, else in backticks. A
    name with a backtick cannot be written in a filter at all (columns ``embed`` makes never need quoting)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", column):
        return column
    if "`" in column:
        raise SchemaError(f"column {column!r}: a name with a backtick cannot be used in a filter; rename the column")
    return f"`{column}`"


def check_filter(where: object, *, option: str = "--where") -> str | None:
    """The SQL filter to hand to Lance, or None for none (``None`` or blank); anything else is a :class:`UsageError`.

    A filter is one SQL expression. Lance's parser stops at a ``;`` and silently ignores the rest, so
    ``"1=1; DROP TABLE x"`` would select every row: a ``;`` outside a quoted literal or identifier is
    refused rather than dropped. Every reader of a user's filter (:func:`read`, :func:`subset`,
    :func:`fingerprint`, search) goes through this one check.

    Example:
        >>> check_filter("name = 'a;b'")
        "name = 'a;b'"
        >>> check_filter("1=1; DROP TABLE x")
        Traceback (most recent call last):
        ...
        cladebench.errors.UsageError: --where '1=1; DROP TABLE x': a filter is one SQL expression; ';' ends it ...
    """
    if where is None:
        return None
    if not isinstance(where, str):
        raise UsageError(f"{option} must be a SQL filter string, got {type(where).__name__}")
    if not where.strip():
        return None
    quote: str | None = None
    for char in where:
        if quote is not None:
            if char == quote:  # a doubled quote ('it''s') closes and reopens: the state comes out right
                quote = None
        elif char in _QUOTES:
            quote = char
        elif char == ";":
            raise UsageError(f"{option} {where!r}: a filter is one SQL expression; ';' ends it "
                             "(quote a ';' that belongs to a value: 'a;b')")
    return where


# --- reading -------------------------------------------------------------------------------------


def read(dataset: lance.LanceDataset, *, columns: Sequence[str] | None = None, where: str | None = None,
         limit: int | None = None) -> pa.Table:
    """Read rows with the projection and the filter pushed down to Lance (only those bytes are read)."""
    where = check_filter(where)
    if columns is not None:
        for column in columns:
            _field(dataset, column)
    try:
        return dataset.to_table(columns=list(columns) if columns else None, filter=where, limit=limit)
    except (ValueError, OSError) as exc:
        raise CladebenchError(f"cannot read with filter {where!r}: {str(exc).split(', /')[0]}") from None


def _copy_schema(schema: pa.Schema, source: str) -> pa.Schema:
    """The schema a copy is written with: canonical columns checked (lossless casts applied) as the writer does,
    other columns as they are (published embedding columns keep their own list types), the source's order kept."""
    check_uuid_type(schema, source.removesuffix(": ") or "the dataset")
    fields = []
    for field in schema:
        spec = CANONICAL_BY_NAME.get(field.name)
        if spec is None:
            fields.append(field)
            continue
        found = field.type
        if found != spec.type and not (pa.types.is_null(found) or found in _LOSSLESS.get(spec.type, ())):
            raise SchemaError(f"{source}column {field.name!r}: expected type {_describe_type(spec.type)}, "
                              f"found {_describe_type(found)}")
        fields.append(pa.field(field.name, spec.type, nullable=field.nullable, metadata=field.metadata))
    metadata = dict(schema.metadata or {})
    metadata[SCHEMA_METADATA_KEY] = SCHEMA_VERSION.encode()
    return pa.schema(fields, metadata=metadata)


def _checked_copy(reader: pa.RecordBatchReader, schema: pa.Schema, seen: set[str],
                  source: str) -> Iterator[pa.RecordBatch]:
    """Batches cast to ``schema`` and checked as the writer checks new rows: uuids non-null, without newlines and
    unique (within the copy and against ``seen``), coordinates in range."""
    offset = 0
    for batch in reader:
        table = pa.Table.from_batches([batch])
        table = pa.Table.from_arrays([c if c.type == f.type else c.cast(f.type)
                                      for c, f in zip(table.columns, schema, strict=True)], schema=schema)
        _check_values(table, offset, source)
        uuids = table.column("uuid").to_pylist()
        repeated = [u for u in uuids if u in seen]
        if not repeated and len(set(uuids)) != len(uuids):
            repeated = _duplicates(table.column("uuid"))
        if repeated:
            raise SchemaError(f"{source}duplicate uuid(s) {repeated[:5]}: a copy keeps uuids unique, as every write")
        seen.update(uuids)
        offset += table.num_rows
        yield from table.to_batches()


def check_writable(path: str | Path, *, folder: bool = False) -> None:
    """Refuse, before any work, an output ``path`` that cannot be written: a parent that is a file, a folder
    without write permission, a read-only file system; with ``folder``, also a ``path`` that is a file.

    Probes the folder the output will be created in (``path`` itself when it is an existing folder, else its
    nearest existing ancestor) by making and removing a hidden folder there; nothing else is touched.
    """
    target = Path(path)
    if folder and target.exists() and not target.is_dir():
        raise CladebenchError(f"{target} is a file; the output is a folder: choose another path")
    probe_in = target if target.is_dir() else target.parent
    while not probe_in.exists() and probe_in != probe_in.parent:
        probe_in = probe_in.parent
    if not probe_in.is_dir():
        raise CladebenchError(f"cannot write {target}: {probe_in} is a file, not a folder")
    probe = probe_in / f".cladebench-probe-{os.getpid()}-{uuidlib.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError as exc:
        error = environment_error(OSError(exc.errno, exc.strerror), probe_in)  # the folder, not the probe's name
        raise (error or CladebenchError(f"cannot write in {probe_in}: {exc}")) from None
    probe.rmdir()


_STAGING_INFIX = ".subset-"


def _staging_path(out: Path) -> Path:
    return out.parent / f".{out.name}{_STAGING_INFIX}{os.getpid()}"


def _remove_stale_staging(out: Path) -> None:
    """Staging folders this function left beside ``out`` when a run was killed (named with the dead run's pid)."""
    pattern = re.compile(re.escape(f".{out.name}{_STAGING_INFIX}") + r"(\d+)")
    if not out.parent.is_dir():
        return
    for candidate in out.parent.iterdir():
        match = pattern.fullmatch(candidate.name)
        if match is None or not candidate.is_dir() or process_alive(int(match.group(1))):
            continue
        shutil.rmtree(candidate, ignore_errors=True)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` may still run: only a pid proven gone is dead (this process, another user's, a
    pid of 0 or less, and any on Windows, where probing would terminate it, count as alive)."""
    if pid == os.getpid() or pid <= 0 or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _created_parents(path: Path) -> list[Path]:
    """Create ``path``'s missing parent folders; returns those created, deepest first (to remove on failure)."""
    missing = []
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    for folder in reversed(missing):
        folder.mkdir()
    return missing


def subset(uri: str | Path, out: str | Path, *, where: str | None = None, columns: Sequence[str] | None = None,
           mode: WriteMode = "create", storage_options: Mapping[str, str] | None = None) -> lance.LanceDataset:
    """Materialise part of a dataset locally, streaming, with filter and projection pushed down.

    ``uuid`` is always kept so the subset has a fingerprint (a source without one is refused before
    anything is written). Rows are checked as every write checks them (canonical column types, uuids
    non-null, without newlines and unique, coordinates in range), batch by batch. A new subset
    (``mode="create"``) is written into a hidden staging folder beside ``out`` and renamed into place,
    so a failure or an interruption never leaves a half-written ``out``. Embedding field metadata and
    the ``embedding_models.json`` sidecar (when the source is local) come along.
    """
    import lance

    where = check_filter(where)
    if mode not in ("create", "append", "overwrite"):
        raise UsageError(f"mode must be create, append or overwrite, got {mode!r}")
    if is_remote(str(out)):
        raise UsageError(f"a subset is written locally; {out} is a remote URI")
    out_path = Path(str(out).removeprefix("file://"))
    if not is_remote(str(uri)):
        from cladebench.paths import check_not_an_input

        # A subset written inside its source would sit among the source's own files (and one that holds the
        # source could not be renamed into place): refused before anything is read or written.
        check_not_an_input(out_path, [Path(str(uri).removeprefix("file://"))])
    if out_path.exists() and not out_path.is_dir():
        raise CladebenchError(f"{out_path} is a file; a subset is a folder: choose another --out")
    if mode == "create" and out_path.exists() and any(out_path.iterdir()):
        raise CladebenchError(f"{out_path} already exists; choose another --out or remove it")
    if mode == "overwrite" and out_path.exists() and any(out_path.iterdir()) and not _is_lance_dataset(out_path):
        raise CladebenchError(f"{out_path} is not a Lance dataset; not overwriting it")
    dataset = open_dataset(uri, storage_options=storage_options)
    source = f"{uri}: "
    check_uuid_type(dataset.schema, str(uri))
    if columns:
        columns = ["uuid", *[c for c in columns if c != "uuid"]]
        for column in columns:
            _field(dataset, column)
    try:
        scanner = dataset.scanner(columns=list(columns) if columns else None, filter=where, batch_size=1024,
                                  scan_in_order=True)
        reader = scanner.to_reader()
    except (ValueError, OSError) as exc:
        raise CladebenchError(f"cannot filter {uri} with {where!r}: {str(exc).split(', /')[0]}") from None
    schema = _copy_schema(reader.schema, source)
    seen = _existing_uuids(open_dataset(out_path)) if mode == "append" else set()
    check_writable(out_path)
    sidecar = None if is_remote(str(uri)) else Path(str(uri).removeprefix("file://")) / EMBEDDING_SIDECAR
    copy = pa.RecordBatchReader.from_batches(schema, _checked_copy(reader, schema, seen, source))
    if mode != "create":
        # Lance commits a new version only once every file is written: a failure leaves the old version.
        try:
            result = lance.write_dataset(copy, str(out_path), schema=schema, mode=mode)
        except BaseException as exc:
            raise _write_error(exc, out_path) from None
        if sidecar is not None and sidecar.exists():
            atomic_write(out_path / EMBEDDING_SIDECAR, sidecar.read_bytes())
        return result
    _remove_stale_staging(out_path)
    created = _created_parents(out_path)
    staging = _staging_path(out_path)
    try:
        staging.mkdir()
        lance.write_dataset(copy, str(staging), schema=schema, mode="create")
        if sidecar is not None and sidecar.exists():
            shutil.copyfile(sidecar, staging / EMBEDDING_SIDECAR)
        os.rename(staging, out_path)  # over nothing, or over an empty folder
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError) and exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and out_path.exists():
            raise CladebenchError(f"{out_path} was created by someone else meanwhile; nothing written") from None
        raise _write_error(exc, out_path) from None
    return open_dataset(out_path)


def atomic_write(path: Path, data: bytes) -> None:
    """Write a small file as a temporary file renamed into place, so a kill leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _write_error(exc: BaseException, out: str | Path, *, environment: bool = True) -> BaseException:
    """What a failed write raises: our own error unwrapped from Lance's, an environment failure as one line (when
    ``environment``: a local target), else the exception itself (a bug)."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return exc
    return _unwrap_schema_error(exc) or (environment_error(exc, out) if environment else None) or exc
