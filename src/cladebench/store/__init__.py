"""The Lance store: the canonical schema, validated writes, indices, versions, and the fingerprint.

Every benchmark lives in one Lance dataset whose columns follow :data:`CANONICAL_COLUMNS`. Writes are
checked before a byte is written (so a bad table never produces a half-written dataset), and Lance's
own commit protocol keeps the previous version readable if a write dies midway. The fingerprint
identifies exactly which examples, in which order, a number was computed on.

This ``__init__`` presents the store's public API on purpose: the rest of the code writes
``from cladebench import store`` and ``store.open_dataset(...)``, whichever module a name lives in. Each job has
its own module, and the modules import one another directly, never through this one:

- :mod:`~cladebench.store.schema`: the canonical columns, embedding field types and metadata;
- :mod:`~cladebench.store.checks`: conforming a table to the schema, uuid and coordinate checks;
- :mod:`~cladebench.store.sql`: identifiers, literals and the ``--where`` check for Lance filters;
- :mod:`~cladebench.store.dataset`: opening (local, ``hf://``, ``s3://``), writing, appending, reading;
- :mod:`~cladebench.store.versions`: the fingerprint, versions and tags;
- :mod:`~cladebench.store.indices`: vector and scalar indices;
- :mod:`~cladebench.store.subset`: local copies of part of a dataset;
- :mod:`~cladebench.store.files`: the writability probe, live-process checks.

:mod:`~cladebench.store.embeddings` (reading embedding columns, failures tables, published columns, the row
normaliser), :mod:`~cladebench.store.sidecar` (a dataset's ``embedding_models.json`` and its columns' checksums),
:mod:`~cladebench.store.search` and :mod:`~cladebench.store.info` are imported by name.

A name is imported from its module when it is first used (``store.open_dataset``), not when the package is:
importing any module of the store imports this ``__init__`` first, and the command line's help and the task
configs (which read a constant of :mod:`~cladebench.store.embeddings`) must not pay for pyarrow and Lance.

Example:
    >>> import pyarrow as pa, tempfile, os
    >>> from cladebench.store import fingerprint, fingerprint_uuids, write_dataset
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.lance")
    >>> table = pa.table({"uuid": ["a", "b"], "image": pa.array([b"x", b"y"], pa.large_binary())})
    >>> ds = write_dataset(table, path)
    >>> ds.count_rows(), fingerprint(ds) == fingerprint_uuids(["a", "b"])
    (2, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cladebench.lazy import present_lazily

if TYPE_CHECKING:  # what present_lazily presents, as the type checker sees it (nothing imported at run time)
    from cladebench.store.checks import check_uuid_type, check_uuid_values, conform  # noqa: F401
    from cladebench.store.dataset import (  # noqa: F401
        WriteMode,
        append,
        column_field,
        is_remote,
        lance_storage_options,
        open_dataset,
        read,
        write_dataset,
    )
    from cladebench.store.files import check_writable  # noqa: F401
    from cladebench.store.indices import (  # noqa: F401
        ScalarIndexKind,
        VectorMetric,
        create_scalar_index,
        create_vector_index,
        indices,
    )
    from cladebench.store.schema import (  # noqa: F401
        CANONICAL_BY_NAME,
        CANONICAL_COLUMNS,
        CANONICAL_SCHEMA,
        EMBEDDING_PREFIX,
        EMBEDDING_SIDECAR,
        GROUP_SUFFIX,
        REQUIRED_COLUMNS,
        SCHEMA_METADATA_KEY,
        SCHEMA_VERSION,
        ColumnSpec,
        canonical_fields,
        embedding_columns,
        embedding_field,
        embedding_metadata,
        embedding_type,
        group_columns,
        is_string_type,
    )
    from cladebench.store.sql import check_filter, sql_identifier, sql_literal  # noqa: F401
    from cladebench.store.subset import subset  # noqa: F401
    from cladebench.store.versions import (  # noqa: F401
        fingerprint,
        fingerprint_uuids,
        tag,
        tags,
        version_or_tag,
        versions,
    )

__all__ = present_lazily(__name__, {
    "checks": ("check_uuid_type", "check_uuid_values", "conform"),
    "dataset": ("WriteMode", "append", "column_field", "is_remote", "lance_storage_options", "open_dataset", "read",
                "write_dataset"),
    "files": ("check_writable",),
    "indices": ("ScalarIndexKind", "VectorMetric", "create_scalar_index", "create_vector_index", "indices"),
    "schema": ("CANONICAL_BY_NAME", "CANONICAL_COLUMNS", "CANONICAL_SCHEMA", "EMBEDDING_PREFIX", "EMBEDDING_SIDECAR",
               "GROUP_SUFFIX", "REQUIRED_COLUMNS", "SCHEMA_METADATA_KEY", "SCHEMA_VERSION", "ColumnSpec",
               "canonical_fields", "embedding_columns", "embedding_field", "embedding_metadata", "embedding_type",
               "group_columns", "is_string_type"),
    "sql": ("check_filter", "sql_identifier", "sql_literal"),
    "subset": ("subset",),
    "versions": ("fingerprint", "fingerprint_uuids", "tag", "tags", "version_or_tag", "versions"),
})
