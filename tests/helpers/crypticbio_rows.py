"""CrypticBio CSV rows for tests: one valid row to vary field by field, and a writer of the benchmark's CSV layout.

Shared by the source, build, fetch and attack tests of CrypticBio, so that they all start from the same row.
"""

from __future__ import annotations

import csv
from pathlib import Path

from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS

GOOD_ROW = {
    "scientificName": "Podarcis muralis", "year": "2021.0", "month": "2.0", "day": "14.0",
    "decimalLatitude": "41.25", "decimalLongitude": "-8.71",
    "url": "https://inaturalist-open-data.s3.amazonaws.com/photos/112897697/original.jpeg",
    "kingdom": "Animalia", "phylum": "Chordata", "class": "Squamata", "order": "", "family": "Lacertidae",
    "genus": "Podarcis", "vernacularName": "['common wall lizard', 'wall lizard']",
}
"""A valid row of a CrypticBio CSV (as the published files write it: floats for dates, a list of names)."""


def write_csv(path: Path, rows: list[dict[str, str]], columns: tuple[str, ...] = CSV_COLUMNS) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path
