"""Where cladebench keeps what it can rebuild: model checkpoints, text embeddings, staging of remote runs.

One root, ``$CLADEBENCH_CACHE_DIR`` or ``~/.cache/cladebench``, so a user can see, move or delete it
in one place, and tests can point it at a temporary directory.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """The cache root (or a sub-directory of it), created on first use."""
    root = os.environ.get("CLADEBENCH_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "cladebench"
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
