"""The bulk of a generated export and its files: background rows streamed a chunk at a time, planted rows mixed in.

Why apart from the planting: the background is where the size goes (millions of rows, bounded memory),
the planting is where the answers are; each is easier to read without the other.
"""

from __future__ import annotations

import contextlib
import gzip
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

import numpy as np

from cladebench.curate.inat_export import HEADERS, OBSERVATIONS_2022, TABLES, attribution_name
from cladebench.errors import CladebenchError
from cladebench.synthetic.inat_export.manifest import ExportConfig, ExportManifest
from cladebench.synthetic.inat_export.planting import Planter, random_uuids
from cladebench.synthetic.inat_export.taxonomy import Observer, Tree, make_observers

_LICENSES = ("CC-BY-NC", "CC-BY", "CC0", "CC-BY-SA", "CC-BY-NC-SA", "CC-BY-ND", "CC-BY-NC-ND")
_LICENSE_P = np.array([0.6, 0.12, 0.08, 0.04, 0.08, 0.03, 0.05])
_EXTENSIONS = ("jpg", "jpeg", "JPG", "png", "jpe")
_EXTENSION_P = np.array([0.86, 0.06, 0.04, 0.03, 0.01])
_GRADES = ("research", "needs_id", "casual")
_GRADE_P = np.array([0.68, 0.24, 0.08])

# --- background ----------------------------------------------------------------------------------

class _Background:
    """The bulk of an export: observations with one to four photos each, every photo on one observation."""

    def __init__(self, rng: np.random.Generator, tree: Tree, observers: list[Observer], config: ExportConfig):
        self.rng, self.config = rng, config
        taxa = [s.taxon_id for s in tree.species]
        taxa += [t for s in tree.species for t in s.subspecies] + [s.taxon_id for s in tree.excluded_species]
        taxa += [g.taxon_id for g in tree.genera[:20]]
        weights = 1.0 / np.arange(1, len(taxa) + 1) ** 0.8  # a long tail, as on iNaturalist
        self.taxa = np.array(taxa)[rng.permutation(len(taxa))]
        self.taxa_p = weights / weights.sum()
        self.observers = np.array([o.observer_id for o in observers])
        weights = 1.0 / np.arange(1, len(observers) + 1) ** 1.1
        self.observer_p = weights / weights.sum()
        self.next_photo_id = 10_000_000

    def chunks(self, n_photo_rows: int) -> Iterator[tuple[list[str], list[str]]]:
        """(observation lines, photo lines) of ``chunk_rows`` observations at a time, ``n_photo_rows`` photo
        rows in all."""
        left = n_photo_rows
        while left > 0:
            n = self.config.chunk_rows
            per_obs = self.rng.choice(4, size=n, p=[0.55, 0.25, 0.12, 0.08]) + 1
            cumulative = np.cumsum(per_obs)
            if cumulative[-1] >= left:
                last = int(np.searchsorted(cumulative, left))
                per_obs = per_obs[:last + 1]
                per_obs[-1] -= int(cumulative[last] - left)
                n = last + 1
            yield self._chunk(n, per_obs)
            left -= int(per_obs.sum())

    def _chunk(self, n: int, per_obs: np.ndarray) -> tuple[list[str], list[str]]:
        rng = self.rng
        uuids = random_uuids(rng, n)
        observers = rng.choice(self.observers, size=n, p=self.observer_p).tolist()
        taxa = rng.choice(self.taxa, size=n, p=self.taxa_p).tolist()
        grades = rng.choice(len(_GRADES), size=n, p=_GRADE_P).tolist()
        latitude = rng.uniform(-60, 70, size=n).tolist()
        longitude = rng.uniform(-180, 180, size=n).tolist()
        accuracy = rng.integers(1, 5000, size=n).tolist()
        days = rng.integers(0, 3650, size=n)
        dates = (np.datetime64("2015-01-01") + days).astype(str).tolist()
        anomaly = rng.uniform(0, 3, size=n).tolist()
        observation_lines = []
        for i in range(n):
            grade = _GRADES[grades[i]]
            where = ("", "") if grade == "casual" and i % 3 == 0 else (f"{latitude[i]:.10f}", f"{longitude[i]:.10f}")
            line = (f"{uuids[i]}\t{observers[i]}\t{where[0]}\t{where[1]}\t{accuracy[i] if i % 4 else ''}\t"
                    f"{taxa[i]}\t{grade}\t{dates[i]}")
            observation_lines.append(line + (f"\t{anomaly[i]:.5f}" if self.config.anomaly_score else ""))
        total = int(per_obs.sum())
        owner = np.repeat(np.arange(n), per_obs)
        starts = np.cumsum(per_obs) - per_obs
        position = (np.arange(total) - np.repeat(starts, per_obs)).tolist()
        photo_uuids = random_uuids(rng, total)
        gaps = rng.integers(1, 4, size=total)
        photo_ids = (self.next_photo_id + np.cumsum(gaps)).tolist()
        self.next_photo_id = photo_ids[-1] if photo_ids else self.next_photo_id
        licenses = rng.choice(len(_LICENSES), size=total, p=_LICENSE_P).tolist()
        extensions = rng.choice(len(_EXTENSIONS), size=total, p=_EXTENSION_P).tolist()
        widths = rng.integers(300, 2049, size=total).tolist()
        owner_list = owner.tolist()
        photo_lines = [
            f"{photo_uuids[j]}\t{photo_ids[j]}\t{uuids[o]}\t{observers[o]}\t{_EXTENSIONS[extensions[j]]}\t"
            f"{_LICENSES[licenses[j]]}\t{widths[j]}\t{2048 if widths[j] < 2048 else 1536}\t{position[j]}"
            for j, o in enumerate(owner_list)
        ]
        return observation_lines, photo_lines


# --- writing -------------------------------------------------------------------------------------


def _open_for_writing(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return gzip.open(path, "wt", encoding="utf-8", newline="\n", compresslevel=1)
    return path.open("w", encoding="utf-8", newline="\n")


class _Writer:
    """One export file, header first, written a chunk of lines at a time."""

    def __init__(self, handle: TextIO, header: Sequence[str]) -> None:
        self.handle = handle
        self.rows = 0
        self.handle.write("\t".join(header) + "\n")

    def write(self, lines: Sequence[str]) -> None:
        if lines:
            self.handle.write("\n".join(lines) + "\n")
            self.rows += len(lines)


def write_export(export_dir: str | Path, config: ExportConfig | None = None) -> ExportManifest:
    """Write an iNat open-data export with planted co-observed photos into ``export_dir``; see the module
    docstring. Returns what was planted and the counts a correct builder reports."""
    config = config or ExportConfig()
    export_dir = Path(export_dir)
    export_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([config.seed, 0x1A7])
    tree = Tree(rng)
    observers = make_observers(rng, config.n_observers)
    planter = Planter(rng, tree, observers, config)
    planter.plant_eligible(config.n_coobserved)
    planter.plant_defects()
    n_background = config.n_photos - len(planter.photo_lines)
    if n_background < 0:
        raise CladebenchError(f"n_photos={config.n_photos} is fewer than the {len(planter.photo_lines)} planted "
                              "photo rows")

    suffix = ".csv.gz" if config.compress else ".csv"
    files = {t: export_dir / f"{t}{suffix}" for t in TABLES}
    headers = {t: HEADERS[t][0] for t in TABLES}
    if not config.anomaly_score:
        headers["observations"] = OBSERVATIONS_2022
    with contextlib.ExitStack() as stack:
        writers = {t: _Writer(stack.enter_context(_open_for_writing(files[t])), headers[t]) for t in TABLES}
        writers["taxa"].write([t.line() for t in tree.taxa] + planter.extra_taxa_lines)
        writers["observers"].write([o.line() for o in observers] + planter.extra_observer_lines)
        # The planted rows go in after the first background chunk, shuffled, so that the rows of one photo are
        # not next to each other (nothing in the format promises they are).
        planted = {"photos": planter.photo_lines, "observations": planter.observation_lines}
        background = _Background(rng, tree, observers, config)
        single = 0
        placed = False
        for observation_lines, photo_lines in background.chunks(n_background):
            writers["observations"].write(observation_lines)
            writers["photos"].write(photo_lines)
            single += len(photo_lines)
            if not placed:
                for table, lines in planted.items():
                    writers[table].write([lines[i] for i in rng.permutation(len(lines))])
                placed = True
        if not placed:
            for table, lines in planted.items():
                writers[table].write(lines)

    photo_outcomes = {"single_observation": single, **{k: len(v) for k, v in planter.planted.items()}}
    return ExportManifest(
        export_dir=export_dir, config=config, files=files, rows={t: w.rows for t, w in writers.items()},
        eligible=tuple(sorted(planter.eligible, key=lambda p: p.photo_id)),
        planted={k: tuple(v) for k, v in planter.planted.items()}, photo_outcomes=photo_outcomes,
        row_issues={t: dict(sorted(c.items())) for t, c in planter.row_issues.items() if c},
        observers_without_name=sum(attribution_name(None, o.name) is None for o in observers)
        + sum(1 for line in planter.extra_observer_lines if line.split("\t")[2] in ("", "None")),
    )



__all__ = ["write_export"]
