"""The registries the ``cladebench`` parser is built from: plain verbs, and families of verbs.

A verb is a name, a line of help, a config class (whose fields become its arguments) and the function that
runs it. A family is a verb whose second word picks one of several configs (``build coobserved``, ``load
crypticbio``, ``eval zeroshot``), each with only its own options. The verb modules register here; the parser
in :mod:`cladebench.cli` reads both registries, so adding a verb never means editing a chain of ``if``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cladebench.registry import Registry


@dataclass(frozen=True)
class Verb:
    """One CLI verb: its name, one-line help, config class and the function that runs it."""

    name: str
    help: str
    config: type | str | Callable[[], type]
    """The config class, where it lives (``module:Class``) or the function that makes it, imported or made only
    when this verb is the one run: the modules behind a verb (Lance, scipy, torch) then cost ``cladebench --help``
    nothing, and a named benchmark's class is made for its own command alone."""
    run: Callable[[Any], int | None]

    def config_class(self) -> type:
        """The config class (imported or made now, when it was named by where it lives or how it is made)."""
        if isinstance(self.config, str):
            module, _, name = self.config.partition(":")
            return getattr(importlib.import_module(module), name)
        if isinstance(self.config, type):
            return self.config
        return self.config()


VERBS: Registry[Verb] = Registry("verb")
"""Verbs with one config each (``info``, ``subset``, ``compare`` ...)."""


def verb(name: str, config: type | str,
         help: str) -> Callable[[Callable[[Any], int | None]], Callable[[object], int | None]]:
    """Register a verb; its config's fields become its arguments."""

    def register(fn: Callable[[object], int | None]) -> Callable[[object], int | None]:
        VERBS.add(name, Verb(name=name, help=help, config=config, run=fn))
        return fn

    return register


@dataclass(frozen=True)
class Family:
    """A verb whose second word picks one of several configs (``cladebench build coobserved ...``)."""

    help: str
    metavar: str
    members: Callable[[], dict[str, Verb]]
    """Name -> verb; called when the parser is built, so members can live in a registry elsewhere."""
    aliases: Callable[[], dict[str, str]] = dict
    """Former name -> member name: accepted on the command line, shown beside the member in ``--help``."""

    def member(self, name: str) -> Verb:
        """The member called ``name`` or by a former name of it."""
        return self.members()[self.aliases().get(name, name)]


FAMILIES: Registry[Family] = Registry("verb")
"""Verbs whose second word names the config: ``build``, ``load``, ``eval``."""
