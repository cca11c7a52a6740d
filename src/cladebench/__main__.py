"""``python -m cladebench`` runs the CLI."""

import sys

from cladebench.cli import main

sys.exit(main())
