"""Curate CrypticBio-style benchmarks from observation metadata, as CrypticBio-Curate does, driven by a YAML file.

CrypticBio (Manolache et al., 2025; ``gmanolache/CrypticBio``) ships GBIF research-grade metadata of
cryptic species (one row per photo: ``scientificName``, ``year``/``month``/``day``,
``decimalLatitude``/``decimalLongitude``, ``url``, the ranks, ``vernacularName`` as a list literal and,
in the full release, ``crypticGroup``) and four benchmarks cut from it. Its curation tool takes a
``config.yaml``; this builder reads one of the same shape, filters the metadata, cuts the subsets and
writes them in the published benchmark format (so ``cladebench load crypticbio`` and
:func:`cladebench.benchmarks.crypticbio.source.read_crypticbio` read them), or fetches their photos into Lance.

The config (``cladebench build crypticbio --config config.yaml``; relative paths are relative to the
YAML file)::

    dataset:
      metadata: [CrypticBio-part1.parquet, more.csv]   # one path or a list; CSV (.csv, .csv.gz) or Parquet
      out: curated/                                    # output folder (must be new unless overwrite: true)
      seed: 0
    filters:                  # every key optional; see FILTER_KEYS
      kingdom: Animalia       # a scalar means equality
      class: [Aves, Insecta]  # a list means membership ...
      year: [2015, 2024]      # ... except for ordered keys, where it is an inclusive [from, to] range
      month: [11, 2]          # month and longitude wrap around: November to February
      latitude: [35, 72]      # latitude + longitude: a coordinate box
      longitude: [-25, 45]
      vernacular_name: true   # a boolean means "has one" (true) or "has none" (false)
      cryptic_group: true
    generate_pairs:           # cryptic species pairs, and from them each species' group
      identifications: ids.parquet     # observation_id, taxon, current ...
      observations: obs.parquet        # ... observation_id, community_taxon (see .cryptic_groups)
      min_observations: 5
      min_fraction: 0.01
    subsets:                  # without this section: one subset, "curated", of every row kept
      common: {more_than: 150, per_species: 100}
      common_unseen: {start: 2025-01-01}
      endangered: {species_list: redlist.csv}              # IUCN export: scientificName column
      invasive: {species_list: gisd.csv, name_column: Species}
    download:                 # fetch the photos into <subset>.lance (DownloadConfig's keys, and cache_dir)
      concurrency: 16
      ray: auto               # optional: fetch on this Ray cluster (cache_dir on a filesystem every node sees)

The package, one module per job, in the order a build uses them:

- :mod:`.filters`: the filter language (``filters:``), one rule for every key, and its SQL;
- :mod:`.sections`: the YAML sections as frozen configs, and the parser that reads them with errors
  naming the key;
- :mod:`.subsets`: the benchmarks that can be cut (``subsets:``) and how each chooses its rows;
- :mod:`.rows`: reading the metadata as a stream, the data checks, and every row into one bin;
- :mod:`.card`: the summary of a curation and its dataset card (README.md);
- :mod:`.build`: cryptic groups, the output files, and :func:`~.build.build_crypticbio` itself.

The builder registry (:mod:`cladebench.curate.builders`) finds the config in :mod:`.sections` and the
function in :mod:`.build`; this ``__init__`` holds no code, so importing one module does not import the rest.
"""
