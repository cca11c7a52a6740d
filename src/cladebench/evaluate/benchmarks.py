"""Named benchmarks: ``cladebench eval inquire-rerank --model M`` without building the dataset by hand.

A benchmark name stands for a dataset built once into the cache folder from its published files, the
task it is evaluated with, and the settings its paper reports (INQUIRE-Rerank: the test split, results
broken down by supercategory and category). Settings the user gives win over the benchmark's; those
left at their defaults take the benchmark's. The first use fetches the published files (network);
offline, the error says how to build the dataset from local files instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cladebench.cache import cache_dir
from cladebench.errors import CladebenchError
from cladebench.registry import Registry


@dataclass(frozen=True)
class Benchmark:
    """A published benchmark: where its dataset comes from, its task and its reporting settings."""

    name: str
    task: str
    description: str
    fetch: Callable[[Path], Path]
    """Builds the dataset at the given path from the published files (needs the network)."""
    defaults: dict[str, Any] = field(default_factory=dict)
    """Eval settings applied when the user left the field at its default."""

    def dataset_path(self) -> Path:
        return cache_dir("benchmarks") / f"{self.name}.lance"


BENCHMARKS: Registry[Benchmark] = Registry("benchmark")
"""Benchmarks by name: each is also a second word of ``cladebench eval`` (``eval inquire-rerank --model M``)."""


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Add a benchmark to :data:`BENCHMARKS` under its name."""
    return BENCHMARKS.add(benchmark.name, benchmark)


INQUIRE_RERANK_FILES = ("*validation-*.parquet", "*test-*.parquet")
"""Hub file patterns of INQUIRE-Rerank's splits (fnmatch, so they match inside ``data/`` as well)."""


def _fetch_inquire_rerank(out: Path) -> Path:
    import os

    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise CladebenchError(
            "benchmark inquire-rerank is not built on this machine and HF_HUB_OFFLINE=1 forbids fetching it; "
            "download the Parquet files of evendrow/INQUIRE-Rerank, run `cladebench load inquire-rerank DIR "
            f"--out {out}` (add the INQUIRE query CSVs with --queries if the files carry no query_id), then rerun")
    from huggingface_hub import snapshot_download

    from cladebench.curate.sources.inquire import build_inquire_rerank

    # The shards sit in data/ (data/test-00000-of-00004.parquet); only the two splits the dataset card declares
    # are fetched, not the train-* shards an earlier upload left in the repository.
    folder = snapshot_download(repo_id="evendrow/INQUIRE-Rerank", repo_type="dataset",
                               allow_patterns=list(INQUIRE_RERANK_FILES))
    return build_inquire_rerank(Path(folder), out).dataset_path


register_benchmark(Benchmark(
    name="inquire-rerank", task="rerank",
    description="INQUIRE-Rerank (evendrow/INQUIRE-Rerank): 100 candidates for each of 250 queries, natural-language "
                "queries over iNat24 images; AP@100, nDCG@100, MRR as the INQUIRE paper reports them",
    fetch=_fetch_inquire_rerank,
    defaults={"where": "split = 'test'", "breakdown": ("supercategory", "category"), "group_by": "none"},
))


def _fetch_inat_coobserved(out: Path) -> Path:
    import os

    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise CladebenchError(
            "benchmark inat-coobserved is not built on this machine and HF_HUB_OFFLINE=1 forbids fetching it; "
            f"download the Parquet files of dcher95/inat-coobserved, run `cladebench load inat-coobserved DIR --out "
            f"{out}`, then rerun")
    from huggingface_hub import snapshot_download

    from cladebench.curate.sources.coobserved import build_inat_coobserved

    folder = snapshot_download(repo_id="dcher95/inat-coobserved", repo_type="dataset", allow_patterns=["*.parquet"])
    return build_inat_coobserved(Path(folder), out).dataset_path


register_benchmark(Benchmark(
    name="inat-coobserved", task="lineage",
    description="iNat Co-Observed (dcher95/inat-coobserved): photos of two organisms of different species; "
                "complete each organism's lineage below the rank where the two part",
    fetch=_fetch_inat_coobserved,
    defaults={"group_by": "none"},
))


def get_benchmark(name: str) -> Benchmark | None:
    """The benchmark named ``name``, or None when ``name`` is a path or URI."""
    return BENCHMARKS.get(name)


def resolve(config: Any) -> tuple[str, Any, Benchmark | None]:
    """The dataset URI to open, the config with the benchmark's defaults filled in, and the benchmark (None for
    a path or URI, including a local folder that happens to bear a benchmark's name)."""
    benchmark = get_benchmark(config.dataset)
    if benchmark is None or Path(config.dataset).exists():
        return config.dataset, config, None
    path = benchmark.dataset_path()
    if not path.exists():
        benchmark.fetch(path)
    changes: dict[str, Any] = {}
    # A field the config's class fixes (the task of `eval rerank ...`) is the user's choice, never replaced.
    fields = {f.name: f for f in dataclasses.fields(config) if f.init}
    for name, value in {"task": benchmark.task, **benchmark.defaults}.items():
        spec = fields.get(name)
        if spec is not None and getattr(config, name) == _default(spec):
            changes[name] = value
    return str(path), dataclasses.replace(config, **changes), benchmark


def _default(spec: dataclasses.Field) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return spec.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING
