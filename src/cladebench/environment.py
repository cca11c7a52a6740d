"""The environment variables cladebench reads, read here and nowhere else, each when asked (not at import), so a
test or a notebook that sets one after the import is obeyed.

One reader means one meaning: a flag is on for what huggingface_hub takes as true (``1``, ``true``, ``yes``,
``on``, any case, spaces around ignored), and an empty variable is an unset one, for every variable alike. The
offline rule is :func:`hub_offline`: every place that would fetch from the Hugging Face Hub asks it, and says
:data:`OFFLINE_REASON` when it refuses, so ``HF_HUB_OFFLINE=true`` and ``HF_HUB_OFFLINE=1`` end the same way.

The project's own variables are named here (:data:`CACHE_DIR`, :data:`MIRROR`, :data:`DEBUG`); a library's
(``HF_HOME``, ``AWS_ENDPOINT_URL``) are read through :func:`variable` where they matter. A block that sets a
library's variable for itself uses :func:`defaults`, which leaves a user's own value alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping

TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
"""What a flag's value may be to be on (compared lower-cased, as huggingface_hub compares upper-cased)."""

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Either forbids fetching from the Hugging Face Hub (transformers honours the second, huggingface_hub the first)."""
OFFLINE_REASON = "HF_HUB_OFFLINE is set"
"""How a refusal to fetch names the rule, whichever spelling of true the user wrote."""

CACHE_DIR = "CLADEBENCH_CACHE_DIR"
"""The cache root (default ``~/.cache/cladebench``)."""
MIRROR = "CLADEBENCH_MIRROR"
"""A folder of benchmark mirrors, one folder per benchmark name, read instead of the published sources."""
DEBUG = "CLADEBENCH_DEBUG"
"""When on, an internal error shows its traceback (as ``--debug`` does)."""


def variable(name: str) -> str | None:
    """The value of ``name``, or None when it is unset or empty."""
    return os.environ.get(name) or None


def flag(name: str) -> bool:
    """Whether ``name`` is set to a true value (:data:`TRUE_VALUES`, any case)."""
    return (variable(name) or "").strip().lower() in TRUE_VALUES


def hub_offline() -> bool:
    """Whether fetching from the Hugging Face Hub is forbidden: :data:`OFFLINE_VARIABLES` now, or
    ``HF_HUB_OFFLINE`` as huggingface_hub read it at its import (a process that set it then and unset it since is
    still offline for the Hub's own calls)."""
    if any(flag(name) for name in OFFLINE_VARIABLES):
        return True
    try:
        from huggingface_hub import constants
    except ImportError:
        return False
    return bool(constants.HF_HUB_OFFLINE)


@contextlib.contextmanager
def defaults(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in the environment for the block where the user has set nothing, removed again afterwards (a
    user's own value is never replaced)."""
    added = [name for name in values if name not in os.environ]
    for name in added:
        os.environ[name] = values[name]
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


__all__ = ["CACHE_DIR", "DEBUG", "MIRROR", "OFFLINE_REASON", "OFFLINE_VARIABLES", "TRUE_VALUES", "defaults", "flag",
           "hub_offline", "variable"]
