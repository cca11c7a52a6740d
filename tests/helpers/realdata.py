"""Where the real-format files live (see ``shared/realdata/MANIFEST.md``): the one place tests ask.

They live beside the repository, not in it: CI clones the repo with ``../shared`` next to its root, and
``CLADEBENCH_REALDATA`` points elsewhere (CI also runs the suite once with it pointing at a missing folder, so
that no test's expectation depends on the files being there). A test that needs a file skips, saying so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REALDATA_ENV = "CLADEBENCH_REALDATA"
DEFAULT_REALDATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "realdata"


def realdata_dir() -> Path:
    """The real-format data folder: ``$CLADEBENCH_REALDATA`` or ``../shared/realdata``."""
    override = os.environ.get(REALDATA_ENV)
    return Path(override) if override else DEFAULT_REALDATA_DIR


def camera_trap_dir() -> Path:
    """Real LILA camera-trap JPEGs (greyscale, CMYK, EXIF-rotated, truncated)."""
    return realdata_dir() / "cameratrapai" / "test_data"


def require(relative_path: str) -> Path:
    """The path of a real-format file or folder, or skip the calling test when it is absent."""
    path = realdata_dir() / relative_path
    if not path.exists():
        pytest.skip(f"real-format data not available: {path} (set {REALDATA_ENV} or place ../shared/realdata)")
    return path
