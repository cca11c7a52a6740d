"""A Darwin Core Archive (a GBIF download): the occurrence core and its Simple Multimedia extension.

Read with ``python-dwca-reader`` (the ``dwca`` extra), which knows the archive's ``meta.xml`` (star schema,
delimiters, quoting, default values, encodings), a zip, a tgz or a folder. Each image is a row of the Simple
Multimedia extension (``http://rs.gbif.org/terms/1.0/Multimedia``) whose ``identifier`` is its URL and whose
``type`` is ``StillImage`` (or whose ``format`` is ``image/...``, or which says neither); its ``license``,
``rightsHolder`` (else ``creator``) and ``references`` are the row's license, attribution and source URL, and
the occurrence's own ``license`` and ``rightsHolder`` stand in where the image has none. The occurrence gives
the rest by its Darwin Core terms (:mod:`.columns`): ``scientificName`` (an author and year after the name are
dropped for resolution), the ranks, ``vernacularName``, ``decimalLatitude``, ``decimalLongitude``,
``eventDate``; its ``occurrenceID`` (or ``gbifID``) is the row's ``source_id``, so the images of one occurrence
stay on one side of a split. An archive without the extension may list image URLs in the core's
``associatedMedia`` (separated by ``|``); one with neither is an error before anything is written. An occurrence
with no image is a record with the problem ``no_image``: counted, not written.

The download's ``rights.txt`` and ``citations.txt`` (what GBIF asks users to cite and respect) and the titles of
its source datasets are kept for the card.

A broken archive (no core file, a malformed ``meta.xml``, a file it names missing) is a
:class:`~cladebench.errors.SchemaError` naming the archive, raised before anything is written.

Why a module: the one kind whose records join two files, through the library that knows their layout.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cladebench.curate.sources.images.columns import license_columns, map_columns, mapped_values, text
from cladebench.curate.sources.images.records import ImageRecord, refuse_special
from cladebench.errors import CladebenchError, SchemaError

MULTIMEDIA = "http://rs.gbif.org/terms/1.0/Multimedia"
"""Row type of the Simple Multimedia extension."""
INCLUDED_TEXTS = ("rights.txt", "citations.txt")
"""Files of a GBIF download kept with the dataset's card."""


def _term(uri: str) -> str:
    """A term's local name: ``http://rs.tdwg.org/dwc/terms/decimalLatitude`` -> ``decimalLatitude``."""
    return uri.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def _cells(data: Mapping[str, object]) -> dict[str, object]:
    return {_term(uri): value for uri, value in data.items()}


def _is_image(cells: Mapping[str, object]) -> bool:
    kind, media_format = (text(cells.get("type")) or "").lower(), (text(cells.get("format")) or "").lower()
    if kind:
        return kind in ("stillimage", "image", "http://purl.org/dc/dcmitype/stillimage")
    return not media_format or media_format.startswith("image/")


def _errors() -> tuple[type[BaseException], ...]:
    import tarfile
    import zipfile
    from xml.etree.ElementTree import ParseError

    from dwca.exceptions import InvalidArchive, NotADataFile

    return (InvalidArchive, NotADataFile, zipfile.BadZipFile, tarfile.TarError, ParseError, OSError, KeyError,
            IndexError, ValueError, AttributeError, TypeError)


def open_archive(path: Path) -> Any:
    """The archive opened by ``python-dwca-reader`` (a zip or tgz unpacked once, to a temporary folder its
    ``close`` removes); its failures as one :class:`SchemaError` line."""
    try:
        from dwca.read import DwCAReader
    except ImportError:
        raise CladebenchError("reading a Darwin Core Archive needs python-dwca-reader: pip install "
                              "'cladebench[dwca]'") from None
    try:
        return DwCAReader(str(path))
    except _errors() as exc:
        raise SchemaError(f"{path}: not a readable Darwin Core Archive: {type(exc).__name__}: {exc}") from None


class ArchiveSource:
    """The images of a Darwin Core Archive's occurrences, as image records."""

    kind = "dwca"

    def __init__(self, path: Path, overrides: Mapping[str, str]) -> None:
        self.path = Path(path)
        refuse_special(self.path, "an archive")
        if not self.path.exists():
            raise CladebenchError(f"{self.path}: no such file or folder")
        self.overrides = dict(overrides)
        self.archive = open_archive(self.path)
        self._close = weakref.finalize(self, self.archive.close)  # read twice, unpacked once
        try:
            self._describe(self.archive)
        except BaseException:
            self._close()
            raise

    def _describe(self, archive: Any) -> None:
        terms = sorted(_term(t) for t in archive.core_file.file_descriptor.terms)
        self.mapping = map_columns(terms, self.overrides, where=f"{self.path} (core)")
        has_media = any(f.file_descriptor.type == MULTIMEDIA for f in archive.extension_files)
        self.notes: dict[str, object] = {
            "archive": str(self.path), "core": archive.descriptor.core.type if archive.descriptor else None,
            "multimedia_extension": has_media,
            "source_datasets": sorted(_title(eml) for eml in (archive.source_metadata or {}).values()),
        }
        for name in INCLUDED_TEXTS:
            with contextlib.suppress(*_errors()), archive.open_included_file(name, encoding="utf-8") as handle:
                self.notes[name] = handle.read()
        if "label" not in self.mapping and not any(r in self.mapping for r in ("genus", "species")):
            raise SchemaError(f"{self.path}: the core has no scientificName nor rank terms; its terms are {terms}")
        self.media_term = next((t for t in terms if t.lower() == "associatedmedia"), None)
        if not has_media and self.media_term is None:
            raise SchemaError(f"{self.path}: no images: the archive has no Simple Multimedia extension ({MULTIMEDIA}) "
                              "and its core no associatedMedia; a GBIF download has images in its DWCA format "
                              "(multimedia.txt), not in Simple CSV")

    def records(self, images: bool = True) -> Iterator[ImageRecord]:
        try:
            for number, row in enumerate(self.archive, 1):
                yield from self._occurrence(number, row)
        except _errors() as exc:
            raise SchemaError(f"{self.path}: not a readable Darwin Core Archive: {type(exc).__name__}: "
                              f"{exc}") from None

    def _occurrence(self, number: int, row: Any) -> Iterator[ImageRecord]:
        cells = _cells(row.data)
        mapped = mapped_values(cells, self.mapping)
        occurrence = text(row.id) or str(number)
        mapped.values["source_id"] = mapped.values.get("source_id") or occurrence
        media = [_cells(e.data) for e in row.extensions if e.rowtype == MULTIMEDIA]
        media = [m for m in media if _is_image(m)]
        if not media and self.media_term is not None:  # the core's own list of image URLs
            media = [{"identifier": url.strip()} for url in (text(cells.get(self.media_term)) or "").split("|")
                     if url.strip()]
        where = f"occurrence {occurrence} (core row {number})"
        if not media:
            yield ImageRecord(key=f"occurrence:{occurrence}", where=where, label=mapped.label, ranks=mapped.ranks,
                              values=dict(mapped.values), problem=("no_image", "the occurrence has no image"))
            return
        for i, item in enumerate(media, 1):
            values = dict(mapped.values)
            license_name, license_link = license_columns(item.get("license"))
            if license_name is not None:
                values["license_name"], values["license_link"] = license_name, license_link
            attribution = text(item.get("rightsHolder")) or text(item.get("creator"))
            values["attribution"] = attribution or values.get("attribution")
            url = text(item.get("identifier"))
            values["source_url"] = text(item.get("references")) or url
            record = ImageRecord(key=f"{occurrence}:{url or i}", where=f"{where}, image {i}", label=mapped.label,
                                 ranks=mapped.ranks, values=values, set_null=mapped.dropped)
            if url is None:
                record.problem = ("no_image", "the multimedia row has no identifier (URL)")
            elif url.startswith(("http://", "https://")):
                record.url = url
            else:
                record.problem = ("bad_url", f"identifier {url!r} is not an http(s) URL")
            yield record


def _title(eml: Any) -> str:
    found = eml.find(".//dataset/title") if eml is not None else None
    return text(getattr(found, "text", None)) or "(untitled)"


__all__ = ["INCLUDED_TEXTS", "MULTIMEDIA", "ArchiveSource", "open_archive"]
