"""The cohort's rows: Fine-Grained Challenges' columns, plus what a camera-trap image brings.

A kept image becomes one row of the FGC table's schema
(:data:`cladebench.benchmarks.finegrained.builder.images.OUTPUT_SCHEMA`): the lineage the label resolved to, cut
at the genus (``species`` null, ``scientific_name`` the genus: camera-trap labels of these genera are not
species identifications), ``seen_in_training = []`` (these collections are in none of the listed models'
training data as the published card states), ``source_dataset`` ``lila:<collection>``, ``source_id`` the
metadata's image id, ``source_url`` where the image was fetched (null when read from a local image folder),
the collection's license and link, ``publisher`` the collection, ``basisOfRecord`` ``MachineObservation``
(Darwin Core's term for a camera trap), ``img_type`` ``camera-trap`` and ``resolution_status`` the label's
resolution status. The columns of :data:`CAMERA_FIELDS` follow; on rows of other cohorts they are null.
``location_id`` and ``sequence_id`` are the sampling units a split of camera-trap images must group by (images
of one burst, or one camera, are near-duplicates).

The uuid is a UUID5 of ``lila:<collection>/<image id>``: the same image gets the same uuid in every build, so a
second append of the same cohort is refused instead of duplicating rows.

Why a module: one place says what a camera-trap row holds, for a new table and for an append alike.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping

import pyarrow as pa

from cladebench.benchmarks.finegrained.builder.images import OUTPUT_SCHEMA
from cladebench.benchmarks.finegrained.cameratrap.config import Cohort, Collection
from cladebench.benchmarks.finegrained.cameratrap.records import CctImage
from cladebench.benchmarks.finegrained.cameratrap.resolve import Resolution
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank

CAMERA_FIELDS: tuple[pa.Field, ...] = (
    pa.field("location_id", pa.string()),
    pa.field("sequence_id", pa.string()),
    pa.field("captured_at", pa.string()),
    pa.field("source_label", pa.string()),
    pa.field("detector", pa.string()),
    pa.field("detection_conf", pa.float64()),
)
"""Camera-trap columns: the camera location and the sequence (the sampling units for splits), the capture time as
the metadata writes it, the category name the row was selected by, the detector version that screened it and its
highest animal confidence."""
SCHEMA = pa.schema([*OUTPUT_SCHEMA, *CAMERA_FIELDS])
"""Columns of a cohort table written on its own (``--out`` without ``--append-to``)."""
BASIS_OF_RECORD = "MachineObservation"
IMG_TYPE = "camera-trap"


def row_uuid(collection: Collection, image_id: str) -> str:
    """The row's uuid: stable across builds (see the module docstring)."""
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{collection.source_dataset}/{image_id}"))


def genus_lineage(resolution: Resolution) -> Lineage:
    """The resolved lineage cut at the genus (or at the label's rank when it is above the genus)."""
    assert resolution.lineage is not None and resolution.rank is not None
    return resolution.lineage.truncate(min(resolution.rank, Rank.GENUS))


def attribution(collection: Collection) -> str:
    title = collection.title or collection.name
    return f"{title}{f' ({collection.link})' if collection.link else ''}, {collection.license}"


def cohort_row(cohort: Cohort, collection: Collection, image: CctImage, resolution: Resolution, url: str | None,
               encoded: Mapping[str, object], detector: str, conf: float) -> dict[str, object]:
    """One kept image as a row of :data:`SCHEMA`."""
    lineage = genus_lineage(resolution)
    title = collection.title or collection.name
    return {
        "uuid": row_uuid(collection, image.image_id), "image": encoded["image"], "image_format": "webp",
        **{c: lineage.names[i] for i, c in enumerate(RANK_COLUMNS)},
        "scientific_name": lineage.scientific_name, "common_name": None,
        "source_dataset": collection.source_dataset, "source_id": image.image_id, "source_url": url,
        "license_name": collection.license, "license_link": collection.license_link,
        "attribution": attribution(collection), "seen_in_training": [],
        "challenge_group": cohort.group.name, "copyright_owner": image.rights_holder or title,
        "publisher": title, "basisOfRecord": BASIS_OF_RECORD, "img_type": IMG_TYPE,
        "resolution_status": resolution.status,
        **{k: encoded[k] for k in ("width", "height", "original_width", "original_height")},
        "location_id": image.location, "sequence_id": image.seq_id, "captured_at": image.datetime,
        "source_label": resolution.label, "detector": detector, "detection_conf": conf,
    }


def rows_table(rows: list[dict[str, object]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


__all__ = ["BASIS_OF_RECORD", "CAMERA_FIELDS", "IMG_TYPE", "SCHEMA", "attribution", "cohort_row", "genus_lineage",
           "row_uuid", "rows_table"]
