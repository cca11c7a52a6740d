"""Build Fine-Grained Challenges from a TreeOfLife-200M-style catalog: hard taxa, clean licenses, one Lance table.

Fine-Grained Challenges (``imageomics/fine-grained-challenges``) is one Lance table of 6,633 images in
three groups of look-alike taxa (1,737 *Peromyscus* deer mice, 4,499 Ixodidae ticks, 397 zebras),
each row with its seven ranks, provenance, license, the models whose training data held it
(``seen_in_training``), raw embeddings and vector and scalar indices. This builder makes such a table
from the catalog TreeOfLife-200M publishes, for the published groups or any others.

The builder, one module per job, in the order a build uses them (those but the options and the images in the
family's folder, :mod:`cladebench.benchmarks.finegrained.builder`; the two here are shared with the camera-trap
cohort's builder, :mod:`cladebench.curate.builders.cameratrap`, which appends to such a table):

- :mod:`.config`: the options (``cladebench build finegrained --help``), the challenge groups and the
  ``--seen`` / ``--embed`` specs;
- ``catalog``: the catalog and provenance read out of core with DuckDB, only the groups' rows kept;
- ``checks``: licenses, the row checks and the per-species sampling;
- :mod:`.images`: images fetched or read, resized, stored as lossless WebP, into the table's rows;
- ``card``: the summary (``build.json``) and the dataset card (``README.md``);
- ``build``: ``build_finegrained``, which runs them into a staged output folder, then embeds and indexes.

The family registers the builder (:mod:`cladebench.benchmarks.finegrained.benchmark`) with its config in
:mod:`.config` and its function in ``build``; this ``__init__`` holds no code, so importing one module does not
import the rest.
"""
