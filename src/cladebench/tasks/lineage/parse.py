"""Read a lineage out of a model's free-text answer: JSON, JSON inside prose, "Order: X" lines, or a binomial.

A VLM asked "Name its order, family, genus and species" answers in whatever shape it likes, even when
asked for a JSON object: the object inside a code fence or after a sentence, ``Order: Hymenoptera``
lines, a markdown table, ``Hymenoptera > Apidae > Apis > Apis mellifera``, or a sentence naming a
binomial. A benchmark that scored only well-formed JSON would measure instruction following, not
taxonomy, so the answer is read tolerantly. The strategies form a registry (:data:`STRATEGIES`), tried in
order; the first that yields a name at one of the asked ranks wins, and its name becomes the answer's
parse status, so a reader can see how each answer was read:

``json``
    the whole answer is one JSON object (what JSON mode returns).
``json_embedded``
    a JSON object (or Python-style dict, or one with trailing commas) inside prose or a code fence.
``fields``
    ``Rank: Name`` lines (bullets, bold and numbering allowed) or ``| Rank | Name |`` table rows.
``sequence``
    exactly as many names as ranks were asked, on one line, separated by ``>``, ``,``, ``;``, ``|`` or arrows.
``prose``
    a rank word followed by a name: "it belongs to the family Apidae", "genus Apis".
``binomial``
    only a ``Genus species`` binomial somewhere in the text (italics preferred); it gives species and genus.

An answer none of them can read is ``unparseable``: it is scored wrong at every rank and counted, never
dropped.

Names are cleaned the same way whatever the strategy: markdown, quotes, parentheses ("Apidae (bees)")
and a leading rank word or article are removed; "unknown", "N/A" and the like mean no name. Names above
species are single words, capitalised. The species is kept as a binomial, ``Genus epithet`` (epithet in
lower case, subspecies, authority and ``cf.``/``aff.`` dropped), because the epithet alone is not a
name. Common mistakes are repaired: the binomial in the species field, a lone epithet there (joined to
the genus given), a binomial in the genus field, an abbreviated genus ("A. mellifera") when the genus is
known. A binomial also implies its genus when no genus was given.

Example:
    >>> answer = parse_lineage_answer('Sure! ```json\\n{"Order": "Hymenoptera", "family": "Apidae (bees)", '
    ...                               '"genus": "Apis", "species": "mellifera"}\\n```', ["order", "family", "genus",
    ...                               "species"])
    >>> answer.status, answer.names["family"], answer.names["species"]
    ('json_embedded', 'Apidae', 'Apis mellifera')
    >>> parse_lineage_answer("Genus: apis\\nSpecies: Apis mellifera L.", ["genus", "species"]).names["genus"]
    'Apis'
    >>> parse_lineage_answer("I cannot tell from this photo.", ["species"]).status
    'unparseable'
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from cladebench.registry import Registry
from cladebench.taxonomy import RANK_COLUMNS, Rank
from cladebench.taxonomy.names import name_key as taxon_name_key
from cladebench.taxonomy.names import parse_name

UNPARSEABLE = "unparseable"
"""Status of an answer from which no name at an asked rank could be read."""

_RANK_WORDS: dict[str, str] = {
    "kingdom": "kingdom", "phylum": "phylum", "division": "phylum", "class": "class", "cls": "class",
    "order": "order", "family": "family", "genus": "genus", "species": "species",
    "scientific name": "species", "scientific_name": "species", "scientificname": "species", "binomial": "species",
    "binomial name": "species", "species name": "species", "species_name": "species",
    "specific epithet": "epithet", "specific_epithet": "epithet", "epithet": "epithet",
}
"""Key or label (lower case) -> rank column; ``division`` is botany's phylum. ``epithet`` is the species'
second word alone, joined to the genus afterwards."""

_NO_NAME = {"", "unknown", "none", "n/a", "na", "null", "nil", "unsure", "not sure", "uncertain", "?", "-", "--",
            "unidentified", "undetermined", "indeterminate", "not visible", "not applicable", "cannot determine",
            "can't determine", "not determinable", "unclear", "various", "multiple"}
"""Answers that say "no name" (compared after cleaning, in lower case)."""

_SENTENCE_WORDS = {
    "a", "an", "the", "this", "that", "these", "those", "it", "its", "i", "my", "in", "on", "at", "there", "here",
    "what", "which", "based", "from", "looks", "appears", "most", "likely", "probably", "possibly", "photo",
    "image", "picture", "organism", "answer", "note", "however", "both", "one", "two", "sorry", "unfortunately",
    "cannot", "sure", "yes", "no", "given", "if", "as", "with", "for", "to", "and", "or", "but", "so", "while",
    "kingdom", "phylum", "division", "class", "order", "family", "genus", "species", "scientific", "common",
    "name", "names", "identification", "identified", "confidence", "we", "you", "they", "he", "she", "is", "are",
    "be", "was", "of", "not", "can", "could", "would", "may", "might", "has", "have", "shows", "show", "seems",
    "like", "also", "other", "another", "left", "right", "top", "bottom", "background", "foreground",
}
"""Lower-case words that start or continue English sentences, never a genus or an epithet in a binomial."""

_CLEAN_MARKUP = re.compile(r"[*_`\"“”‘’]|^'+|'+$")
_JOINING_UNDERSCORE = re.compile(r"(?<=[A-Za-z])_(?=[A-Za-z])")
_PARENTHESES = re.compile(r"\([^)]*\)|\[[^\]]*\]")
_NAME_WORD = re.compile(r"[A-Za-z][A-Za-z-]*\.?")
_FIELD_LINE = re.compile(
    r"^[\s>*\-•·\d.)#|]*\**\s*(?P<rank>kingdom|phylum|division|class|order|family|genus|species name|species|"
    r"scientific name|binomial name|binomial|specific epithet|epithet)\s*\**\s*(?:[:=\-–—|]|\bis\b)\s*(?P<name>.+?)"
    r"\s*\|?\s*$", re.IGNORECASE | re.MULTILINE)
_PROSE = re.compile(
    r"\b(?P<rank>(?i:kingdom|phylum|division|class|order|family|genus|species))\s+(?:is\s+|of\s+|called\s+)?"
    r"[*_]{0,2}(?P<name>[A-Z][a-zA-Z-]+(?:\s+[a-z][a-z-]+)?)")
_BINOMIAL = re.compile(r"(?P<mark>[*_]{1,2})?(?<![A-Za-z])(?P<genus>[A-Z][a-z]{2,})\s+(?P<epithet>[a-z][a-z-]{2,})"
                       r"(?![A-Za-z])(?P=mark)?")
_SEPARATORS = re.compile(r"\s*(?:>|→|->|=>|»|;|\||,)\s*")
_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ParsedAnswer:
    """What an answer names at each rank, and how it was read."""

    names: dict[str, str | None]
    """Rank column -> cleaned name, for all seven ranks (``None`` where the answer names nothing); the
    species as a binomial ``Genus epithet``."""
    status: str
    """The strategy that read it (``json``, ``json_embedded``, ``fields``, ``sequence``, ``prose``,
    ``binomial``), or ``unparseable``."""

    @property
    def parsed(self) -> bool:
        return self.status != UNPARSEABLE


Strategy = Callable[[str, Sequence[str]], dict[str, str]]
"""(answer text, asked rank columns) -> raw names by rank column (``epithet`` allowed); empty when it finds none."""

STRATEGIES: Registry[Strategy] = Registry("answer-reading strategy")
"""Registry, in the order tried: status name -> strategy."""


def strategy(name: str) -> Callable[[Strategy], Strategy]:
    """Register a strategy under ``name`` (tried after those registered before it)."""
    return STRATEGIES.register(name)


# --- cleaning ------------------------------------------------------------------------------------


def _strip_markup(value: str) -> str:
    value = _JOINING_UNDERSCORE.sub(" ", value)  # "Peromyscus_sp" is two words; "_Apis_" is italics
    text = _PARENTHESES.sub(" ", _CLEAN_MARKUP.sub("", value))
    return " ".join(text.replace("\u00a0", " ").split()).strip(" .,:;!?-–—")


def _says_none(text: str) -> bool:
    lowered = text.casefold()
    return lowered in _NO_NAME or lowered.startswith(("unknown", "not ", "cannot ", "can't ", "unable"))


def clean_uninomial(value: object) -> str | None:
    """A name above species: one word, capitalised; ``None`` for "unknown" and the like.

    A leading article or rank word is dropped ("the family Apidae" -> "Apidae").
    """
    if not isinstance(value, str):
        return None
    text = _strip_markup(value)
    if _says_none(text):
        return None
    words = [w.rstrip(".") for w in _NAME_WORD.findall(text)]
    words = [w for w in words if w and w.casefold() not in ("the", "a", "an", *_RANK_WORDS)]
    if not words:
        return None
    word = words[0]
    return word[:1].upper() + word[1:].lower()


def clean_binomial(value: object, genus: str | None = None) -> str | None:
    """A species as ``Genus epithet``; a lone epithet is joined to ``genus``; ``None`` when no species is named.

    "Apis mellifera Linnaeus, 1758", "apis MELLIFERA", "*Apis mellifera*", "Apis cf. mellifera",
    "A. mellifera" (with genus Apis) all give "Apis mellifera"; "Apis sp." gives ``None``.
    """
    if not isinstance(value, str):
        return None
    text = _strip_markup(value)
    if _says_none(text):
        return None
    meaning = parse_name(text)  # qualifiers read as everywhere: "Apis sp." names the genus only
    if meaning.rank is Rank.GENUS or not meaning.named:
        return None
    words = [w for w in meaning.name.split() if w.casefold() not in ("species", "the")]
    words = [w for w in words if _NAME_WORD.fullmatch(w)]
    if not words:
        return None
    if len(words) == 1:
        if genus is None or words[0].endswith(".") or words[0].casefold() == genus.casefold():
            return None
        return f"{genus} {words[0].lower()}"
    first, epithet = words[0], words[1].rstrip(".").lower()
    if first.endswith(".") and genus is not None and genus[:1].casefold() == first[:1].casefold():
        first = genus  # "A. mellifera": the abbreviation of the genus already given
    elif first.endswith("."):
        return None
    if not epithet:
        return None
    return f"{first[:1].upper()}{first[1:].lower()} {epithet}"


def name_key(name: str | None) -> str | None:
    """How two names are compared (:func:`cladebench.taxonomy.names.name_key`; ``None`` stays ``None``)."""
    return None if name is None else taxon_name_key(name) or None


def names_match(predicted: str | None, truth: str | None) -> bool:
    """Whether a predicted name is the true one (both present, equal up to case and whitespace)."""
    return predicted is not None and truth is not None and name_key(predicted) == name_key(truth)


def _finish(raw: Mapping[str, str]) -> dict[str, str | None]:
    """Cleaned names for all seven ranks, with the species as a binomial and the genus implied by it."""
    names: dict[str, str | None] = {c: None for c in RANK_COLUMNS}
    for column in RANK_COLUMNS[: Rank.GENUS]:
        names[column] = clean_uninomial(raw.get(column))
    genus_text = raw.get("genus")
    genus = clean_uninomial(genus_text)
    species = clean_binomial(raw.get("species"), genus)
    if species is None and raw.get("epithet") is not None:
        species = clean_binomial(raw.get("epithet"), genus)
    if species is None and isinstance(genus_text, str):
        species = _binomial_in(genus_text)  # the binomial written in the genus field
    if genus is None and species is not None:
        genus = species.split()[0]
    names["genus"], names["species"] = genus, species
    return names


def _binomial_in(text: str) -> str | None:
    words = _strip_markup(text).split()
    if len(words) >= 2 and words[0][:1].isupper() and words[1][:1].islower():
        return clean_binomial(" ".join(words[:2]))
    return None


# --- strategies ----------------------------------------------------------------------------------


def _value_text(value: object) -> str | None:
    """A JSON value as a name: a string, the first string of a list, or the ``name`` of an object."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        return _value_text(value[0])
    if isinstance(value, Mapping):
        for key in ("name", "scientific_name", "value", "taxon"):
            if key in value:
                return _value_text(value[key])
    return None


def _names_from_mapping(obj: object, depth: int = 0) -> dict[str, str]:
    """Rank names in a parsed JSON value: keys named like ranks, ``[{"rank": .., "name": ..}]`` lists, or
    one level of nesting (``{"lineage": {...}}``)."""
    found: dict[str, str] = {}
    if isinstance(obj, list):
        for item in obj:
            if isinstance(item, Mapping) and isinstance(item.get("rank"), str):
                column = _RANK_WORDS.get(item["rank"].strip().casefold())
                text = _value_text(item.get("name"))
                if column and text is not None:
                    found.setdefault(column, text)
            elif depth < 2:
                for column, text in _names_from_mapping(item, depth + 1).items():
                    found.setdefault(column, text)
        return found
    if not isinstance(obj, Mapping):
        return found
    for key, value in obj.items():
        column = _RANK_WORDS.get(str(key).strip().casefold().replace("-", "_"))
        text = _value_text(value)
        if column and text is not None:
            found.setdefault(column, text)
    if not found and depth < 2:
        for value in obj.values():
            if isinstance(value, (Mapping, list)):
                found = _names_from_mapping(value, depth + 1)
                if found:
                    break
    return found


def _loads_lenient(text: str) -> object:
    """JSON, or JSON with trailing commas, or a Python dict literal (single quotes); ``None`` when none of them."""
    for candidate in (text, re.sub(r",\s*([}\]])", r"\1", text)):
        try:
            return json.loads(candidate)
        except ValueError:
            pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _embedded_objects(text: str) -> Iterator[object]:
    """Every JSON-ish object in the text: fenced blocks first, then each balanced ``{...}`` span."""
    for block in _FENCE.findall(text):
        parsed = _loads_lenient(block.strip())
        if parsed is not None:
            yield parsed
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        depth = 0
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                parsed = _loads_lenient(text[start:end + 1])
                if parsed is not None:
                    yield parsed
                break


@strategy("json")
def _whole_json(text: str, ranks: Sequence[str]) -> dict[str, str]:
    try:
        parsed = json.loads(text)
    except ValueError:
        return {}
    return _names_from_mapping(parsed)


@strategy("json_embedded")
def _embedded_json(text: str, ranks: Sequence[str]) -> dict[str, str]:
    for parsed in _embedded_objects(text):
        found = _names_from_mapping(parsed)
        if found:
            return found
    return {}


@strategy("fields")
def _field_lines(text: str, ranks: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _FIELD_LINE.finditer(text):
        column = _RANK_WORDS[match.group("rank").casefold()]
        found.setdefault(column, match.group("name"))
    return found


@strategy("sequence")
def _sequence(text: str, ranks: Sequence[str]) -> dict[str, str]:
    """One line holding exactly one name per asked rank, in order (the species last, as a binomial)."""
    for line in text.splitlines():
        parts = [p for p in (_strip_markup(p) for p in _SEPARATORS.split(line.strip())) if p]
        if len(parts) != len(ranks) or not parts:
            continue
        sizes_ok = all(len(p.split()) == (2 if column == "species" else 1) for p, column in zip(parts, ranks,
                                                                                                  strict=True))
        if sizes_ok and all(_NAME_WORD.fullmatch(w) for p in parts for w in p.split()):
            return dict(zip(ranks, parts, strict=True))
    return {}


@strategy("prose")
def _prose(text: str, ranks: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for match in _PROSE.finditer(text):
        column = _RANK_WORDS[match.group("rank").casefold()]
        name = match.group("name")
        if column != "species":
            name = name.split()[0]
        elif len(name.split()) < 2:
            continue
        if name.split()[0].casefold() in _SENTENCE_WORDS:
            continue
        found.setdefault(column, name)
    return found


@strategy("binomial")
def _binomial(text: str, ranks: Sequence[str]) -> dict[str, str]:
    """The first plausible ``Genus species`` in the text, one in italics or bold first."""
    plausible = [m for m in _BINOMIAL.finditer(text)
                 if m.group("genus").casefold() not in _SENTENCE_WORDS
                 and m.group("epithet").casefold() not in _SENTENCE_WORDS]
    if not plausible:
        return {}
    marked = [m for m in plausible if m.group("mark")]
    best = (marked or plausible)[0]
    return {"species": f"{best.group('genus')} {best.group('epithet')}"}


# --- the entry point -----------------------------------------------------------------------------


def parse_lineage_answer(text: str | None, ranks: Sequence[Rank | str]) -> ParsedAnswer:
    """Names at every rank read from ``text`` by the first strategy that names one of ``ranks``."""
    asked = [Rank.parse(r).column for r in ranks]
    empty: dict[str, str | None] = dict.fromkeys(RANK_COLUMNS)
    if not text or not text.strip():
        return ParsedAnswer(empty, UNPARSEABLE)
    text = text.strip()
    for status, read in STRATEGIES.items():
        names = _finish(read(text, asked))
        if any(names[c] is not None for c in asked):
            return ParsedAnswer(names, status)
    return ParsedAnswer(empty, UNPARSEABLE)


__all__ = [
    "STRATEGIES",
    "UNPARSEABLE",
    "ParsedAnswer",
    "clean_binomial",
    "clean_uninomial",
    "name_key",
    "names_match",
    "parse_lineage_answer",
    "strategy",
]
