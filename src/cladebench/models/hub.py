"""Fetch open_clip checkpoints from the Hugging Face Hub at an exact revision, cache first, failing fast.

open_clip's own ``hf-hub:`` loader has no revision argument (it always reads ``main``), retries for
about 20 s when the network is down, and fails with a bare traceback. Here a pinned revision is
honoured by downloading the snapshot with ``huggingface_hub.snapshot_download(revision=...)`` and
loading it as ``local-dir:``; the cache is read first, so a cached commit needs no network at all;
and ``HF_HUB_OFFLINE`` with nothing cached fails at once with a message naming model and revision.

An image-only backbone's files (timm's or transformers' ``config.json``, weights and image processor) come through
:func:`fetch_file` the same way, and :func:`config_files` reads a repo's small config files alone, which is how
the resolver tells an open_clip repo from a timm or transformers one.

Only what open_clip reads is fetched: ``open_clip_config.json``, one weights file (safetensors when
the repo has it) and small tokenizer files. Some repos hold several gigabytes of other checkpoints
(BGLab/BioTrove-CLIP keeps three ``.pt`` files beside its open_clip weights).

Environment variables are read at call time, not import time as ``huggingface_hub`` does, so a test
or a notebook can set ``HF_HUB_OFFLINE`` or ``HF_HOME`` after the import and be obeyed.

Offline without ``HF_HUB_OFFLINE`` is fast too. Listing a repo's files goes through huggingface_hub's
backoff: six attempts over about 23 s (1, 2, 4, 8, 8 s apart), a warning line each, when the network is down.
So before the first download a model that is not cached costs one request with a short deadline
(:data:`PROBE_TIMEOUT_S`): the repo's info at the revision, which is one small JSON answer and is not
retried. No answer in time (no route, a refused port, a proxy or server that never answers, a name lookup
that hangs) is the one line of :class:`ModelUnavailableError` at once; any answer (the repo, or the Hub
saying it has no such repo or revision) means the network is there, and the download goes on with
huggingface_hub's retries, which then serve their purpose.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from cladebench.environment import OFFLINE_REASON, hub_offline, variable
from cladebench.models.failures import ModelLoadError, ModelUnavailableError

CONFIG_NAME = "open_clip_config.json"
WEIGHT_NAMES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin")
"""open_clip's weight file names on the Hub, preferred first (safetensors loads without pickle)."""
SMALL_FILE_PATTERNS = (
    CONFIG_NAME, "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "vocab.txt", "merges.txt", "spiece.model", "tokenizer.model", "sentencepiece.bpe.model",
)
"""The config and the tokenizer files an HF tokenizer (SigLIP's) reads from a ``local-dir:``, by exact name:
a wildcard would also fetch whatever large JSON or text files a model repo keeps beside its weights."""

PROBE_TIMEOUT_S = 2.0
"""Seconds the Hub has to answer the one request made before downloading a model that is not cached: the
whole request, name lookup included. The Hub answers a repo's info in well under a second; a model that is
not cached then fails within about this long when the network is down, instead of after huggingface_hub's
retries."""


def hub_cache_dir() -> Path:
    """The Hub cache as the environment says now: ``HF_HUB_CACHE``, else ``$HF_HOME/hub``."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if value := variable(name):
            return Path(value).expanduser()
    home = variable("HF_HOME") or os.path.join(variable("XDG_CACHE_HOME") or "~/.cache", "huggingface")
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
        f"model {_describe(repo, revision)}: {what} not in the Hugging Face cache ({cache}) and {OFFLINE_REASON}, "
        "which forbids downloading it. Run once with network access to cache it, or set HF_HOME to a cache that "
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


def _endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def _is_timeout(error: BaseException | None) -> bool:
    """Whether the probe ended by its own HTTP timeout, which races the thread's deadline and means the same
    (httpcore's own timeout can reach the caller unwrapped by httpx when the read times out mid-stream)."""
    import httpcore
    import httpx

    return isinstance(error, (httpx.TimeoutException, httpcore.TimeoutException, TimeoutError))


def check_hub_answers(repo: str, revision: str | None) -> None:
    """Ask the Hub for the repo's info at ``revision`` once, giving it :data:`PROBE_TIMEOUT_S` seconds.

    Returns when the Hub knows the repo and revision. Raises :class:`ModelUnavailableError` at once when it
    does not answer in time or cannot be reached (no retries: a down network gets the same answer every time),
    and the same error as a later listing would when it answers that the repo or revision does not exist.
    The request runs in a daemon thread so that the deadline holds for a name lookup too, which no HTTP
    timeout covers; a request still hanging past the deadline is left to end on its own.
    """
    from huggingface_hub import HfApi

    outcome: list[BaseException | None] = []

    def ask() -> None:
        try:
            HfApi().model_info(repo, revision=revision, timeout=PROBE_TIMEOUT_S)
        except Exception as error:  # reported by the caller's thread, below
            outcome.append(error)
        else:
            outcome.append(None)

    thread = threading.Thread(target=ask, name="cladebench-hub-probe", daemon=True)
    thread.start()
    thread.join(PROBE_TIMEOUT_S)
    if not outcome or _is_timeout(outcome[0]):  # the HTTP timeout and the join's deadline are the same length
        raise ModelUnavailableError(
            f"model {_describe(repo, revision)}: the Hub ({_endpoint()}) did not answer within "
            f"{PROBE_TIMEOUT_S:g} s, and the model is not in the Hugging Face cache ({hub_cache_dir()}); connect "
            "to the network once to cache it, or set HF_HOME to a cache that holds it"
        )
    error = outcome[0]
    if error is None:
        return
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(error, HfHubHTTPError):  # the Hub answered: no such repo or revision, gated, a server error
        raise _remote_error(repo, revision, error) from error
    raise ModelUnavailableError(
        f"model {_describe(repo, revision)}: the Hub ({_endpoint()}) could not be reached ({type(error).__name__}: "
        f"{error}), and the model is not in the Hugging Face cache ({hub_cache_dir()}); connect to the network "
        "once to cache it, or set HF_HOME to a cache that holds it"
    ) from error


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
        raise _offline_error(repo, revision, cache, "the model's config and weights are")
    check_hub_answers(repo, revision)

    from huggingface_hub import HfApi

    try:
        files = set(HfApi().list_repo_files(repo, revision=revision))
    except Exception as error:  # any failure to list means we cannot download: say which and why
        raise _remote_error(repo, revision, error) from error
    found = next((w for w in WEIGHT_NAMES if w in files), None)
    if CONFIG_NAME not in files or found is None:
        raise ModelLoadError(
            f"model {_describe(repo, revision)} is not an open_clip checkpoint: it needs {CONFIG_NAME} and one of "
            f"{', '.join(WEIGHT_NAMES)}; it has {', '.join(sorted(files)) or 'no files'}"
        )
    try:
        folder = Path(snapshot_download(repo, revision=revision, cache_dir=cache,
                                        allow_patterns=[*SMALL_FILE_PATTERNS, found]))
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
    check_hub_answers(repo, revision)

    from huggingface_hub import HfApi

    try:
        files = set(HfApi().list_repo_files(repo, revision=revision))
        named = next((f for f in filenames if f in files), None)
        if named is None:
            raise ModelLoadError(f"model {_describe(repo, revision)} has none of {', '.join(filenames)}")
        path = hf_hub_download(repo, named, revision=revision, cache_dir=cache)
    except ModelLoadError:
        raise
    except Exception as error:
        raise _remote_error(repo, revision, error) from error
    return Path(path), commit_of(path)


def config_files(repo: str, revision: str | None, names: tuple[str, ...]) -> Path | None:
    """The snapshot folder holding those of ``names`` (small config files) that the repo has at ``revision``: from
    the cache, or online fetched alone (no weights); None when none is cached and they cannot be fetched now (offline,
    the Hub not answering, no such repo: the model's load then says which, in its one line)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = hub_cache_dir()
    for name in names:
        try:
            return Path(hf_hub_download(repo, name, revision=revision, cache_dir=cache, local_files_only=True)).parent
        except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
            continue
    if hub_offline():
        return None
    try:
        check_hub_answers(repo, revision)
        from huggingface_hub import HfApi

        files = set(HfApi().list_repo_files(repo, revision=revision))
        found = [Path(hf_hub_download(repo, name, revision=revision, cache_dir=cache)) for name in names
                 if name in files]
    except Exception:  # unreachable, gated, no such repo: the load that follows reports it in one line
        return None
    return found[0].parent if found else None
