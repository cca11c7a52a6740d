"""CrypticBio's four benchmarks: the published CSVs, their photos fetched once into the cache, zero-shot per name
style with results per taxonomic group and per cryptic group.

``gmanolache/CrypticBio`` publishes ``CrypticBio-Benchmark/CrypticBio-{Common,CommonUnseen,Endangered,Invasive}
.csv`` (one row per photo, its URL, lineage, place, date and vernacular names; see
:mod:`cladebench.benchmarks.crypticbio.source`). The first use of a benchmark fetches its CSV, downloads the photos
through the downloader into the cache (``downloads/``, shared by every build, so a photo is fetched once) and
builds the dataset. A mirror is a folder holding the CSV (at any depth, as the builder ``cladebench build
crypticbio`` writes it or under ``CrypticBio-Benchmark/`` as published) and, when known, ``cryptic_groups.tsv``
(``anchor<TAB>species,species,...``), which gives each row its cryptic group.

The paper reports zero-shot top-1 with 95% binomial intervals under scientific, common and mixed names: the
protocol runs the three name styles (``sci``, ``com``, ``mixed``), and breaks each down by ``taxonomic_group``
(the seven groups, Squamata included) and ``cryptic_group`` (a species and its look-alikes), pooled over the
benchmark's species otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cladebench.benchmarks.base import Benchmark, Headline, Protocol, PublishedFigure, register_benchmark
from cladebench.curate.builders import Builder
from cladebench.curate.builders import register as register_builder
from cladebench.curate.sources import Source
from cladebench.curate.sources import register as register_source
from cladebench.environment import OFFLINE_REASON, hub_offline
from cladebench.errors import CladebenchError, DatasetNotFoundError

REPO = "gmanolache/CrypticBio"
"""The Hub dataset that publishes the benchmark CSVs."""
LOOKUP_FILE = "cryptic_groups.tsv"
"""The cryptic-group lookup a mirror may hold beside the CSVs (as ``cladebench build crypticbio`` writes it)."""
NAME_STYLES = ("sci", "com", "mixed")
"""The name styles the paper reports, in its order."""

PROTOCOL = Protocol(
    "zeroshot",
    {"rank": "species", "group_by": "none", "breakdown": ("taxonomic_group", "cryptic_group"), "name_style": "sci"},
    runs=tuple({"name_style": style} for style in NAME_STYLES),
)
HEADLINE = Headline("zeroshot", "top1_species", {"name_style": "sci"})
"""Zero-shot species top-1 under scientific names, pooled over the benchmark's species (as the paper's tables)."""
PUBLISHED: tuple[PublishedFigure, ...] = ()
"""No published figure is listed: the paper's zero-shot tables could not be checked here against this protocol
(its label set and prompts), so none is shown beside our numbers rather than one that may not compare."""


def _find(folder: Path, name: str) -> Path | None:
    """The file called ``name`` in ``folder`` at any depth (hidden folders left out), or None."""
    for root, folders, files in os.walk(folder):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        if name in files:
            return Path(root) / name
    return None


def _build(csv_path: Path, lookup: Path | None, out: Path, subset: str) -> None:
    from cladebench.benchmarks.crypticbio.source import build_crypticbio_dataset
    from cladebench.cache import cache_dir

    build_crypticbio_dataset(csv_path, out, lookup=lookup, download_dir=cache_dir("downloads"), subset=subset)


def _register(name: str, file_name: str, subset: str, what: str) -> None:
    def from_mirror(folder: Path, out: Path) -> None:
        csv_path = _find(folder, file_name)
        if csv_path is None:
            raise DatasetNotFoundError(f"{folder}: no {file_name} (a mirror of {name} holds the published "
                                       f"CrypticBio-Benchmark/{file_name}, and optionally {LOOKUP_FILE})")
        _build(csv_path, _find(folder, LOOKUP_FILE), out, subset)

    def fetch(out: Path) -> dict[str, Any]:
        if hub_offline():
            raise CladebenchError(
                f"benchmark {name} is not built on this machine and {OFFLINE_REASON}, which forbids fetching it; "
                f"download CrypticBio-Benchmark/{file_name} of {REPO} into a folder and pass it with --data DIR (its "
                "photos are then fetched from their URLs), then rerun")
        from huggingface_hub import hf_hub_download

        path = Path(hf_hub_download(repo_id=REPO, repo_type="dataset", filename=f"CrypticBio-Benchmark/{file_name}"))
        _build(path, None, out, subset)
        return {"repo": REPO, "revision": path.parent.parent.name}  # snapshots/<commit>/CrypticBio-Benchmark/...

    register_benchmark(Benchmark(
        name=name, source=f"hf://datasets/{REPO}/CrypticBio-Benchmark/{file_name}", release=None,
        description=f"CrypticBio-{what} ({REPO}): cryptic species groups; zero-shot top-1 under scientific, "
                    "common and mixed names, per taxonomic group and cryptic group",
        protocols=(PROTOCOL,), headline=HEADLINE, published=PUBLISHED,
        mirror_layout=f"CrypticBio-Benchmark/{file_name} (photo URLs inside) and optionally {LOOKUP_FILE}",
        fetch=fetch, from_mirror=from_mirror,
    ))


for _name, _file, _subset, _what in (
    ("crypticbio-common", "CrypticBio-Common.csv", "common", "Common"),
    ("crypticbio-commonunseen", "CrypticBio-CommonUnseen.csv", "common-unseen", "CommonUnseen"),
    ("crypticbio-endangered", "CrypticBio-Endangered.csv", "endangered", "Endangered"),
    ("crypticbio-invasive", "CrypticBio-Invasive.csv", "invasive", "Invasive"),
):
    _register(_name, _file, _subset, _what)

register_source(Source(
    "crypticbio", "cladebench.benchmarks.crypticbio.source", "read_crypticbio", "build_crypticbio_dataset",
    "CrypticBio benchmark CSVs (Common, CommonUnseen, Endangered, Invasive): iNat/observation.org photos",
    "CrypticBioLoadConfig",
))
register_builder(Builder(
    "crypticbio", "cladebench.benchmarks.crypticbio.builder.build", "CrypticBioBuildConfig", "build_crypticbio",
    "CrypticBio-style benchmarks (Common, CommonUnseen, Endangered, Invasive) from metadata and a YAML config",
    config_module="cladebench.benchmarks.crypticbio.builder.sections", stages_name="crypticbio_stages",
))
