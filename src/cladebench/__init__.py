"""cladebench: curate, store, evaluate and inspect benchmarks for biological vision(-language) models.

The package root stays light on purpose: importing ``cladebench`` pulls in nothing heavier than
the standard library, so ``cladebench --help`` starts fast and the core runs without torch.
"""

from cladebench.errors import CladebenchError

__version__ = "0.1.0"

__all__ = ["CladebenchError", "__version__"]
