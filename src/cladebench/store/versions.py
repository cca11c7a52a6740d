"""Which rows and which version: the fingerprint of a dataset's uuids, its versions and tags.

A number is only as good as the record of what it was computed on; the fingerprint identifies exactly which
examples, in which order, and a tag names a version to reopen.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cladebench.errors import CladebenchError, DatasetNotFoundError, UsageError
from cladebench.store.checks import check_uuid_type, check_uuid_values
from cladebench.store.species import holds_epithets, species_filter
from cladebench.store.sql import check_filter

if TYPE_CHECKING:
    import lance
    import pyarrow as pa


def fingerprint_uuids(uuids: Iterable[str]) -> str:
    """The fingerprint's definition: SHA-256 over each uuid's UTF-8 bytes followed by one ``\\n`` byte.

    In row order, with no separator other than the newline after every uuid (so the last uuid is
    followed by a newline too). Hex digest, lower case. Uuids cannot contain newlines (the store
    rejects them), so the encoding is unambiguous.
    """
    digest = hashlib.sha256()
    for uuid in uuids:
        digest.update(uuid.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def fingerprint(dataset: lance.LanceDataset, *, where: str | None = None) -> str:
    """SHA-256 of the dataset's uuids in row order (see :func:`fingerprint_uuids`), streamed.

    A dataset whose uuids are not text, or hold a null or a newline (one written by other tools: the
    store's writer refuses them), has no unambiguous fingerprint: a :class:`SchemaError` names the row.
    """
    where = check_filter(where)
    if where is not None and holds_epithets(dataset):  # written before species held the binomial: read as if it did
        where = species_filter(where)
    digest = hashlib.sha256()
    for uuids, _ in _uuid_batches(dataset, where=where):
        _update(digest, uuids)
    return digest.hexdigest()


def fingerprint_selecting(dataset: lance.LanceDataset, where: str | None) -> tuple[str, pa.ChunkedArray]:
    """The whole dataset's :func:`fingerprint` and the uuids ``where`` selects (every uuid when None), from one
    read of the uuid column: an evaluation checks the selected uuids and records the fingerprint, and reads the
    column once for both (the filter is evaluated as a column beside it)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    where = check_filter(where)
    if where is not None and holds_epithets(dataset):
        where = species_filter(where)
    digest = hashlib.sha256()
    selected = []
    for uuids, chosen in _uuid_batches(dataset, selected=where):
        _update(digest, uuids)
        selected.append(uuids if chosen is None else uuids.filter(pc.fill_null(chosen, False)))
    return digest.hexdigest(), pa.chunked_array(selected) if selected else pa.chunked_array([], type=pa.string())


def _update(digest: hashlib._Hash, uuids: pa.Array | pa.ChunkedArray) -> None:
    values = uuids.to_pylist()
    if values:
        digest.update(("\n".join(values) + "\n").encode("utf-8"))


def _uuid_batches(dataset: lance.LanceDataset, *, where: str | None = None,
                  selected: str | None = None) -> Iterable[tuple[pa.Array, object]]:
    """The uuid column in row order, batch by batch and checked (a null, empty or multi-line uuid is a
    :class:`SchemaError` naming its row), with the value of the ``selected`` expression per row (None without)."""
    source = getattr(dataset, "uri", "the dataset")
    check_uuid_type(dataset.schema, source)
    columns: list[str] | dict[str, str] = (["uuid"] if selected is None
                                           else {"uuid": "uuid", "selected": f"({selected})"})
    scanner = dataset.scanner(columns=columns, filter=where, batch_size=65536, scan_in_order=True)
    offset = 0
    for batch in scanner.to_batches():
        column = batch.column(0)
        check_uuid_values(column, offset, f"{source}: ")
        offset += len(column)
        yield column, None if selected is None else batch.column(1)


def versions(dataset: lance.LanceDataset) -> list[dict[str, object]]:
    """Versions of the dataset, oldest first: ``version`` and ``timestamp``."""
    return [{"version": v["version"], "timestamp": str(v["timestamp"])} for v in dataset.versions()]


MAX_VERSION = (1 << 63) - 1
"""Lance numbers versions from 1 with unsigned 64-bit integers; a larger number is no version (nor is 0)."""
TAG_NAME = re.compile(r"[A-Za-z0-9._-]+")
"""The characters Lance allows in a tag name."""


def version_or_tag(value: int | str | None) -> int | str | None:
    """The version a user named, as Lance takes it: a whole number (as an int, or as a string of digits, which
    is how a command line gives it) is a version number, anything else a tag name, None the latest. The one
    rule for every reader of a version, so ``1`` means version 1 from Python and from ``info`` alike; a tag
    therefore never consists of digits alone (:func:`tag` refuses one).

    Example:
        >>> version_or_tag("3"), version_or_tag(3), version_or_tag("release-1"), version_or_tag(None)
        (3, 3, 'release-1', None)
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise UsageError("a version is a number or a tag name, got an empty string")
        if not text.isdigit():
            return text
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"a version is a whole number or a tag name, got {value!r}")
    if not 1 <= value <= MAX_VERSION:
        raise UsageError(f"a version number is a whole number from 1, got {value}")
    return value


def tag(dataset: lance.LanceDataset, name: str, version: int | None = None) -> None:
    """Tag a version (the current one by default) so it can be reopened by name. A name Lance would refuse, a
    name of digits alone (it would read as a version number: :func:`version_or_tag`), a version the dataset
    does not have and a tag that exists already are one-line errors."""
    if not isinstance(name, str) or not TAG_NAME.fullmatch(name):
        raise UsageError(f"a tag name is letters, digits, '.', '-' and '_', got {name!r}")
    if name.isdigit():
        raise UsageError(f"tag {name!r} is digits alone, which reads as a version number; add a letter")
    number = dataset.version if version is None else version_or_tag(version)
    if not isinstance(number, int):
        raise UsageError(f"a tag names a version number, got {version!r}")
    existing = tags(dataset)
    if name in existing:
        raise CladebenchError(f"tag {name!r} already names version {existing[name]} of {dataset.uri}")
    if number not in {v["version"] for v in dataset.versions()}:
        raise DatasetNotFoundError(f"{dataset.uri} has no version {number} to tag")
    dataset.tags.create(name, number)


def tags(dataset: lance.LanceDataset) -> dict[str, int]:
    """Tag name -> version."""
    return {name: info["version"] for name, info in dataset.tags.list().items()}
