"""The Fine-Grained Challenges build: catalog, checks, images, embeddings and indices, into a staged output folder.

**Embeddings and indices.** Each ``--embed`` model encodes every image into ``emb_<key>``
(:func:`cladebench.embed.embed_dataset`; raw vectors, field metadata naming model, revision,
preprocessing and dim). Then BTREE on ``uuid``, BITMAP on ``challenge_group``, and an IVF_FLAT cosine
index on each ``emb_*`` column when the dataset has at least ``min_index_rows`` rows
(:data:`DEFAULT_MIN_INDEX_ROWS`): below that an exact search over every row is as fast as the index
and never misses, and k-means over a handful of vectors gives partitions that mean nothing.

**Output** (``--out``, written whole by :func:`cladebench.curate.skeleton.run_build`):

- ``data/challenges.lance``: the table (the store's canonical columns; ``species`` is the binomial, as the
  published card defines it, and ``scientific_name`` the catalog's, authority included; plus ``challenge_group``,
  ``copyright_owner``, ``publisher``, ``basisOfRecord``, ``img_type``, ``resolution_status``,
  ``width``/``height`` of the stored image and ``original_width``/``original_height``);
- ``embedding_models.json``: one entry per ``emb_*`` column (model id, revision, preprocessing, dim,
  ...), beside the card and inside the dataset;
- ``README.md``: the card, with images per group, per species and per license, seen_in_training,
  embeddings, indices and every drop count by reason; ``build.json`` (the summary);
  ``left_out.parquet`` (every row of a group left out, with its stage, reason and detail).

Why a module: it is the one place that orders the other modules' work and writes files.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from cladebench import store
from cladebench.benchmarks.finegrained.builder.card import FineGrainedBuildSummary, render_card, summarise
from cladebench.benchmarks.finegrained.builder.catalog import Catalog, read_catalog, read_uuid_list
from cladebench.benchmarks.finegrained.builder.checks import (
    IMAGE_REASONS,
    OUTSIDE_REASON,
    SAMPLING_REASONS,
    check_rows,
    reason_docs,
    sample,
)
from cladebench.benchmarks.finegrained.builder.config import (
    DATASET_DIR,
    ChallengeGroup,
    FineGrainedBuildConfig,
    parse_groups,
    parse_seen,
)
from cladebench.benchmarks.finegrained.builder.images import image_sources, output_batches
from cladebench.config import config_to_dict
from cladebench.curate.builders.duckdb_errors import duckdb_errors
from cladebench.curate.skeleton import Built, Run, run_build
from cladebench.curate.staging import OutputTarget
from cladebench.errors import CladebenchError
from cladebench.store.left_out import left_out_table

WRITER = "build finegrained"
"""The output's marker names this writer; ``--overwrite`` replaces only such a folder
(:mod:`cladebench.curate.staging`)."""


def _inputs(config: FineGrainedBuildConfig) -> tuple[Path, ...]:
    """What the build reads: the output may be none of these, inside none, and contain none (a local model
    folder given to ``--embed`` included)."""
    paths: list[Path | None] = [config.catalog, config.provenance, config.image_dir, config.download_dir]
    paths += [path for _, path in parse_seen(config.seen)]
    paths += [Path(target.model.removeprefix("local-dir:")) for target in config.embed_targets
              if target.model.startswith("local-dir:")]
    return tuple(Path(p) for p in paths if p is not None)


def _embed(dataset_path: Path, config: FineGrainedBuildConfig) -> None:
    from cladebench.embed import EmbedConfig, embed_dataset
    from cladebench.models.deferred import DeferredEncoder

    for target in config.embed_targets:  # built from the spec resolved when the config was made
        embed_dataset(EmbedConfig(dataset=str(dataset_path), model=target.model, column=target.column,
                                  device=config.device, batch_size=config.batch_size, workers=config.workers,
                                  progress=config.progress),
                      encoder=DeferredEncoder(target.spec, config.device))


def _index(dataset_path: Path, config: FineGrainedBuildConfig) -> str | None:
    """BTREE on uuid, BITMAP on challenge_group, IVF_FLAT cosine on each emb_ column when there are enough rows;
    returns why the vector indices were skipped, if they were."""
    dataset = store.open_dataset(dataset_path)
    store.create_scalar_index(dataset, "uuid", "BTREE")
    store.create_scalar_index(dataset, "challenge_group", "BITMAP")
    columns = store.embedding_columns(store.open_dataset(dataset_path).schema)
    rows = dataset.count_rows()
    if columns and rows < config.min_index_rows:
        return (f"No IVF_FLAT index on {', '.join(columns)}: {rows} rows is under min_index_rows="
                f"{config.min_index_rows}; exact search over every row is as fast at this size.")
    for column in columns:
        store.create_vector_index(store.open_dataset(dataset_path), column, metric="cosine")
    return None


def _embedding_entries(dataset_path: Path) -> dict[str, dict[str, object]]:
    """``embedding_models.json`` as embed wrote it beside the data (one entry per emb_ column)."""
    sidecar = dataset_path / store.EMBEDDING_SIDECAR
    return json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.exists() else {}


def _dropped_table(dropped: Sequence[Mapping[str, object]]) -> pa.Table:
    """The left-out record (:mod:`cladebench.store.left_out`): the row's uuid as its key, the stage its reason
    belongs to, then the catalog columns a person checks it by."""
    columns = ("uuid", "challenge_group", "reason", "detail", "genus", "species", "source_url", "image_path",
               "license_name")
    rows = [{c: row.get(c) for c in columns} for row in dropped]
    table = pa.Table.from_pylist(rows, schema=pa.schema([(c, pa.string()) for c in columns]))
    return left_out_table(table, key="uuid", stage=[_STAGES.get(str(r["reason"]), "check") for r in rows])


_STAGES = {**dict.fromkeys(SAMPLING_REASONS, "sample"), **dict.fromkeys(IMAGE_REASONS, "fetch")}
"""The stage each reason belongs to that is not a row check."""


@dataclass(frozen=True)
class _Read:
    """The read stage's result: the ``--seen`` lists, the catalog, its eligible rows and those left out so far."""

    seen: list[tuple[str, set[str]]] | None
    catalog: Catalog
    eligible: list[dict[str, object]]
    dropped: list[dict[str, object]]


@dataclass(frozen=True)
class FineGrainedBuild:
    """The Fine-Grained Challenges stages (:class:`cladebench.curate.skeleton.Builder`)."""

    config: FineGrainedBuildConfig
    writer = WRITER

    @property
    def progress(self) -> bool:
        return self.config.progress

    @functools.cached_property
    def groups(self) -> tuple[ChallengeGroup, ...]:
        return parse_groups(self.config.group)

    def target(self) -> OutputTarget:
        return OutputTarget(Path(self.config.out), writer=WRITER, overwrite=self.config.overwrite,
                            inputs=_inputs(self.config))

    def read(self, run: Run) -> _Read:
        seen_specs = parse_seen(self.config.seen)
        seen = [(model, read_uuid_list(path)) for model, path in seen_specs] if seen_specs else None
        with duckdb_errors(f"the catalog {self.config.catalog} with {self.config.provenance}"):
            catalog = read_catalog(self.config, self.groups)
        eligible, dropped = check_rows(catalog.group_rows)
        run.count(len(eligible), total=catalog.rows)
        return _Read(seen, catalog, eligible, dropped)

    def choose(self, read: _Read, run: Run) -> tuple[_Read, list[dict[str, object]]]:
        kept, capped = sample(read.eligible, self.config, self.groups)
        read.dropped.extend(capped)
        run.count(len(kept), total=len(read.eligible))
        return read, kept

    def write(self, chosen: tuple[_Read, list[dict[str, object]]], run: Run) -> Built[FineGrainedBuildSummary]:
        (read, kept), config, out, staging = chosen, self.config, Path(self.config.out), run.staging
        seen, catalog, dropped = read.seen, read.catalog, read.dropped
        downloads = run.downloads(config.download_dir, "finegrained")
        with_files, image_counts = image_sources(kept, config, dropped, downloads)
        dataset_path = staging / DATASET_DIR
        dataset_path.parent.mkdir(parents=True)
        workers = (os.cpu_count() or 1) if config.workers is None else config.workers
        batches = output_batches(with_files, config, seen, dropped, workers, run.count)
        try:
            first = next(batches, None)
            if first is None:
                raise CladebenchError(
                    f"nothing to write: of {catalog.rows:,} catalog rows, {len(kept):,} were sampled and none has "
                    f"an image that could be read ({dict(Counter(r['reason'] for r in dropped).most_common(5))})")
            store.write_dataset(itertools.chain([first], batches), dataset_path)
        finally:
            batches.close()  # stops the encoding processes if the write failed midway
        _embed(dataset_path, config)
        skipped = _index(dataset_path, config)

        dataset = store.open_dataset(dataset_path)
        table = store.read(dataset, columns=["uuid", "challenge_group", "genus", "species", "license_name",
                                             "seen_in_training"])
        counts = Counter(r["reason"] for r in dropped)
        outcomes = {OUTSIDE_REASON: catalog.outside,
                    **{r: counts.pop(r, 0) for r in reason_docs() if r != OUTSIDE_REASON}}
        if counts:
            raise AssertionError(f"reasons without a check: {dict(counts)}")
        if sum(outcomes.values()) + table.num_rows != catalog.rows:
            raise AssertionError(f"row accounting: {outcomes} + {table.num_rows} kept != {catalog.rows} catalog rows")
        uuids = set(table.column("uuid").to_pylist())
        entries = _embedding_entries(dataset_path)
        (staging / store.EMBEDDING_SIDECAR).write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n",
                                                       encoding="utf-8")
        summary = FineGrainedBuildSummary(
            out=out, dataset_path=out / DATASET_DIR, card_path=out / "README.md", rows=table.num_rows,
            fingerprint=store.fingerprint(dataset), catalog_rows=catalog.rows, outcomes=outcomes,
            seen_in_training={m: {"listed": len(u), "in_dataset": len(u & uuids)} for m, u in seen or []},
            embeddings={c: {k: e.get(k) for k in ("model", "revision", "preprocessing", "dim", "valid_rows",
                                                  "failed_rows")} for c, e in entries.items()},
            indices=store.indices(dataset), vector_index_skipped=skipped, images=image_counts,
            notes={"rows_in_several_groups": catalog.in_several_groups,
                   "seen_uuids_not_in_dataset": {m: len(u - uuids) for m, u in seen or []}},
            config=config_to_dict(config), elapsed_s=run.elapsed_s(),
            **summarise(table, self.groups, Counter(str(r["challenge_group"]) for r in read.eligible)),
        )
        return Built(summary, _dropped_table(dropped), lambda lines: render_card(summary, lines))


def build_finegrained(config: FineGrainedBuildConfig) -> FineGrainedBuildSummary:
    """Build Fine-Grained Challenges from ``config.catalog`` into ``config.out``; see the module docstring."""
    return run_build(FineGrainedBuild(config))


__all__ = ["WRITER", "FineGrainedBuild", "build_finegrained"]
