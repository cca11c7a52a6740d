"""The one console: every note and warning cladebench writes for the person at the terminal goes through here.

stdout holds a command's own result (a table, a path, a summary a script may read); these lines go to stderr,
whole and flushed, so they never interleave with a result or a progress bar mid-line. Two kinds:

- :func:`note`: what is being done or was decided on the user's behalf (embedding a dataset once, waiting for
  another process, a setting that departs from a protocol). ``cladebench --quiet`` drops them.
- :func:`warn`: what the user must know to trust a result (rows left out, a published column not verified);
  always shown, ``--quiet`` or not.

Third-party output is another matter (:mod:`cladebench.quiet`); progress bars are :mod:`cladebench.progress`,
which follows the same ``--quiet``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

_quiet = False


def is_quiet() -> bool:
    """Whether notes and progress bars are off (``--quiet``)."""
    return _quiet


@contextlib.contextmanager
def quieted(quiet: bool = True) -> Iterator[None]:
    """Within the block, notes and progress bars are off when ``quiet`` (the CLI wraps a command in it)."""
    global _quiet
    previous, _quiet = _quiet, quiet or _quiet
    try:
        yield
    finally:
        _quiet = previous


def _write(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def note(line: str) -> None:
    """A line about what is being done, on stderr; dropped with ``--quiet``."""
    if not _quiet:
        _write(line)


def warn(line: str) -> None:
    """A line the user must see to trust a result, on stderr; shown even with ``--quiet``."""
    _write(line)


__all__ = ["is_quiet", "note", "quieted", "warn"]
