"""INQUIRE: its queries, its positive annotations, and INQUIRE-Rerank as canonical rows in a Lance dataset.

INQUIRE (Vendrow et al., "INQUIRE: A Natural World Text-to-Image Retrieval Benchmark", NeurIPS 2024
Datasets and Benchmarks; github.com/inquire-benchmark/INQUIRE) has 250 expert queries over the five
million photos of iNat24. It ships three things, each with a reader here:

**Queries** (``data/inquire/inquire_queries_{val,test}.csv``, 50 and 200 queries)::

    ,query_id,query_text,supercategory,category,iconic_group
    0,3,A mongoose standing upright alert,Behavior,Defensive and Survival Behaviors,Mammals

- The first column is pandas' unnamed index; it is dropped, and a file without it reads the same.
- ``query_text`` is kept exactly as written: INQUIRE feeds it to the text encoder as-is, so a
  trailing space (val query 222 ends in one) or a typographic quote is part of the query.
- ``iconic_group`` is empty for two test queries; empty text cells become null.
- A repeated ``query_id`` is an error naming the file and both rows.

**Annotations** (``data/inquire/inquire_annotations.csv``, about 33k rows, every row a positive)::

    query_id,image_id,image_path
    3,4702270,train/04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo/903be103-....jpg

The species folder is ``<category id>_<Kingdom>_<Phylum>_<Class>_<Order>_<Family>_<Genus>_<epithet>``
(checked on the real excerpt: ``04686_..._Mungos_mungo`` and ``04687_..._Urva_auropunctata``); the
reader splits it into the seven rank columns, ``scientific_name`` and ``inat24_category_id``.

**The iNat24 file key.** The official Fullrank code counts a retrieved image as relevant when
``match['image_path'] + ".jpg" in pos_images``, where ``pos_images`` are the annotation paths and the
retrieval index stores paths without the extension. The key here, ``inat24_file_name``, is therefore
the annotation ``image_path`` verbatim (relative to the iNat24 root, starting ``train/``, ending
``.jpg``), and :func:`inat24_file_key` turns an index path into it by appending ``.jpg`` when it is
missing and changing nothing else, so a string comparison with the key is the official match.
INQUIRE-Rerank's ``inat24_file_name`` is iNat24's own ``file_name``, the same form, so rerank
candidates and annotations join on this column.

**INQUIRE-Rerank** (Hugging Face ``evendrow/INQUIRE-Rerank``; Parquet shards
``validation-*.parquet``, 4,000 rows, and ``test-*.parquet``, 16,000 rows): 100 CLIP-retrieved
iNat24 candidates per query with a relevance label. One stored row per (query, candidate):

- ``uuid`` is a UUID-5 of ``<split>/<query_id>/<inat24_image_id>`` in the namespace
  :data:`UUID_NAMESPACE`, so a rebuild gives the same uuids and the same fingerprint. The same photo
  is a candidate of several queries, so the image id alone would not be unique.
- ``split`` is ``val`` or ``test`` (INQUIRE's names, as in the query files), from the shard's file
  name (``validation-`` and ``val`` give ``val``) unless given.
- ``image`` is the ``image.bytes`` of the HF image struct, unchanged; ``image_format`` is sniffed
  from its first bytes (:func:`cladebench.images.sniff_format`); an unknown signature gives null
  and is counted. A row without image bytes is an error: dropping a candidate would change every
  metric of its query.
- ``observed_on`` is the calendar date written at the start of ``date`` (see :func:`parse_observed_on`
  for the accepted forms); a time of day and a UTC offset are validated but do not shift the date.
- ``latitude``/``longitude`` NaN or null become null (iNat24 leaves them NaN when unknown).
- ``license_name`` is iNaturalist's code (``cc-by-nc``, ``cc0``, ...) parsed from ``license`` in any
  of its usual spellings (:func:`parse_license`); the raw value stays in ``license_raw``. A value
  that is not recognised gives a null ``license_name`` and is counted, never guessed.
- ``attribution`` follows iNaturalist's rule for its open data: ``© <rights holder>, some rights
  reserved (CC-BY-NC)``, or ``<rights holder>, no rights reserved (CC0)``; null when the rights holder
  or the license is unknown (counted).
- ``source_dataset`` is ``inquire-rerank``; ``source_id`` is the iNat24 image id.
- The ranks come from the species folder of ``inat24_file_name``; a file name without one leaves
  them null (counted) rather than failing, because reranking does not need them.
- Extra columns: ``split``, ``query_id``, ``query`` (verbatim), ``relevant`` (bool), ``clip_score``,
  ``supercategory``, ``category``, ``iconic_group``, ``inat24_image_id``, ``inat24_file_name``,
  ``license_raw``, ``rights_holder``, and, null when a revision lacks them, ``location_uncertainty``,
  ``inat24_species_id``, ``inat24_species_name`` (older revisions call the last two
  ``inat24_category_*``).
- ``query_id`` is required unless ``queries`` (the query CSVs or their table) are given: the dataset
  card of one revision lists no ``query_id``, and the official rerank script groups by query text.

Any bad value is a :class:`SchemaError` naming the file, the row (1 = the first row of data, in a CSV
or a Parquet file; :mod:`cladebench.curate.sources.rows`) and the field; a missing column names the file and
the column, and is found before anything is written.

This package presents the API on purpose: every reader and builder above is importable from here. Its
modules: :mod:`~cladebench.benchmarks.inquire.source.columns` (the formats and schemas),
:mod:`~cladebench.curate.sources.values` (names, keys, licenses, dates),
:mod:`~cladebench.benchmarks.inquire.source.queries` (the query and annotation CSVs) and
:mod:`~cladebench.benchmarks.inquire.source.rerank` (the rerank shards and the build).

Example:
    >>> inat24_file_key("train/04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo/903be103")
    'train/04686_Animalia_Chordata_Mammalia_Carnivora_Herpestidae_Mungos_mungo/903be103.jpg'
    >>> parse_license("CC BY-NC 4.0").attribution("Jane Doe")
    '© Jane Doe, some rights reserved (CC-BY-NC)'
    >>> parse_observed_on("2019-06-23 18:02:00+00:00")
    datetime.date(2019, 6, 23)
"""

from __future__ import annotations

from cladebench.benchmarks.inquire.source.columns import (
    ANNOTATIONS_SCHEMA,
    QUERIES_SCHEMA,
    RERANK_COLUMNS,
    RERANK_SCHEMA,
    SOURCE_DATASET,
    UUID_NAMESPACE,
    read_stats,
    rerank_schema,
)
from cladebench.benchmarks.inquire.source.queries import read_inquire_annotations, read_inquire_queries
from cladebench.benchmarks.inquire.source.rerank import (
    InquireRerankBuild,
    RerankStats,
    build_inquire_rerank,
    iter_inquire_rerank_batches,
    parquet_paths_of,
    read_inquire_rerank,
    shard_paths,
)
from cladebench.curate.sources.values import (
    InatLicense,
    inat24_file_key,
    parse_license,
    parse_observed_on,
    species_folder_lineage,
    split_from_name,
)

__all__ = [
    "ANNOTATIONS_SCHEMA",
    "QUERIES_SCHEMA",
    "RERANK_COLUMNS",
    "RERANK_SCHEMA",
    "SOURCE_DATASET",
    "UUID_NAMESPACE",
    "InatLicense",
    "InquireRerankBuild",
    "RerankStats",
    "build_inquire_rerank",
    "inat24_file_key",
    "iter_inquire_rerank_batches",
    "parquet_paths_of",
    "parse_license",
    "parse_observed_on",
    "read_inquire_annotations",
    "read_inquire_queries",
    "read_inquire_rerank",
    "read_stats",
    "rerank_schema",
    "shard_paths",
    "species_folder_lineage",
    "split_from_name",
]
