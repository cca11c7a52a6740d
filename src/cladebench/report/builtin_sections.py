"""Imports every built-in section module, so that each registers itself in :data:`.sections.SECTIONS`."""

from cladebench.report import (  # noqa: F401
    calibration_section,
    confusion,
    gallery,
    groups,
    leaderboard,
    lineage_ranks,
    provenance,
    ranks,
    rerank_ap,
)
