"""Which rows and which version: the fingerprint of a dataset's uuids, its versions and tags.

A number is only as good as the record of what it was computed on; the fingerprint identifies exactly which
examples, in which order, and a tag names a version to reopen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cladebench.store.checks import check_uuid_type, check_uuid_values
from cladebench.store.species import holds_epithets, species_filter
from cladebench.store.sql import check_filter

if TYPE_CHECKING:
    import lance


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
    check_uuid_type(dataset.schema, getattr(dataset, "uri", "the dataset"))
    digest = hashlib.sha256()
    scanner = dataset.scanner(columns=["uuid"], filter=where, batch_size=65536, scan_in_order=True)
    offset = 0
    for batch in scanner.to_batches():
        column = batch.column(0)
        check_uuid_values(column, offset, f"{getattr(dataset, 'uri', 'the dataset')}: ")
        uuids = column.to_pylist()
        if uuids:
            digest.update(("\n".join(uuids) + "\n").encode("utf-8"))
        offset += len(uuids)
    return digest.hexdigest()


def versions(dataset: lance.LanceDataset) -> list[dict[str, Any]]:
    """Versions of the dataset, oldest first: ``version`` and ``timestamp``."""
    return [{"version": v["version"], "timestamp": str(v["timestamp"])} for v in dataset.versions()]


def tag(dataset: lance.LanceDataset, name: str, version: int | None = None) -> None:
    """Tag a version (the current one by default) so it can be reopened by name."""
    dataset.tags.create(name, dataset.version if version is None else version)


def tags(dataset: lance.LanceDataset) -> dict[str, int]:
    """Tag name -> version."""
    return {name: info["version"] for name, info in dataset.tags.list().items()}
