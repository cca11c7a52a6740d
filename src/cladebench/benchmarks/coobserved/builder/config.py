"""The options of ``cladebench build coobserved`` and the constants of what a build keeps.

Why a module: the CLI builds its ``--help`` from this config without importing DuckDB or the stages.

Example:
    >>> from dataclasses import fields
    >>> [f.name for f in fields(CoObservedBuildConfig)][:4]
    ['export_dir', 'out', 'exclude_photo_ids', 'tol_species']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cladebench.config import OPTION, bare_value
from cladebench.curate import inat_export
from cladebench.errors import UsageError
from cladebench.raycluster import DEFAULT_ADDRESS

ALLOWED_LICENSES: tuple[str, ...] = ("cc0", "cc-by", "cc-by-nc")
"""License codes kept (:func:`cladebench.benchmarks.inquire.source.parse_license`'s codes)."""
INCLUDED_KINGDOMS: tuple[str, ...] = ("Animalia", "Plantae", "Fungi")
DIVERGENCE_RANKS: tuple[str, ...] = inat_export.DIVERGENCE_RANKS
"""Ranks a kept pair can part at, broadest first (also the order ranks are filled in)."""
DEFAULT_MEMORY_LIMIT = "1GB"
"""DuckDB's memory limit; it spills beyond it (sorts, joins, aggregates) to its temporary directory."""
SOURCE = "inaturalist-open-data"
"""Value of the ``source`` column."""
DATA_FILE = "data/coobserved.parquet"
"""Where the rows go inside ``--out``: under ``data/``, so the folder can be given to the reader as is."""


@dataclass(frozen=True)
class CoObservedBuildConfig:
    """Build iNat Co-Observed from an iNaturalist open-data export (``cladebench build coobserved``)."""

    export_dir: Path = field(metadata=OPTION)
    """Folder with photos.csv, observations.csv, taxa.csv and observers.csv (or their .csv.gz)."""
    out: Path = field(metadata=OPTION)
    """Output folder: data/coobserved.parquet, README.md (the card), build.json, left_out.parquet."""
    exclude_photo_ids: Path | None = None
    """Photo ids to leave out (e.g. TreeOfLife-200M's): a text file, one id per line, or a Parquet file with a
    photo_id column."""
    tol_species: Path | None = None
    """Scientific names of the species in TreeOfLife-200M (one per line, or Parquet with scientific_name), to fill
    species_in_tol200m."""
    per_rank: int = 1000
    """At most this many photos per divergence rank (kingdom .. genus)."""
    seed: int = 0
    """Seed of the sampling order; the same export, config and seed give the same rows in the same order."""
    max_per_species: int = 5
    """At most this many photos per species (counting either organism)."""
    max_per_observer: int = 10
    """At most this many photos per observer."""
    download: bool = False
    """Also fetch the photos and write OUT/coobserved.lance (otherwise: cladebench load inat-coobserved OUT/data)."""
    ray: str | None = field(default=None, metadata=bare_value(DEFAULT_ADDRESS))
    """With --download, fetch on a Ray cluster: --ray alone as ray.init finds it, or auto, local,
    ray://HOST:10001 (the download cache must be on a filesystem every node sees)."""
    overwrite: bool = False
    """Replace OUT if it is a previous output of this builder (its marker file says so); anything else is refused."""

    def __post_init__(self) -> None:
        for name in ("per_rank", "max_per_species", "max_per_observer"):
            if getattr(self, name) < 1:
                raise UsageError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.seed < 0:
            raise UsageError(f"seed must be >= 0, got {self.seed}")



__all__ = [
    "ALLOWED_LICENSES",
    "DATA_FILE",
    "DEFAULT_MEMORY_LIMIT",
    "DIVERGENCE_RANKS",
    "INCLUDED_KINGDOMS",
    "SOURCE",
    "CoObservedBuildConfig",
]
