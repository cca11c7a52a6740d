"""iNat Co-Observed: its Parquet files on the Hugging Face Hub, built once into a Lance dataset, evaluated by
lineage completion, per divergence rank. The family's source (reader and builder of the published files) is
:mod:`.source`, its builder from an iNaturalist export :mod:`.builder`, its offline mirror :mod:`.mirror`.
"""

from __future__ import annotations

from pathlib import Path

from cladebench.benchmarks.base import Benchmark, Headline, Protocol, register_benchmark
from cladebench.benchmarks.hub import built_path, hub_snapshot
from cladebench.curate.builders import BUILDERS, Builder
from cladebench.curate.builders import register as register_builder
from cladebench.curate.sources import Source
from cladebench.curate.sources import register as register_source


def _fetch_inat_coobserved(out: Path) -> dict[str, object]:
    from cladebench.benchmarks.coobserved.source import build_inat_coobserved

    folder, fetched = hub_snapshot(
        "dcher95/inat-coobserved", ["*.parquet"], name="inat-coobserved",
        how=(f"download the Parquet files of dcher95/inat-coobserved, run `cladebench load inat-coobserved DIR "
             f"--out {built_path('inat-coobserved')}`"))
    build_inat_coobserved(folder, out)
    return fetched


def _inat_coobserved_from_mirror(folder: Path, out: Path) -> None:
    from cladebench.benchmarks.coobserved.source import build_inat_coobserved

    build_inat_coobserved(folder, out)


register_benchmark(Benchmark(
    name="inat-coobserved", source="hf://datasets/dcher95/inat-coobserved (data/*.parquet)", release=None,
    description="iNat Co-Observed (dcher95/inat-coobserved): photos of two organisms of different species; "
                "complete each organism's lineage below the rank where the two part",
    protocols=(Protocol("lineage", {"group_by": "none"}),),
    mirror_layout="data/*.parquet as published (one row per photo, organisms and divergence rank, photos inside "
                  "or by URL)",
    fetch=_fetch_inat_coobserved, from_mirror=_inat_coobserved_from_mirror,
    headline=Headline("lineage", "hint_exact"),  # no paper publishes results on it yet
))


register_source(Source(
    "inat-coobserved", "cladebench.benchmarks.coobserved.source", "read_inat_coobserved", "build_inat_coobserved",
    "iNat Co-Observed Parquet files (dcher95/inat-coobserved): iNat photos of two organisms of different species",
    "CoObservedLoadConfig",
))
register_builder(Builder(
    "inat-coobserved", "cladebench.benchmarks.coobserved.builder.build", "CoObservedBuildConfig", "build_coobserved",
    "iNat Co-Observed from an iNaturalist open-data export: photos on two observations of different species",
    config_module="cladebench.benchmarks.coobserved.builder.config", stages_name="CoObservedBuild",
))
BUILDERS.alias("coobserved", "inat-coobserved")
