"""Opening, writing and reading Lance datasets: local paths, ``hf://`` and ``s3://``, with the checks of
:mod:`cladebench.store.checks` applied to every write and Lance's commit protocol keeping the previous version
readable when a write dies midway.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import socket
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

import pyarrow as pa

from cladebench.environment import OFFLINE_REASON, hub_offline, variable
from cladebench.errors import (
    CladebenchError,
    DatasetNotFoundError,
    RemoteUnavailableError,
    SchemaError,
    environment_error,
)
from cladebench.paths import NOT_OURS, TAKEN, WRONG_KIND, write_refusal
from cladebench.store.checks import conform, duplicate_uuids
from cladebench.store.datasets_card import write_datasets_card
from cladebench.store.species import check_appendable, columns_to_read, holds_epithets, species_filter, with_binomials
from cladebench.store.sql import check_filter
from cladebench.store.versions import version_or_tag

if TYPE_CHECKING:
    from types import FrameType

    import lance


# --- opening -------------------------------------------------------------------------------------

_REMOTE_HOSTS = {"hf": ("huggingface.co", 443)}


def is_remote(uri: str) -> bool:
    """Whether ``uri`` names an object store or hub (``s3://``, ``hf://``, ...) rather than a local path."""
    return "://" in uri and urlparse(uri).scheme not in ("", "file")


_ENDPOINT_OPTIONS = ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url")
"""Storage-option keys that name an S3-compatible endpoint (Lance's object store takes any of them)."""


def _check_remote_reachable(uri: str, timeout_s: float = 3.0,
                            storage_options: Mapping[str, str] | None = None) -> None:
    """Fail within seconds, with a message, when a remote URI cannot be reached (offline machines).

    The endpoint probed is the one Lance will use: from the storage options, else from the environment.
    """
    scheme = urlparse(uri).scheme
    if scheme == "hf" and hub_offline():
        raise RemoteUnavailableError(
            f"cannot open {uri}: {OFFLINE_REASON}, so hf:// datasets are not fetched. "
            "Unset it when online, or pass a local copy (see `cladebench subset`)."
        )
    # AWS_ENDPOINT_URL is the AWS SDKs' name, AWS_ENDPOINT object_store's; Lance honours both.
    s3 = scheme in ("s3", "s3a")
    given = {k.lower(): v for k, v in (storage_options or {}).items()}
    endpoint = next((given[k] for k in _ENDPOINT_OPTIONS if given.get(k)), None) if s3 else None
    endpoint = endpoint or ((variable("AWS_ENDPOINT_URL") or variable("AWS_ENDPOINT")) if s3 else None)
    if endpoint:
        parsed = urlparse(endpoint)
        host, port = parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)
    elif s3:
        host, port = "s3.amazonaws.com", 443
    elif scheme in _REMOTE_HOSTS:
        host, port = _REMOTE_HOSTS[scheme]
    else:
        return  # gs://, az://, ...: let Lance decide, with its own timeouts
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RemoteUnavailableError(
            f"cannot open {uri}: {host}:{port} is not reachable from this machine ({exc}). "
            "Is it offline? Work on a local copy instead (`cladebench subset URI --where ... --out DIR` when online)."
        ) from None


def lance_storage_options(uri: str, storage_options: Mapping[str, str] | None) -> dict[str, str] | None:
    if not is_remote(uri):
        return dict(storage_options) if storage_options else None
    options = {"connect_timeout": "10s", "timeout": "120s"}
    options.update(storage_options or {})
    return options


_HF_REVISION = re.compile(r"^(hf://[^/]+/[^/]+/[^/@]+)@([^/]+)(/.*)?$")


def hf_revision(uri: str) -> tuple[str, str | None]:
    """``hf://datasets/ORG/NAME@REV/path`` -> (the URI without ``@REV``, REV); other URIs come back as they are.

    The Hub's own clients write a pinned revision (a tag, a branch or a commit) this way; Lance reads it from the
    ``hf_revision`` storage option instead, so a URI keeps the pin wherever it is recorded or reopened.

    Example:
        >>> hf_revision("hf://datasets/imageomics/fine-grained-challenges@v0.1.0/data/challenges.lance")
        ('hf://datasets/imageomics/fine-grained-challenges/data/challenges.lance', 'v0.1.0')
    """
    found = _HF_REVISION.match(uri)
    if found is None:
        return uri, None
    return found[1] + (found[3] or ""), found[2]


def open_dataset(uri: str | Path, *, version: int | str | None = None,
                 storage_options: Mapping[str, str] | None = None) -> lance.LanceDataset:
    """Open a Lance dataset at a local path, ``hf://`` or ``s3://`` URI, optionally at a version or tag.

    A path that holds no Lance dataset raises :class:`DatasetNotFoundError`; a remote URI this
    machine cannot reach raises :class:`RemoteUnavailableError` within seconds. ``version`` is read by
    :func:`~cladebench.store.versions.version_or_tag` (``"3"`` is version 3; a name is a tag).
    """
    import lance

    uri = str(uri)
    if is_remote(uri):
        _check_remote_reachable(uri, storage_options=storage_options)
    else:
        path = Path(uri.removeprefix("file://"))
        if not path.exists():
            raise DatasetNotFoundError(f"no dataset at {uri}: the path does not exist")
        if not (path / "_versions").is_dir():
            raise DatasetNotFoundError(f"{uri} is not a Lance dataset (it has no _versions directory)")
    version = version_or_tag(version)
    options = lance_storage_options(uri, storage_options)
    lance_uri, revision = hf_revision(uri)
    if revision is not None:  # hf://datasets/ORG/NAME@REV/path: Lance takes the revision as a storage option
        options = {**(options or {}), "hf_revision": revision}
    try:
        return lance.dataset(lance_uri, version=version, storage_options=options)
    except (ValueError, OSError) as exc:
        message = str(exc).split(", /")[0]  # Lance appends Rust source locations
        if version is not None and ("not found" in message.lower() or "version" in message.lower()):
            raise DatasetNotFoundError(f"{uri} has no version or tag {version!r}: {message}") from None
        if is_remote(uri):
            raise RemoteUnavailableError(f"cannot open {uri}: {message}") from None
        raise DatasetNotFoundError(f"cannot open {uri} as a Lance dataset: {message}") from None


def is_lance_dataset(path: Path) -> bool:
    return (path / "_versions").is_dir()


# --- writing -------------------------------------------------------------------------------------

WriteMode = Literal["create", "append", "overwrite"]


def _batches(data: pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch | pa.Table]) -> Iterator[pa.Table]:
    if isinstance(data, pa.Table):
        yield data
        return
    for item in data:
        yield item if isinstance(item, pa.Table) else pa.Table.from_batches([item])


def existing_uuids(dataset: lance.LanceDataset) -> set[str]:
    uuids: set[str] = set()
    for batch in dataset.to_batches(columns=["uuid"], batch_size=65536):
        uuids.update(batch.column(0).to_pylist())
    return uuids


_WRITER_STOP_S = 60.0
"""Seconds an interrupted write waits for Lance's reading thread to finish the batch it is making."""
_WRITER_GRACE_S = 1.0
"""Seconds it then waits for that thread to ask for the next batch and be told to stop (it may never ask)."""


def write_dataset(
    data: pa.Table | pa.RecordBatchReader | Iterable[pa.RecordBatch | pa.Table],
    uri: str | Path,
    *,
    mode: WriteMode = "create",
    storage_options: Mapping[str, str] | None = None,
    max_rows_per_file: int = 1 << 20,
) -> lance.LanceDataset:
    """Validate and write rows to a Lance dataset; ``mode`` is ``create``, ``append`` or ``overwrite``.

    Every batch is conformed (:func:`conform`) and uuids are checked for duplicates, within the new
    rows and against the dataset when appending, before the commit. Any error leaves the dataset as
    it was: Lance commits a new version only after all data files are written, and a failed
    ``create`` removes the directory it started.
    """
    import lance

    uri = str(uri)
    local = not is_remote(uri)
    existing_ds = None
    if local:
        _check_local_target(Path(uri.removeprefix("file://")), mode)
    elif mode != "append":  # append checks through open_dataset
        _check_remote_reachable(uri, storage_options=storage_options)
    if mode == "append":
        existing_ds = open_dataset(uri, storage_options=storage_options)
        check_appendable(existing_ds, uri)
    existing_schema = existing_ds.schema if existing_ds is not None else None
    in_dataset_uuids = existing_uuids(existing_ds) if existing_ds is not None else set()

    source = f"{uri}: "
    first: list[pa.Table] = []
    iterator = _batches(data)
    # The first batch fixes the schema of the write (and of the dataset, when creating).
    for table in iterator:
        first.append(conform(table, existing=existing_schema, source=source))
        break
    if not first:
        raise SchemaError(f"{source}no rows to write")
    schema = first[0].schema

    written: set[str] = set()
    stop, idle, finished = threading.Event(), threading.Event(), threading.Event()
    idle.set()

    def checked() -> Iterator[pa.RecordBatch]:
        """The batches, saying when Lance's thread is making one (in Python) and when it has stopped."""
        try:
            idle.clear()
            for batch in checked_batches():
                idle.set()
                yield batch
                idle.clear()
        finally:
            idle.set()
            finished.set()

    def checked_batches() -> Iterator[pa.RecordBatch]:
        offset = 0
        for index, table in enumerate(_chain(first, iterator)):
            if stop.is_set():
                raise KeyboardInterrupt
            conformed = table if index == 0 else conform(
                table, existing=existing_schema or schema, add_missing=False, row_offset=offset, source=source
            )
            uuids = conformed.column("uuid")
            dups = duplicate_uuids(uuids)
            if dups:
                raise SchemaError(f"{source}duplicate uuid(s) {dups} in the rows being written")
            batch_uuids = uuids.to_pylist()
            in_dataset = [u for u in batch_uuids if u in in_dataset_uuids]
            if in_dataset:
                raise SchemaError(f"{source}duplicate uuid(s) {in_dataset[:5]}: already in the dataset")
            repeated = [u for u in batch_uuids if u in written]
            if repeated:
                raise SchemaError(f"{source}duplicate uuid(s) {repeated[:5]} in the rows being written")
            written.update(batch_uuids)
            offset += conformed.num_rows
            yield from conformed.to_batches()

    created_dir = local and mode in ("create", "overwrite") and not Path(uri).exists()
    reader = pa.RecordBatchReader.from_batches(schema, checked())
    try:
        with _interrupt_at_next_batch(stop):
            written = lance.write_dataset(
                reader, uri, schema=schema, mode=mode,
                storage_options=lance_storage_options(uri, storage_options), max_rows_per_file=max_rows_per_file,
            )
    except BaseException as exc:
        # Lance pulls the rows on a thread of its own, which goes on after a Ctrl-C ends the call here; left
        # running, it calls into Python while the interpreter shuts down, which aborts the process (no exit
        # 130, no cleanup message). Let it finish the batch it is making, and take the stop if it asks again.
        stop.set()
        if idle.wait(_WRITER_STOP_S):
            finished.wait(_WRITER_GRACE_S)
        if created_dir and Path(uri).exists() and not is_lance_dataset(Path(uri)):
            shutil.rmtree(uri, ignore_errors=True)
        error = write_error(exc, uri, environment=local)
        if error is exc:
            raise
        raise error from None
    if local:  # how Hugging Face `datasets` should type the columns (`image`: an image, not a video)
        write_datasets_card(Path(uri.removeprefix("file://")), written.schema)
    return written


@contextlib.contextmanager
def _interrupt_at_next_batch(stop: threading.Event) -> Iterator[threading.Event]:
    """A first Ctrl-C during the write asks Lance's reading thread to stop at its next batch, so that Lance ends
    the write itself (and its thread with it) before the interrupt is raised here; a second one interrupts at
    once. Raised in the middle of Lance's call instead, the interrupt left that thread running, and when it
    called into Python as the interpreter shut down the process aborted ("Fatal Python error", no exit 130).
    Only in the main thread, and only where Ctrl-C has Python's own handler."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield interrupted
        return

    def first(signum: int, frame: FrameType | None) -> None:
        interrupted.set()
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    signal.signal(signal.SIGINT, first)
    try:
        yield interrupted
    except BaseException:
        if interrupted.is_set():  # Lance's error for the batch it was refused is the interrupt
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if interrupted.is_set():  # it came as the last batch was taken: the write is whole, but was not wanted
        raise KeyboardInterrupt


def _check_local_target(path: Path, mode: WriteMode) -> None:
    """Refuse, before writing anything, a target that is a file or a directory we would clobber."""
    refusal = write_refusal(path, folder=True, overwrite=mode != "create",
                            ours=is_lance_dataset if mode == "overwrite" else None)
    if refusal == WRONG_KIND:
        raise DatasetNotFoundError(f"{path} is a file, not a Lance dataset (a directory)")
    if refusal == TAKEN:
        raise CladebenchError(f"{path} already exists; use mode='overwrite' to replace it or mode='append'")
    if refusal == NOT_OURS:
        raise DatasetNotFoundError(f"{path} is not a Lance dataset (it has no _versions directory); not overwriting it")


def _chain(first: list[pa.Table], rest: Iterator[pa.Table]) -> Iterator[pa.Table]:
    yield from first
    yield from rest


def _unwrap_schema_error(exc: BaseException) -> CladebenchError | None:
    """Lance re-raises errors from the batch iterator wrapped; find ours again."""
    node: BaseException | None = exc
    while node is not None:
        if isinstance(node, CladebenchError):
            return node
        node = node.__cause__ or node.__context__
    text = str(exc)
    for marker in ("SchemaError: ", "CladebenchError: "):
        if marker in text:
            return SchemaError(text.split(marker, 1)[1].split("\n")[0])
    return None


def append(data: pa.Table | Iterable[pa.RecordBatch | pa.Table], uri: str | Path, **kwargs: Any) -> lance.LanceDataset:
    """Append validated rows to an existing dataset (see :func:`write_dataset`)."""
    return write_dataset(data, uri, mode="append", **kwargs)


def column_field(dataset: lance.LanceDataset, column: str) -> pa.Field:
    try:
        return dataset.schema.field(column)
    except KeyError:
        raise SchemaError(f"column {column!r} is not in the dataset; it has {dataset.schema.names}") from None


# --- reading -------------------------------------------------------------------------------------


def read(dataset: lance.LanceDataset, *, columns: Sequence[str] | None = None, where: str | None = None,
         limit: int | None = None) -> pa.Table:
    """Read rows with the projection and the filter pushed down to Lance (only those bytes are read).

    A dataset written before ``species`` held the binomial is read as if it did, filter included
    (:mod:`cladebench.store.species`).
    """
    where = check_filter(where)
    if columns is not None:
        for column in columns:
            column_field(dataset, column)
    legacy = holds_epithets(dataset)
    projection, added_genus = columns_to_read(columns or None, dataset.schema.names) if legacy else (
        list(columns) if columns else None, False)
    try:
        table = dataset.to_table(columns=projection, filter=species_filter(where) if legacy else where, limit=limit)
        return with_binomials(table, added_genus) if legacy else table
    except (ValueError, OSError) as exc:
        raise CladebenchError(f"cannot read with filter {where!r}: {str(exc).split(', /')[0]}") from None


def write_error(exc: BaseException, out: str | Path, *, environment: bool = True) -> BaseException:
    """What a failed write raises: our own error unwrapped from Lance's, an environment failure as one line (when
    ``environment``: a local target), else the exception itself (a bug)."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return exc
    return _unwrap_schema_error(exc) or (environment_error(exc, out) if environment else None) or exc
