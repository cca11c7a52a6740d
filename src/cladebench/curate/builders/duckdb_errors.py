"""DuckDB's failures as what they are to a user: Ctrl-C is an interruption, an unreadable file is an input error.

The builders read exports and catalogs with DuckDB. Three things it raises are not bugs:

- **Ctrl-C.** Python's SIGINT handler runs only between bytecodes; while a query runs, DuckDB's Python
  client notices the signal itself and raises ``RuntimeError("Query interrupted")`` (SIGINT) or
  ``duckdb.InterruptException`` (``con.interrupt()``); a Ctrl-C inside a Python function the query calls
  comes back as an ``InvalidInputException`` naming ``KeyboardInterrupt``. Each becomes
  :class:`KeyboardInterrupt`, so the CLI exits 130 and cleanup code that handles Ctrl-C runs.
- **A file it cannot read** (a truncated ``.csv.gz``, bytes that are not the declared encoding where
  the reader cannot skip the line, a file it may not open): ``IOException``, ``InvalidInputException``,
  ``ConversionException``, ``PermissionException``. Each becomes a :class:`CladebenchError` (exit 1)
  naming what was being read, with the first line of DuckDB's message.
- **Memory** (``OutOfMemoryException``): a :class:`CladebenchError` that says which limit to raise.

Everything else (binder, parser, catalog errors: the SQL is wrong) stays an internal error.

Example:
    >>> import duckdb
    >>> try:
    ...     with duckdb_errors("the export in /data/inat"):
    ...         raise duckdb.IOException("IO Error: Unexpected end of GZIP stream: photos.csv.gz\\nmore")
    ... except CladebenchError as error:
    ...     print(error)
    cannot read the export in /data/inat: IO Error: Unexpected end of GZIP stream: photos.csv.gz
    >>> try:
    ...     with duckdb_errors("x"):
    ...         raise RuntimeError("Query interrupted")
    ... except KeyboardInterrupt:
    ...     print("interrupted")
    interrupted
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cladebench.errors import CladebenchError

INTERRUPTED_MESSAGES: tuple[str, ...] = ("Query interrupted", "INTERRUPT Error")
"""What DuckDB's Python client says when a query is interrupted (by SIGINT, or ``interrupt()``)."""


def is_interrupt(error: BaseException) -> bool:
    """Whether ``error`` is DuckDB telling of an interrupted query."""
    try:
        import duckdb
    except ImportError:  # pragma: no cover - duckdb is a core dependency
        return False
    if isinstance(error, duckdb.InterruptException):
        return True
    if isinstance(error, duckdb.InvalidInputException):  # Ctrl-C while a Python function ran inside a query
        return "exception occurred while executing the UDF: KeyboardInterrupt" in str(error)
    return isinstance(error, RuntimeError) and any(m in str(error) for m in INTERRUPTED_MESSAGES)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@contextlib.contextmanager
def duckdb_interrupts() -> Iterator[None]:
    """Only the interrupt half of :func:`duckdb_errors`: for DuckDB work on data already read (Arrow tables),
    where any other DuckDB error is a bug."""
    try:
        yield
    except Exception as error:
        if is_interrupt(error):
            raise KeyboardInterrupt from None
        raise


@contextlib.contextmanager
def duckdb_errors(what: str, *, memory_hint: str = "") -> Iterator[None]:
    """Translate DuckDB's interrupts and input failures raised in the block (see the module docstring);
    ``what`` completes "cannot read ..." in messages."""
    import duckdb

    try:
        yield
    except (duckdb.IOException, duckdb.InvalidInputException, duckdb.ConversionException,
            duckdb.PermissionException) as error:
        if is_interrupt(error):
            raise KeyboardInterrupt from None
        raise CladebenchError(f"cannot read {what}: {first_line(error)}") from None
    except duckdb.OutOfMemoryException as error:
        raise CladebenchError(f"out of memory reading {what}: {first_line(error)}"
                              + (f" ({memory_hint})" if memory_hint else "")) from None
    except (duckdb.InterruptException, RuntimeError) as error:
        if is_interrupt(error):
            raise KeyboardInterrupt from None
        raise


__all__ = ["INTERRUPTED_MESSAGES", "duckdb_errors", "duckdb_interrupts", "first_line", "is_interrupt"]
