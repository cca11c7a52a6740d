"""The cohort's labels resolved against the taxonomy backbone, and whether each lands inside the cohort's taxon.

The cohort selects labels *before* resolution, as the published card did; each selected label is then resolved
offline by :mod:`cladebench.taxonomy.resolve` (the statuses and the normalisation are defined there), and its
images join the cohort only when the label lands inside the cohort's taxon. ``in_group`` says whether the resolved
lineage lies inside it (its name at the taxon's rank is one of the taxon's values): a label that resolves to
another genus, or to a rank above the taxon's, is not.

Why a module: what "inside the cohort" means is the camera-trap builder's own decision on top of resolution.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cladebench.benchmarks.finegrained.builder.config import ChallengeGroup
from cladebench.taxonomy import Lineage
from cladebench.taxonomy import resolve as names
from cladebench.taxonomy.names import name_key
from cladebench.taxonomy.resolve import STATUSES, normalise_label


@dataclass(frozen=True)
class Resolution(names.Resolution):
    """One label's resolution record, and whether it lies inside the cohort's taxon."""

    in_group: bool = False
    """Whether the lineage lies inside the cohort's taxon."""

    def as_dict(self) -> dict[str, object]:
        return {**super().as_dict(), "in_group": self.in_group}


def in_taxon(lineage: Lineage, group: ChallengeGroup) -> bool:
    """Whether ``lineage`` lies inside the group's taxon (the binomial compared at species rank)."""
    name = lineage.names[group.rank]
    if name is None:
        return False
    return name_key(str(name)) in {name_key(v) for v in group.values}


def resolve_labels(labels: Iterable[str], group: ChallengeGroup, backbone: str | Path | None = None
                   ) -> dict[str, Resolution]:
    """Label -> its :class:`Resolution`, every label looked up in one read of the backbone."""
    out = {}
    for label, found in names.resolve_labels(labels, backbone).items():
        fields = {f.name: getattr(found, f.name) for f in dataclasses.fields(found)}
        inside = found.lineage is not None and in_taxon(found.lineage, group)
        out[label] = Resolution(**fields, in_group=inside)
    return out


__all__ = ["STATUSES", "Resolution", "in_taxon", "normalise_label", "resolve_labels"]
