"""What the benchmarks published as Parquet files on the Hugging Face Hub share: the files fetched once, at a
commit, and the hint an offline machine gets (INQUIRE-Rerank, iNat Co-Observed).

Both publish Parquet files with the photos inside (``evendrow/INQUIRE-Rerank``: ``data/test-*.parquet`` and
``data/validation-*.parquet``; ``dcher95/inat-coobserved``: ``data/*.parquet``). The first use fetches them and
builds the dataset with the source's builder (``cladebench load inquire-rerank`` / ``load inat-coobserved``); a
mirror is a folder holding the same files, in the same layout, and is built the same way. Offline, without a
mirror, the error says how to build the dataset from local files instead.
"""

from __future__ import annotations

from pathlib import Path

from cladebench.environment import OFFLINE_REASON, hub_offline
from cladebench.errors import CladebenchError


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


def built_path(name: str) -> Path:
    """Where the published files of ``name`` are built in the cache (what ``--out`` names in the offline hint)."""
    from cladebench.cache import cache_dir

    return cache_dir("benchmarks") / f"{name}.lance"
