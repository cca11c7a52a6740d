"""A generator of iNaturalist open-data exports of any size, with known answers, for tests and benchmarks.

The format itself (files, headers, column types, URLs) is :mod:`cladebench.curate.inat_export`, what the
builders read; this package writes exports in it. :func:`write_export` writes one with a real-looking
taxonomy (the seven ranks with iNaturalist's intermediate ranks between them, subspecies, inactive taxa,
iNat's real ids for Life and the kingdoms) and streams the background photos and observations to disk
``chunk_rows`` observations at a time, so ten million photo rows take bounded memory. Into it it plants
photos with a known answer for :mod:`cladebench.benchmarks.coobserved.builder`:

- eligible co-observed photos: one photo on two research-grade observations of different species by
  the same observer, cycled over the divergence ranks kingdom .. genus, with licenses in mixed case,
  ``JPG`` extensions, observers named ``None``, subspecies observations, two photos on one
  observation pair, and a duplicated photo row;
- one group of photos per way a candidate can fail (:data:`PHOTO_DEFECTS`), each failing only that
  check, and rows that are bad on their own (:data:`ROW_DEFECTS`): a line with too many fields,
  taxa without a name, a duplicated taxon.

The returned :class:`ExportManifest` says what was planted and the counts the builder must report.

The modules, one job each: :mod:`.manifest` (the config and what a generation promises),
:mod:`.taxonomy` (made-up taxa and observers), :mod:`.planting` (the photos with known answers),
:mod:`.writing` (the background rows and the files). This ``__init__`` presents the package's public API
on purpose, so a test writes ``from cladebench.synthetic.inat_export import ExportConfig, write_export``.

Example:
    >>> import tempfile
    >>> manifest = write_export(tempfile.mkdtemp(), ExportConfig(n_photos=1500, n_coobserved=4, n_defects=1))
    >>> manifest.rows["photos"], len(manifest.eligible)
    (1500, 4)
"""

from __future__ import annotations

from cladebench.synthetic.inat_export.manifest import (
    PHOTO_DEFECTS,
    ROW_DEFECTS,
    ExportConfig,
    ExportManifest,
    PlantedPhoto,
    write_manifest,
)
from cladebench.synthetic.inat_export.writing import write_export

__all__ = [
    "PHOTO_DEFECTS",
    "ROW_DEFECTS",
    "ExportConfig",
    "ExportManifest",
    "PlantedPhoto",
    "write_export",
    "write_manifest",
]
