"""Appending a cohort to a built Fine-Grained Challenges dataset: new rows, never a rewritten one.

What an append does to ``--append-to`` (a ``build finegrained`` output), in this order:

1. **Checks, before anything is written**: the folder is a ``build finegrained`` output (its marker says so) with
   a Lance table at ``data/challenges.lance`` that holds binomials; none of the cohort's uuids is in it already
   (a cohort appended twice is refused, naming the version that added it when it was tagged).
2. **Embeddings**: when the table has ``emb_*`` columns, the new rows are encoded by the same models, as
   ``embedding_models.json`` names them (model, preprocessing, precision), in a scratch copy of the new rows
   (:func:`cladebench.embed.embed_dataset`, so decoding, failures and the column's metadata are made as they were
   for the rest). A model whose id, revision or preprocessing now differs from the recorded one is refused: the
   new vectors would not be comparable with the old.
3. **The commit**: the camera-trap columns the table lacks are added as all-null columns (a schema-only Lance
   version: no data file is rewritten), then the rows are appended as one Lance version through
   :func:`cladebench.store.append` (checked as every write is: schema, uuids). That version is tagged
   ``cameratrap-<cohort>``.
4. **Bookkeeping**: the scalar and vector indices are brought up to date over the new fragments (Lance's
   ``optimize_indices``, a new version; until then queries scan the new rows unindexed, so results are right at
   every version); each ``emb_*`` field's metadata and ``embedding_models.json`` (beside the data and in the
   folder) count the new valid and failed rows; new rows whose image failed to encode join the column's failures
   table; the folder's ``build.json`` lists the append and its card gains the cohort's section.

A failure in 1 or 2 leaves the dataset exactly as it was. Earlier versions stay readable by number whatever
happens later (Lance keeps them).

Why a module: this is the one place that writes into a dataset another command built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from cladebench import store
from cladebench.curate.builders.cameratrap.config import CameraTrapBuildConfig
from cladebench.curate.builders.finegrained.config import DATASET_DIR
from cladebench.curate.staging import is_output_of
from cladebench.errors import CladebenchError
from cladebench.paths import atomic_write, atomic_write_parquet
from cladebench.store.dataset import existing_uuids
from cladebench.store.embeddings import failures as column_failures
from cladebench.store.embeddings import failures_path
from cladebench.store.species import check_appendable

FGC_WRITER = "build finegrained"
"""The marker a folder must carry to be appended to."""
TAG_PREFIX = "cameratrap-"
"""An appended cohort's version is tagged ``cameratrap-<cohort name>``."""
COUNTED_KEYS = ("valid_rows", "failed_rows")


def target_dataset(folder: Path) -> Path:
    """The table inside a ``build finegrained`` output, checked (exit 1 for another folder, 3 for no table)."""
    if not is_output_of(folder, FGC_WRITER):
        raise CladebenchError(f"--append-to {folder}: not an output of `cladebench {FGC_WRITER}` (its "
                              ".cladebench-output.json does not name it); the cohort is appended only to such a folder")
    dataset_path = folder / DATASET_DIR
    dataset = store.open_dataset(dataset_path)
    check_appendable(dataset, dataset_path)
    return dataset_path


def refuse_present(dataset_path: Path, uuids: list[str], cohort: str) -> None:
    """Refuse an append whose rows are in the dataset already."""
    dataset = store.open_dataset(dataset_path)
    present = existing_uuids(dataset) & set(uuids)
    if present:
        version = store.tags(dataset).get(TAG_PREFIX + cohort)
        where = f" (version {version}, tagged {TAG_PREFIX + cohort})" if version is not None else ""
        raise CladebenchError(f"{dataset_path} already holds {len(present):,} of the cohort's {len(uuids):,} rows"
                              f"{where}; a cohort is appended once")


def _entries(dataset_path: Path) -> dict[str, dict[str, Any]]:
    sidecar = dataset_path / store.EMBEDDING_SIDECAR
    return json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.exists() else {}


def _same_model(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    for key in ("model", "revision", "preprocessing"):
        if old.get(key) and old.get(key) != new.get(key):
            return f"{key} was {old.get(key)!r}, is now {new.get(key)!r}"
    return None


def embed_new_rows(table: pa.Table, dataset_path: Path, work: Path, config: CameraTrapBuildConfig
                   ) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
    """The rows with every ``emb_*`` column of the dataset filled by its model; per column, the new rows' entry
    (valid and failed counts) and their failures."""
    dataset = store.open_dataset(dataset_path)
    columns = store.embedding_columns(dataset.schema)
    if not columns:
        return table, {}
    from cladebench.embed import EmbedConfig, embed_dataset

    entries = _entries(dataset_path)
    scratch = work / "new-rows.lance"
    store.write_dataset(table, scratch)
    added: dict[str, dict[str, Any]] = {}
    for column in columns:
        entry = entries.get(column) or store.embedding_metadata(dataset.schema.field(column))
        preprocessing = entry.get("preprocessing")
        mode = preprocessing.get("mode", "openclip") if isinstance(preprocessing, dict) else "openclip"
        summary = embed_dataset(EmbedConfig(
            dataset=str(scratch), model=str(entry["model"]), column=column, preprocessing=mode,
            precision=entry.get("precision", "fp32"), device=config.device, batch_size=config.batch_size,
            workers=config.workers, progress=config.progress))
        new_entry = _entries(scratch)[column]
        changed = _same_model(entry, new_entry)
        if changed:
            raise CladebenchError(f"{dataset_path}: {column}'s model differs from the one that made the column "
                                  f"({changed}); the new rows' vectors would not be comparable, so nothing was "
                                  "appended")
        failures = column_failures(str(scratch), column)
        added[column] = {"valid_rows": summary.valid, "failed_rows": summary.failed, "failures": failures}
    return store.read(store.open_dataset(scratch)), added


def _add_missing_columns(dataset_path: Path, fields: list[pa.Field]) -> list[str]:
    dataset = store.open_dataset(dataset_path)
    missing = [f for f in fields if f.name not in dataset.schema.names]
    if missing:
        dataset.add_columns(missing)
    return [f.name for f in missing]


def commit_rows(dataset_path: Path, table: pa.Table, fields: list[pa.Field], cohort: str) -> dict[str, Any]:
    """Add the missing columns, append the rows, tag the version; returns the versions written."""
    before = store.open_dataset(dataset_path).version
    added_columns = _add_missing_columns(dataset_path, fields)
    appended = store.append(table, dataset_path)
    store.tag(appended, TAG_PREFIX + cohort)
    return {"version_before": before, "version_appended": appended.version, "columns_added": added_columns,
            "tag": TAG_PREFIX + cohort}


def update_bookkeeping(folder: Path, dataset_path: Path, embedded: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Indices over the new fragments, the embedding columns' counts (field metadata, sidecars, failures)."""
    dataset = store.open_dataset(dataset_path)
    if store.indices(dataset):
        dataset.optimize.optimize_indices()
    entries = _entries(dataset_path)
    dataset = store.open_dataset(dataset_path)
    updates: dict[str, dict[str, str | None]] = {}
    for column, new in embedded.items():
        metadata = {k.decode(): v.decode() for k, v in (dataset.schema.field(column).metadata or {}).items()}
        updates[column] = {key: str(int(metadata.get(key, 0) or 0) + int(new[key])) for key in COUNTED_KEYS}
        entry = entries.setdefault(column, {"column": column})
        for key in COUNTED_KEYS:
            entry[key] = int(entry.get(key, 0) or 0) + int(new[key])
        failures: pa.Table = new["failures"]
        if failures.num_rows:
            path = failures_path(str(dataset_path), column)
            if path.exists():
                import pyarrow.parquet as pq

                failures = pa.concat_tables([pq.read_table(path), failures.select(pq.read_table(path).column_names)])
            atomic_write_parquet(path, failures)
    if updates:  # one version for every column's counts
        dataset.update_field_metadata(updates)
    if embedded:
        text = json.dumps(entries, indent=2, sort_keys=True) + "\n"
        atomic_write(dataset_path / store.EMBEDDING_SIDECAR, text.encode())
        atomic_write(folder / store.EMBEDDING_SIDECAR, text.encode())
    final = store.open_dataset(dataset_path)
    return {"version_final": final.version, "rows_final": final.count_rows(), "indices": store.indices(final)}


def extend_folder(folder: Path, entry: dict[str, Any], section: str) -> None:
    """The FGC folder's build.json lists the append; its card gains the cohort's section (both whole or not)."""
    build_json = folder / "build.json"
    summary = json.loads(build_json.read_text(encoding="utf-8")) if build_json.exists() else {}
    summary.setdefault("appended", []).append(entry)
    atomic_write(build_json, json.dumps(summary, indent=1, default=str).encode())
    card = folder / "README.md"
    text = card.read_text(encoding="utf-8") if card.exists() else ""
    atomic_write(card, (text.rstrip("\n") + "\n\n" + section.strip("\n") + "\n").encode())


__all__ = ["FGC_WRITER", "TAG_PREFIX", "commit_rows", "embed_new_rows", "extend_folder", "refuse_present",
           "target_dataset", "update_bookkeeping"]
