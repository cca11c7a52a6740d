"""Appending a cohort to a built Fine-Grained Challenges dataset: new rows, never a rewritten one.

What an append does to ``--append-to`` (a ``build finegrained`` output), in this order, all of it under an
exclusive lock on the folder (:func:`append_lock`: a second append to the same folder at the same time is
refused, exit 1, before it reads anything of the dataset):

0. **An interrupted append is undone first** (:func:`roll_back`): see *Interrupted appends* below.
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
   :func:`cladebench.store.append` (checked as every write is: schema, uuids).
4. **Bookkeeping**: the scalar and vector indices are brought up to date over the new fragments (Lance's
   ``optimize_indices``, a new version; until then queries scan the new rows unindexed, so results are right at
   every version); each ``emb_*`` field's metadata and ``embedding_models.json`` (beside the data and in the
   folder) count the new valid and failed rows; new rows whose image failed to encode join the column's failures
   table; the folder's ``build.json`` lists the append and its card gains the cohort's section.
5. **Done**: the appended version is tagged ``cameratrap-<cohort>`` and the journal removed. Only now is the append
   complete: the journal's absence is what says so (a kill after step 4 leaves the ``build.json`` entry and the
   card's section, which the next append's rollback removes with the rest; the tag is never there before).

**Interrupted appends.** Steps 3 to 5 write in several places (Lance versions, sidecars, ``build.json``, the
card) that no one transaction covers, so before step 3 the append writes a journal
(:data:`JOURNAL_DIR` in the folder, through :func:`cladebench.curate.staging.journaled_change`; pending exactly
while its ``journal.json`` is there): the dataset's version before, and a copy of every bookkeeping file it may
change (or that it was absent). An exception or Ctrl-C in steps 3 to 5 rolls back at
once; after a kill -9 (or a crash in the rollback) the journal stays, and the next append to the folder rolls
back first: the dataset's version before is restored as a new version (``restore``: the rows, schema, indices
and field metadata that were there, nothing rewritten; the abandoned versions stay readable by number), the tag
is deleted if it was made, the bookkeeping files are put back as they were. Then the append runs as if for the
first time. Should the dataset have more versions after the journal's than an append makes
(:data:`MAX_APPEND_VERSIONS`: someone wrote to it since), nothing is restored and the append is refused with how
to restore by hand. Between a kill and the next append, the dataset's latest version may hold the interrupted
append's rows: its journal, no tag and no ``build.json`` entry say it is not done.

A failure in 1 or 2 leaves the dataset exactly as it was. Earlier versions stay readable by number whatever
happens later (Lance keeps them).

Why a module: this is the one place that writes into a dataset another command built.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa

from cladebench import store
from cladebench.benchmarks.finegrained.builder.config import DATASET_DIR
from cladebench.benchmarks.finegrained.cameratrap.config import CameraTrapBuildConfig
from cladebench.curate.staging import (
    discard_journal,
    folder_lock,
    is_output_of,
    journaled_change,
    pending_journal,
    restore_journaled,
)
from cladebench.errors import CladebenchError
from cladebench.paths import atomic_write, atomic_write_parquet
from cladebench.store.dataset import existing_uuids
from cladebench.store.embeddings import failures as column_failures
from cladebench.store.embeddings import failures_path
from cladebench.store.sidecar import write_sidecar
from cladebench.store.species import check_appendable

FGC_WRITER = "build finegrained"
"""The marker a folder must carry to be appended to."""
TAG_PREFIX = "cameratrap-"
"""An appended cohort's version is tagged ``cameratrap-<cohort name>``."""
COUNTED_KEYS = ("valid_rows", "failed_rows")
JOURNAL_DIR = ".cladebench-append-pending"
"""The journal of an append in progress, in the ``--append-to`` folder (see the module docstring)."""
MAX_APPEND_VERSIONS = 4
"""Lance versions an append makes at most: the new columns, the rows, the indices, the embedding counts."""


def append_lock(folder: Path) -> contextlib.AbstractContextManager[None]:
    """An exclusive lock on ``folder`` for a whole append (:func:`cladebench.curate.staging.folder_lock`): another
    append to the folder meanwhile is refused at once (exit 1)."""
    return folder_lock(folder, f"--append-to {folder}: another `cladebench build cameratrap` is appending to it "
                               "now; run this one again when it has finished")


def _bookkeeping_files(folder: Path, dataset_path: Path, columns: list[str]) -> list[Path]:
    """Every file an append changes besides the Lance table."""
    return [folder / "build.json", folder / "README.md", folder / store.EMBEDDING_SIDECAR,
            dataset_path / store.EMBEDDING_SIDECAR, *(failures_path(str(dataset_path), c) for c in columns)]


def roll_back(folder: Path, dataset_path: Path) -> dict[str, Any] | None:
    """Undo an interrupted append whose journal is in ``folder`` (call it holding :func:`append_lock`); returns
    what was undone, or None when there was nothing to undo."""
    record = pending_journal(folder, JOURNAL_DIR)
    if record is None:
        return None
    before = int(record["version_before"])
    dataset = store.open_dataset(dataset_path)
    latest = dataset.version
    if latest > before + MAX_APPEND_VERSIONS:
        journal = folder / JOURNAL_DIR
        raise CladebenchError(f"{dataset_path}: an append of cohort {record['cohort']!r} was interrupted after "
                              f"version {before}, and versions up to {latest} were written since; restore version "
                              f"{before} by hand (lance: dataset.checkout_version({before}).restore()) and remove "
                              f"{journal}, or remove {journal} to keep the dataset as it is")
    if store.tags(dataset).get(record["tag"], -1) > before:
        dataset.tags.delete(record["tag"])
    if latest != before:
        dataset.checkout_version(before).restore()
    restore_journaled(folder, JOURNAL_DIR, record)
    discard_journal(folder, JOURNAL_DIR)
    return {"cohort": record["cohort"], "version_before": before, "version_abandoned": latest,
            "version_restored": store.open_dataset(dataset_path).version}


def journaled(folder: Path, dataset_path: Path, cohort: str, columns: list[str]
              ) -> contextlib.AbstractContextManager[Path]:
    """The block's writes to the dataset and its folder happen whole or are undone
    (:func:`cladebench.curate.staging.journaled_change`, the journal recording the version before and the
    bookkeeping files): on an exception (Ctrl-C included) at once, after a kill by the next append's
    :func:`roll_back`."""
    record = {"cohort": cohort, "tag": TAG_PREFIX + cohort,
              "version_before": store.open_dataset(dataset_path).version}
    return journaled_change(folder, JOURNAL_DIR, record, _bookkeeping_files(folder, dataset_path, columns),
                            undo=lambda: roll_back(folder, dataset_path))


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


def _same_model(old: dict[str, object], new: dict[str, object]) -> str | None:
    for key in ("model", "revision", "preprocessing"):
        if old.get(key) and old.get(key) != new.get(key):
            return f"{key} was {old.get(key)!r}, is now {new.get(key)!r}"
    return None


def embed_new_rows(table: pa.Table, dataset_path: Path, work: Path, config: CameraTrapBuildConfig
                   ) -> tuple[pa.Table, dict[str, dict[str, object]]]:
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
    added: dict[str, dict[str, object]] = {}
    for column in columns:
        entry = entries.get(column) or store.embedding_metadata(dataset.schema.field(column))
        preprocessing = entry.get("preprocessing")
        mode: Literal["openclip", "tol"] = (preprocessing.get("mode", "openclip") if isinstance(preprocessing, dict)
                                            else "openclip")
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


def commit_rows(dataset_path: Path, table: pa.Table, fields: list[pa.Field], cohort: str) -> dict[str, object]:
    """Add the missing columns and append the rows; returns the versions written (the tag is made last, by
    :func:`tag_appended`)."""
    before = store.open_dataset(dataset_path).version
    added_columns = _add_missing_columns(dataset_path, fields)
    appended = store.append(table, dataset_path)
    return {"version_before": before, "version_appended": appended.version, "columns_added": added_columns,
            "tag": TAG_PREFIX + cohort}


def update_bookkeeping(folder: Path, dataset_path: Path, embedded: dict[str, dict[str, Any]]) -> dict[str, object]:
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
    if embedded:  # the appended rows' vectors in each column's checksum
        write_sidecar(str(dataset_path), entries, written=embedded)
        atomic_write(folder / store.EMBEDDING_SIDECAR, (dataset_path / store.EMBEDDING_SIDECAR).read_bytes())
    final = store.open_dataset(dataset_path)
    return {"version_final": final.version, "rows_final": final.count_rows(), "indices": store.indices(final)}


def tag_appended(dataset_path: Path, append: dict[str, Any]) -> None:
    """Tag the appended version: the last write of an append."""
    store.tag(store.open_dataset(dataset_path), append["tag"], append["version_appended"])


def extend_folder(folder: Path, entry: dict[str, object], section: str) -> None:
    """The FGC folder's build.json lists the append; its card gains the cohort's section (both whole or not)."""
    build_json = folder / "build.json"
    summary = json.loads(build_json.read_text(encoding="utf-8")) if build_json.exists() else {}
    summary.setdefault("appended", []).append(entry)
    atomic_write(build_json, json.dumps(summary, indent=1, default=str).encode())
    card = folder / "README.md"
    text = card.read_text(encoding="utf-8") if card.exists() else ""
    atomic_write(card, (text.rstrip("\n") + "\n\n" + section.strip("\n") + "\n").encode())


__all__ = ["FGC_WRITER", "JOURNAL_DIR", "MAX_APPEND_VERSIONS", "TAG_PREFIX", "append_lock", "commit_rows",
           "embed_new_rows", "extend_folder", "journaled", "refuse_present", "roll_back",
           "tag_appended", "target_dataset", "update_bookkeeping"]
