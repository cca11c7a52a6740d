"""The camera-trap cohort build: select, resolve, retrieve, screen, write (or append), account.

The steps, per the cohort file (:mod:`.config`):

1. For every named collection, its metadata (fetched once when a URL) is read as a stream
   (:mod:`.records`): the categories, then the images annotated with a selected
   label. An excluded collection is read this far only, to count what it would have given.
2. Every selected label is resolved offline against the taxonomy backbone (:mod:`.resolve`).
3. The candidates' images are fetched (or read from the image folder) and stored as lossless WebP of at most
   ``max_side`` px (:mod:`.fetching`).
4. Each retrieved image is screened by the collection's MegaDetector output (:mod:`.screening`).
5. The kept rows (:mod:`.table`) go to ``OUT/data/challenges.lance`` or, with ``--append-to``, into that Fine-Grained
   Challenges dataset as a new version (:mod:`.append`).
6. ``OUT`` gets the card, ``build.json``, ``candidates.parquet`` (every selected image with its collection, id,
   file, labels, location, sequence, reason and detail), ``left_out.parquet`` (the images left out, in the one
   left-out record of :mod:`cladebench.store.left_out`) and ``resolution.json``.

``OUT`` is written through :func:`cladebench.curate.skeleton.run_build` (whole or not at all); the one write
into another folder is the append, made last, once every row is ready.

Why a module: the one place that orders the other modules' work.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cladebench import store
from cladebench.benchmarks.finegrained.builder.config import DATASET_DIR
from cladebench.benchmarks.finegrained.cameratrap import append as appending
from cladebench.benchmarks.finegrained.cameratrap.card import (
    CameraTrapBuildSummary,
    appended_section,
    render_card,
)
from cladebench.benchmarks.finegrained.cameratrap.config import (
    CameraTrapBuildConfig,
    Cohort,
    Collection,
    is_url,
    read_cohort,
)
from cladebench.benchmarks.finegrained.cameratrap.fetching import (
    ImageTask,
    check_image_folders,
    encoded_images,
    failure_reason,
    gather_files,
    image_location,
    local_copy,
    named_as_given,
)
from cladebench.benchmarks.finegrained.cameratrap.megadetector import DetectorRun, read_detections, read_detector_run
from cladebench.benchmarks.finegrained.cameratrap.records import (
    BadRecords,
    CctImage,
    labelled_images,
    read_categories,
    read_images,
)
from cladebench.benchmarks.finegrained.cameratrap.resolve import Resolution, normalise_label, resolve_labels
from cladebench.benchmarks.finegrained.cameratrap.screening import STAGES, accounting, label_outcome, screen
from cladebench.benchmarks.finegrained.cameratrap.table import CAMERA_FIELDS, cohort_row, row_uuid, rows_table
from cladebench.config import config_to_dict
from cladebench.curate.skeleton import Built, Run, run_build
from cladebench.curate.staging import OutputTarget, work_dir
from cladebench.errors import CladebenchError
from cladebench.store.left_out import left_out_table

WRITER = "build cameratrap"
"""The output's marker names this writer; ``--overwrite`` replaces only such a folder."""


@dataclass
class Selected:
    """One selected image and what became of it."""

    collection: Collection
    image_id: str
    labels: tuple[str, ...]
    image: CctImage | None = None
    resolution: Resolution | None = None
    reason: str | None = None
    detail: str | None = None
    encoded: dict[str, object] | None = None
    conf: float | None = None

    @property
    def key(self) -> str:
        return row_uuid(self.collection, self.image_id)

    def drop(self, reason: str, detail: str | None = None) -> None:
        self.reason, self.detail = reason, detail


def _inputs(config: CameraTrapBuildConfig, cohort: Cohort) -> tuple[Path, ...]:
    paths: list[str | Path | None] = [config.cohort, config.taxonomy, config.download_dir, config.append_to]
    for c in cohort.collections:
        paths += [c.metadata, c.detections, c.images]
    return tuple(Path(p) for p in paths if p is not None and not is_url(p))


def _select(cohort: Cohort, root: Path, progress: bool, bad: dict[str, dict[str, BadRecords]]
            ) -> tuple[list[Selected], dict[str, Path]]:
    """Every image of every named collection that carries a selected label; and each collection's metadata file."""
    wanted = {normalise_label(label) for label in cohort.labels} | {" ".join(x.lower().split()) for x in cohort.labels}
    selected: list[Selected] = []
    metadata_files: dict[str, Path] = {}
    for collection in cohort.collections:
        records = bad.setdefault(collection.name, {}).setdefault("metadata", BadRecords())
        path = local_copy(collection.metadata, f"{collection.name}:metadata", root, progress)
        metadata_files[collection.name] = path
        with named_as_given(collection.metadata, path):
            categories = read_categories(path, records)
            chosen = {i for i, name in categories.items()
                      if " ".join(name.lower().split()) in wanted or normalise_label(name) in wanted}
            labelled = labelled_images(path, chosen, categories, records) if chosen else {}
        selected += [Selected(collection, image_id, labels) for image_id, labels in labelled.items()]
    return selected, metadata_files


def _attach_records(cohort: Cohort, selected: list[Selected], metadata_files: dict[str, Path],
                    bad: dict[str, dict[str, BadRecords]]) -> None:
    for collection in cohort.included():
        mine = {s.image_id: s for s in selected if s.collection.name == collection.name and s.reason is None}
        if not mine:
            continue
        with named_as_given(collection.metadata, metadata_files[collection.name]):
            for image in read_images(metadata_files[collection.name], {k: s.labels for k, s in mine.items()},
                                     bad[collection.name]["metadata"]):
                mine[image.image_id].image = image
        for item in mine.values():
            if item.image is None:
                item.drop("image_record_missing", "no usable image record with this id")


def _retrieve(candidates: list[Selected], config: CameraTrapBuildConfig, root: Path) -> dict[str, object]:
    tasks = [ImageTask(s.key, image_location(s.collection, s.image.file_name)) for s in candidates if s.image]
    files, failed, counts = gather_files(tasks, root, config.concurrency, config.progress)
    by_key = {s.key: s for s in candidates}
    for key, detail in failed.items():
        by_key[key].drop(failure_reason(detail), detail)
    workers = (os.cpu_count() or 1) if config.workers is None else config.workers
    for key, result in encoded_images(files, config.max_side, workers):
        if "reason" in result:
            by_key[key].drop(result["reason"], result["detail"])
        else:
            by_key[key].encoded = result
    return counts


def _screen(cohort: Cohort, retrieved: list[Selected], root: Path, progress: bool,
            bad: dict[str, dict[str, BadRecords]]) -> dict[str, DetectorRun]:
    runs: dict[str, DetectorRun] = {}
    for collection in cohort.included():
        mine = [s for s in retrieved if s.collection.name == collection.name]
        path = local_copy(str(collection.detections), f"{collection.name}:detections", root, progress)
        records = bad[collection.name].setdefault("detections", BadRecords())
        with named_as_given(str(collection.detections), path):
            run = read_detector_run(path)
            found = read_detections(path, {s.image.file_name for s in mine if s.image}, run, records)
        runs[collection.name] = run
        for item in mine:
            assert item.image is not None
            entry = found.get(item.image.file_name)
            reason, conf = screen(entry, cohort)
            if reason is not None:
                detail = entry.failure if entry is not None and entry.failure else None
                item.drop(reason, detail)
            else:
                item.conf = conf
    return runs


def _source_url(item: Selected) -> str | None:
    """Where the image was fetched; None for one read from a local image folder (a path is no source)."""
    assert item.image is not None
    location = image_location(item.collection, item.image.file_name)
    return location if is_url(location) else None


def _candidates_table(selected: list[Selected]) -> pa.Table:
    rows = [{"collection": s.collection.name, "image_id": s.image_id, "uuid": s.key,
             "file_name": s.image.file_name if s.image else None, "labels": list(s.labels),
             "source_label": s.resolution.label if s.resolution else None,
             "location_id": s.image.location if s.image else None, "sequence_id": s.image.seq_id if s.image else None,
             "outcome": "kept" if s.reason is None else "left_out", "reason": s.reason, "detail": s.detail,
             "detection_conf": s.conf} for s in selected]
    schema = pa.schema([("collection", pa.string()), ("image_id", pa.string()), ("uuid", pa.string()),
                        ("file_name", pa.string()), ("labels", pa.list_(pa.string())), ("source_label", pa.string()),
                        ("location_id", pa.string()), ("sequence_id", pa.string()), ("outcome", pa.string()),
                        ("reason", pa.string()), ("detail", pa.string()), ("detection_conf", pa.float64())])
    return pa.Table.from_pylist(rows, schema=schema)


@dataclass
class _Reports:
    """What the cohort's reports are made of, known before the rows are written."""

    out: Path
    cohort: Cohort
    config: CameraTrapBuildConfig
    selected: list[Selected]
    accounting: dict[str, dict[str, object]]
    resolutions: dict[str, Resolution]
    runs: dict[str, DetectorRun]
    bad: dict[str, dict[str, BadRecords]]
    images: dict[str, object]
    run: Run

    def write(self, staging: Path, dataset_path: Path, rows: int, embedded: dict[str, dict[str, Any]],
              append_info: dict[str, object] | None) -> Built[CameraTrapBuildSummary]:
        """The summary, OUT's candidates.parquet and resolution.json (in the staging), and what the driver reports
        (the left-out record, the card, build.json)."""
        import pyarrow.parquet as pq

        summary = CameraTrapBuildSummary(
            out=self.out, dataset_path=dataset_path, rows=rows, cohort=self.cohort.as_dict(),
            accounting=self.accounting,
            resolutions=[self.resolutions[label].as_dict() for label in sorted(self.resolutions)],
            detectors={name: run.as_dict() for name, run in self.runs.items()},
            bad_records={name: {part: records.as_dict() for part, records in parts.items()}
                         for name, parts in self.bad.items()},
            images=self.images,
            embeddings={c: {k: v[k] for k in ("valid_rows", "failed_rows")} for c, v in embedded.items()},
            append=append_info, config=config_to_dict(self.config),
            elapsed_s=self.run.elapsed_s())
        candidates = _candidates_table(self.selected)
        pq.write_table(candidates, staging / "candidates.parquet")
        left = candidates.filter(pc.equal(candidates.column("outcome"), "left_out"))
        (staging / "resolution.json").write_text(json.dumps(summary.resolutions, indent=1) + "\n", encoding="utf-8")
        stages = [STAGES[r] for r in left.column("reason").to_pylist()]
        return Built(summary, left_out_table(left, key="uuid", stage=stages), lambda lines: render_card(summary, lines))


def _append(target_path: Path, table: pa.Table, staging: Path, config: CameraTrapBuildConfig, cohort: Cohort,
            reports: _Reports) -> Built[CameraTrapBuildSummary]:
    """The append to ``--append-to`` (:mod:`.append`): under its lock, an interrupted append undone first, then
    every write journaled, so the dataset and its folder are appended to whole or left as they were."""
    folder = Path(str(config.append_to))
    with appending.append_lock(folder):
        recovered = appending.roll_back(folder, target_path)
        appending.refuse_present(target_path, table.column("uuid").to_pylist(), cohort.name)
        table, embedded = appending.embed_new_rows(table, target_path, work_dir(staging), config)
        with appending.journaled(folder, target_path, cohort.name, list(embedded)):
            append_info: dict[str, object] = {
                "target": str(config.append_to),
                **appending.commit_rows(target_path, table, list(CAMERA_FIELDS), cohort.name)}
            append_info.update(appending.update_bookkeeping(folder, target_path, embedded))
            if recovered is not None:
                append_info["rolled_back"] = recovered
            built = reports.write(staging, target_path, table.num_rows, embedded, append_info)
            summary = built.summary
            appending.extend_folder(folder, {
                "cohort": cohort.name, "writer": WRITER, "rows": table.num_rows, "out": str(reports.out),
                "version_appended": append_info["version_appended"], "tag": append_info["tag"],
                "accounting": reports.accounting}, appended_section(summary))
            appending.tag_appended(target_path, append_info)
    return built


@dataclass(frozen=True)
class _Read:
    """The read stage's result: every selected image (with its outcome so far) and what reading it needed."""

    selected: list[Selected]
    resolutions: dict[str, Resolution]
    bad: dict[str, dict[str, BadRecords]]
    root: Path
    target_path: Path | None


@dataclass(frozen=True)
class CameraTrapBuild:
    """The camera-trap cohort's stages (:class:`cladebench.curate.skeleton.Builder`)."""

    config: CameraTrapBuildConfig
    writer = WRITER

    @property
    def progress(self) -> bool:
        return self.config.progress

    @functools.cached_property
    def cohort(self) -> Cohort:
        return read_cohort(self.config.cohort)

    def target(self) -> OutputTarget:
        return OutputTarget(Path(self.config.out), writer=WRITER, overwrite=self.config.overwrite,
                            inputs=_inputs(self.config, self.cohort))

    def read(self, run: Run) -> _Read:
        config, cohort = self.config, self.cohort
        check_image_folders(cohort)
        target_path = appending.target_dataset(Path(config.append_to)) if config.append_to is not None else None
        root = run.downloads(config.download_dir, "cameratrap")
        bad: dict[str, dict[str, BadRecords]] = {}
        selected, metadata_files = _select(cohort, root, config.progress, bad)
        for item in selected:
            if item.collection.name in cohort.exclude:
                item.drop("excluded_collection")
        labels = {label for s in selected if s.reason is None for label in s.labels}
        resolutions = resolve_labels(labels, cohort.group, config.taxonomy)
        for item in (s for s in selected if s.reason is None):
            reason, item.resolution = label_outcome(item.labels, resolutions)
            if reason is not None:
                item.drop(reason)
        _attach_records(cohort, selected, metadata_files, bad)
        run.count(len(selected))
        return _Read(selected, resolutions, bad, root, target_path)

    def choose(self, read: _Read, run: Run) -> _Read:
        run.count(sum(s.reason is None for s in read.selected), total=len(read.selected))
        return read

    def write(self, read: _Read, run: Run) -> Built[CameraTrapBuildSummary]:
        config, cohort, staging, out, selected = self.config, self.cohort, run.staging, Path(self.config.out), \
            read.selected
        image_counts = _retrieve([s for s in selected if s.reason is None], config, read.root)
        runs = _screen(cohort, [s for s in selected if s.reason is None], read.root, config.progress, read.bad)
        kept = [s for s in selected if s.reason is None]
        table = rows_table([cohort_row(cohort, s.collection, s.image, s.resolution, _source_url(s), s.encoded,
                                       runs[s.collection.name].version, s.conf)
                            for s in kept if s.image and s.resolution and s.encoded and s.conf is not None])
        run.count(table.num_rows)
        table_accounting = accounting([c.name for c in cohort.collections],
                                      ((s.collection.name, s.reason) for s in selected))
        if table.num_rows != table_accounting["total"]["kept"]:
            raise AssertionError(f"{table.num_rows} rows written for {table_accounting['total']['kept']} kept")
        if table.num_rows == 0:
            reasons = Counter(s.reason for s in selected)
            raise CladebenchError(f"nothing to write: of {len(selected):,} selected images none was kept "
                                  f"({dict(reasons.most_common(5))}); the card would describe an empty cohort")
        reports = _Reports(out=out, cohort=cohort, config=config, selected=selected, accounting=table_accounting,
                           resolutions=read.resolutions, runs=runs, bad=read.bad, images=image_counts, run=run)
        if read.target_path is None:
            (staging / DATASET_DIR).parent.mkdir(parents=True)
            store.write_dataset(table, staging / DATASET_DIR)
            return reports.write(staging, out / DATASET_DIR, table.num_rows, {}, None)
        return _append(read.target_path, table, staging, config, cohort, reports)


def build_cameratrap(config: CameraTrapBuildConfig) -> CameraTrapBuildSummary:
    """Build the cohort named by ``config.cohort`` into ``config.out`` (and ``--append-to``); see the module
    docstring."""
    return run_build(CameraTrapBuild(config))


__all__ = ["WRITER", "CameraTrapBuild", "build_cameratrap"]
