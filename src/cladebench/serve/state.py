"""What every area of the app shares: the dataset opened once, the runs loaded once, and the caches.

One :class:`ServeState` lives on the app (``app.state.serve``) for the server's life. The dataset is opened at the
version it had when the server started and never written through it, so two requests read the same rows and a
thumbnail cached under that version stays true. Handlers reach it through a parameter annotated
:data:`AppState` (``state: AppState``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar, cast

from fastapi import Depends, Request

if TYPE_CHECKING:
    import lance

    from cladebench.report.runs import ReportRun

_Made = TypeVar("_Made")


@dataclass(eq=False)
class ServeState:
    """The dataset, the runs and the caches of one server (shared by every request; caches are locked)."""

    uri: str
    """The dataset's path or URI, as given on the command line."""
    dataset: lance.LanceDataset
    """The ``lance.LanceDataset`` opened at :attr:`version` (read-only here)."""
    runs: tuple[ReportRun, ...] = ()
    """The loaded runs (``report.runs.ReportRun``), in the order given, each with its predictions."""
    model: str | None = None
    """The model whose text tower encodes search text; None: the one recorded on the embedding column."""
    device: str = "auto"
    """Where the text tower runs."""
    thumbnail_root: Path | None = None
    """Where thumbnails are cached; None: the cache folder (``$CLADEBENCH_CACHE_DIR/serve-thumbnails``)."""
    map_root: Path | None = None
    """Where embedding maps are cached; None: the cache folder (``$CLADEBENCH_CACHE_DIR/serve-maps``)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards :attr:`memo` (requests run in a thread pool)."""
    encode_lock: threading.Lock = field(default_factory=threading.Lock)
    """One text encoding at a time (a text tower is not made for concurrent calls)."""
    memo: dict[object, object] = field(default_factory=dict)
    """Small results computed once per server (counts, the taxonomy tree, encoders), by key."""

    @property
    def version(self) -> int:
        """The dataset version every page describes."""
        return int(self.dataset.version)

    @property
    def key(self) -> str:
        """A short name of this dataset at this version, for cache folders: its URI's hash and the version."""
        digest = hashlib.sha256(str(self.uri).encode()).hexdigest()[:16]
        return f"{digest}-v{self.version}"

    @property
    def columns(self) -> list[str]:
        """The dataset's column names."""
        return list(self.dataset.schema.names)

    def remembered(self, key: object, make: Callable[[], _Made]) -> _Made:
        """``make()`` computed once per ``key`` for the server's life (two requests at once may both compute it;
        one result is kept)."""
        with self.lock:
            if key in self.memo:
                return cast("_Made", self.memo[key])  # what this key's make() gave
        value = make()
        with self.lock:
            return cast("_Made", self.memo.setdefault(key, value))


def get_state(request: Request) -> ServeState:
    """The server's :class:`ServeState` (a FastAPI dependency: ``state: ServeState = Depends(get_state)``)."""
    return request.app.state.serve


AppState = Annotated[ServeState, Depends(get_state)]
"""The annotation of a handler's state parameter: ``def page(request: Request, state: AppState)``."""
