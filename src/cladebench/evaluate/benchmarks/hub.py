"""INQUIRE-Rerank and iNat Co-Observed: Parquet files on the Hugging Face Hub, built once into a Lance dataset.

Both publish Parquet files with the photos inside (``evendrow/INQUIRE-Rerank``: ``data/test-*.parquet`` and
``data/validation-*.parquet``; ``dcher95/inat-coobserved``: ``data/*.parquet``). The first use fetches them and
builds the dataset with the source's builder (``cladebench load inquire-rerank`` / ``load inat-coobserved``); a
mirror is a folder holding the same files, in the same layout, and is built the same way. Offline, without a
mirror, the error says how to build the dataset from local files instead.

INQUIRE-Rerank is evaluated on its test split, broken down by supercategory and category, with AP@100, nDCG@100
and MRR as the INQUIRE paper reports them; Co-Observed by lineage completion, per divergence rank.
"""

from __future__ import annotations

from pathlib import Path

from cladebench.environment import OFFLINE_REASON, hub_offline
from cladebench.errors import CladebenchError
from cladebench.evaluate.benchmarks.base import Benchmark, Headline, Protocol, register_benchmark

INQUIRE_RERANK_FILES = ("*validation-*.parquet", "*test-*.parquet")
"""Hub file patterns of INQUIRE-Rerank's splits (fnmatch, so they match inside ``data/`` as well)."""


def hub_snapshot(repo_id: str, patterns: list[str], *, name: str, how: str) -> tuple[Path, dict[str, object]]:
    """The published files of a Hub dataset (fetched once into the Hub's cache) and the commit they are at; offline
    (:func:`~cladebench.environment.hub_offline`) an error that says ``how`` to build the benchmark from local files."""
    if hub_offline():
        raise CladebenchError(f"benchmark {name} is not built on this machine and {OFFLINE_REASON}, which forbids "
                              f"fetching it; {how}, or pass a local mirror of {repo_id} with --data DIR, then rerun")
    from huggingface_hub import snapshot_download

    folder = Path(snapshot_download(repo_id=repo_id, repo_type="dataset", allow_patterns=patterns))
    # A snapshot folder is named by the commit it holds: the revision the benchmark was built from.
    return folder, {"repo": repo_id, "revision": folder.name}


def _built(name: str) -> Path:
    """Where the published files of ``name`` are built in the cache (what ``--out`` names in the offline hint)."""
    from cladebench.cache import cache_dir

    return cache_dir("benchmarks") / f"{name}.lance"


PROTOCOL_SPLITS = ("test",)
"""The split the protocol evaluates: a mirror or download without its files is refused, saying what it holds,
rather than built and then found to select no row."""


def _fetch_inquire_rerank(out: Path) -> dict[str, object]:
    from cladebench.curate.sources.inquire import build_inquire_rerank

    # The shards sit in data/ (data/test-00000-of-00004.parquet); only the two splits the dataset card declares
    # are fetched, not the train-* shards an earlier upload left in the repository.
    folder, fetched = hub_snapshot(
        "evendrow/INQUIRE-Rerank", list(INQUIRE_RERANK_FILES), name="inquire-rerank",
        how=("download the Parquet files of evendrow/INQUIRE-Rerank, run `cladebench load inquire-rerank DIR "
             f"--out {_built('inquire-rerank')}` (add the INQUIRE query CSVs with --queries if the files carry no "
             "query_id)"))
    build_inquire_rerank(folder, out, splits=PROTOCOL_SPLITS)
    return fetched


def _inquire_rerank_from_mirror(folder: Path, out: Path) -> None:
    from cladebench.curate.sources.inquire import build_inquire_rerank

    build_inquire_rerank(folder, out, splits=PROTOCOL_SPLITS)


register_benchmark(Benchmark(
    name="inquire-rerank", source="hf://datasets/evendrow/INQUIRE-Rerank (data/{validation,test}-*.parquet)",
    release=None,
    description="INQUIRE-Rerank (evendrow/INQUIRE-Rerank): 100 candidates for each of 250 queries, natural-language "
                "queries over iNat24 images; AP@100, nDCG@100, MRR as the INQUIRE paper reports them",
    protocols=(Protocol("rerank", {"where": "split = 'test'", "breakdown": ("supercategory", "category"),
                                   "group_by": "none"}),),
    mirror_layout="data/test-*.parquet and data/validation-*.parquet as published (photos inside)",
    fetch=_fetch_inquire_rerank, from_mirror=_inquire_rerank_from_mirror,
    # The INQUIRE paper's Rerank tables report AP@50 over the 100 candidates; the protocol here scores AP@100, so
    # its figures are not the same number and none is listed as published beside ours.
    headline=Headline("rerank", "ap@100"),
))


def _fetch_inat_coobserved(out: Path) -> dict[str, object]:
    from cladebench.curate.sources.coobserved import build_inat_coobserved

    folder, fetched = hub_snapshot(
        "dcher95/inat-coobserved", ["*.parquet"], name="inat-coobserved",
        how=(f"download the Parquet files of dcher95/inat-coobserved, run `cladebench load inat-coobserved DIR "
             f"--out {_built('inat-coobserved')}`"))
    build_inat_coobserved(folder, out)
    return fetched


def _inat_coobserved_from_mirror(folder: Path, out: Path) -> None:
    from cladebench.curate.sources.coobserved import build_inat_coobserved

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
