"""A record's taxon columns from its label's resolution against the backbone.

A resolved label (``exact`` or ``normalised``, :mod:`cladebench.taxonomy.resolve`) fills the ranks from the
match, down to the matched rank: ``species`` is the binomial, and a genus-only label stays genus-only (no species
is invented); ``taxon_id`` is the backbone's id. An ``ambiguous`` label (*Morus*: a gannet and a mulberry) is
``disambiguated`` on a row whose own rank columns (``kingdom: Plantae``) agree with exactly one of its taxa, and
then filled from that taxon. Otherwise an ambiguous or ``unresolved`` label keeps the rank columns the source gave
itself (a GBIF occurrence's ``kingdom`` .. ``genus``), or none, and its label as ``scientific_name``: the row is
written, and the card lists the label. Every row records ``source_label`` (the
label as the source wrote it) and ``label_status``, so ``eval --where "label_status = 'exact'"`` can keep only
the rows a person need not check.

Why a module: the one rule for what a row's ranks are, whatever the kind of source.
"""

from __future__ import annotations

from collections.abc import Mapping

from cladebench.curate.sources.images.records import ImageRecord
from cladebench.taxonomy import RANK_COLUMNS, Lineage
from cladebench.taxonomy.names import name_key
from cladebench.taxonomy.resolve import Resolution

EXTRA_COLUMNS = ("source_label", "label_status")
"""Columns this source adds to the canonical ones."""
ROW_STATUSES = ("exact", "normalised", "disambiguated", "ambiguous", "unresolved")
"""A row's ``label_status``: its label's resolution status, or ``disambiguated`` (see the module docstring)."""


def taxon_columns(record: ImageRecord, resolutions: Mapping[str, Resolution]) -> dict[str, object]:
    """The rank columns, ``scientific_name``, ``taxon_id``, ``source_label`` and ``label_status`` of a record."""
    resolution = resolutions.get(record.label) if record.label is not None else None
    lineage, status = None, resolution.status if resolution is not None else "unresolved"
    if resolution is not None and resolution.resolved:
        lineage = resolution.lineage
    elif resolution is not None and resolution.matches and record.ranks:
        agreeing = [m for m in resolution.matches if _agrees(m, record.ranks)]
        if len(agreeing) == 1:
            lineage, status = agreeing[0], "disambiguated"
    if lineage is not None:
        return {**dict(zip(RANK_COLUMNS, lineage.names, strict=True)), "scientific_name": lineage.scientific_name,
                "taxon_id": lineage.taxon_id, "source_label": record.label, "label_status": status}
    given = Lineage.from_names(*(record.ranks.get(rank) for rank in RANK_COLUMNS))
    return {**dict(zip(RANK_COLUMNS, given.names, strict=True)),
            "scientific_name": record.label or given.scientific_name, "taxon_id": None,
            "source_label": record.label, "label_status": status}


def _agrees(lineage: Lineage, ranks: Mapping[str, str]) -> bool:
    """Whether every rank the source names, down to the lineage's own, is the lineage's name there."""
    for rank, name in zip(RANK_COLUMNS, lineage.names, strict=True):
        given = ranks.get(rank)
        if name is not None and given is not None and name_key(given) != name_key(name):
            return False
    return True


__all__ = ["EXTRA_COLUMNS", "taxon_columns"]
