"""INQUIRE-Rerank: its Parquet shards on the Hugging Face Hub, built once into a Lance dataset, evaluated on its
test split, broken down by supercategory and category, with AP@100, nDCG@100 and MRR as the INQUIRE paper reports
them. The family's source (reader and builder) is :mod:`.source`, its offline mirror :mod:`.mirror`.
"""

from __future__ import annotations

from pathlib import Path

from cladebench.benchmarks.base import Benchmark, Headline, Protocol, register_benchmark
from cladebench.benchmarks.hub import built_path, hub_snapshot
from cladebench.curate.sources import Source
from cladebench.curate.sources import register as register_source

INQUIRE_RERANK_FILES = ("*validation-*.parquet", "*test-*.parquet")
"""Hub file patterns of INQUIRE-Rerank's splits (fnmatch, so they match inside ``data/`` as well)."""


PROTOCOL_SPLITS = ("test",)
"""The split the protocol evaluates: a mirror or download without its files is refused, saying what it holds,
rather than built and then found to select no row."""


def _fetch_inquire_rerank(out: Path) -> dict[str, object]:
    from cladebench.benchmarks.inquire.source import build_inquire_rerank

    # The shards sit in data/ (data/test-00000-of-00004.parquet); only the two splits the dataset card declares
    # are fetched, not the train-* shards an earlier upload left in the repository.
    folder, fetched = hub_snapshot(
        "evendrow/INQUIRE-Rerank", list(INQUIRE_RERANK_FILES), name="inquire-rerank",
        how=("download the Parquet files of evendrow/INQUIRE-Rerank, run `cladebench load inquire-rerank DIR "
             f"--out {built_path('inquire-rerank')}` (add the INQUIRE query CSVs with --queries if the files carry no "
             "query_id)"))
    build_inquire_rerank(folder, out, splits=PROTOCOL_SPLITS)
    return fetched


def _inquire_rerank_from_mirror(folder: Path, out: Path) -> None:
    from cladebench.benchmarks.inquire.source import build_inquire_rerank

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


register_source(Source(
    "inquire-rerank", "cladebench.benchmarks.inquire.source", "read_inquire_rerank", "build_inquire_rerank",
    "INQUIRE-Rerank Parquet shards (evendrow/INQUIRE-Rerank): 250 queries x 100 iNat24 candidates with relevance",
    "InquireRerankLoadConfig",
))
