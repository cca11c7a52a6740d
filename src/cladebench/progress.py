"""The one progress bar of every long loop: a tqdm bar on stderr with the count done, the total and the rate.

A bar is for a person watching a terminal: it is off when stderr is not one (a log file, a pipe, a test's
capture, where a bar's carriage returns would be noise), with ``cladebench --quiet``
(:func:`cladebench.console.quieted`), and where the caller's own ``progress`` setting says so. One place decides,
so every loop reads the same (``embed emb_x: 40%|████  | 400/1000 [00:10<00:15, 39.8img/s]``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cladebench.console import is_quiet

if TYPE_CHECKING:
    from tqdm import tqdm as Bar  # what progress_bar gives, for the annotations of those who hold one


def shown(enabled: bool = True) -> bool:
    """Whether a bar asked for with ``enabled`` is drawn now."""
    return enabled and not is_quiet() and sys.stderr.isatty()


def progress_bar(iterable: Iterable[object] | None = None, *, total: float | None = None, desc: str, unit: str,
                 enabled: bool = True, initial: float = 0, leave: bool = True, **options: object) -> Bar:
    """A tqdm bar (use it as tqdm's: ``update``, ``set_postfix``, a context manager, or iterate it), drawn only
    when :func:`shown`. ``options`` are tqdm's (``smoothing``, ``position``)."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial, leave=leave, file=sys.stderr,
                disable=not shown(enabled), dynamic_ncols=True, **options)


__all__ = ["progress_bar", "shown"]
