"""Checks every write makes before a byte is written: types conformed to the canonical schema, uuids and
coordinates checked, so a bad table is refused with the column and row named instead of half-written.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import SchemaError
from cladebench.store.schema import (
    CANONICAL_BY_NAME,
    CANONICAL_COLUMNS,
    EMBEDDING_PREFIX,
    LOSSLESS_CASTS,
    REQUIRED_COLUMNS,
    SCHEMA_METADATA_KEY,
    SCHEMA_VERSION,
    describe_type,
    is_string_type,
)
from cladebench.store.species import binomials_for_epithets


def _conform_column(name: str, array: pa.ChunkedArray, expected: pa.DataType) -> pa.ChunkedArray:
    found = array.type
    if found == expected:
        return array
    if pa.types.is_null(found) or found in LOSSLESS_CASTS.get(expected, ()):
        return array.cast(expected)
    raise SchemaError(f"column {name!r}: expected type {describe_type(expected)}, found {describe_type(found)}")


def _check_embedding(field: pa.Field, expected: pa.Field | None) -> pa.Field:
    t = field.type
    if not (pa.types.is_fixed_size_list(t) and t.value_type == pa.float32()):
        raise SchemaError(
            f"column {field.name!r}: expected type fixed_size_list<float32>[D] for an embedding column, "
            f"found {describe_type(t)}"
        )
    if expected is not None and expected.type != t:
        raise SchemaError(
            f"column {field.name!r}: expected type {describe_type(expected.type)} (the dataset's dimension "
            f"{expected.type.list_size}), found {describe_type(t)} (dimension {t.list_size})"
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


def check_uuid_type(schema: pa.Schema, name: str) -> None:
    """Refuse a schema without a text ``uuid`` column (:func:`is_string_type`); ``name`` names the dataset."""
    if "uuid" not in schema.names:
        raise SchemaError(f"{name} has no 'uuid' column ({CANONICAL_BY_NAME['uuid'].doc})")
    found = schema.field("uuid").type
    if not is_string_type(found):
        raise SchemaError(f"{name}: column 'uuid': expected type string, found {describe_type(found)} "
                          "(uuids are text; write the dataset again with cladebench)")


UUID_BREAKS = "[\x00-\x1f\x7f\x85\u2028\u2029]"
"""What no uuid may hold (a regular expression for both Python and Arrow): control characters (newline, carriage
return, NUL, tab, ...) and Unicode's line breaks (U+0085, U+2028, U+2029). The fingerprint writes one uuid per
line, and CSV exports, terminals and ``splitlines`` break a line at each of them."""


def uuid_problem(uuid: object) -> str | None:
    """Why ``uuid`` cannot be a row's uuid (not text, empty, holding a :data:`UUID_BREAKS` character), or None.

    Example:
        >>> uuid_problem("a1"), uuid_problem(""), uuid_problem("a\\u2028b")
        (None, 'is empty', 'contains the line-break or control character U+2028')
    """
    if not isinstance(uuid, str):
        return "is not text"
    if not uuid:
        return "is empty"
    found = re.search(UUID_BREAKS, uuid)
    if found is None:
        return None
    character = found.group()
    return "contains a newline" if character == "\n" else \
        f"contains the line-break or control character U+{ord(character):04X}"


def check_uuid_values(uuid: pa.ChunkedArray | pa.Array, row_offset: int, source: str, *, null_hint: str = "",
                      show_value: bool = False) -> None:
    """Refuse a null or empty uuid, or one holding a :data:`UUID_BREAKS` character, naming the first such row
    (``row_offset`` + its index).

    Rows are joined by uuid and the fingerprint is the uuids one per line, so every writer and reader of uuids
    checks them here. ``source`` prefixes the message (``"<uri>: "``); ``null_hint`` is appended to the null
    uuid's message; ``show_value`` puts the offending uuid in the message.
    """
    bad = _first_bad_row(pc.is_null(uuid))
    if bad is not None:
        raise SchemaError(f"{source}row {row_offset + bad}, column 'uuid': null uuid{null_hint}")
    bad = _first_bad_row(pc.or_(pc.equal(pc.utf8_length(uuid), 0), pc.match_substring_regex(uuid, UUID_BREAKS)))
    if bad is not None:
        value = uuid[bad].as_py()
        shown = f" {value!r}" if show_value else ""
        raise SchemaError(f"{source}row {row_offset + bad}, column 'uuid': uuid{shown} {uuid_problem(value)}")


def check_values(table: pa.Table, row_offset: int, source: str) -> None:
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
    the existing order. An epithet in ``species`` beside a genus is written as the binomial (schema version 2;
    see :func:`~cladebench.store.species.binomials_for_epithets`).
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
            f"{source}column 'uuid': expected type string, found {describe_type(table.schema.field('uuid').type)}"
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
    out = binomials_for_epithets(pa.Table.from_arrays([columns[n] for n in order], schema=schema))
    check_values(out, row_offset, source)
    return out


def duplicate_uuids(uuids: pa.ChunkedArray | pa.Array) -> list[str]:
    counts = pc.value_counts(uuids)
    dup = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    return dup.to_pylist()[:5]
