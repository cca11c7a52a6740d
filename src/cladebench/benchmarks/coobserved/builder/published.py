"""A kept co-observed photo as a row of the published dataset's layout (``data/coobserved.parquet``).

Why a module: the layout is the contract with ``cladebench load inat-coobserved`` and with the published
dataset (``dcher95/inat-coobserved``); it is spelled once, here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from cladebench.benchmarks.coobserved.builder.config import SOURCE
from cladebench.curate import inat_export
from cladebench.store.schema import canonical_fields
from cladebench.taxonomy import RANK_COLUMNS

ORGANISM_TYPE = pa.struct([
    pa.field("observation_uuid", pa.string()),
    pa.field("observation_url", pa.string()),
    *canonical_fields("taxon_id"),
    pa.field("taxon_url", pa.string()),
    *canonical_fields(*RANK_COLUMNS, "scientific_name"),
    pa.field("quality_grade", pa.string()),
    pa.field("species_in_tol200m", pa.bool_()),
])
"""One entry of ``organisms`` in the published layout (its field order); the canonical columns among them are
typed by the store's schema."""

PUBLISHED_SCHEMA = pa.schema([
    pa.field("photo_id", pa.int64(), nullable=False),
    pa.field("photo_uuid", pa.string()),
    pa.field("image_url", pa.string()),
    pa.field("image_url_medium", pa.string()),
    pa.field("photo_page_url", pa.string()),
    pa.field("width", pa.int64()),
    pa.field("height", pa.int64()),
    pa.field("license", pa.string()),
    pa.field("license_url", pa.string()),
    pa.field("attribution", pa.string()),
    pa.field("observer_id", pa.int64()),
    pa.field("observer_login", pa.string()),
    pa.field("observer_name", pa.string()),
    pa.field("observed_on", pa.date32()),
    pa.field("latitude", pa.float64()),
    pa.field("longitude", pa.float64()),
    pa.field("positional_accuracy_m", pa.float64()),
    pa.field("divergence_rank", pa.string()),
    pa.field("kingdom_pair", pa.string()),
    pa.field("class_pair", pa.string()),
    pa.field("n_photos_sharing_observation_pair", pa.int64()),
    pa.field("organisms", pa.list_(ORGANISM_TYPE)),
    pa.field("in_tol200m", pa.bool_()),
    pa.field("source", pa.string()),
])
"""Columns of ``data/coobserved.parquet``: the published dataset's, without the image bytes."""


def _organism(row: Mapping[str, Any], side: str) -> dict[str, object]:
    uuid = row[f"obs_{side}_uuid"]
    taxon_id = row[f"taxon_{side}"]
    return {
        "observation_uuid": uuid, "observation_url": inat_export.observation_url(uuid),
        "taxon_id": taxon_id, "taxon_url": inat_export.taxon_url(taxon_id),
        **{c: row[f"{c}_{side}"] for c in RANK_COLUMNS[:-1]}, "species": row[f"species_name_{side}"],
        "scientific_name": row[f"binomial_{side}"], "quality_grade": row[f"grade_{side}"],
        "species_in_tol200m": row[f"in_tol_{side}"],
    }


def published_row(row: Mapping[str, Any]) -> dict[str, object]:
    from cladebench.curate.sources.values import parse_license

    first, second = ("a", "b") if row["a_first"] else ("b", "a")
    place = first if row[f"latitude_{first}"] is not None and row[f"longitude_{first}"] is not None else second
    parsed = parse_license(row["license"])
    assert parsed is not None and row["observer_name"] is not None  # eligible photos have both
    url = inat_export.photo_url(row["photo_id"], row["extension"])
    accuracy = row[f"accuracy_{place}"]
    return {
        "photo_id": row["photo_id"], "photo_uuid": None if row["photo_uuid"] is None else str(row["photo_uuid"]),
        "image_url": url, "image_url_medium": url, "photo_page_url": inat_export.photo_page_url(row["photo_id"]),
        "width": row["width"], "height": row["height"], "license": row["license"], "license_url": parsed.link,
        "attribution": parsed.attribution(row["observer_name"]), "observer_id": row["observer_id"],
        "observer_login": row["observer_login"], "observer_name": row["observer_name"],
        "observed_on": row[f"observed_on_{place}"], "latitude": row[f"latitude_{place}"],
        "longitude": row[f"longitude_{place}"], "positional_accuracy_m": None if accuracy is None else float(accuracy),
        "divergence_rank": RANK_COLUMNS[row["rank_index"]], "kingdom_pair": row["kingdom_pair"],
        "class_pair": row["class_pair"], "n_photos_sharing_observation_pair": row["n_sharing"],
        "organisms": [_organism(row, first), _organism(row, second)], "in_tol200m": None, "source": SOURCE,
    }



__all__ = ["ORGANISM_TYPE", "PUBLISHED_SCHEMA", "published_row"]
