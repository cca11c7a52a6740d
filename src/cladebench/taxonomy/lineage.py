"""Ranks, lineages, divergence and label strings: the one shape of taxonomy everything downstream reads.

Every benchmark family spells taxonomy differently: iNaturalist exports give a taxon's ancestors as an
ancestry string of ids (``48460/1/2/355675/...``); TreeOfLife and Rare Species give one column per
rank (Rare Species calls the class column ``cls``); CrypticBio puts Squamata in ``class`` and leaves
``order`` empty. This module turns all of them into one immutable :class:`Lineage` over the seven
Linnaean ranks, so that everything downstream (prompts, hints, hierarchical metrics) reads one shape.

Conventions, chosen to match TreeOfLife and BioCLIP:

- ``species`` holds the binomial, ``"Genus epithet"`` (``"Felis catus"``), with an infraspecific part kept
  (``"Felis silvestris lybica"``), as the Fine-Grained Challenges card defines it (its example query is
  ``species = 'Peromyscus maniculatus'``). A reader given only the epithet (TreeOfLife, Darwin Core's
  ``specificEpithet``, a dataset written before schema version 2) builds the binomial from the genus;
  :attr:`Lineage.epithet` gives the lower-case epithet back. The epithet alone is not a name: two genera may
  share one.
- A missing rank is ``None``, never ``""``. Names are Unicode NFC with characters no one sees (zero-width
  spaces and joiners, soft hyphens, byte-order marks) dropped and runs of white space made one space
  (:func:`normalised_name`), so two spellings of one name that differ only there are one name;
  :meth:`Lineage.match_key` further ignores case, and label sets are de-duplicated on it (a backbone that spells
  one species two ways yields one label).
- Two taxa at a rank are the same taxon only if their whole prefix (kingdom .. that rank) agrees,
  so homonyms in different kingdoms (*Laelia* the orchid and *Laelia* the moth) stay apart.

Example:
    >>> cat = Lineage.from_names("Animalia", "Chordata", "Mammalia", "Carnivora", "Felidae", "Felis",
    ...                          "Felis catus", common_name="domestic cat")
    >>> cat["species"], cat.epithet
    ('Felis catus', 'catus')
    >>> cat.label("taxon")
    'Animalia Chordata Mammalia Carnivora Felidae Felis catus'
    >>> cat.label("taxon_com")
    'Animalia Chordata Mammalia Carnivora Felidae Felis catus with common name domestic cat'
    >>> lion = cat.replace(genus="Panthera", species="leo", common_name="lion")
    >>> lion["species"], lion.label("sci")
    ('Panthera leo', 'Panthera leo')
    >>> divergence_rank(cat, lion)
    <Rank.GENUS: 5>
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cladebench.errors import SchemaError, UsageError, unknown_name
from cladebench.registry import Registry
from cladebench.taxonomy.qualifiers import qualifier

T = TypeVar("T")


class Rank(enum.IntEnum):
    """The seven Linnaean ranks, ordered from the broadest (kingdom) to the narrowest (species)."""

    KINGDOM = 0
    PHYLUM = 1
    CLASS = 2
    ORDER = 3
    FAMILY = 4
    GENUS = 5
    SPECIES = 6

    @property
    def column(self) -> str:
        """The column name this rank has in the canonical schema (``"class"``, not ``"cls"``)."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: str | int | Rank) -> Rank:
        """Accept a Rank, its index, or a name in any case; ``cls`` is accepted for ``class``."""
        if isinstance(value, Rank):
            return value
        if not isinstance(value, str) and hasattr(value, "__index__"):  # int, numpy integer
            try:
                return cls(value.__index__())
            except ValueError:
                raise unknown_name("rank", str(value), [r.column for r in cls]) from None
        key = str(value).strip().lower()
        key = _RANK_ALIASES.get(key, key)
        try:
            return cls[key.upper()]
        except KeyError:
            raise unknown_name("rank", str(value), [r.column for r in cls]) from None


def parse_within(within: str) -> tuple[Rank, str]:
    """``--within RANK=NAME`` as the rank and the name (stripped): the one reading of the option, a usage error
    (exit 2) naming it when it is not of that form or the rank is unknown.

    Example:
        >>> parse_within("class = Aves")
        (<Rank.CLASS: 2>, 'Aves')
    """
    rank, equals, name = within.partition("=")
    if not equals or not name.strip():
        raise UsageError(f"--within takes RANK=NAME (e.g. class=Aves), got {within!r}")
    return Rank.parse(rank.strip()), name.strip()


_RANK_ALIASES = {"cls": "class", "kingdom_": "kingdom"}

RANKS: tuple[Rank, ...] = tuple(Rank)
RANK_COLUMNS: tuple[str, ...] = tuple(r.column for r in Rank)

# Column spellings seen in the wild, mapped to canonical rank columns.
_COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "kingdom": ("kingdom",),
    "phylum": ("phylum",),
    # ``cls`` first: Rare Species has both, and there ``class`` is the "Genus species" label.
    "class": ("cls", "class_", "class"),
    "order": ("order", "order_"),
    "family": ("family",),
    "genus": ("genus",),
    "species": ("species", "specificEpithet", "specific_epithet"),
}
_SCIENTIFIC_NAME_ALIASES = ("scientific_name", "scientificName", "canonicalName")
_COMMON_NAME_ALIASES = ("common_name", "vernacularName", "vernacular_name", "common")
_TAXON_ID_ALIASES = ("taxon_id", "taxonID", "taxon_key")


def _clean(value: object, field: str | None = None) -> str | None:
    """Strip a name; empty strings, NaN and ``None`` become ``None``; a number is a :class:`SchemaError`.

    A number is refused rather than turned into text: a numeric species column (an id, a code) would
    otherwise become labels like ``"Limnobdella 24"`` that look like names and score as nonsense.
    """
    if value is None:
        return None
    if isinstance(value, float) and value != value:  # pandas-style NaN for a missing cell
        return None
    kind = getattr(getattr(value, "dtype", None), "kind", None)  # numpy scalars, without importing numpy
    if isinstance(value, (bool, int, float)) or kind in ("b", "i", "u", "f"):
        if kind == "f" and value != value:
            return None
        where = f"column {field!r}: " if field else ""
        raise SchemaError(f"{where}{value!r} is a number, not a taxon name; name columns hold text (a numeric "
                          "column would make labels like 'Limnobdella 24')")
    if isinstance(value, (bytes, bytearray, memoryview)):
        where = f"column {field!r}: " if field else ""
        raise SchemaError(f"{where}{bytes(value)[:40]!r} is bytes, not text (was the file UTF-8?)")
    return normalised_name(str(value)) or None


def normalised_name(text: str) -> str:
    """``text`` as names are compared: characters no one sees (format characters: a zero-width space or joiner,
    a soft hyphen, a byte-order mark, pasted with a name from a web page) dropped, then Unicode NFC (an accent
    typed as a combining mark is the accented letter), runs of white space made one space.

    Example:
        >>> normalised_name("Felis  cate\u0301us\u200b") == "Felis cat\u00e9us"
        True
    """
    visible = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return " ".join(unicodedata.normalize("NFC", visible).split())


def _script(character: str) -> str | None:
    """The script a letter is written in, as the first word of its Unicode name (``LATIN``, ``CYRILLIC``,
    ``GREEK``); None for anything that is not a letter (digits, marks, punctuation)."""
    if not character.isalpha():
        return None
    name = unicodedata.name(character, "")
    return name.split(" ", 1)[0] if name else None


def mixed_script_words(text: str) -> list[str]:
    """The words of ``text`` that mix Latin letters with letters of another script (a Cyrillic ``а`` inside a
    Latin binomial): such a word reads as a Latin one but is another string, so its taxon becomes a class of its
    own. A word wholly in one script (a Cyrillic vernacular name) is no mix.

    Example:
        >>> print(ascii(mixed_script_words("Felis c\N{CYRILLIC SMALL LETTER A}tus")))
        ['c\u0430tus']
        >>> mixed_script_words("Felis cat\u00e9us"), mixed_script_words("\u043a\u043e\u0448\u043a\u0430")
        ([], [])
    """
    mixed = []
    for word in text.split():
        scripts = {script for script in map(_script, word) if script is not None}
        if "LATIN" in scripts and len(scripts) > 1:
            mixed.append(word)
    return mixed


def _taxon_id(value: Any, field: str) -> int | None:
    """A taxon id as a whole number (``12``, ``12.0``, ``"12"``); a missing one (NaN, a blank cell) is ``None``.
    Anything else is a :class:`SchemaError`: ``1.5`` would otherwise become taxon 1 and ``True`` taxon 1, silently."""
    if isinstance(value, str) and not value.strip():
        return None
    kind = getattr(getattr(value, "dtype", None), "kind", None)  # numpy scalars, without importing numpy
    if isinstance(value, float) or kind == "f":
        if value != value:
            return None
        if float(value).is_integer():
            return int(value)
    elif ((isinstance(value, int) and not isinstance(value, bool)) or kind in ("i", "u")
          or (isinstance(value, str) and value.strip().isdigit())):
        return int(value)
    raise SchemaError(f"column {field!r}: {value!r} is not a taxon id (a whole number)")


def _first_vernacular(value: object, field: str | None = None) -> str | None:
    """CrypticBio stores vernacular names as a Python list literal; take the first, the preferred one."""
    text = _clean(value, field)
    if text is None or not text.startswith("["):
        return text
    try:
        names = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    if isinstance(names, (list, tuple)):
        return next((_clean(n) for n in names if _clean(n)), None)
    return text


@dataclass(frozen=True, slots=True)
class Lineage:
    """One organism's place in the seven ranks; ranks may be missing.

    Every way of making one (:meth:`from_names`, :meth:`from_row`, the table readers below, or by hand) goes
    through the same normalisation: empty strings become ``None``, and the species becomes the binomial.
    """

    names: tuple[str | None, ...]
    """Seven names, kingdom first; ``names[Rank.SPECIES]`` is the binomial ``"Genus epithet"`` (the epithet in
    lower case, an infraspecific part kept), the lower-case epithet alone when no genus is known, or ``None``."""
    common_name: str | None = None
    """Vernacular name used by the ``com`` and ``taxon_com`` styles."""
    taxon_id: int | None = None
    """Identifier in the source taxonomy (an iNaturalist taxon id, for instance)."""

    def __post_init__(self) -> None:
        if len(self.names) != len(RANKS):
            raise ValueError(f"a lineage has {len(RANKS)} ranks, got {len(self.names)}: {self.names!r}")
        names = [_clean(n, column) for n, column in zip(self.names, RANK_COLUMNS, strict=True)]
        genus, species = names[Rank.GENUS], names[Rank.SPECIES]
        if species is not None:
            words = species.split()
            # A binomial in the species slot starts with its genus (capitalised, or equal to the lineage's
            # genus): its epithet is the rest, infraspecific part included. Anything else is an epithet
            # ("catus"; "silvestris lybica" is one with a subspecies), to be joined to the genus.
            starts_with_genus = genus is not None and words[0].lower() == genus.lower()
            epithet = species
            if len(words) >= 2 and (starts_with_genus or (genus is None and words[0][:1].isupper())):
                if genus is None:
                    genus = names[Rank.GENUS] = words[0]
                epithet = " ".join(words[1:])
            # The genus as the lineage spells it, so the binomial and the genus column always agree.
            names[Rank.SPECIES] = epithet.lower() if genus is None else f"{genus} {epithet.lower()}"
        object.__setattr__(self, "names", tuple(names))
        object.__setattr__(self, "common_name", _clean(self.common_name, "common_name"))

    @classmethod
    def from_names(cls, *names: str | None, common_name: str | None = None,
                   taxon_id: int | None = None) -> Lineage:
        """Lineage from up to seven names, kingdom first; missing trailing ranks are ``None``."""
        if len(names) > len(RANKS):
            raise ValueError(f"at most {len(RANKS)} names, got {len(names)}")
        padded = tuple(names) + (None,) * (len(RANKS) - len(names))
        return cls(padded, common_name=common_name, taxon_id=taxon_id)

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Lineage:
        """Lineage from one record with rank columns, in any of the spellings seen in the wild.

        Accepts ``class``/``cls``, a species column holding either the epithet or the binomial, a
        ``scientificName`` when there is no species column (CrypticBio), and a vernacular name given
        as a Python list literal.
        """
        names: list[str | None] = []
        for column in RANK_COLUMNS:
            names.append(next((_clean(row[a], a) for a in _COLUMN_ALIASES[column] if a in row), None))
        scientific = next((_clean(row[a], a) for a in _SCIENTIFIC_NAME_ALIASES if a in row), None)
        if names[Rank.SPECIES] is None and scientific is not None:
            binomial = _binomial(scientific)
            if binomial is not None and names[Rank.GENUS] in (None, binomial.split()[0]):
                names[Rank.SPECIES] = binomial
        common = next((_first_vernacular(row[a], a) for a in _COMMON_NAME_ALIASES if a in row), None)
        taxon_id = next((_taxon_id(row[a], a) for a in _TAXON_ID_ALIASES if a in row and row[a] is not None), None)
        return cls(tuple(names), common_name=common, taxon_id=taxon_id)

    def __getitem__(self, rank: Rank | str | int) -> str | None:
        return self.names[Rank.parse(rank)]

    def replace(self, **changes: Any) -> Lineage:
        """A copy with some ranks (by column name) or ``common_name``/``taxon_id`` changed.

        A new genus without a new species keeps the epithet under the new genus (``Felis catus`` moved to
        *Panthera* is ``Panthera catus``), as it did when ``species`` held the epithet alone.
        """
        names = list(self.names)
        extra = {k: changes.pop(k) for k in ("common_name", "taxon_id") if k in changes}
        changed = {Rank.parse(key): value for key, value in changes.items()}
        if Rank.GENUS in changed and Rank.SPECIES not in changed:
            changed[Rank.SPECIES] = self.epithet
        for rank, value in changed.items():
            names[rank] = value
        return dataclasses.replace(self, names=tuple(names), **extra)

    @property
    def deepest_rank(self) -> Rank | None:
        """The narrowest rank that has a name, or ``None`` for an empty lineage."""
        known = [r for r in RANKS if self.names[r] is not None]
        return known[-1] if known else None

    @property
    def is_complete(self) -> bool:
        """True when all seven ranks are named."""
        return all(n is not None for n in self.names)

    @property
    def epithet(self) -> str | None:
        """The species' epithet in lower case (``"catus"``, ``"silvestris lybica"``): the binomial without its
        genus; ``None`` when no species is known."""
        genus, species = self.names[Rank.GENUS], self.names[Rank.SPECIES]
        if species is None or genus is None:
            return species
        return species[len(genus) + 1:]

    @property
    def scientific_name(self) -> str | None:
        """``"Genus epithet"`` (the species binomial) when both are known, else the name at the deepest known
        rank."""
        genus, species = self.names[Rank.GENUS], self.names[Rank.SPECIES]
        if genus and species:
            return species
        deepest = self.deepest_rank
        return None if deepest is None else self.names[deepest]

    def truncate(self, rank: Rank | str) -> Lineage:
        """The lineage down to and including ``rank``; narrower ranks and the common name dropped."""
        rank = Rank.parse(rank)
        names = self.names[: rank + 1] + (None,) * (len(RANKS) - rank - 1)
        return Lineage(names, common_name=None, taxon_id=None)

    def key(self, rank: Rank | str) -> tuple[str | None, ...]:
        """Identity of this organism's taxon at ``rank``: the prefix of names down to it."""
        return self.names[: Rank.parse(rank) + 1]

    def match_key(self, rank: Rank | str) -> tuple[str | None, ...]:
        """:meth:`key` with case ignored: two spellings of one taxon that differ only in case are one taxon (names
        are already NFC with single spaces), which is how label sets are de-duplicated and rows matched to them."""
        return tuple(None if name is None else name.casefold() for name in self.key(rank))

    def label(self, style: str) -> str:
        """The label string in one of the registered name styles (see :data:`NAME_STYLES`)."""
        return get_name_style(style)(self)


def distinct_lineages(lineages: Iterable[Lineage]) -> list[Lineage]:
    """The distinct lineage objects, in first-seen order: a benchmark's rows repeat a few thousand lineages over
    many images, and the readers hand each repeat out as the same object, so telling them apart is an ``id``
    lookup, not a hash of seven names (two equal copies are both kept: whatever is computed from them agrees)."""
    return list({id(lineage): lineage for lineage in lineages}.values())


def per_lineage(lineages: Sequence[Lineage], value: Callable[[Lineage], T]) -> list[T]:
    """``value`` of every lineage, computed once per distinct lineage (:func:`distinct_lineages`)."""
    memo = {id(lineage): value(lineage) for lineage in distinct_lineages(lineages)}
    return [memo[id(lineage)] for lineage in lineages]


NameStyle = Callable[[Lineage], str]
NAME_STYLES: Registry[NameStyle] = Registry("name style")
"""Label-string styles: name -> function of a lineage."""


def name_style(name: str) -> Callable[[NameStyle], NameStyle]:
    """Register a label-string style under ``name`` (a decorator)."""
    return NAME_STYLES.register(name)


def get_name_style(name: str) -> NameStyle:
    """Look up a style; an unknown name lists the known ones and the closest."""
    return NAME_STYLES.get_named(name)


def _require_name(lineage: Lineage) -> str:
    name = lineage.scientific_name
    if name is None:
        raise ValueError(f"lineage has no names to make a label from: {lineage!r}")
    return name


@name_style("sci")
def _sci(lineage: Lineage) -> str:
    """``"Genus species"``, or the deepest known name."""
    return _require_name(lineage)


@name_style("com")
def _com(lineage: Lineage) -> str:
    """The common name, falling back to the scientific name."""
    return lineage.common_name or _require_name(lineage)


@name_style("taxon")
def _taxon(lineage: Lineage) -> str:
    """BioCLIP's taxonomic string: ranks capitalised, the epithet in lower case, missing ranks skipped (the genus
    is written once: the species rank adds its epithet, not the binomial)."""
    parts = [n[:1].upper() + n[1:] for n in lineage.names[: Rank.SPECIES] if n is not None]
    if lineage.epithet is not None:
        parts.append(lineage.epithet)
    if not parts:
        raise ValueError(f"lineage has no names to make a label from: {lineage!r}")
    return " ".join(parts)


@name_style("taxon_com")
def _taxon_com(lineage: Lineage) -> str:
    """The taxonomic string followed by ``"with common name X"`` when a common name is known."""
    taxon = _taxon(lineage)
    return f"{taxon} with common name {lineage.common_name}" if lineage.common_name else taxon


@name_style("mixed")
def _mixed(lineage: Lineage) -> str:
    """CrypticBio's mixed names: ``"Genus species (common name)"``, the scientific name alone when no common
    name is known. Both names at once, so a model strong on either kind of name is not penalised."""
    scientific = _require_name(lineage)
    return f"{scientific} ({lineage.common_name})" if lineage.common_name else scientific


_EPITHET = re.compile(r"[a-z][a-z-]*")


def _is_infraspecific(word: str) -> bool:
    found = qualifier(word)
    return found is not None and found.kind == "infraspecific"


def _binomial(scientific: str) -> str | None:
    """``"Genus epithet [subsp. x]"`` from a scientific name, without its authority; None for a name above species.

    Published tables write genus-only rows as ``"Peromyscus Gloger, 1841"`` (Fine-Grained Challenges); the
    second word of such a name is an author, not an epithet, and must not become a species.
    """
    words = scientific.split()
    if len(words) < 2 or not words[0][:1].isupper() or not _EPITHET.fullmatch(words[1]):
        return None
    kept = words[:2]
    rest = words[2:]
    while len(rest) >= 2 and _is_infraspecific(rest[0]) and _EPITHET.fullmatch(rest[1]):
        kept += rest[:2]
        rest = rest[2:]
    if rest and _EPITHET.fullmatch(rest[0]):  # a trinomial without a marker ("Felis silvestris lybica")
        kept.append(rest[0])
    return " ".join(kept)


def divergence_rank(a: Lineage, b: Lineage) -> Rank | None:
    """The broadest rank at which two lineages name different taxa; ``None`` when they never differ.

    Ranks are compared from kingdom down. A missing name differs from a present one; two missing
    names are taken as equal (both sources simply lack that rank, as CrypticBio's Squamata lack an
    order), so the comparison moves on to the next rank.
    """
    for rank in RANKS:
        if a.names[rank] != b.names[rank]:
            return rank
    return None


LOOKALIKES = str.maketrans({
    # Cyrillic letters drawn like Latin ones
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y", "\u0445": "x",
    "\u0456": "i", "\u0458": "j", "\u0455": "s", "\u04bb": "h", "\u0501": "d", "\u051b": "q", "\u051d": "w",
    "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O",
    "\u0420": "P", "\u0421": "C", "\u0422": "T", "\u0425": "X", "\u0406": "I", "\u0408": "J", "\u0405": "S",
    # Greek letters drawn like Latin ones
    "\u03bf": "o", "\u03b1": "a", "\u03b9": "i", "\u03bd": "v", "\u0391": "A", "\u0392": "B", "\u0395": "E",
    "\u0396": "Z", "\u0397": "H", "\u0399": "I", "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O",
    "\u03a1": "P", "\u03a4": "T", "\u03a7": "X", "\u03a5": "Y",
})
"""Letters of other scripts that read as Latin ones: two labels that differ only by them look like one name."""


def lookalike_labels(texts: Sequence[str]) -> list[list[str]]:
    """Groups of distinct label strings that read alike: equal once compatibility-normalised (NFKC), with letters
    of other scripts drawn like Latin ones made Latin (:data:`LOOKALIKES`) and case ignored. Such labels are
    separate classes that a reader (and a text encoder) can hardly tell apart, so they are reported.

    Example:
        >>> groups = lookalike_labels(["Felis catus", "Felis c\N{CYRILLIC SMALL LETTER A}tus", "Felis silvestris"])
        >>> print(ascii(groups))
        [['Felis catus', 'Felis c\\u0430tus']]
    """
    groups: dict[str, list[str]] = {}
    for text in dict.fromkeys(texts):
        skeleton = " ".join(unicodedata.normalize("NFKC", text).translate(LOOKALIKES).casefold().split())
        groups.setdefault(skeleton, []).append(text)
    return [group for group in groups.values() if len(group) > 1]
