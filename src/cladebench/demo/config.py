"""The demo's config: what ``cladebench demo`` takes, defined beside the demo that reads it.

Why it exists: the demo's steps read these fields and the CLI builds its ``demo`` verb from them; kept in
the demo package, the CLI imports from the demo and never the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DemoConfig:
    """Build the offline sample suite from the synthetic world and run every task on it."""

    out: Path = Path("cladebench-demo")
    """Directory for the demo's datasets and results."""
    seed: int = 0
    """Seed of the synthetic world and of every sampling step."""
    images: int = 384
    """Number of single-organism images in the sample suite."""
    pairs: int = 96
    """Number of two-organism images."""
    overwrite: bool = False
    """Kept for scripts: a previous demo's folder (finished or killed midway) is always replaced, so the
    demo reruns as written, and a folder that is not a demo's is never touched, with or without it."""
