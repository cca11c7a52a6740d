"""Ranks, lineages, divergence, label strings, readers of taxonomy tables, and species-to-taxon roll-up.

This ``__init__`` presents the package's API on purpose, so ``from cladebench.taxonomy import Lineage`` is the
one spelling everywhere; the modules inside import each other directly:

- :mod:`.lineage`: :class:`Rank`, :class:`Lineage`, label styles (:data:`NAME_STYLES`), :func:`divergence_rank`;
- :mod:`.inat`: lineages from rank columns and from iNaturalist's taxa table;
- :mod:`.rollup`: rolling species probabilities up the ranks: the sparse species x taxon membership, and the
  segmented sums over species in lineage order (:class:`LineageRuns`).
"""

from cladebench.taxonomy.inat import (
    ancestry_from_parents,
    inat_lineages,
    inat_rank_table,
    lineages_from_table,
    read_inat_taxa,
)
from cladebench.taxonomy.lineage import (
    NAME_STYLES,
    RANK_COLUMNS,
    RANKS,
    Lineage,
    NameStyle,
    Rank,
    distinct_lineages,
    divergence_rank,
    get_name_style,
    lookalike_labels,
    mixed_script_words,
    name_style,
    normalised_name,
    parse_within,
    per_lineage,
)
from cladebench.taxonomy.rollup import (
    LineageRuns,
    Membership,
    RankRuns,
    lineage_order,
    lineage_runs,
    membership_matrix,
    top_taxa,
    unique_species,
)

__all__ = [
    "NAME_STYLES", "RANKS", "RANK_COLUMNS", "Lineage", "LineageRuns", "Membership", "NameStyle", "Rank", "RankRuns",
    "ancestry_from_parents", "distinct_lineages", "divergence_rank", "get_name_style", "inat_lineages",
    "inat_rank_table", "lineage_order", "lineage_runs", "lineages_from_table", "lookalike_labels",
    "membership_matrix", "mixed_script_words", "name_style", "normalised_name", "parse_within", "per_lineage",
    "read_inat_taxa", "top_taxa", "unique_species",
]
