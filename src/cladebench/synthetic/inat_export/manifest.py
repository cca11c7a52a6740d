"""What a generated export is asked to hold (:class:`ExportConfig`) and what it holds (:class:`ExportManifest`).

Why apart: a builder's tests read the manifest's answers without caring how the rows were made, and
benchmarks store it as JSON (:func:`write_manifest`) to generate once and build many times.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from cladebench.errors import CladebenchError

PHOTO_DEFECTS: tuple[str, ...] = (
    "invalid_photo_row", "more_than_two_observations", "inconsistent_photo_rows", "unknown_observation",
    "invalid_observation_row", "ambiguous_observation", "observer_mismatch", "not_research_grade",
    "unknown_taxon", "malformed_ancestry", "inactive_taxon", "ancestry_mismatch", "incomplete_lineage",
    "kingdom_not_included", "same_species", "same_genus", "license_not_allowed", "unknown_observer",
)
"""Ways a photo on two or more observations can be unusable, in the order the builder checks them; the
generator plants photos that fail each one (and only it)."""

ROW_DEFECTS: tuple[tuple[str, str], ...] = (
    ("photos", "malformed_line"), ("taxa", "missing_fields"), ("taxa", "duplicate_taxon_id"),
)
"""Rows bad on their own, planted apart from any photo: (table, reason)."""


@dataclass(frozen=True)
class ExportConfig:
    """What :func:`write_export` writes."""

    n_photos: int = 20_000
    """Rows of ``photos.csv`` in all; the background fills what the planted photos leave."""
    seed: int = 0
    """Seed of everything written; the same config writes byte-identical files."""
    anomaly_score: bool = True
    """Write the current 9-column observations (with ``anomaly_score``); False writes the 2022 8-column file."""
    n_coobserved: int = 60
    """Eligible co-observed photos to plant."""
    n_defects: int = 2
    """Photos planted per kind of :data:`PHOTO_DEFECTS`, and rows per kind of :data:`ROW_DEFECTS` (variants
    of a kind alternate, e.g. an empty field and a truncated line)."""
    n_observers: int = 400
    """Observers of the background observations."""
    chunk_rows: int = 100_000
    """Background observations generated and written at a time: the memory bound."""
    compress: bool = False
    """Write ``<table>.csv.gz``, as the bucket serves the files."""

    def __post_init__(self) -> None:
        if self.n_defects < 1 or self.n_coobserved < 1:
            raise CladebenchError("n_coobserved and n_defects must be at least 1")
        if self.chunk_rows < 1 or self.n_observers < 8:
            raise CladebenchError("chunk_rows must be positive and n_observers at least 8")


@dataclass(frozen=True)
class PlantedPhoto:
    """An eligible co-observed photo and what a correct build says about it."""

    photo_id: int
    divergence_rank: str
    """Rank at which the two species' lineages part (kingdom .. genus)."""
    species_ids: tuple[int, int]
    """Species-rank taxon ids of the two organisms (a subspecies observation counts as its species)."""
    observation_uuids: tuple[str, str]
    observer_id: int
    license: str
    """As written in ``photos.csv`` (case varies)."""
    extension: str
    image_url: str
    """Medium-size URL, extension as written."""
    attribution: str
    """As iNaturalist formats it, naming the observer (or the login when the name is ``None``)."""
    scientific_names: tuple[str, str]
    """The two species' binomials."""
    n_photos_sharing_observation_pair: int


@dataclass(frozen=True)
class ExportManifest:
    """What :func:`write_export` wrote and planted: the right answers for a builder's tests."""

    export_dir: Path
    config: ExportConfig
    files: dict[str, Path]
    rows: dict[str, int]
    """Data lines (header excluded) per table."""
    eligible: tuple[PlantedPhoto, ...]
    """The eligible co-observed photos, in photo-id order."""
    planted: dict[str, tuple[int, ...]]
    """Photo ids planted per :data:`PHOTO_DEFECTS` kind."""
    photo_outcomes: dict[str, int]
    """Expected count of distinct photo ids per outcome (every kind of :data:`PHOTO_DEFECTS`, plus
    ``single_observation`` for photos on one observation); the eligible ones are not in it."""
    row_issues: dict[str, dict[str, int]]
    """Expected bad rows per table and reason."""
    observers_without_name: int
    """Rows of ``observers.csv`` whose name is empty or ``None``."""

    @property
    def n_photo_ids(self) -> int:
        """Distinct photo ids a reader can parse (a rejected line's id is not one)."""
        return sum(self.photo_outcomes.values()) + len(self.eligible)

    def as_dict(self) -> dict[str, object]:
        return {
            "export_dir": str(self.export_dir), "config": dataclasses.asdict(self.config),
            "files": {k: str(v) for k, v in self.files.items()}, "rows": self.rows,
            "eligible": [dataclasses.asdict(p) for p in self.eligible],
            "planted": {k: list(v) for k, v in self.planted.items()}, "photo_outcomes": self.photo_outcomes,
            "row_issues": self.row_issues, "observers_without_name": self.observers_without_name,
        }



def write_manifest(manifest: ExportManifest, path: str | Path) -> Path:
    """The manifest as JSON (for benchmarks that generate once and build many times)."""
    path = Path(path)
    path.write_text(json.dumps(manifest.as_dict(), indent=1, sort_keys=True))
    return path


__all__ = ["PHOTO_DEFECTS", "ROW_DEFECTS", "ExportConfig", "ExportManifest", "PlantedPhoto", "write_manifest"]
