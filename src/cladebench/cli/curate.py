"""The verbs that make datasets: ``build <builder>`` and ``load <source>``, one config per builder or source.

Each source takes only the options it uses: ``load inquire-rerank`` has ``--queries`` and no download options
(its images are in its files), ``load crypticbio`` has ``--lookup`` and the download options. An option of
another source is an unrecognised argument, not something silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cladebench.cli.verbs import FAMILIES, Family, Verb
from cladebench.config import OPTION, at_least, bare_value, positive
from cladebench.raycluster import DEFAULT_ADDRESS
from cladebench.registry import Registry

# --- build ---------------------------------------------------------------------------------------


def _builders() -> dict[str, Verb]:
    from cladebench.curate.builders import BUILDERS

    def run(builder: Any) -> Callable[[Any], int]:
        def build(config: Any) -> int:
            summary = builder.build(config)
            print(summary.describe() if hasattr(summary, "describe") else summary)
            return 0

        return build

    return {name: Verb(name=name, help=b.doc, config=b.config(), run=run(b)) for name, b in BUILDERS.items()}


FAMILIES.add("build", Family(help="build a benchmark from raw sources (an iNaturalist export, a catalog, a config)",
                             metavar="BENCHMARK", members=_builders))


# --- load ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LoadConfig:
    """What every source's load needs: its files and where the dataset goes."""

    path: Path
    """The source's metadata file or folder."""
    out: Path = field(metadata=OPTION)
    """Where to write the Lance dataset (must not exist); failures go to OUT.failures.parquet beside it."""

    def builder_options(self) -> dict[str, Any]:
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

    def builder_options(self) -> dict[str, Any]:
        from cladebench.curate.fetch import DownloadConfig

        return {"limit": self.limit, "download_dir": self.download_dir,
                "download_config": DownloadConfig(concurrency=self.concurrency, max_attempts=self.retries,
                                                  item_deadline_s=self.image_deadline_s, progress=True,
                                                  ray=self.ray)}


LOAD_CONFIGS: Registry[type[LoadConfig]] = Registry("source")
"""The load config of each registered source (``cladebench load <source>``)."""


@LOAD_CONFIGS.register("crypticbio")
@dataclass(frozen=True, kw_only=True)
class CrypticBioLoadConfig(FetchingLoadConfig):
    """Build a Lance dataset from a CrypticBio CSV (Common, CommonUnseen, Endangered or Invasive), fetching its
    photos."""

    lookup: Path | None = None
    """Cryptic-group lookup (anchor<TAB>comma-separated look-alikes) to attach as cryptic_group."""

    def builder_options(self) -> dict[str, Any]:
        return {**super().builder_options(), "lookup": self.lookup}


@LOAD_CONFIGS.register("inat-coobserved")
@dataclass(frozen=True, kw_only=True)
class CoObservedLoadConfig(FetchingLoadConfig):
    """Build a Lance dataset from the Parquet files of dcher95/inat-coobserved (or their folder), fetching the
    photos the files do not carry."""


@LOAD_CONFIGS.register("inquire-rerank")
@dataclass(frozen=True, kw_only=True)
class InquireRerankLoadConfig(LoadConfig):
    """Build a Lance dataset from the Parquet files of evendrow/INQUIRE-Rerank (or their folder); the images are
    in the files, nothing is fetched."""

    queries: tuple[Path, ...] = ()
    """INQUIRE query CSVs, to fill query_id by exact text when the Parquet files lack it."""

    def builder_options(self) -> dict[str, Any]:
        return {"queries": list(self.queries) or None}


def _run_load(name: str) -> Callable[[LoadConfig], int]:
    def load(command: LoadConfig) -> int:
        from cladebench.curate.sources import get_source

        build = get_source(name).build(command.path, command.out, **command.builder_options())
        if hasattr(build, "download"):
            print(f"{build.dataset_path}: {build.written:,} of {build.rows:,} rows written; downloads: "
                  f"{build.download.summary()}")
        else:
            print(f"{build.dataset_path}: {build.rows:,} rows written")
        for note in getattr(build, "notes", ()):
            print(note)
        if getattr(build, "failed", 0):
            print(f"{build.failed:,} rows left out, listed with their reasons in {build.failures_path}")
        return 0

    return load


def _sources() -> dict[str, Verb]:
    from cladebench.curate.sources import SOURCES

    return {name: Verb(name=name, help=source.doc, config=LOAD_CONFIGS.get_named(name), run=_run_load(name))
            for name, source in SOURCES.items()}


FAMILIES.add("load", Family(help="build a dataset from a published benchmark's files (images fetched, failures "
                                 "recorded)", metavar="SOURCE", members=_sources))
