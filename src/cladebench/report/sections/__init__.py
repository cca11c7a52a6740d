"""The sections of a report, one module each, registered in :data:`.base.SECTIONS` when this package is imported.

:mod:`.base` holds what a section is (:class:`.base.Section`, :class:`.base.ReportContext`) and the registry; it
imports no section, so each section module imports it without a cycle. This ``__init__`` imports every built-in
section module (importing one registers its section) and presents the public API of the package on purpose:
the registry and the sections in page order.
"""

from __future__ import annotations

from cladebench.report.sections import (  # noqa: F401  (imported to register their sections)
    calibration,
    confusion,
    gallery,
    groups,
    leaderboard,
    lineage_ranks,
    mistakes,
    provenance,
    ranks,
    rerank_ap,
    suite,
)
from cladebench.report.sections.base import SECTIONS, Section

__all__ = ["SECTIONS", "ordered_sections"]


def ordered_sections() -> list[Section]:
    """The registered sections in page order."""
    return sorted(SECTIONS.values(), key=lambda s: (s.order, s.name))
