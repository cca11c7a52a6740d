"""A package's API presented lazily: ``package.NAME`` imports NAME's module the first time it is used.

Why: importing any module of a package imports its ``__init__`` first, so an ``__init__`` that imports every
module to present their names makes each of them cost pyarrow, scipy or Lance, even for the command line's help,
which reads one constant. With :func:`present_lazily` the ``__init__`` names where each name lives instead.

A type checker cannot follow a name made on first use, so the ``__init__`` also imports the same names under
``if TYPE_CHECKING:`` (nothing is imported at run time); ``tests/test_types.py`` keeps the two lists equal.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType


class _LazyPackage(ModuleType):
    """A package whose API names are imported on first use. A module named like one of them (``store.subset``,
    ``store.indices``) is bound on the package by the import system when it is imported; the name keeps the API's
    object instead, as an ``__init__`` that imported it eagerly kept it."""

    _lazy_home: dict[str, str]

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, ModuleType) and self._lazy_home.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> object:
        module = self.__dict__["_lazy_home"].get(name)
        if module is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{self.__name__}.{module}"), name)
        super().__setattr__(name, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted({*self.__dict__, *self._lazy_home})


def present_lazily(package: str, api: Mapping[str, Sequence[str]]) -> list[str]:
    """Make ``package`` (its ``__name__``) present ``api`` (module of the package -> names it presents from that
    module), each name imported on first use; returns the sorted names, for ``__all__``."""
    home = {name: module for module, names in api.items() for name in names}
    module = sys.modules[package]
    module.__dict__["_lazy_home"] = home
    module.__class__ = _LazyPackage
    return sorted(home)
