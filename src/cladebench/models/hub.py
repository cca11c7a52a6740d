"""Fetch open_clip checkpoints from the Hugging Face Hub at an exact revision, cache first, failing fast.

open_clip's own ``hf-hub:`` loader has no revision argument (it always reads ``main``), retries for
about 20 s when the network is down, and fails with a bare traceback. Here a pinned revision is
honoured by downloading the snapshot with ``huggingface_hub.snapshot_download(revision=...)`` and
loading it as ``local-dir:``; the cache is read first, so a cached commit needs no network at all;
and ``HF_HUB_OFFLINE`` with nothing cached fails at once with a message naming model and revision.

Only what open_clip reads is fetched: ``open_clip_config.json``, one weights file (safetensors when
the repo has it) and small tokenizer files. Some repos hold several gigabytes of other checkpoints
(BGLab/BioTrove-CLIP keeps three ``.pt`` files beside its open_clip weights).

Environment variables are read at call time, not import time as ``huggingface_hub`` does, so a test
or a notebook can set ``HF_HUB_OFFLINE`` or ``HF_HOME`` after the import and be obeyed.
"""

from __future__ import annotations

import os
from pathlib import Path

from cladebench.models.registry import ModelLoadError, ModelUnavailableError

CONFIG_NAME = "open_clip_config.json"
WEIGHT_NAMES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
"""open_clip's weight file names on the Hub, preferred first (safetensors loads without pickle)."""
SMALL_FILE_PATTERNS = (
    CONFIG_NAME, "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "vocab.txt", "merges.txt", "spiece.model", "tokenizer.model", "sentencepiece.bpe.model",
)
"""The config and the tokenizer files an HF tokenizer (SigLIP's) reads from a ``local-dir:``, by exact name:
a wildcard would also fetch whatever large JSON or text files a model repo keeps beside its weights."""

_TRUE = {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set now, or was at import."""
    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(variable, "").strip().lower() in _TRUE:
            return True
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return bool(constants.HF_HUB_OFFLINE)


def hub_cache_dir() -> Path:
    """The Hub cache as the environment says now: ``HF_HUB_CACHE``, else ``$HF_HOME/hub``."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def commit_of(path: str | Path) -> str | None:
    """The commit a cached file or snapshot belongs to (``.../snapshots/<commit>/...``), else ``None``."""
    parts = Path(path).parts
    for i in range(len(parts) - 1):
        if parts[i] == "snapshots":
            return parts[i + 1]
    return None


def _describe(repo: str, revision: str | None) -> str:
    return f"hf-hub:{repo} at revision {revision or 'main'}"


def _offline_error(repo: str, revision: str | None, cache: Path, what: str) -> ModelUnavailableError:
    return ModelUnavailableError(
        f"model {_describe(repo, revision)}: {what} not in the Hugging Face cache ({cache}) and HF_HUB_OFFLINE=1 "
        "forbids downloading it. Run once with network access to cache it, or set HF_HOME to a cache that "
        "holds it."
    )


def _remote_error(repo: str, revision: str | None, error: Exception) -> ModelUnavailableError:
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    reasons = {
        GatedRepoError: "the repository is gated: accept its terms on the Hub and log in (hf auth login)",
        RepositoryNotFoundError: "no such repository on the Hub, or it is private and you are not logged in",
        RevisionNotFoundError: "the repository has no such revision",
    }
    reason = next((text for kind, text in reasons.items() if isinstance(error, kind)), None)
    reason = reason or f"the Hub could not be reached ({type(error).__name__}: {error})"
    return ModelUnavailableError(f"model {_describe(repo, revision)}: {reason}")


def fetch_snapshot(repo: str, revision: str | None) -> tuple[Path, str]:
    """A local folder holding the repo's open_clip config and weights at ``revision``, and its commit.

    Raises :class:`ModelUnavailableError` when the files are neither cached nor downloadable, and
    :class:`ModelLoadError` when the repo is not an open_clip checkpoint.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = hub_cache_dir()
    for weights in WEIGHT_NAMES:
        try:
            folder = Path(snapshot_download(
                repo, revision=revision, cache_dir=cache, local_files_only=True,
                allow_patterns=[*SMALL_FILE_PATTERNS, weights],
            ))
        except (LocalEntryNotFoundError, FileNotFoundError):
            continue
        if (folder / CONFIG_NAME).is_file() and (folder / weights).is_file():
            return folder, commit_of(folder) or folder.name
    if hub_offline():
        raise _offline_error(repo, revision, cache, "the open_clip config and weights are")

    from huggingface_hub import HfApi

    try:
        files = set(HfApi().list_repo_files(repo, revision=revision))
    except Exception as error:  # any failure to list means we cannot download: say which and why
        raise _remote_error(repo, revision, error) from error
    weights = next((w for w in WEIGHT_NAMES if w in files), None)
    if CONFIG_NAME not in files or weights is None:
        raise ModelLoadError(
            f"model {_describe(repo, revision)} is not an open_clip checkpoint: it needs {CONFIG_NAME} and one of "
            f"{', '.join(WEIGHT_NAMES)}; it has {', '.join(sorted(files)) or 'no files'}"
        )
    try:
        folder = Path(snapshot_download(repo, revision=revision, cache_dir=cache,
                                        allow_patterns=[*SMALL_FILE_PATTERNS, weights]))
    except Exception as error:
        raise _remote_error(repo, revision, error) from error
    return folder, commit_of(folder) or folder.name


def fetch_file(repo: str, filenames: tuple[str, ...], revision: str | None) -> tuple[Path, str | None]:
    """The first of ``filenames`` that the repo has, as a cached local file, and its commit."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = hub_cache_dir()
    for filename in filenames:
        try:
            path = hf_hub_download(repo, filename, revision=revision, cache_dir=cache, local_files_only=True)
        except (LocalEntryNotFoundError, FileNotFoundError):
            continue
        return Path(path), commit_of(path)
    if hub_offline():
        raise _offline_error(repo, revision, cache, f"{' or '.join(filenames)} is")

    from huggingface_hub import HfApi

    try:
        files = set(HfApi().list_repo_files(repo, revision=revision))
        filename = next((f for f in filenames if f in files), None)
        if filename is None:
            raise ModelLoadError(f"model {_describe(repo, revision)} has none of {', '.join(filenames)}")
        path = hf_hub_download(repo, filename, revision=revision, cache_dir=cache)
    except ModelLoadError:
        raise
    except Exception as error:
        raise _remote_error(repo, revision, error) from error
    return Path(path), commit_of(path)
