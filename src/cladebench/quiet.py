"""What third-party libraries print reaches the terminal only when asked (``cladebench --verbose``).

A researcher reading a command's output should see what cladebench has to say: the results, the one line per
side effect, the one line of an error. The libraries underneath speak up on their own: pylance logs each index
build's timing at INFO, Lance's Rust core warns about its index statistics (read at import from ``LANCE_LOG``),
Lance warns "not fork-safe" before every fork (the training and image workers fork), huggingface_hub logs a
line per retry, open_clip logs at INFO through the root logger (which makes Python install a handler that
every other library's INFO then reaches). None of that is for the user; all of it is for whoever debugs the
library, who passes ``--verbose``.

This is the one place where that is decided, so that no module sprinkles its own filters. The CLI wraps each
command in :func:`third_party_output`; code that uses cladebench as a library keeps Python's and the libraries'
defaults. Three channels, one rule for each:

- **Lance's Rust log** is configured once, from the environment, when ``lance`` is first imported (and the
  CLI imports it only inside a verb). Quiet: ``LANCE_LOG=error`` unless the user set ``LANCE_LOG`` (a user's
  value always wins, both ways). Verbose: Lance's own default.
- **Python logging.** Quiet: records below ERROR are dropped for every logger (``logging.disable``), since
  libraries attach their own handlers (huggingface_hub does) and a handler on the root would not reach them;
  cladebench itself reports through its own lines and errors, not through logging. Verbose: INFO and above
  are shown on stderr as ``LEVEL name: message``, once each (a library with its own handler keeps it).
- **Python warnings.** Quiet: ignored, here and (``PYTHONWARNINGS=ignore`` unless set) in the Python processes
  the command starts. Verbose: shown as Python shows them.

Everything is restored when the command ends, so a test (or a notebook) that runs the CLI in-process gets its
logging and warnings back as they were.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator

from cladebench.environment import defaults

QUIET_ENVIRONMENT: dict[str, str] = {"LANCE_LOG": "error", "PYTHONWARNINGS": "ignore"}
"""Variables set for a quiet command when the user has not set them: Lance reads ``LANCE_LOG`` at import, for
its Rust log and for the level of its Python logger ``pylance``; ``PYTHONWARNINGS`` reaches the Python
processes a command starts (Ray's workers, spawned pools), whose warnings filters are not this process's."""

VERBOSE_FORMAT = "%(levelname)s %(name)s: %(message)s"
"""How a library's log record reads with ``--verbose``: which library said it, at which level."""


class _NotHandledBelow(logging.Filter):
    """Lets through the records that no logger between theirs and the root has a handler for, so that a library
    with a handler of its own (huggingface_hub) is not printed twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None and logger is not logging.root:
            if logger.handlers:
                return False
            if not logger.propagate:
                return True
            logger = logger.parent
        return True


@contextlib.contextmanager
def _logging(verbose: bool) -> Iterator[None]:
    root = logging.getLogger()
    previous_disable = logging.root.manager.disable
    previous_level = root.level
    handler: logging.Handler | None = None
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(VERBOSE_FORMAT))
        handler.addFilter(_NotHandledBelow())
        root.addHandler(handler)
        root.setLevel(min(previous_level or logging.WARNING, logging.INFO))
    else:
        logging.disable(logging.WARNING)
    try:
        yield
    finally:
        if handler is not None:
            root.removeHandler(handler)
            root.setLevel(previous_level)
        logging.disable(previous_disable)


@contextlib.contextmanager
def third_party_output(verbose: bool) -> Iterator[None]:
    """Within the block, third-party log lines and warnings reach stderr only when ``verbose`` (see the module).

    Enter it before anything imports ``lance``: Lance's Rust side reads ``LANCE_LOG`` once, at import.
    """
    with contextlib.ExitStack() as stack:
        if not verbose:
            stack.enter_context(defaults(QUIET_ENVIRONMENT))
        stack.enter_context(warnings.catch_warnings())
        if not verbose:
            warnings.simplefilter("ignore")
        stack.enter_context(_logging(verbose))
        yield


__all__ = ["QUIET_ENVIRONMENT", "VERBOSE_FORMAT", "third_party_output"]
