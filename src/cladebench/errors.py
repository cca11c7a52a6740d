"""Errors that carry a message a person can act on, and an exit code a script can trust.

Every failure the CLI reports goes through one of these classes, so the CLI can print the message
without a traceback and exit with a code that says which kind of failure it was.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CladebenchError(Exception):
    """Base class: a failure caused by the input or the environment, not by a bug."""

    exit_code: int = 1


class DatasetNotFoundError(CladebenchError):
    """A path or URI that does not hold a Lance dataset."""

    exit_code = 3


class SchemaError(CladebenchError):
    """A table or dataset that does not match the canonical schema."""

    exit_code = 4


class RemoteUnavailableError(CladebenchError):
    """A remote URI (hf://, s3://) that cannot be reached from this machine."""

    exit_code = 5


class UsageError(CladebenchError):
    """Options that do not go together, or one that is missing for what was asked."""

    exit_code = 2


class UnknownNameError(CladebenchError, KeyError):
    """A name looked up in a registry that does not hold it."""

    exit_code = 2

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


def unknown_name(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    """Build the error for an unknown registry name, listing the known ones and the closest match."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return UnknownNameError(f"unknown {kind} {name!r}; known: {', '.join(known)}.{hint}")
