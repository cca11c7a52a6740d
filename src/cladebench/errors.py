"""Errors that carry a message a person can act on, and an exit code a script can trust.

Every failure the CLI reports goes through one of these classes, so the CLI can print the message
without a traceback and exit with a code that says which kind of failure it was.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
import re
from collections.abc import Iterable, Iterator

EXIT_BUG = 70
"""Exit code of an unexpected exception: a bug, reported as one."""
EXIT_INTERRUPTED = 130
"""Exit code of a run stopped by Ctrl-C (SIGINT), as shells report 128 + 2."""
EXIT_BROKEN_PIPE = 141
"""Exit code when whatever read the output stopped reading (``cladebench info DS | head``), as shells report
128 + SIGPIPE: not a failure of the command, and no message."""


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


class NotEvaluableError(CladebenchError):
    """Rows a task cannot evaluate as asked (too few images per class for the shots). In a grouped run only that
    group is left out, with this reason; the run fails (exit 1) only when no group can be evaluated."""


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


ENVIRONMENT_ERRNOS: frozenset[int] = frozenset({
    errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EISDIR, errno.ENOTDIR, errno.EEXIST,
    errno.ENOTEMPTY, errno.ENOENT, errno.ENAMETOOLONG, errno.EMFILE, errno.ENFILE, errno.EFBIG, errno.ELOOP,
})
"""Error numbers that describe the machine or the paths given (permissions, a full or read-only disk, a file
where a folder was expected), not a bug: they end a command with exit 1 and one line."""

_LANCE_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def undecodable_at(error: UnicodeDecodeError) -> str:
    """Where a decoding failure is, for a message: the first byte that is not UTF-8 and its offset.

    Example:
        >>> try:
        ...     b"ab\\xff".decode("utf-8")
        ... except UnicodeDecodeError as error:
        ...     print(undecodable_at(error))
        byte b'\\xff' at offset 2
    """
    return f"byte {error.object[error.start:error.start + 1]!r} at offset {error.start}"


def environment_error(exc: BaseException, path: object = None) -> CladebenchError | None:
    """The one-line error for a filesystem failure caused by the environment, or None when ``exc`` is not one.

    Python's ``OSError`` carries an errno and the file name; Lance (Rust) reports the same failures as an
    ``OSError`` or ``ValueError`` whose text ends in ``(os error N)``, without the errno attribute, so the
    number is read from the text. ``path`` names the output when the error itself does not.
    """
    number = exc.errno if isinstance(exc, OSError) and exc.errno is not None else None
    if number is None:
        match = _LANCE_OS_ERROR.search(str(exc))
        number = int(match.group(1)) if match else None
    if number not in ENVIRONMENT_ERRNOS:
        return None
    name = getattr(exc, "filename", None) or path
    reason = os.strerror(number).lower()
    hint = {errno.EACCES: "check the folder's permissions", errno.EPERM: "check the folder's permissions",
            errno.EROFS: "write to a writable folder", errno.ENOSPC: "free some space or write elsewhere",
            errno.EDQUOT: "free some space or write elsewhere"}.get(number)
    where = f"{name}: " if name is not None else ""
    return CladebenchError(f"{where}{reason}" + (f" ({hint})" if hint else ""))


def _is_arrow_error(exc: BaseException) -> bool:
    """Whether ``exc`` is Arrow's report on its input (``ArrowInvalid`` is a ``ValueError``; a corrupt page an
    ``OSError``), without importing pyarrow where nothing read a file with it."""
    return any(kind.__module__.startswith("pyarrow") for kind in type(exc).__mro__)


@contextlib.contextmanager
def reading(path: object, error: type[CladebenchError] = CladebenchError) -> Iterator[None]:
    """A file that cannot be read while the block reads it (gone, unreadable, a loop of symbolic links, a corrupt
    Parquet page, a truncated ``.gz``) ends the command with one line naming ``path`` and the documented code
    (:func:`environment_error`'s for the machine's failures, ``error``'s for a file that is not what it should
    be), not as a bug. Errors the block raises on purpose (a :class:`CladebenchError`) pass unchanged."""
    try:
        yield
    except CladebenchError:
        raise
    except (OSError, ValueError) as exc:
        if not isinstance(exc, OSError) and not _is_arrow_error(exc):
            raise
        environment = environment_error(exc, path)
        if environment is not None:
            raise environment from None
        lines = (getattr(exc, "strerror", None) or str(exc)).strip().splitlines()
        raise error(f"cannot read {path}: {lines[0] if lines else type(exc).__name__}") from None

