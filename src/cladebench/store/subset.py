"""``subset``: materialise part of a dataset locally, streaming, checked as every write, renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from cladebench.errors import CladebenchError, SchemaError, UsageError
from cladebench.paths import NOT_OURS, TAKEN, WRONG_KIND, staged_folder, write_refusal
from cladebench.store.checks import check_uuid_type, check_values, duplicate_uuids
from cladebench.store.dataset import (
    WriteMode,
    column_field,
    existing_uuids,
    is_lance_dataset,
    is_remote,
    open_dataset,
    write_error,
)
from cladebench.store.datasets_card import write_datasets_card
from cladebench.store.files import check_writable
from cladebench.store.schema import (
    CANONICAL_BY_NAME,
    LOSSLESS_CASTS,
    SCHEMA_METADATA_KEY,
    SCHEMA_VERSION,
    describe_type,
)
from cladebench.store.sidecar import check_vectors, read_sidecar, write_sidecar
from cladebench.store.species import (
    binomial_reader,
    check_appendable,
    columns_to_read,
    holds_epithets,
    species_filter,
)
from cladebench.store.sql import check_filter

if TYPE_CHECKING:
    import lance


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
        if found != spec.type and not (pa.types.is_null(found) or found in LOSSLESS_CASTS.get(spec.type, ())):
            raise SchemaError(f"{source}column {field.name!r}: expected type {describe_type(spec.type)}, "
                              f"found {describe_type(found)}")
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
        check_values(table, offset, source)
        uuids = table.column("uuid").to_pylist()
        repeated = [u for u in uuids if u in seen]
        if not repeated and len(set(uuids)) != len(uuids):
            repeated = duplicate_uuids(table.column("uuid"))
        if repeated:
            raise SchemaError(f"{source}duplicate uuid(s) {repeated[:5]}: a copy keeps uuids unique, as every write")
        seen.update(uuids)
        offset += table.num_rows
        yield from table.to_batches()


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


def _checked_entries(dataset: lance.LanceDataset, kept: Sequence[str]) -> dict[str, dict[str, object]]:
    """The source's sidecar entries of the embedding columns the subset keeps, each column's vectors checked
    against its recorded checksum first (a copy must not bless a column changed outside cladebench)."""
    entries = {column: entry for column, entry in read_sidecar(dataset.uri).items() if column in kept}
    for column in entries:
        check_vectors(dataset, column)
    return entries


def _write_subset_sidecar(path: Path, entries: Mapping[str, Mapping[str, object]],
                          appended_to: Mapping[str, Mapping[str, object]] | None = None) -> None:
    """The subset's own sidecar: the entries of the columns it holds, with the rows it holds (valid rows and the
    checksum recomputed; the source's failure count and failures table do not describe it, so they are left
    out), or none at all when it keeps no embedding column (:func:`~cladebench.store.sidecar.write_sidecar`)."""
    base = {**(appended_to or {}), **entries}
    described = {column: {k: v for k, v in entry.items() if k not in ("failed_rows", "failures")}
                 for column, entry in base.items()}
    write_sidecar(str(path), described, written=list(described))


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
    refusal = write_refusal(out_path, folder=True, overwrite=mode != "create",
                            ours=is_lance_dataset if mode == "overwrite" else None)
    if refusal == WRONG_KIND:
        raise CladebenchError(f"{out_path} is a file; a subset is a folder: choose another --out")
    if refusal == TAKEN:
        raise CladebenchError(f"{out_path} already exists; choose another --out or remove it")
    if refusal == NOT_OURS:
        raise CladebenchError(f"{out_path} is not a Lance dataset; not overwriting it")
    dataset = open_dataset(uri, storage_options=storage_options)
    source = f"{uri}: "
    check_uuid_type(dataset.schema, str(uri))
    if columns:
        columns = list(dict.fromkeys(["uuid", *columns]))  # a column named twice is kept once
        for column in columns:
            column_field(dataset, column)
    # A dataset written before species held the binomial is copied with binomials (the copy is schema version 2).
    legacy = holds_epithets(dataset)
    projection, added_genus = columns_to_read(columns or None, dataset.schema.names) if legacy else (
        list(columns) if columns else None, False)
    try:
        scanner = dataset.scanner(columns=projection, filter=species_filter(where) if legacy else where,
                                  batch_size=1024, scan_in_order=True)
        reader = binomial_reader(scanner.to_reader(), added_genus) if legacy else scanner.to_reader()
    except (ValueError, OSError) as exc:
        doing = f"filter {uri} with {where!r}" if where is not None else f"read {uri}"
        raise CladebenchError(f"cannot {doing}: {str(exc).split(', /')[0]}") from None
    schema = _copy_schema(reader.schema, source)
    if mode == "append":
        check_appendable(open_dataset(out_path), out_path)
    seen = existing_uuids(open_dataset(out_path)) if mode == "append" else set()
    check_writable(out_path)
    source_entries = _checked_entries(dataset, schema.names)
    existing = read_sidecar(str(out_path)) if mode == "append" else {}
    copy = pa.RecordBatchReader.from_batches(schema, _checked_copy(reader, schema, seen, source))
    if mode != "create":
        # Lance commits a new version only once every file is written: a failure leaves the old version.
        try:
            result = lance.write_dataset(copy, str(out_path), schema=schema, mode=mode)
        except BaseException as exc:
            raise write_error(exc, out_path) from None
        write_datasets_card(out_path, result.schema)
        _write_subset_sidecar(out_path, source_entries, appended_to=existing)
        return result
    created = _created_parents(out_path)
    try:
        with staged_folder(out_path, tag="subset") as staging:  # renamed over nothing, or over an empty folder
            write_datasets_card(staging, lance.write_dataset(copy, str(staging), schema=schema, mode="create").schema)
            _write_subset_sidecar(staging, source_entries)
    except BaseException as exc:
        for folder in created:
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError) and exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and out_path.exists():
            raise CladebenchError(f"{out_path} was created by someone else meanwhile; nothing written") from None
        raise write_error(exc, out_path) from None
    return open_dataset(out_path)
