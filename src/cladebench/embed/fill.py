"""Rows an existing column has no vector for (appended after its run read the dataset): a later ``embed``
without ``--overwrite`` encodes only those, with the column's own settings, and writes them in place.

Why in place, with a Lance ``Update`` of the one column in the fragments that hold the rows: the other columns,
the other rows and the row order (so the fingerprint) stay as they are, and the vectors already there are
never recomputed. Which rows those are is decided once, in :func:`cladebench.embed.core.rows_without_vector`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from cladebench import store
from cladebench.embed.core import NormSums, column_metadata, write_failures, write_sidecar
from cladebench.errors import CladebenchError
from cladebench.store.embeddings import failures

if TYPE_CHECKING:
    import lance

    from cladebench.embed.config import EmbedConfig


def check_fill_settings(dataset: lance.LanceDataset, column: str, key: dict[str, object], rows: int) -> None:
    """Rows added to an existing column must be encoded as the column was: the same model, revision,
    preprocessing and precision (its field metadata records them). Otherwise the column would hold two
    embedding spaces under one model's name."""
    recorded = store.embedding_metadata(dataset.schema.field(column))
    made = {"model": recorded.get("model"), "revision": str(recorded.get("revision") or "") or None,
            "preprocessing": recorded.get("preprocessing"), "precision": recorded.get("precision")}
    wanted = {**key, "revision": str(key.get("revision") or "") or None}
    differ = [name for name in made if made[name] != wanted[name]]
    if differ:
        said = "; ".join(_difference(name, made[name], wanted[name]) for name in differ)
        raise CladebenchError(f"{rows:,} row(s) of {column!r} have no vector, but the column was made with other "
                              f"settings ({said}); rerun with the column's settings to encode only them, or "
                              "pass --overwrite to recompute the whole column")


def _difference(name: str, there: object, here: object) -> str:
    """One setting that differs, said briefly: of a preprocessing (a dict), only the entries that differ."""
    if isinstance(there, dict) and isinstance(here, dict):
        keys = [k for k in sorted({*there, *here}) if there.get(k) != here.get(k)]
        return "; ".join(f"{name} {k} {there.get(k)!r} there, {here.get(k)!r} in this run" for k in keys)
    return f"{name} {there!r} there, {here!r} in this run"


def commit_fill(uri: str, dataset: lance.LanceDataset, column: str, staged: pa.Table, described: dict[str, Any],
                 config: EmbedConfig, storage_options: dict[str, str] | None, wanted: int) -> dict[str, Any]:
    """Write the vectors of the rows an existing column had none for, in place: one Lance ``Update`` of the column
    in the fragments that hold them (the other columns, the other rows and the row order stay as they are), then
    the column's counts, norm statistics, failures and sidecar, which now describe the whole column."""
    import lance

    if staged.num_rows != wanted:
        raise CladebenchError(f"{uri}: {staged.num_rows} rows staged for the {wanted} rows of {column!r} without a "
                              "vector; rerun to finish")
    current = store.open_dataset(uri, storage_options=storage_options)
    field = current.schema.field(column)
    embeddings = staged.column("embedding").combine_chunks()
    if embeddings.type.list_size != field.type.list_size:
        raise CladebenchError(f"model {described.get('model_id', config.model)} produced dimension "
                              f"{embeddings.type.list_size}, but {column!r} holds {field.type.list_size}")
    table = pa.Table.from_arrays([staged.column("uuid"), embeddings.cast(field.type)],
                                 schema=pa.schema([pa.field("uuid", pa.string()), field]))
    filled = set(staged.column("uuid").to_pylist())
    targets = current.to_table(columns=["uuid"], filter=f"{column} IS NULL", with_row_address=True)
    fragment_ids = sorted({address >> 32 for address, row_uuid in zip(  # a row address is fragment id << 32 | offset
        targets.column("_rowaddr").to_pylist(), targets.column("uuid").to_pylist(), strict=True) if row_uuid in filled})
    updated, modified = [], set()
    for fragment_id in fragment_ids:
        found = current.get_fragment(fragment_id)
        if found is None:
            raise CladebenchError(f"{uri}: fragment {fragment_id} is gone (the dataset changed while filling); rerun")
        fragment, fields = found.update_columns(table, left_on="uuid", right_on="uuid")
        updated.append(fragment)
        modified.update(fields)
    lance.LanceDataset.commit(current.uri, lance.LanceOperation.Update(updated_fragments=updated,
                                                                       fields_modified=sorted(modified)),
                              read_version=current.version,
                              storage_options=store.lance_storage_options(uri, storage_options))

    valid_mask = pc.is_valid(embeddings).to_numpy(zero_copy_only=False)
    recorded = store.embedding_metadata(field)
    sums = NormSums.from_stats(recorded.get("norm_stats") or {}, int(recorded.get("valid_rows") or 0))
    sums.add(embeddings.filter(pa.array(valid_mask)).flatten().to_numpy(zero_copy_only=False)
             .reshape(-1, embeddings.type.list_size))
    model = described.get("model_id", config.model)
    new_failures = staged.filter(pa.array(~valid_mask)).select(["uuid", "error"]).rename_columns(["uuid", "reason"])
    all_failures = pa.concat_tables([failures(uri, column).select(["uuid", "reason"]), new_failures])
    failures_path = write_failures(uri, column, all_failures, model)
    metadata = column_metadata(uri, described, config, norm_stats=sums.to_stats(), valid=sums.n,
                               failed=all_failures.num_rows, failures_path=failures_path,
                               source_version=dataset.version)
    described_field = store.embedding_field(column, field.type.list_size, metadata)
    latest = store.open_dataset(uri, storage_options=storage_options)
    latest.update_field_metadata({column: {k.decode(): v.decode() for k, v in described_field.metadata.items()}},
                                 replace=True)
    latest = store.open_dataset(uri, storage_options=storage_options)
    write_sidecar(uri, column, field.type.list_size, metadata)
    return {"rows": latest.count_rows(), "valid": sums.n, "failed": all_failures.num_rows, "version": latest.version,
            "failures_path": str(failures_path) if failures_path else None, "metadata": metadata}
