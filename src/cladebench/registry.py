"""A named registry: a dict whose lookups of an unknown name list the known ones and suggest the closest.

Why: every pluggable part (builders, sources, ...) is found by a name the user typed, and a typo deserves the
same helpful error everywhere rather than a bare ``KeyError``.

Example:
    >>> shapes = Registry("shape")
    >>> shapes.add("circle", 1)
    1
    >>> @shapes.register("square")
    ... def square(side: float) -> float:
    ...     return side * side
    >>> shapes.get_named("square")(3)
    9
    >>> shapes.get_named("circel")
    Traceback (most recent call last):
    ...
    cladebench.errors.UnknownNameError: unknown shape 'circel'; known: circle, square. Did you mean 'circle'?
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from cladebench.errors import unknown_name

T = TypeVar("T")


class Registry(dict[str, T]):
    """Items by name, for one kind of thing (its ``kind`` names it in errors)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.aliases: dict[str, str] = {}
        """Former spellings -> the name they now stand for: found by :meth:`get_named`, never listed."""

    def alias(self, old: str, name: str) -> None:
        """Accept ``old`` wherever ``name`` is looked up (a name that changed keeps working)."""
        self.aliases[old] = name

    def add(self, name: str, item: T) -> T:
        """Register ``item`` under ``name`` and return it (so it can serve as a decorator's result)."""
        self[name] = item
        return item

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator that registers what it decorates under ``name`` and leaves it unchanged."""
        def decorate(item: T) -> T:
            return self.add(name, item)
        return decorate

    def get_named(self, name: str) -> T:
        """The item called ``name``; an unknown name raises UnknownNameError listing the known ones."""
        try:
            return self[self.aliases.get(name, name)]
        except KeyError:
            raise unknown_name(self.kind, name, self) from None
