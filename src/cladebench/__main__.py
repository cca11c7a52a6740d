"""``python -m cladebench`` and the ``cladebench`` command.

The CLI module imports the verbs' configs, which takes a moment; a Ctrl-C in that moment must end like
any other interrupt (one line, exit 130), not with a traceback from deep inside an import, so the entry
point imports it under the same rule that :func:`cladebench.cli.main` applies to the run itself.
"""

from __future__ import annotations

import sys

from cladebench.errors import EXIT_INTERRUPTED


def entry() -> int:
    """Import the CLI and run it; the exit code of the command."""
    try:
        from cladebench.cli import main
    except KeyboardInterrupt:
        print("cladebench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return main()


if __name__ == "__main__":
    sys.exit(entry())
