"""The options of ``cladebench build finegrained``: the catalog, the challenge groups, ``--seen`` and ``--embed``.

**Challenge groups** are chosen by taxon: ``NAME=RANK:VALUE[,VALUE]`` (:class:`ChallengeGroup`),
defaults :data:`DEFAULT_GROUPS`. Names compare case-insensitively; a species value is a binomial,
matched against the catalog's binomial (its ``species`` when that is one, else ``genus species``).
A row goes to the first group it matches (rows in several are counted in the notes).

Why a module: the CLI builds its ``--help`` and checks every option here, before DuckDB, PIL or a model
is imported; a bad group spec or an unknown model is a usage error before anything is read.

Example:
    >>> ChallengeGroup.parse("zebras=species:Equus quagga,Equus grevyi")
    ChallengeGroup(name='zebras', rank=<Rank.SPECIES: 6>, values=('Equus quagga', 'Equus grevyi'))
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cladebench import store
from cladebench.config import OPTION, bare_value
from cladebench.errors import UsageError
from cladebench.raycluster import DEFAULT_ADDRESS
from cladebench.taxonomy import Rank
from cladebench.taxonomy.names import name_key

if TYPE_CHECKING:
    from cladebench.models.spec import ModelSpec

DEFAULT_GROUPS: tuple[str, ...] = (
    "Peromyscus=genus:Peromyscus",
    "Ixodidae=family:Ixodidae",
    "zebras=species:Equus quagga,Equus grevyi,Equus zebra",
)
"""The published dataset's groups: deer mice (genus), hard ticks (family), the three zebra species of *Equus*."""
DATASET_DIR = "data/challenges.lance"
"""Where the table goes inside ``--out`` (the published repository's layout)."""
DEFAULT_MIN_INDEX_ROWS = 256
"""Fewest rows for an IVF_FLAT index; below it exact search is as fast and k-means has too little to learn."""
WEBP_METHOD = 6
"""libwebp's effort level (0-6): 6 gives the smallest lossless files; pixels are identical at every level."""
PASSTHROUGH_COLUMNS: tuple[str, ...] = ("publisher", "basisOfRecord", "img_type", "resolution_status")
"""Catalog columns copied as they are (null when the catalog lacks them)."""
CATALOG_TEXT_COLUMNS: tuple[str, ...] = ("source_dataset", "source_id", "scientific_name", "common_name",
                                         "source_url", *PASSTHROUGH_COLUMNS)
"""Optional catalog columns read as text."""
CHUNK_ROWS = 64
"""Rows per batch handed to Lance: bounds the encoded images held in memory."""


# --- challenge groups ----------------------------------------------------------------------------


def _normalise_name(value: str) -> str:
    return name_key(value)


BINOMIAL_SQL = ("lower(regexp_replace(CASE WHEN regexp_matches(trim(species), '^[A-Z]\\S*\\s') THEN trim(species) "
                "ELSE trim(genus) || ' ' || trim(species) END, '\\s+', ' ', 'g'))")
"""The catalog row's binomial, lower case: ``species`` when it is one, else ``genus species``."""


@dataclass(frozen=True)
class ChallengeGroup:
    """A challenge group: every row whose name at ``rank`` is one of ``values``."""

    name: str
    """The ``challenge_group`` value."""
    rank: Rank
    """Rank the values name taxa at."""
    values: tuple[str, ...]
    """Taxon names at that rank (binomials for ``species``), compared case-insensitively."""

    @classmethod
    def parse(cls, spec: str) -> ChallengeGroup:
        """``NAME=RANK:VALUE[,VALUE]``, e.g. ``Ixodidae=family:Ixodidae``."""
        example = "e.g. zebras=species:Equus quagga,Equus grevyi"
        name, equals, rest = spec.partition("=")
        rank_name, colon, values_text = rest.partition(":")
        values = tuple(v.strip() for v in values_text.split(",") if v.strip())
        if not (equals and colon and name.strip() and values):
            raise UsageError(f"challenge group {spec!r}: expected NAME=RANK:VALUE[,VALUE] ({example})")
        try:
            rank = Rank.parse(rank_name)
        except KeyError as exc:
            raise UsageError(f"challenge group {spec!r}: {exc}") from None
        if rank is Rank.SPECIES:
            not_binomial = [v for v in values if len(v.split()) < 2]
            if not_binomial:
                raise UsageError(f"challenge group {spec!r}: species are named by their binomial "
                                 f"('Equus quagga'), not {not_binomial}")
        return cls(name.strip(), rank, values)

    @property
    def taxon(self) -> str:
        """``genus:Peromyscus``, as the card shows it."""
        return f"{self.rank.column}:{', '.join(self.values)}"

    def condition(self) -> str:
        """SQL over the catalog's columns: true for a row of this group."""
        column = BINOMIAL_SQL if self.rank is Rank.SPECIES else f'lower(trim("{self.rank.column}"))'
        return f"{column} IN ({', '.join(store.sql_literal(_normalise_name(v)) for v in self.values)})"


def parse_groups(specs: Iterable[str]) -> tuple[ChallengeGroup, ...]:
    """Parse ``--group`` values; group names must be unique."""
    groups = tuple(ChallengeGroup.parse(s) for s in specs)
    names = Counter(g.name for g in groups)
    repeated = [n for n, count in names.items() if count > 1]
    if repeated:
        raise UsageError(f"challenge group name(s) {repeated} given more than once")
    if not groups:
        raise UsageError("at least one challenge group is needed (--group NAME=RANK:VALUE)")
    return groups


def _parse_pair(spec: str, what: str, example: str) -> tuple[str, str]:
    left, equals, right = spec.partition("=")
    if not (equals and left.strip() and right.strip()):
        raise UsageError(f"{what} {spec!r}: expected {example}")
    return left.strip(), right.strip()


def parse_seen(specs: Iterable[str]) -> tuple[tuple[str, Path], ...]:
    """Parse ``--seen MODEL=FILE`` values; each model once."""
    pairs = tuple((model, Path(path)) for model, path in
                  (_parse_pair(s, "--seen", "MODEL=FILE, e.g. bioclip-2=bioclip2_uuids.txt") for s in specs))
    repeated = [m for m, n in Counter(m for m, _ in pairs).items() if n > 1]
    if repeated:
        raise UsageError(f"--seen names model(s) {repeated} more than once")
    return pairs


_COLUMN_KEY = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class EmbedTarget:
    """One ``--embed`` value, its model name resolved once: the column it writes and the model that writes it."""

    column: str
    """The ``emb_*`` column written."""
    model: str
    """The model as named (recorded, and shown in messages)."""
    spec: ModelSpec
    """The name resolved (no weights read): every later step uses this, never the name again."""


def parse_embed(specs: Iterable[str]) -> tuple[EmbedTarget, ...]:
    """Parse ``--embed`` values: ``MODEL`` (column derived from it) or ``KEY=MODEL``.

    Each model name is resolved here, once (no weights read), so a misspelt alias fails before any image is
    fetched; :attr:`FineGrainedBuildConfig.embed_targets` keeps the result for the rest of the build.
    """
    from cladebench.models.registry import resolve_encoder

    targets = []
    for spec in specs:
        key, equals, model = spec.partition("=")
        if equals and _COLUMN_KEY.fullmatch(key) and model.strip():
            resolved = resolve_encoder(model.strip())
            column = key if key.startswith(store.EMBEDDING_PREFIX) else store.EMBEDDING_PREFIX + key
            targets.append(EmbedTarget(column, model.strip(), resolved))
        elif spec.strip():
            resolved = resolve_encoder(spec.strip())
            targets.append(EmbedTarget(str(resolved.column), spec.strip(), resolved))
        else:
            raise UsageError("--embed: an empty model name")
    repeated = [c for c, n in Counter(t.column for t in targets).items() if n > 1]
    if repeated:
        raise UsageError(f"--embed: two models would write column(s) {repeated}; name them with KEY=MODEL")
    return tuple(targets)


# --- the config ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FineGrainedBuildConfig:
    """Build Fine-Grained Challenges from a TreeOfLife-200M-style catalog (``cladebench build finegrained``)."""

    catalog: Path
    """Catalog of images (Parquet, CSV or TSV, or a folder of Parquet files): uuid, kingdom .. species, source_url,
    and optionally source_dataset, source_id, scientific_name, common_name, publisher, basisOfRecord, img_type."""
    provenance: Path = field(metadata=OPTION)
    """Provenance table joined on uuid (Parquet, CSV or TSV): license_name, license_link, copyright_owner."""
    out: Path = field(metadata=OPTION)
    """Output folder: data/challenges.lance, README.md (the card), embedding_models.json, build.json,
    left_out.parquet."""
    group: tuple[str, ...] = DEFAULT_GROUPS
    """Challenge groups, each NAME=RANK:VALUE[,VALUE] (e.g. 'zebras=species:Equus quagga,Equus grevyi'); a row
    goes to the first group it matches."""
    per_species: int = 100
    """At most this many images per species (seeded choice)."""
    genus_only_cap: int = 500
    """At most this many images per genus among rows identified to genus only (species null); 0 leaves them out."""
    seed: int = 0
    """Seed of the sampling; the same catalog, config and seed give the same rows in the same order."""
    seen: tuple[str, ...] = ()
    """MODEL=FILE: the uuids in FILE (one per line, or Parquet/CSV with a uuid column) were in MODEL's training
    data; fills seen_in_training."""
    embed: tuple[str, ...] = ()
    """Models to embed every image with (alias, hf-hub:ORG/NAME, local-dir:PATH), each into emb_<key>; KEY=MODEL
    names the column emb_KEY."""
    image_path_column: str = "image_path"
    """Catalog column of local image files; rows where it is empty (or the catalog lacks it) are fetched from
    source_url."""
    image_dir: Path | None = None
    """Folder that relative image paths are resolved against (default: the catalog's folder)."""
    download_dir: Path | None = None
    """Where fetched originals are kept, so a rerun fetches only what is missing (default: the cladebench cache)."""
    max_side: int = 720
    """Longest side of a stored image in pixels; larger images are shrunk with Lanczos, smaller ones kept as is."""
    min_index_rows: int = DEFAULT_MIN_INDEX_ROWS
    """Fewest rows for an IVF_FLAT index on an emb_ column; smaller datasets are searched exactly."""
    workers: int | None = None
    """Processes that resize and encode images (and decode them for embedding); 0 works in this process.
    Default: one per core."""
    concurrency: int = 16
    """Image downloads in flight at once (per Ray task with --ray)."""
    ray: str | None = field(default=None, metadata=bare_value(DEFAULT_ADDRESS))
    """Fetch the images on a Ray cluster: --ray alone as ray.init finds it, or auto, local, ray://HOST:10001;
    --download-dir must then be on a filesystem every node sees."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the embedding models run."""
    batch_size: int = 64
    """Images per forward pass when embedding."""
    progress: bool = True
    """Show progress bars on stderr."""
    overwrite: bool = False
    """Replace OUT if it is a previous output of this builder (its marker file says so), only once the new build is
    complete; anything else at OUT is refused."""

    def __post_init__(self) -> None:
        for name, low in (("per_species", 1), ("genus_only_cap", 0), ("max_side", 1), ("min_index_rows", 1),
                          ("concurrency", 1), ("batch_size", 1)):
            if getattr(self, name) < low:
                raise UsageError(f"{name} must be at least {low}, got {getattr(self, name)}")
        if self.seed < 0:
            raise UsageError(f"seed must be >= 0, got {self.seed}")
        if self.workers is not None and self.workers < 0:
            raise UsageError(f"workers must be >= 0, got {self.workers}")
        parse_groups(self.group)
        parse_seen(self.seen)
        self.embed_targets  # noqa: B018 (resolved here, so a misspelt model is refused before any work)

    @functools.cached_property
    def embed_targets(self) -> tuple[EmbedTarget, ...]:
        """The ``--embed`` values parsed, each model name resolved once (:func:`parse_embed`)."""
        return parse_embed(self.embed)



__all__ = [
    "CATALOG_TEXT_COLUMNS",
    "CHUNK_ROWS",
    "DATASET_DIR",
    "DEFAULT_GROUPS",
    "DEFAULT_MIN_INDEX_ROWS",
    "PASSTHROUGH_COLUMNS",
    "WEBP_METHOD",
    "ChallengeGroup",
    "EmbedTarget",
    "FineGrainedBuildConfig",
    "parse_embed",
    "parse_groups",
    "parse_seen",
]
