"""The package's one list of name qualifiers: the words that say what a written name does not (``sp.``: no species
named; ``cf.``: uncertain; ``subsp.``: below species).

What each kind does to a name is :func:`cladebench.taxonomy.names.parse_name`'s; this module holds only the
list, importing nothing, so :mod:`cladebench.taxonomy.lineage` (which keeps an infraspecific part in ``species``)
and the parser share it without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Qualifier:
    """One qualifier: how it is printed, how else it is written, and what it does to the name."""

    canonical: str
    """How it is printed (``sp.``)."""
    spellings: tuple[str, ...]
    """Every way it is written, lower case, without a full stop (``sp``, ``species``)."""
    kind: str
    """``unnamed`` (the species is not named), ``compared`` (the name is uncertain) or ``infraspecific``."""


QUALIFIERS: tuple[Qualifier, ...] = (
    Qualifier("sp.", ("sp", "species"), "unnamed"),
    Qualifier("spp.", ("spp",), "unnamed"),
    Qualifier("cf.", ("cf", "cfr"), "compared"),
    Qualifier("aff.", ("aff",), "compared"),
    Qualifier("nr.", ("nr",), "compared"),
    Qualifier("subsp.", ("subsp", "ssp"), "infraspecific"),
    Qualifier("var.", ("var",), "infraspecific"),
    Qualifier("f.", ("f", "forma"), "infraspecific"),
)
"""The package's one list of name qualifiers (see the module docstring for what each kind does)."""
_BY_SPELLING = {spelling: q for q in QUALIFIERS for spelling in q.spellings}


def qualifier(word: str) -> Qualifier | None:
    """The qualifier ``word`` is (any case, full stop or not), or ``None``.

    Example:
        >>> qualifier("SP").canonical, qualifier("ssp.").canonical, qualifier("Apis")
        ('sp.', 'subsp.', None)
    """
    return _BY_SPELLING.get(word.lower().removesuffix("."))


__all__ = ["QUALIFIERS", "Qualifier", "qualifier"]
