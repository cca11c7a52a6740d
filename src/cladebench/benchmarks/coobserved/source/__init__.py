"""iNat Co-Observed: iNaturalist photos that show two organisms of different species, as pair rows in a Lance dataset.

iNat Co-Observed (Hugging Face ``dcher95/inat-coobserved``, Parquet, 5,996 rows) collects photos that
iNaturalist observers attached to two observations of different species. One row is one photo; its
``organisms`` list holds the two organisms, each with a seven-rank lineage, and ``divergence_rank``
names the broadest rank at which the two lineages part. Steered lineage completion conditions on it:
the image and one organism's lineage down to that rank, the rest of the lineage to be predicted.

The columns the Hub's dataset viewer shows for the published files::

    photo_id, photo_uuid, image, image_url, image_url_medium, photo_page_url, width, height, image_format,
    image_sha256, license, license_url, attribution, observer_id, observer_login, observer_name,
    observed_on, latitude, longitude, positional_accuracy_m, divergence_rank, kingdom_pair, class_pair,
    n_photos_sharing_observation_pair, organisms, in_tol200m, source

and in each ``organisms`` entry ``observation_uuid``, ``observation_url``, ``taxon_id``, ``taxon_url``,
the seven ranks, ``scientific_name``, ``quality_grade`` and ``species_in_tol200m``. The reader is
written against those names and accepts the aliases in :data:`COLUMN_ALIASES` and
:data:`ORGANISM_ALIASES` (``inat_photo_id``, ``date``, ``lat``/``lon``, ``cls``, ...); the first alias
present wins, and the column each field was read from is recorded per file in the read stats.

How a published row becomes a stored row (the store's co-observed shape, as
:meth:`cladebench.synthetic.World.pair_table` writes it):

- ``uuid`` is a UUID-5 of the photo id in :data:`UUID_NAMESPACE` (:func:`row_uuid`), so a rebuild gives
  the same uuids and the same fingerprint. A photo id that repeats is an error naming both rows.
- ``image`` is the image's bytes, unchanged: the ``bytes`` of an HF image struct, or a binary column.
  ``image_format`` is sniffed from the bytes (:func:`cladebench.images.sniff_format`; an unknown
  signature gives null and is counted), ``image_sha256`` is the SHA-256 of the stored bytes, and the
  published ``image_sha256`` stays in ``published_image_sha256`` (rows where they differ are counted:
  the published hash may describe the original photo rather than the embedded copy).
- A row without image bytes is fetched from its ``image_url`` by :func:`build_inat_coobserved`
  (with :func:`cladebench.curate.fetch.download`); a photo that cannot be fetched leaves its row out and
  is listed with the reason in ``<out>.failures.parquet``. Without a URL, such a row is an error.
- The canonical per-organism columns (ranks, ``scientific_name``, ``common_name``, ``taxon_id``) are
  null: a row is a photo of two organisms. ``organisms`` is a list of exactly two structs of
  :data:`ORGANISM_TYPE`, whose first fields are those of ``synthetic.ORGANISM_TYPE``. ``species`` is the
  binomial, as in the store: an epithet in the published ``species`` is joined to its genus by
  :class:`cladebench.taxonomy.Lineage`'s rules (counted). ``scientific_name`` is kept as published;
  when it is null it is the lineage's (counted). An organism with no rank named is an error.
- ``divergence_rank`` is the published value as a rank name (``kingdom`` .. ``species``, any case,
  ``cls`` accepted); anything else, or null, is an error. It is compared with
  :func:`cladebench.taxonomy.divergence_rank` of the two lineages: the recomputed rank is always stored
  in ``divergence_rank_recomputed`` (null when the lineages do not differ), and a mismatch is counted
  and listed in the read stats, never silently replaced.
- ``kingdom_pair`` and ``class_pair`` are kept as published (``Animalia + Animalia``).
- ``license_name`` is iNaturalist's code parsed from ``license`` by
  :func:`cladebench.benchmarks.inquire.source.parse_license`; the raw value stays in ``license_raw``; a value it
  does not recognise gives null and is counted. ``license_link`` is the published ``license_url``, or
  the parsed license's link when that is absent.
- ``attribution`` is the published one, verbatim; when it is missing it is iNaturalist's rule applied
  to the license and ``observer_name`` (counted), or null when either is unknown (counted).
- ``observed_on`` is the calendar date (:func:`cladebench.benchmarks.inquire.source.parse_observed_on`).
  ``latitude``/``longitude`` NaN or null become null (counted); one without the other, or a value out
  of range, is an error.
- ``source_dataset`` is ``inat-coobserved``, ``source_id`` the photo id, ``source_url`` the image URL.
- Extra columns: ``divergence_rank_recomputed``, ``kingdom_pair``, ``class_pair``, ``photo_id``,
  ``photo_uuid``, ``photo_page_url``, ``image_url_medium``, ``license_raw``, ``observer_id``,
  ``observer_login``, ``observer_name``, ``positional_accuracy_m``,
  ``n_photos_sharing_observation_pair``, ``in_tol200m``, ``published_image_sha256``; each is null when
  its file lacks the column (the absent columns are listed per file in the read stats).

Required columns: ``photo_id``, ``organisms``, ``divergence_rank``, ``license``, ``observed_on``,
``latitude``, ``longitude``, and ``image`` or ``image_url``; required in each organism: the seven
ranks. A missing one is a :class:`SchemaError` naming the file and the column (and the columns it
has), found before anything is written. A bad value names the file, the row (1 = the first row of the
file, :mod:`cladebench.curate.sources.rows`) and the field. A build is committed only at its end, so an
error leaves nothing at ``out``.

This package presents the API on purpose: every reader and builder above is importable from here. Its
modules: :mod:`~cladebench.benchmarks.coobserved.source.columns` (the format, checked per file),
:mod:`~cladebench.benchmarks.coobserved.source.pairs` (the mapping of a row),
:mod:`~cladebench.benchmarks.coobserved.source.read` (the readers, images included) and
:mod:`~cladebench.benchmarks.coobserved.source.build` (fetching and writing the dataset).

Example:
    >>> row_uuid(4047) == row_uuid("4047")
    True
    >>> parse_divergence_rank("Phylum"), parse_divergence_rank("cls")
    ('phylum', 'class')
"""

from __future__ import annotations

from cladebench.benchmarks.coobserved.source.build import FAILURES_SCHEMA, CoObservedBuild, build_inat_coobserved
from cladebench.benchmarks.coobserved.source.columns import (
    COLUMN_ALIASES,
    IMAGE_FIELDS,
    ORGANISM_ALIASES,
    ORGANISM_TYPE,
    READ_SCHEMA,
    REQUIRED_COLUMNS,
    SOURCE_DATASET,
    UUID_NAMESPACE,
    parquet_paths_of,
    parse_divergence_rank,
    read_schema,
    row_uuid,
)
from cladebench.benchmarks.coobserved.source.pairs import IMAGE_COUNTS, ROW_COUNTS, CoObservedStats
from cladebench.benchmarks.coobserved.source.read import iter_inat_coobserved_batches, read_inat_coobserved, read_stats
from cladebench.curate.sources import failures_path_for

__all__ = [
    "COLUMN_ALIASES",
    "FAILURES_SCHEMA",
    "IMAGE_COUNTS",
    "IMAGE_FIELDS",
    "ORGANISM_ALIASES",
    "ORGANISM_TYPE",
    "READ_SCHEMA",
    "REQUIRED_COLUMNS",
    "ROW_COUNTS",
    "SOURCE_DATASET",
    "UUID_NAMESPACE",
    "CoObservedBuild",
    "CoObservedStats",
    "build_inat_coobserved",
    "failures_path_for",
    "iter_inat_coobserved_batches",
    "parquet_paths_of",
    "parse_divergence_rank",
    "read_inat_coobserved",
    "read_schema",
    "read_stats",
    "row_uuid",
]
