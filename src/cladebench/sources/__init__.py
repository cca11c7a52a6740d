"""Raw sources a benchmark is built from: one module per source, each reading its files into canonical rows.

A source module knows one published format (its columns, its quirks, where its images live) and
offers two things: a reader that turns the source's metadata files into an Arrow table in the
canonical schema (without images, so it is fast and testable offline), and a builder that fetches
the images and writes a Lance dataset. The registry below names them, so the CLI and scripts look a
source up by name without importing every source (and its dependencies) up front.

Example:
    >>> get_source("crypticbio").reader
    'read_crypticbio'
    >>> try:
    ...     get_source("cryptic")
    ... except Exception as error:
    ...     print(error)
    unknown source 'cryptic'; known: crypticbio, inat-coobserved, inquire-rerank. Did you mean 'crypticbio'?
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cladebench.errors import unknown_name


@dataclass(frozen=True)
class Source:
    """Where a source's reader and builder live; imported only when used."""

    name: str
    """Registry name (``crypticbio``)."""
    module: str
    """Module that implements it."""
    reader: str
    """Function ``(path, ...) -> pyarrow.Table`` of canonical rows without images."""
    builder: str
    """Function ``(path, out, ...) -> report`` that fetches images and writes a Lance dataset."""
    doc: str
    """One line on what the source is."""

    def load(self, attribute: str) -> Callable[..., Any]:
        """The named function of the source's module."""
        return getattr(importlib.import_module(self.module), attribute)

    def read(self, *args: Any, **kwargs: Any) -> Any:
        return self.load(self.reader)(*args, **kwargs)

    def build(self, *args: Any, **kwargs: Any) -> Any:
        return self.load(self.builder)(*args, **kwargs)


SOURCES: dict[str, Source] = {}
"""Registry of sources by name."""


def register(source: Source) -> Source:
    """Add a source to :data:`SOURCES`."""
    SOURCES[source.name] = source
    return source


def get_source(name: str) -> Source:
    """Look a source up by name; an unknown name lists the known ones and the closest."""
    try:
        return SOURCES[name]
    except KeyError:
        raise unknown_name("source", name, SOURCES) from None


register(Source(
    "crypticbio", "cladebench.sources.crypticbio", "read_crypticbio", "build_crypticbio_dataset",
    "CrypticBio benchmark CSVs (Common, CommonUnseen, Endangered, Invasive): iNat/observation.org photos",
))
register(Source(
    "inquire-rerank", "cladebench.sources.inquire", "read_inquire_rerank", "build_inquire_rerank",
    "INQUIRE-Rerank Parquet shards (evendrow/INQUIRE-Rerank): 250 queries x 100 iNat24 candidates with relevance",
))
register(Source(
    "inat-coobserved", "cladebench.sources.coobserved", "read_inat_coobserved", "build_inat_coobserved",
    "iNat Co-Observed Parquet files (dcher95/inat-coobserved): iNat photos of two organisms of different species",
))
