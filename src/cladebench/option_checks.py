"""Range checks of task settings that name the option a user typed.

A setting out of range (``--shots 0``, ``--prior-cell-km 0``) is the user's mistake, so it is refused
when the config is built, as a :class:`~cladebench.errors.UsageError` (exit 2) whose one line names the
option, rather than failing later, deep in a computation, as a bug (exit 70). Configs call these
from ``__post_init__`` with the option's CLI spelling.

Example:
    >>> at_least("--shots", 0, 1)
    Traceback (most recent call last):
    ...
    cladebench.errors.UsageError: --shots must be at least 1, got 0
"""

from __future__ import annotations

import math
from numbers import Real

from cladebench.errors import UsageError


def _number(option: str, value: object, kind: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise UsageError(f"{option} must be {kind}, got {value!r}")
    number = float(value)
    if math.isnan(number):
        raise UsageError(f"{option} must be {kind}, got {value!r}")
    return number


def at_least(option: str, value: object, minimum: int) -> None:
    """Refuse an integer setting below ``minimum`` (or one that is not an integer)."""
    whole = isinstance(value, int) or (isinstance(value, Real) and math.isfinite(float(value))
                                       and float(value).is_integer())
    if isinstance(value, bool) or not whole:
        raise UsageError(f"{option} must be an integer, got {value!r}")
    if value < minimum:
        raise UsageError(f"{option} must be at least {minimum}, got {value}")


def positive(option: str, value: object) -> None:
    """Refuse a number that is not finite and greater than zero."""
    number = _number(option, value, "a positive number")
    if not (math.isfinite(number) and number > 0):
        raise UsageError(f"{option} must be a positive finite number, got {value}")


def non_negative(option: str, value: object) -> None:
    """Refuse a number that is not finite and at least zero."""
    number = _number(option, value, "a number >= 0")
    if not (math.isfinite(number) and number >= 0):
        raise UsageError(f"{option} must be a finite number >= 0, got {value}")
