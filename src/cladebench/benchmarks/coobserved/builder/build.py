"""The iNat Co-Observed build: the stages, the sampling and the card, run into a staged output folder.

**Output** (a folder, ``--out``, written whole by :func:`cladebench.curate.skeleton.run_build`; DuckDB's
database and spill files live in its scratch folder, so a killed build's are removed by the next):

- ``data/coobserved.parquet``: one row per photo in the published dataset's layout (``photo_id``,
  ``photo_uuid``, ``image_url``, ``image_url_medium``, ``photo_page_url``, ``width``, ``height``,
  ``license``, ``license_url``, ``attribution``, ``observer_id``, ``observer_login``, ``observer_name``,
  ``observed_on``, ``latitude``, ``longitude``, ``positional_accuracy_m``, ``divergence_rank``,
  ``kingdom_pair``, ``class_pair``, ``n_photos_sharing_observation_pair``, ``organisms``,
  ``in_tol200m``, ``source``), without image bytes. ``organisms`` holds the two organisms in lineage
  order (kingdom .. species names, then observation uuid); the pairs read ``"Animalia + Plantae"`` in
  that order. ``species`` is the binomial (the genus's spelling, the epithet in lower case), ``scientific_name``
  iNaturalist's name of the species.
  The image URL is the ``medium`` (500 px) one with the extension as the export writes it; the
  attribution is iNaturalist's (``© name, some rights reserved (CC-BY-NC)``, ``name, no rights
  reserved (CC0)``) naming the observer, or the login when the name is empty or ``None``. Latitude,
  longitude, date and positional accuracy are the first organism's observation's (the second's when the
  first has no coordinates). ``species_in_tol200m`` is whether the species' binomial is in
  ``--tol-species`` (null without it); ``in_tol200m`` (whether the photo itself is in TreeOfLife-200M)
  stays null: it needs TOL's photo ids, which is what ``--exclude-photo-ids`` takes.
- ``README.md``: the dataset card (per divergence rank, kingdom pairs, class pairs, species, licenses,
  every count by reason), ``build.json`` (the summary), ``left_out.parquet`` (each photo on two or more
  observations that was left out, with its reason).
- With ``--download``: ``coobserved.lance``, the store's co-observed rows with their images.

**Why the images are separate.** The store's ``image`` column is required (non-null bytes), so a
Lance dataset cannot be written before the photos are fetched. Without ``--download`` the builder
writes the Parquet above: exactly the file ``cladebench load inat-coobserved`` reads, which fetches the
photos (:mod:`cladebench.curate.fetch`: resumable, retried, every failure recorded) and writes the Lance
dataset, through the same mapping as the published dataset
(:func:`cladebench.benchmarks.coobserved.source.build_inat_coobserved`). ``--download`` runs that step at once.

**Memory.** DuckDB runs with a ``memory_limit`` (default :data:`DEFAULT_MEMORY_LIMIT`) and spills to
disk; tables live in an on-disk database, both in the staging folder (on the output's disk, not in
``/tmp``, which is often memory). Python holds only the eligible photos
(a small fraction of an export). ``bench/coobserved_builder.py`` measures peak memory as the export
grows.

Why a module: it is the one place that orders the other modules' work and writes files.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from cladebench.benchmarks.coobserved.builder.card import CoObservedBuildSummary, render_card, summarise
from cladebench.benchmarks.coobserved.builder.checks import FETCH_REASON, PHOTO_CHECKS, SAMPLING_REASONS
from cladebench.benchmarks.coobserved.builder.config import (
    DATA_FILE,
    DEFAULT_MEMORY_LIMIT,
    DIVERGENCE_RANKS,
    CoObservedBuildConfig,
)
from cladebench.benchmarks.coobserved.builder.published import PUBLISHED_SCHEMA, published_row
from cladebench.benchmarks.coobserved.builder.reading import ExportFile, export_files, read_id_list
from cladebench.benchmarks.coobserved.builder.sampling import sample
from cladebench.benchmarks.coobserved.builder.stages import Stages
from cladebench.config import config_to_dict
from cladebench.curate.builders.duckdb_errors import duckdb_errors
from cladebench.curate.skeleton import Built, Run, run_build
from cladebench.curate.staging import OutputTarget
from cladebench.store import fingerprint_uuids
from cladebench.store.left_out import left_out_table

if TYPE_CHECKING:
    import duckdb

def _connect(work_dir: Path, memory_limit: str, threads: int | None) -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(str(work_dir / "build.duckdb"))
    con.sql(f"SET memory_limit = '{memory_limit}'")
    con.sql(f"SET temp_directory = '{work_dir / 'spill'}'")
    # Output order is fixed by explicit ORDER BYs; insertion order would only cost memory.
    con.sql("SET preserve_insertion_order = false")
    if threads is not None:
        con.sql(f"SET threads = {int(threads)}")
    return con


WRITER = "build coobserved"
"""The output's marker names this writer; ``--overwrite`` replaces only such a folder
(:mod:`cladebench.curate.staging`)."""


def _inputs(config: CoObservedBuildConfig) -> tuple[Path, ...]:
    """What the build reads: the output may be none of these, inside none, and contain none."""
    return tuple(Path(p) for p in (config.export_dir, config.exclude_photo_ids, config.tol_species) if p is not None)


def _write_parquet(table: pa.Table, path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)


def _download(staging: Path, ray: str | None = None) -> tuple[Path, int, dict[str, int], str]:
    from cladebench.benchmarks.coobserved.source import build_inat_coobserved
    from cladebench.curate.fetch import DownloadConfig

    dataset_path = staging / "coobserved.lance"
    build = build_inat_coobserved(staging / "data", dataset_path,
                                  download_config=DownloadConfig(progress=True, ray=ray))
    return dataset_path, build.failed, build.failed_by_reason, build.fingerprint


@dataclass(frozen=True)
class _Read:
    """The read stage's result: the export's files, the DuckDB stages over them, each photo id's outcome."""

    files: dict[str, ExportFile]
    stages: Stages
    outcomes: dict[str, int]
    eligible: list[tuple[object, ...]]


@dataclass(frozen=True)
class CoObservedBuild:
    """The iNat Co-Observed stages (:class:`cladebench.curate.skeleton.Builder`); ``memory_limit`` and ``threads``
    are DuckDB's (``threads`` None: one per core)."""

    config: CoObservedBuildConfig
    memory_limit: str = DEFAULT_MEMORY_LIMIT
    threads: int | None = None
    writer = WRITER
    progress = True

    def target(self) -> OutputTarget:
        return OutputTarget(Path(self.config.out), writer=WRITER, overwrite=self.config.overwrite,
                            inputs=_inputs(self.config))

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return duckdb_errors(f"the export in {self.config.export_dir}",
                             memory_hint=f"DuckDB's memory_limit is {self.memory_limit}")

    def read(self, run: Run) -> _Read:
        config = self.config
        files = export_files(Path(config.export_dir))
        (run.staging / "data").mkdir()
        con = run.enter(contextlib.closing(_connect(run.work_dir(), self.memory_limit, self.threads)))
        with self._errors():
            stages = Stages(con, files, config)
            if config.exclude_photo_ids is not None:
                read_id_list(con, Path(config.exclude_photo_ids), "photo_id", "BIGINT", "excluded")
            if config.tol_species is not None:
                read_id_list(con, Path(config.tol_species), "scientific_name", "VARCHAR", "tol")
            for stage in (stages.photo_ids, stages.photos, stages.candidates, stages.observations, stages.taxa,
                          stages.lineages, stages.observers, stages.licenses):
                stage()
            stages.evaluate(config.exclude_photo_ids is not None, config.tol_species is not None)
            read = _Read(files, stages, stages.outcomes(), stages.eligible())
        run.count(len(read.eligible))
        return read

    def choose(self, read: _Read, run: Run) -> tuple[_Read, list[int], dict[int, str]]:
        kept, refused = sample(read.eligible, self.config)
        run.count(len(kept), total=len(read.eligible))
        return read, kept, refused

    def write(self, chosen: tuple[_Read, list[int], dict[int, str]], run: Run) -> Built[CoObservedBuildSummary]:
        from cladebench.benchmarks.coobserved.source import row_uuid

        read, kept, refused = chosen
        files, stages, outcomes, eligible = read.files, read.stages, read.outcomes, read.eligible
        config, out, staging = self.config, Path(self.config.out), run.staging
        with self._errors():
            selected = stages.rows(kept)
            rows = [published_row(r) for r in selected]
            from_login = sum(bool(r["from_login"]) for r in selected)
            dropped = stages.dropped(refused)
            n_photo_ids = stages.one("SELECT coalesce(sum(n_ids), 0) FROM photo_groups "
                                     "WHERE photo_id IS NOT NULL OR outcome IS NOT NULL")[0]
        stages.con.close()  # its memory is free before the photos are fetched (the run closes it on a failure)
        run.count(len(rows))
        table = pa.Table.from_pylist(rows, schema=PUBLISHED_SCHEMA)
        _write_parquet(table, staging / DATA_FILE)
        reasons = dropped.column("reason").to_pylist()
        left_out = left_out_table(dropped, key=[str(i) for i in dropped.column("photo_id").to_pylist()], detail=None,
                                  stage=["sample" if r in SAMPLING_REASONS else "check" for r in reasons])
        eligible_count = outcomes.pop("", 0)
        photo_outcomes = {c.reason: outcomes.pop(c.reason, 0) for c in PHOTO_CHECKS}
        photo_outcomes.update({r: sum(v == r for v in refused.values()) for r in SAMPLING_REASONS})
        if outcomes:
            raise AssertionError(f"outcomes without a check: {outcomes}")
        if sum(photo_outcomes.values()) + len(kept) != n_photo_ids or eligible_count != len(kept) + len(refused):
            raise AssertionError(f"photo accounting: {photo_outcomes} + {len(kept)} kept != {n_photo_ids} photo ids")
        dataset_path = dataset_fingerprint = None
        if config.download and rows:
            dataset_path, failed, _, dataset_fingerprint = _download(staging, config.ray)
            photo_outcomes[FETCH_REASON] = failed
        summary = CoObservedBuildSummary(
            out=out, data_path=out / DATA_FILE, card_path=out / "README.md",
            dataset_path=None if dataset_path is None else out / dataset_path.name, rows=len(rows),
            fingerprint=fingerprint_uuids(row_uuid(p) for p in kept),
            files={t: {"file": str(f.path), "columns": list(f.header), "rows": stages.rows_read.get(t, 0)}
                   for t, f in files.items()},
            row_issues={t: {r: n for r, n in sorted(c.items()) if n} for t, c in stages.row_issues.items()
                        if any(c.values())},
            photo_outcomes=photo_outcomes, photo_ids=int(n_photo_ids), eligible=eligible_count,
            eligible_per_rank={r: sum(e[1] == i for e in eligible) for i, r in enumerate(DIVERGENCE_RANKS)},
            notes={**stages.notes, "kept_attributions_from_login": from_login,
                   "malformed_line_kinds": stages.malformed_kinds},
            dataset_fingerprint=dataset_fingerprint, config=config_to_dict(config),
            elapsed_s=run.elapsed_s(), **summarise(rows),
        )
        return Built(summary, left_out, lambda lines: render_card(summary, lines))


def build_coobserved(config: CoObservedBuildConfig, *, memory_limit: str = DEFAULT_MEMORY_LIMIT,
                     threads: int | None = None) -> CoObservedBuildSummary:
    """Build iNat Co-Observed from the export in ``config.export_dir`` into ``config.out``; see the module
    docstring. ``memory_limit`` and ``threads`` are DuckDB's (``threads`` None: one per core)."""
    return run_build(CoObservedBuild(config, memory_limit, threads))


__all__ = ["WRITER", "CoObservedBuild", "build_coobserved"]
