"""What a written name means: the scientific name, the rank its qualifiers imply, and the qualifiers.

Collections, answer texts, folders and cohort files write one taxon many ways: ``Peromyscus sp.``,
``peromyscus  SP``, ``Peromyscus spp.``, ``Apis cf. mellifera``, ``Canis lupus ssp. familiaris``,
``Vulpes vulpes (Linnaeus, 1758)``. :func:`parse_name` is the one reading of them that every caller uses (the
backbone resolver of :mod:`.resolve`, hence the camera-trap builder and ``load images``; the Fine-Grained
challenge groups; the lineage answer parser), reading the one list of qualifiers
(:data:`cladebench.taxonomy.qualifiers.QUALIFIERS`); the table of examples in ``docs/reference.md`` ("What a
written name means") is run through every caller by a test.

The rules, in order:

1. characters no one sees (format characters) are dropped, compatibility forms read as plain (NFKC),
   underscores read as spaces, runs of white space as one; with ``authorship``, an author and year after the
   name are dropped (:func:`strip_authorship`);
2. a qualifier is a word of that list, in any case, with or without its full stop;
3. a *species not named* qualifier (``sp.``, ``spp.``, ``species``) after the first word ends the name: what
   follows it is an informal tag (``Peromyscus sp. A``); after exactly one word it makes the name a genus;
4. a *comparison* qualifier (``cf.``, ``aff.``, ``nr.``) anywhere is dropped and recorded: ``Apis cf.
   mellifera`` means *Apis mellifera*, uncertainly; between a genus and an epithet it makes the name a species;
5. an *infraspecific* marker (``subsp.``, ``ssp.``, ``var.``, ``f.``) after a binomial ends the name at the
   binomial (the seven ranks end at species); the marker and the epithet after it are kept as ``infraspecific``;
6. a name that is nothing but qualifiers is left as written (``sp`` is a label, not an empty name).

The rank is set only where a qualifier says it; otherwise it is ``None`` and a backbone decides (``Morus`` may
be a genus; ``white tailed deer`` is no rank at all). Names compare by :attr:`WrittenName.key`: the name in lower
case (``str.lower``, as the backbone is matched by Arrow's ``utf8_lower``), case and spacing otherwise ignored.

Where we differ from the name parsers on purpose: GBIF's name parser keeps ``Abies sp.`` as an indeterminate
name at species rank, and gnparser keeps ``sp.`` and ``cf.`` as annotations of the name (approximation,
comparison) beside its canonical form; here ``Abies sp.`` *is* the genus, because a benchmark scores a row at the
deepest rank it names and a species nobody named cannot be scored. A comparison qualifier is kept only as a mark
(:attr:`WrittenName.qualifiers`): the name counts as the species named.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from cladebench.taxonomy.lineage import Rank
from cladebench.taxonomy.qualifiers import qualifier

_AUTHOR_START = re.compile(r"^(\(|\d|[A-Z]|d'|de$|van$|von$|ex$|&$)")
"""A word that starts an authorship after the name: ``(Linnaeus,``, ``L.``, ``1758``, ``d'Orbigny``."""


@dataclass(frozen=True)
class WrittenName:
    """What one written name means."""

    written: str
    """The name as it was written."""
    name: str
    """The scientific name meant: qualifiers (and, when asked, authorship) removed, spacing made single, case
    as written."""
    rank: Rank | None
    """The rank a qualifier implies (``GENUS`` for ``Peromyscus sp.``), or ``None`` when the words alone do not
    say."""
    qualifiers: tuple[str, ...] = ()
    """The qualifiers found, printed canonically (``sp.``, ``cf.``), in the order written."""
    infraspecific: str | None = None
    """What an infraspecific marker introduced (``subsp. familiaris``), dropped from :attr:`name`."""
    named: bool = True
    """False when the text names no taxon: empty, or nothing but qualifiers (``sp``; :attr:`name` is then the
    text as written, so a label is still shown and compared as itself)."""

    @property
    def key(self) -> str:
        """How names are compared: :attr:`name` in lower case."""
        return self.name.lower()


def clean_text(text: str) -> str:
    """``text`` with invisible characters dropped, NFKC, underscores as spaces and single spaces (rule 1)."""
    visible = "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")
    return re.sub(r"\s+", " ", visible.replace("_", " ")).strip()


def strip_authorship(name: str) -> str:
    """The name without an author and year after it (Darwin Core's ``scientificName`` carries them).

    Example:
        >>> strip_authorship("Vulpes vulpes (Linnaeus, 1758)"), strip_authorship("Morus L."), strip_authorship("sp")
        ('Vulpes vulpes', 'Morus', 'sp')
        >>> strip_authorship("Canis lupus familiaris Linnaeus, 1758")
        'Canis lupus familiaris'
    """
    words = name.split()
    for i, word in enumerate(words[1:], 1):
        if _AUTHOR_START.match(word):
            return " ".join(words[:i])
    return " ".join(words)


def parse_name(text: str, *, authorship: bool = False) -> WrittenName:
    """What ``text`` means (the rules are in the module docstring).

    Example:
        >>> parse_name("peromyscus  SP")
        WrittenName(written='peromyscus  SP', name='peromyscus', rank=<Rank.GENUS: 5>, qualifiers=('sp.',), \
infraspecific=None, named=True)
        >>> parse_name("Apis cf. mellifera").name, parse_name("Apis cf. mellifera").rank.column
        ('Apis mellifera', 'species')
        >>> parse_name("Vulpes vulpes (Linnaeus, 1758)", authorship=True).key
        'vulpes vulpes'
    """
    cleaned = clean_text(text)
    if authorship:
        cleaned = strip_authorship(cleaned)
    words = cleaned.split(" ") if cleaned else []
    kept: list[str] = []
    found: list[str] = []
    rank: Rank | None = None
    infraspecific: str | None = None
    for i, word in enumerate(words):
        q = qualifier(word)
        if q is None:
            kept.append(word)
            continue
        if q.kind == "unnamed" and kept:
            found.append(q.canonical)
            rank = Rank.GENUS if len(kept) == 1 else None
            break
        if q.kind == "compared":
            found.append(q.canonical)
            if len(kept) == 1 and i + 1 < len(words) and qualifier(words[i + 1]) is None:
                rank = Rank.SPECIES
            continue
        if q.kind == "infraspecific" and len(kept) >= 2:
            found.append(q.canonical)
            infraspecific = " ".join([q.canonical, *words[i + 1:i + 2]])
            rank = Rank.SPECIES
            break
        kept.append(word)  # a qualifier with nothing to qualify is read as a word
    if all(qualifier(word) is not None for word in kept):
        return WrittenName(text, cleaned, None, named=False)
    return WrittenName(text, " ".join(kept), rank, tuple(found), infraspecific)


def name_key(text: str) -> str:
    """How ``text`` is compared with another name: :attr:`WrittenName.key` of :func:`parse_name`."""
    return parse_name(text).key


__all__ = ["WrittenName", "clean_text", "name_key", "parse_name", "strip_authorship"]
