"""The CrypticBio build: cryptic groups, the subsets' files, photos, the card, staged into ``dataset.out``.

**Cryptic groups.** ``generate_pairs`` makes directed pairs "A is confused with B" from one source:
an identification history (mined by :func:`cladebench.benchmarks.crypticbio.cryptic_groups.mine_cryptic_pairs`, with its
thresholds), a lookup TSV, or an undirected ``source,target`` pair list; A's group is A and its
confusables. Without the section, the metadata's cryptic group column (``crypticGroup``) is used when
present. A row's ``cryptic_group`` (what the filter tests) is its species' confusables, the species
itself excluded: ``cryptic_group: true`` keeps species with at least one, and a species the source
does not know has none.

**Output** (``dataset.out``, written whole by :func:`cladebench.curate.skeleton.run_build`; it may not overlap a
file the config reads, the YAML file included): ``CrypticBio-<Subset>.csv`` per subset in the published column
order; ``cryptic_groups.tsv`` (the lookup :func:`read_cryptic_lookup` reads) and
``cryptic_pairs.parquet`` (pairs with their evidence) when groups are known; ``left_out.parquet``;
``README.md`` (the card: per-subset and per-taxonomic-group counts, drops by reason, cryptic-group
statistics); ``build.json``. With ``download``: ``<subset>.lance`` and its ``.failures.parquet`` per
non-empty subset, built by :func:`cladebench.benchmarks.crypticbio.source.build_crypticbio_dataset`.


Why a module: this is the one place that orders the other modules' work into a build and writes files;
each step it calls is tested on its own.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.benchmarks.crypticbio import cryptic_groups
from cladebench.benchmarks.crypticbio.builder.card import CrypticBioCurationSummary, render_card
from cladebench.benchmarks.crypticbio.builder.rows import (
    DUPLICATE_URL,
    MALFORMED_LINE,
    ROW_CHECKS,
    Tally,
    read_and_filter,
)
from cladebench.benchmarks.crypticbio.builder.sections import (
    CrypticBioBuildConfig,
    CrypticBioCurateConfig,
    DownloadSection,
    PairsSection,
    load_config,
)
from cladebench.benchmarks.crypticbio.builder.subsets import SUBSETS, SubsetContext
from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS, read_cryptic_lookup
from cladebench.config import config_to_dict
from cladebench.curate.builders.cards import counts
from cladebench.curate.skeleton import Built, Run, run_build
from cladebench.curate.staging import OutputTarget
from cladebench.errors import CladebenchError
from cladebench.store.left_out import left_out_table

# --- cryptic groups --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Groups:
    """Species -> (species, *confusables) where the source knows the species (confusables may be none)."""

    groups: dict[str, tuple[str, ...]]
    pairs: pa.Table
    source: str
    mining: dict[str, object] | None = None


def _load_groups(section: PairsSection) -> _Groups:
    if section.identifications is not None and section.observations is not None:
        observations = cryptic_groups.read_table(section.observations)
        mined = cryptic_groups.mine_cryptic_pairs(cryptic_groups.read_table(section.identifications), observations,
                                                  section.mining())
        groups = cryptic_groups.groups_from_pairs(mined.pairs)
        community = pc.unique(pc.cast(observations.column("community_taxon"), pa.string())).drop_null()
        known = {name: (name,) for name in community.to_pylist()}
        return _Groups(known | groups, mined.pairs, f"mined from {section.identifications.name}", mined.as_dict())
    if section.lookup is not None:
        lookup = read_cryptic_lookup(section.lookup)
        return _Groups(lookup, cryptic_groups.pairs_from_groups(lookup), f"lookup {section.lookup.name}")
    assert section.edges is not None
    pairs = cryptic_groups.symmetric(cryptic_groups.read_edges(section.edges))
    return _Groups(cryptic_groups.groups_from_pairs(pairs), pairs, f"edges {section.edges.name} (undirected)")


def _groups_from_rows(kept: pa.Table) -> _Groups:
    """Per species, the confusables its rows name (in order of first appearance), from the metadata column."""
    groups: dict[str, list[str]] = {}
    for name, members in zip(kept.column("scientific_name").to_pylist(), kept.column("cryptic_group").to_pylist(),
                             strict=True):
        if members is None:
            continue
        group = groups.setdefault(name, [name])
        group.extend(m for m in members if m not in group)
    final = {name: tuple(groups[name]) for name in sorted(groups)}
    return _Groups(final, cryptic_groups.pairs_from_groups(final), "the metadata's cryptic group column")


# --- output ----------------------------------------------------------------------------------------


def _csv_value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return repr(list(value))
    return str(value)


_CSV_SOURCES: dict[str, str] = {
    "scientificName": "scientific_name", "year": "year", "month": "month", "day": "day",
    "decimalLatitude": "latitude", "decimalLongitude": "longitude", "url": "url", "kingdom": "kingdom",
    "phylum": "phylum", "class": "class", "order": "order", "family": "family", "genus": "genus",
    "vernacularName": "vernacular_names",
}
"""Published CSV column -> kept column."""


def write_benchmark_csv(rows: pa.Table, path: Path) -> None:
    """Rows in the published CrypticBio column order and value format (float date parts, list literals)."""
    columns = [rows.column(_CSV_SOURCES[c]).to_pylist() for c in CSV_COLUMNS]
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        writer.writerows([_csv_value(v) for v in values] for values in zip(*columns, strict=True))



def _rejected_table(tally: Tally, malformed: list[tuple[int, str]], files: Sequence[Path]) -> pa.Table:
    """The left-out record (:mod:`cladebench.store.left_out`): ``file:row`` as the key (the file alone for a
    malformed line), the line's text as the detail, then the source file, row, name and URL."""
    schema = pa.schema([("file", pa.string()), ("row", pa.int64()), ("reason", pa.string()),
                        ("scientific_name", pa.string()), ("url", pa.string()), ("text", pa.string())])
    names = pa.array([p.name for p in files], pa.string())
    tables = [pa.table({"file": names.take(t.column("_file")), "row": t.column("_row"), "reason": t.column("_reason"),
                        "scientific_name": t.column("scientific_name"), "url": t.column("url"),
                        "text": pa.nulls(t.num_rows, pa.string())}, schema=schema) for t in tally.rejected]
    if malformed:
        tables.append(pa.table({
            "file": [files[i].name for i, _ in malformed], "row": pa.nulls(len(malformed), pa.int64()),
            "reason": [MALFORMED_LINE] * len(malformed), "scientific_name": pa.nulls(len(malformed), pa.string()),
            "url": pa.nulls(len(malformed), pa.string()), "text": [t[:1000] for _, t in malformed],
        }, schema=schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    files_rows = zip(table.column("file").to_pylist(), table.column("row").to_pylist(), strict=True)
    reasons = table.column("reason").to_pylist()
    return left_out_table(table, key=[f"{f}:{r}" if r is not None else f for f, r in files_rows], detail="text",
                          stage=["read" if r == MALFORMED_LINE else "check" for r in reasons])


WRITER = "build crypticbio"
"""The output's marker names this writer; ``overwrite: true`` replaces only such a folder
(:mod:`cladebench.curate.staging`)."""


def _inputs(config: CrypticBioCurateConfig) -> tuple[Path, ...]:
    """What the build reads (the YAML file included): the output may be none of these, inside none, contain none."""
    paths: list[Path | None] = [config.source, *config.dataset.metadata]
    if config.generate_pairs is not None:
        pairs = config.generate_pairs
        paths += [pairs.identifications, pairs.observations, pairs.lookup, pairs.edges]
    paths += [getattr(subset, "species_list", None) for subset in config.subsets.configured().values()]
    if config.download is not None and config.download.enabled:
        paths.append(config.download.cache_dir)
    return tuple(Path(p) for p in paths if p is not None)


def _download(section: DownloadSection, staging: Path, written: Mapping[str, tuple[Path, int]],
              lookup: Path | None) -> dict[str, dict[str, object]]:
    """One Lance dataset per non-empty subset. A subset none of whose photos could be fetched gets no dataset
    (Lance cannot hold an image-less row) but keeps its failures table and is reported, rather than sinking
    the other subsets' builds."""
    import pyarrow.parquet as pq

    from cladebench.benchmarks.crypticbio.source import build_crypticbio_dataset, failures_path_for, subset_name

    results: dict[str, dict[str, object]] = {}
    for name, (csv_path, rows) in written.items():
        if rows == 0:
            continue
        dataset_path = staging / f"{csv_path.stem}.lance"
        failures_path = failures_path_for(dataset_path)
        try:
            build = build_crypticbio_dataset(csv_path, dataset_path, lookup=lookup, download_config=section.fetch,
                                             download_dir=section.cache_dir, subset=subset_name(csv_path))
        except CladebenchError:
            if dataset_path.exists() or not failures_path.is_file():
                raise
            reasons = counts(pq.read_table(failures_path).column("reason").to_pylist())
            results[name] = {"dataset": None, "failures": failures_path.name, "rows": rows, "written": 0,
                             "failed": rows, "failed_by_reason": reasons}
            continue
        results[name] = {"dataset": dataset_path.name, "failures": failures_path.name, "rows": build.rows,
                         "written": build.written, "failed": build.failed, "failed_by_reason": build.failed_by_reason}
    return results


def _resolve(config: str | Path | CrypticBioBuildConfig | CrypticBioCurateConfig) -> CrypticBioCurateConfig:
    if isinstance(config, CrypticBioCurateConfig):
        return config
    return load_config(config.config if isinstance(config, CrypticBioBuildConfig) else config)


def _config_record(config: CrypticBioCurateConfig) -> dict[str, object]:
    def plain(value: object) -> object:
        if isinstance(value, (Path, datetime.date)):
            return str(value)
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items()}
        return value

    record = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return {k: plain(config_to_dict(v) if dataclasses.is_dataclass(v) else v) for k, v in record.items()}


@dataclass(frozen=True)
class _Read:
    """The read stage's result: the rows kept by the checks and filters, their tally, the cryptic groups."""

    tally: Tally
    kept: pa.Table
    malformed: list[tuple[int, str]]
    groups: _Groups | None


@dataclass(frozen=True)
class CrypticBioBuild:
    """The CrypticBio stages (:class:`cladebench.curate.skeleton.Builder`)."""

    config: CrypticBioCurateConfig
    writer = WRITER
    progress = True

    def target(self) -> OutputTarget:
        return OutputTarget(self.config.dataset.out, writer=WRITER, overwrite=self.config.dataset.overwrite,
                            inputs=_inputs(self.config), out_option="dataset.out", overwrite_option="overwrite: true")

    def read(self, run: Run) -> _Read:
        config = self.config
        source_groups = _load_groups(config.generate_pairs) if config.generate_pairs is not None else None
        tally, kept, malformed = read_and_filter(config, None if source_groups is None else source_groups.groups)
        groups = source_groups or (_groups_from_rows(kept) if kept.column("cryptic_group").null_count
                                   < kept.num_rows else None)
        run.count(kept.num_rows, total=tally.rows)
        return _Read(tally, kept, malformed, groups)

    def choose(self, read: _Read, run: Run) -> tuple[_Read, dict[str, pa.Table], dict[str, dict[str, object]]]:
        context = SubsetContext(read.kept, self.config.dataset.seed, self.config.subsets.common,
                                self.config.subsets.common_unseen)
        chosen, notes = {}, {}
        for name, subset_config in self.config.subsets.configured().items():
            subset = SUBSETS[name].select(subset_config, context)
            chosen[name], notes[name] = subset.rows, subset.notes
            run.count(subset.rows.num_rows)
        return read, chosen, notes

    def write(self, chosen: tuple[_Read, dict[str, pa.Table], dict[str, dict[str, object]]], run: Run
              ) -> Built[CrypticBioCurationSummary]:
        import pyarrow.parquet as pq

        (read, rows_of, notes), config, staging = chosen, self.config, run.staging
        tally, kept, malformed, groups = read.tally, read.kept, read.malformed, read.groups
        subsets: dict[str, dict[str, object]] = {}
        written: dict[str, tuple[Path, int]] = {}
        species_written: set[str] = set()
        for name, rows in rows_of.items():
            kind = SUBSETS[name]
            path = staging / kind.file_name
            write_benchmark_csv(rows, path)
            run.count(rows.num_rows)
            written[name] = (path, rows.num_rows)
            species = set(rows.column("scientific_name").to_pylist())
            species_written |= species
            subsets[name] = {
                "file": kind.file_name, "rows": rows.num_rows, "species": len(species),
                "taxonomic_groups": counts(rows.column("class").to_pylist()), "notes": notes[name],
            }
            if groups is not None:
                subsets[name]["species_with_group"] = sum(len(groups.groups.get(s, ())) > 1 for s in species)
        cryptic: dict[str, object] = {}
        lookup_path = None
        if groups is not None:
            relevant = {s: groups.groups[s] for s in sorted(species_written) if s in groups.groups}
            lookup_path = cryptic_groups.write_lookup(relevant, staging / "cryptic_groups.tsv")
            pq.write_table(groups.pairs, staging / "cryptic_pairs.parquet")
            cryptic = {"source": groups.source, "mining": groups.mining,
                       "statistics": cryptic_groups.group_statistics(groups.groups, species_written)}
        downloads = {}
        if config.download is not None and config.download.enabled:
            downloads = _download(config.download, staging, written, lookup_path)
        # Data checks and duplicates when they dropped something; every configured filter, even at zero.
        dropped = {c.reason: tally.dropped[c.reason] for c in ROW_CHECKS if tally.dropped[c.reason]}
        dropped |= {f"filter:{c.key}": tally.dropped[f"filter:{c.key}"] for c in config.filters.conditions}
        dropped |= {DUPLICATE_URL: tally.dropped[DUPLICATE_URL]} if tally.dropped[DUPLICATE_URL] else {}
        if tally.rows != kept.num_rows + sum(dropped.values()):  # every row in exactly one bin
            raise AssertionError(f"row accounting: {tally.rows} read, {kept.num_rows} kept, dropped {dropped}")
        wanted = [v for c in config.filters.conditions if c.key == "scientific_name" for v in c.values]
        summary = CrypticBioCurationSummary(
            out=config.dataset.out, rows_read=tally.rows, malformed_lines=len(malformed), kept=kept.num_rows,
            dropped=dropped, failing=dict(tally.failing), filters=[c.describe() for c in config.filters.conditions],
            unmatched_filter_names=[n for n in wanted if n not in tally.names_seen], subsets=subsets,
            cryptic=cryptic, downloads=downloads, seed=config.dataset.seed,
            elapsed_s=time.monotonic() - run.started, config=_config_record(config),
        )
        return Built(summary, _rejected_table(tally, malformed, config.dataset.metadata),
                     lambda lines: render_card(summary, lines))


def build_crypticbio(config: str | Path | CrypticBioBuildConfig | CrypticBioCurateConfig
                     ) -> CrypticBioCurationSummary:
    """Curate CrypticBio-style benchmarks as a config says (a YAML path or a parsed config); see the module
    docstring for what is written to ``dataset.out``."""
    return run_build(crypticbio_stages(config))


def crypticbio_stages(config: str | Path | CrypticBioBuildConfig | CrypticBioCurateConfig) -> CrypticBioBuild:
    """The stages of the curation a config says (a YAML path or a parsed config)."""
    return CrypticBioBuild(_resolve(config))


__all__ = ["WRITER", "CrypticBioBuild", "build_crypticbio", "crypticbio_stages", "write_benchmark_csv"]
