"""How building a model fails: the two errors every loader and the Hub fetcher raise (no torch, no imports).

Why a module of its own: the resolver (:mod:`.registry`) asks the Hub cache which library an ``hf-hub:`` repo
belongs to (:mod:`.backbones`, through :mod:`.hub`), and the Hub fetcher raises these errors; defined here, below
both, neither imports the other to reach them. :mod:`.registry` presents them too, where they were always found.
"""

from __future__ import annotations

from cladebench.errors import CladebenchError, RemoteUnavailableError


class ModelLoadError(CladebenchError):
    """A model that resolves but cannot be built: missing files, unknown architecture, bad checkpoint."""

    exit_code = 6


class ModelUnavailableError(RemoteUnavailableError):
    """Model files that are neither cached on this machine nor reachable (offline, no network, no access)."""


__all__ = ["ModelLoadError", "ModelUnavailableError"]
