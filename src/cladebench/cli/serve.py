"""The ``serve`` verb: the local web app over a dataset and runs (:mod:`cladebench.serve`).

FastAPI and uvicorn are the ``serve`` extra (``pip install 'cladebench[serve]'``); without them the verb says so
in one line (exit 1), and the rest of the command never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cladebench.cli.verbs import verb
from cladebench.errors import CladebenchError

if TYPE_CHECKING:
    from cladebench.serve.config import ServeConfig


@verb("serve", "cladebench.serve.config:ServeConfig",
      "a local web app: browse the dataset, one image with its neighbours and predictions, "
                            "text search, runs overlaid (Ctrl-C stops it, exit 0)")
def _serve(config: ServeConfig) -> int:
    try:
        import fastapi  # noqa: F401
        import jinja2  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise CladebenchError(f"serve needs {exc.name}: pip install 'cladebench[serve]'") from None
    from cladebench.serve.server import serve

    return serve(config)
