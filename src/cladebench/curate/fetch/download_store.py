"""What a download run keeps on disk and reports: the items, their records, the store and the report.

Why apart: the local and the Ray runners share these (a Ray shard writes bodies into the same store, the driver
its manifest lines), and they are what a caller holds after a run; the fetching itself is in
:mod:`cladebench.curate.fetch.core`.

On disk (a :class:`DownloadStore` directory)::

    objects/ab/ab12...ef     every body, named by its SHA-256 (identical photos stored once)
    manifest.jsonl           one JSON line per finished item, appended as each finishes
    failures.parquet         the failures of the latest run

A body is streamed to a temporary file in ``objects/`` as it arrives (:meth:`DownloadStore.spool_path`: a
multi-gigabyte metadata file is never held in memory) and renamed under its digest
(:meth:`DownloadStore.put_file`) before its manifest line is appended, so a manifest line always points at a
complete file; a line torn by a kill is cut off when the store is next opened.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.errors import CladebenchError
from cladebench.paths import atomic_write_parquet

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True)
class DownloadItem:
    """One thing to fetch."""

    key: str
    """Caller's id for the item (a row uuid); unique within one call, and the resume key."""
    url: str
    """Where to fetch it."""
    sha256: str | None = None
    """Expected SHA-256 (hex) of the body, when known; a mismatch fails the item."""


@dataclass(frozen=True)
class Downloaded:
    """A finished item: where its body is and what it was."""

    key: str
    url: str
    sha256: str
    """SHA-256 (hex) of the body; also its file name under ``objects/``."""
    size: int
    """Body length in bytes."""
    content_type: str | None
    """``Content-Type`` the server sent."""
    image_format: str | None
    """Format sniffed from the bytes (``jpeg``, ``png``, ...), ``None`` when not an image signature."""
    attempts: int
    """Attempts it took in the run that fetched it."""
    fetched_at: float
    """Unix time it finished."""


@dataclass(frozen=True)
class DownloadFailure:
    """An item that did not finish, and why."""

    key: str
    url: str
    reason: str
    """Short category to count by: ``http_404``, ``timeout``, ``connection``, ``truncated``, ``too_large``,
    ``too_many_pixels`` (over :data:`cladebench.images.MAX_PIXELS`), ``sha256_mismatch``, ``invalid_image``,
    ``bad_url``, ``protocol``, ``deadline`` (``item_deadline_s`` spent; the detail names the last attempt's
    failure); on Ray also ``ray_task`` (the shard's task raised, or its worker died on every retry)."""
    detail: str
    """What happened, for a person."""
    status: int | None
    """HTTP status of the last attempt, when a response came."""
    exception: str | None
    """Exception class of the last attempt, when one was raised."""
    attempts: int
    """Attempts made."""



def failures_table(failures: Iterable[DownloadFailure]) -> pa.Table:
    """Failures as an Arrow table with a fixed schema (empty tables keep their column types)."""
    import pyarrow as pa

    rows = [asdict(f) for f in failures]
    schema = pa.schema([
        ("key", pa.string()), ("url", pa.string()), ("reason", pa.string()), ("detail", pa.string()),
        ("status", pa.int32()), ("exception", pa.string()), ("attempts", pa.int32()),
    ])
    return pa.Table.from_pylist(rows, schema=schema)


# --- the store on disk ---------------------------------------------------------------------------


class DownloadStore:
    """A directory of fetched bodies, named by SHA-256, and the manifest that makes runs resumable.

    ``writes_manifest=False`` opens a view that writes bodies only: it neither repairs nor appends to the
    manifest. Ray shards open the shared store this way, so that the driver stays the manifest's one writer
    (a worker killed mid-write then cannot tear a line, and a rerun shard's results are recorded once).
    """

    def __init__(self, root: str | Path, *, writes_manifest: bool = True) -> None:
        self.root = Path(root)
        self.writes_manifest = writes_manifest
        self.objects_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        if writes_manifest:
            self._repair_manifest()

    @property
    def objects_dir(self) -> Path:
        return self.root / "objects"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.jsonl"

    @property
    def failures_path(self) -> Path:
        return self.root / "failures.parquet"

    def object_path(self, sha256: str) -> Path:
        """Where the body with this digest lives (two-character fan-out keeps directories small)."""
        return self.objects_dir / sha256[:2] / sha256

    def _repair_manifest(self) -> None:
        """Cut a last line torn by a kill, so the next append starts on a line of its own."""
        path = self.manifest_path
        if not path.exists() or path.stat().st_size == 0:
            return
        with open(path, "rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) == b"\n":
                return
            data = path.read_bytes()
            handle.truncate(data.rfind(b"\n") + 1)

    def load_manifest(self) -> dict[str, Downloaded]:
        """Finished items by key; a later line for a key replaces an earlier one."""
        done: dict[str, Downloaded] = {}
        if not self.manifest_path.exists():
            return done
        with open(self.manifest_path, encoding="utf-8") as handle:
            for line in handle:
                try:
                    entry = Downloaded(**json.loads(line))
                except (ValueError, TypeError):
                    # A damaged line only costs a refetch of its item; nothing is lost by skipping it.
                    continue
                done[entry.key] = entry
        return done

    def has(self, entry: Downloaded) -> bool:
        """Whether the entry's body is on disk, complete (its size matches)."""
        path = self.object_path(entry.sha256)
        return path.is_file() and path.stat().st_size == entry.size

    def spool_path(self) -> Path:
        """A new temporary name in ``objects/`` for a body being received: its name, the digest, is known only once
        all of it has arrived, when :meth:`put_file` renames it. Unique per call (process, thread, random), so
        concurrent writers never share one; a kill -9 mid-transfer may leave a hidden ``.incoming-*.tmp``, which
        is never read as a body."""
        return self.objects_dir / f".incoming-{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:12]}.tmp"

    def put_file(self, spooled: Path, sha256: str) -> Path:
        """Store a body received whole into ``spooled`` (a :meth:`spool_path`) under its digest, by one rename: never
        half there. An identical body already stored is left as it is (``spooled`` is then removed)."""
        path = self.object_path(sha256)
        if path.is_file() and path.stat().st_size == spooled.stat().st_size:
            spooled.unlink()
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(spooled, path)
        return path

    def put(self, body: bytes, sha256: str) -> Path:
        """Store a body held in memory under its digest (whole: written as a spool file, then :meth:`put_file`)."""
        spooled = self.spool_path()
        try:
            with open(spooled, "xb") as handle:
                handle.write(body)
            return self.put_file(spooled, sha256)
        finally:
            spooled.unlink(missing_ok=True)

    def record(self, entry: Downloaded) -> None:
        """Append one manifest line in a single write (after :meth:`put`, so the line's body exists)."""
        if not self.writes_manifest:
            raise CladebenchError(f"{self.root}: this view of the store writes bodies only, not the manifest")
        line = (json.dumps(asdict(entry), ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock, open(self.manifest_path, "ab") as handle:
            handle.write(line)

    def read_bytes(self, entry: Downloaded) -> bytes:
        """The stored body of a finished item."""
        return self.object_path(entry.sha256).read_bytes()

    def read_verified(self, entry: Downloaded) -> bytes:
        """The stored body of a finished item, its SHA-256 checked again before it goes into a dataset: a body
        damaged on disk since it was fetched is an error naming the file, never written as the item's photo."""
        body = self.read_bytes(entry)
        if hashlib.sha256(body).hexdigest() != entry.sha256:
            raise CladebenchError(f"{self.object_path(entry.sha256)} does not match its SHA-256; "
                                  "the download cache is damaged: delete that file and build again")
        return body

    def write_failures(self, failures: Iterable[DownloadFailure], path: Path | None = None) -> Path:
        """Write failures as Parquet, atomically (a temporary file renamed into place)."""
        table = failures_table(failures)
        return atomic_write_parquet(path or self.failures_path, table)


# --- the report ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DownloadReport:
    """Where every item ended up. ``ok + cached + failed`` is the number of items asked for."""

    store: DownloadStore
    """The store the bodies are in."""
    downloaded: Mapping[str, Downloaded]
    """Finished items by key, fetched now or earlier, in the order asked for."""
    failures: tuple[DownloadFailure, ...]
    """Items that did not finish, in the order asked for."""
    ok: int
    """Items fetched in this run."""
    cached: int
    """Items finished by an earlier run and not fetched again."""
    elapsed_s: float = 0.0
    """Wall time of the run."""

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def failed_by_reason(self) -> dict[str, int]:
        """Failure counts by reason, most frequent first."""
        return dict(Counter(f.reason for f in self.failures).most_common())

    def failures_table(self) -> pa.Table:
        return failures_table(self.failures)

    def read_bytes(self, key: str) -> bytes:
        """The body fetched for ``key``."""
        return self.store.read_bytes(self.downloaded[key])

    def summary(self) -> str:
        reasons = ", ".join(f"{reason} {count}" for reason, count in self.failed_by_reason.items())
        return (f"{self.ok} fetched, {self.cached} cached, {self.failed} failed"
                + (f" ({reasons})" if reasons else "") + f" in {self.elapsed_s:.1f} s")



ItemLike = DownloadItem | tuple[str, str] | tuple[str, str, str | None]
"""What the entry points take for an item: a :class:`DownloadItem`, or ``(key, url)`` / ``(key, url, sha256)``."""


def as_items(items: Iterable[ItemLike]) -> list[DownloadItem]:
    """The items as :class:`DownloadItem`, refusing a key given twice (keys are the resume key)."""
    out: list[DownloadItem] = []
    seen: set[str] = set()
    for raw in items:
        item = raw if isinstance(raw, DownloadItem) else DownloadItem(*raw)
        if item.key in seen:
            raise CladebenchError(f"duplicate download key {item.key!r}: keys must be unique (they are the resume key)")
        seen.add(item.key)
        out.append(item)
    return out


__all__ = [
    "DownloadFailure",
    "DownloadItem",
    "DownloadReport",
    "DownloadStore",
    "Downloaded",
    "ItemLike",
    "as_items",
    "failures_table",
]
