"""A named registry: a dict whose lookups of an unknown name list the known ones and suggest the closest.

Why: every pluggable part (builders, sources, ...) is found by a name the user typed, and a typo deserves the
same helpful error everywhere rather than a bare ``KeyError``. A fixed table that nothing extends (a choice's
values, a constant per model kind) is a plain read-only mapping instead, looked up with :func:`look_up`, which
gives the same error.

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
    >>> from types import MappingProxyType
    >>> look_up(MappingProxyType({"red": 1, "green": 2}), "colour", "green")
    2
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
        return look_up(self, self.kind, self.aliases.get(name, name))


def look_up(table: Mapping[str, T], kind: str, name: str) -> T:
    """``table[name]``; an unknown name raises UnknownNameError naming the ``kind``, listing the known names and
    suggesting the closest (a registry's lookup and a constant table's alike)."""
    try:
        return table[name]
    except KeyError:
        raise unknown_name(kind, name, table) from None
