"""Where cladebench keeps what it can rebuild: model checkpoints, text embeddings, staging of remote runs.

One root, ``$CLADEBENCH_CACHE_DIR`` or ``~/.cache/cladebench``, so a user can see, move or delete it
in one place, and tests can point it at a temporary directory.

The demo model's checkpoint is cached here too, under a name only the demo can compute (a hash of its recipe
and its synthetic world). So that ``--model demo`` finds it from the models layer, which sits below the demo,
the demo records the folder it trained or reused in one small file (:func:`record_demo_model`), and the model
registry reads it back (:func:`recorded_demo_model`): the rule of where that file lives is here, below both.
"""

from __future__ import annotations

import json
from pathlib import Path

from cladebench.environment import CACHE_DIR, variable

DEMO_MODEL_RECORD = "demo-model.json"
"""File in the cache's ``models`` folder naming the demo model's checkpoint folder, written by the demo."""

DEMO_TRAINING_RECORD = "training.json"
"""The file a finished demo checkpoint holds (its training record): a folder without it is not trained yet."""


def cache_root() -> Path:
    """The cache root, without creating it."""
    root = variable(CACHE_DIR)
    return Path(root).expanduser() if root else Path.home() / ".cache" / "cladebench"


def cache_dir(*parts: str) -> Path:
    """The cache root (or a sub-directory of it), created on first use."""
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def record_demo_model(folder: str | Path) -> Path:
    """Record ``folder`` (a trained demo checkpoint) as the one ``--model demo`` means; returns the record's path."""
    from cladebench.paths import atomic_write

    path = cache_dir("models") / DEMO_MODEL_RECORD
    return atomic_write(path, json.dumps({"folder": str(Path(folder).resolve())}) + "\n")


def recorded_demo_model() -> Path | None:
    """The demo checkpoint folder the demo last recorded, or None when none is recorded or the folder holds no
    finished checkpoint (deleted, or never trained to the end)."""
    path = cache_root() / "models" / DEMO_MODEL_RECORD
    try:
        folder = Path(json.loads(path.read_text(encoding="utf-8"))["folder"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return folder if (folder / DEMO_TRAINING_RECORD).is_file() else None
