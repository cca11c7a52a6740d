"""The config of ``cladebench serve``: apart from the app, so the command line is built without FastAPI."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cladebench.config import POSITIONAL, at_least, at_most
from cladebench.errors import UsageError


@dataclass(frozen=True)
class ServeConfig:
    """Browse a dataset, one image at a time, search it, and read runs over it in a local web app (stop with
    Ctrl-C, exit 0). Bound to 127.0.0.1 by default; any other address needs a token (one is made and printed when
    --token-file is not given)."""

    dataset: str
    """Path or URI of the Lance dataset (its rows are never changed; reviews are written inside it, to
    DATASET/_cladebench/reviews.lance)."""
    runs: tuple[Path, ...] = field(default=(), metadata=POSITIONAL)
    """run.json files (or their folders) of runs on this dataset, to overlay their predictions."""
    host: str = "127.0.0.1"
    """Address to listen on; anything but 127.0.0.1, ::1 or localhost asks every request for a token."""
    port: int = 8765
    """Port to listen on (0: a free one, printed)."""
    token_file: Path | None = None
    """File of 'OWNER TOKEN' lines: each request must carry one of them, and is its owner's (also when local)."""
    model: str | None = None
    """Model whose text tower encodes search text (as for `search`); default: the one named on the column."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where the text tower runs."""

    def __post_init__(self) -> None:
        at_least("--port", self.port, 0)
        at_most("--port", self.port, 65535, "the largest TCP port")
        if not self.host.strip():
            raise UsageError("--host must name an address, e.g. 127.0.0.1")
