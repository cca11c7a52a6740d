"""Build iNat Co-Observed from an iNaturalist open-data export: photos on two observations of different species.

iNat Co-Observed (``dcher95/inat-coobserved``) is made of photos that an observer attached to two
observations, one per organism in the frame. The open-data export shows such a photo as one row of
``photos.csv`` per observation, with the same ``photo_id`` (:mod:`cladebench.curate.inat_export` describes
the files). This builder finds those photos in a full export (hundreds of millions of rows) with
DuckDB, out of core, keeps the usable ones, samples them per divergence rank and writes them in the
published dataset's layout.

The package, one module per job, in the order a build uses them:

- :mod:`.config`: the options (``cladebench build coobserved --help``) and the constants they refer to;
- :mod:`.checks`: every reason a row or photo is left out, as SQL, in the order they are applied;
- :mod:`.reading`: reading the export's files into DuckDB (as text, each typed column cast once) and the id lists;
- :mod:`.stages`: the SQL stages that find and check the photos;
- :mod:`.sampling`: the per-rank, capped, seeded choice among eligible photos;
- :mod:`.published`: a kept photo as a row of the published dataset's layout;
- :mod:`.card`: the summary (``build.json``) and the dataset card (``README.md``);
- :mod:`.build`: :func:`~.build.build_coobserved`, which runs them into a staged output folder.

The builder registry (:mod:`cladebench.curate.builders`) finds the config in :mod:`.config` and the function
in :mod:`.build`; this ``__init__`` holds no code, so importing one module does not import the rest.
"""
