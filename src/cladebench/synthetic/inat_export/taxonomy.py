"""The made-up world of a generated export: a taxonomy with iNaturalist's shape, and its observers.

Why: the builder's checks are about lineages (intermediate ranks, inactive taxa, stale or malformed
ancestries, a genus under an order) and attributions (observers named ``None``), so the generator needs
taxa and observers it can bend in each of those ways on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cladebench.curate.inat_export import KINGDOM_IDS, LIFE_TAXON_ID, RANK_LEVELS
from cladebench.taxonomy import RANK_COLUMNS

_SYLLABLES = ("ba", "co", "di", "fu", "ga", "he", "ki", "lo", "mu", "na", "pe", "ri", "sa", "tu", "vo", "xe",
              "za", "bri", "cla", "dro", "fle", "gri", "plo", "stu", "tha", "vex", "mor", "quin", "zel", "ost")
_ENDINGS: dict[str, tuple[str, ...]] = {
    "phylum": ("phyta", "mycota", "poda", "zoa"), "subphylum": ("ina",), "class": ("opsida", "ia", "ea"),
    "subclass": ("idae",), "order": ("ales", "ptera", "formes"), "suborder": ("ineae",),
    "superfamily": ("oidea",), "family": ("aceae", "idae"), "subfamily": ("oideae", "inae"), "tribe": ("eae", "ini"),
    "genus": ("us", "a", "ium", "is"), "species": ("ensis", "ii", "ata", "icus", "ella"),
    "subspecies": ("inus", "oides"),
}
# Intermediate ranks inserted below a rank, with their probability: iNat lineages are not seven steps.
_INTERMEDIATE: dict[str, tuple[tuple[str, float], ...]] = {
    "phylum": (("subphylum", 0.4),), "class": (("subclass", 0.3),), "order": (("suborder", 0.3),
                                                                              ("superfamily", 0.4)),
    "family": (("subfamily", 0.6), ("tribe", 0.4)),
}
_BRANCHING = {"phylum": 2, "class": 3, "order": 2, "family": 2, "genus": 2, "species": 3}
_INCLUDED_KINGDOMS = ("Animalia", "Plantae", "Fungi")
_EXCLUDED_KINGDOMS = ("Chromista", "Protozoa")


@dataclass
class _Taxon:
    taxon_id: int
    ancestry: tuple[int, ...]
    rank: str
    name: str
    active: bool = True
    ancestry_text: str | None = None
    """Written instead of ``ancestry`` when set (a malformed or stale ancestry)."""

    def line(self) -> str:
        ancestry = self.ancestry_text if self.ancestry_text is not None else "/".join(map(str, self.ancestry))
        level = RANK_LEVELS[self.rank]
        level_text = str(int(level)) if float(level).is_integer() else str(level)
        return "\t".join((str(self.taxon_id), ancestry, level_text, self.rank, self.name,
                          "true" if self.active else "false"))


@dataclass(frozen=True)
class Species:
    """A species with a clean, complete lineage: what observations of usable pairs are on."""

    taxon_id: int
    ranks: tuple[int, ...]
    """Taxon ids at kingdom .. species."""
    names: tuple[str, ...]
    binomial: str
    subspecies: tuple[int, ...]


class _Names:
    """Made-up, distinct, pronounceable taxon names, seeded."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, rank: str) -> str:
        for _ in range(1000):
            n = int(self.rng.integers(2, 4))
            stem = "".join(self.rng.choice(_SYLLABLES, size=n))
            name = stem + str(self.rng.choice(_ENDINGS.get(rank, ("us",))))
            if rank not in ("species", "subspecies"):
                name = name.capitalize()  # epithets are lower case, every other name capitalised
            if name not in self.used:
                self.used.add(name)
                return name
        raise AssertionError("ran out of names")


class Tree:
    """The taxonomy written to ``taxa.csv``: clean species, and the odd taxa the defects need."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.names = _Names(rng)
        self.taxa: list[_Taxon] = []
        self.by_id: dict[int, _Taxon] = {}
        self.next_id = 100_000
        self.species: list[Species] = []
        self.excluded_species: list[Species] = []
        self.genera: list[_Taxon] = []
        self._add(_Taxon(LIFE_TAXON_ID, (), "stateofmatter", "Life"))
        for kingdom in (*_INCLUDED_KINGDOMS, *_EXCLUDED_KINGDOMS):
            node = self._add(_Taxon(KINGDOM_IDS[kingdom], (LIFE_TAXON_ID,), "kingdom", kingdom))
            small = kingdom in _EXCLUDED_KINGDOMS
            self._grow(node, (LIFE_TAXON_ID, node.taxon_id), [kingdom], RANK_COLUMNS[1:], small)

    def _add(self, taxon: _Taxon) -> _Taxon:
        self.taxa.append(taxon)
        self.by_id[taxon.taxon_id] = taxon
        return taxon

    def new_id(self) -> int:
        self.next_id += int(self.rng.integers(1, 40))
        return self.next_id

    def _child(self, parent_chain: tuple[int, ...], rank: str, name: str) -> _Taxon:
        return self._add(_Taxon(self.new_id(), parent_chain, rank, name))

    def _grow(self, node: _Taxon, chain: tuple[int, ...], names: list[str], ranks: Sequence[str],
              small: bool) -> None:
        """Children of ``node`` down the remaining ranks, intermediate ranks in between."""
        rank, rest = ranks[0], ranks[1:]
        if rank == "species":
            genus = node.name
            for _ in range(1 if small else _BRANCHING["species"]):
                epithet = self.names.word("species")
                taxon = self._child(chain, "species", f"{genus} {epithet}")
                subspecies = []
                if not small and self.rng.random() < 0.25:
                    sub = self._child((*chain, taxon.taxon_id), "subspecies",
                                      f"{genus} {epithet} {self.names.word('subspecies')}")
                    subspecies.append(sub.taxon_id)
                ids = (*[t for t in chain if self.by_id[t].rank in RANK_COLUMNS], taxon.taxon_id)
                species = Species(taxon.taxon_id, ids, (*names, epithet), taxon.name, tuple(subspecies))
                (self.excluded_species if small else self.species).append(species)
            return
        for _ in range(1 if small else _BRANCHING[rank]):
            child = self._child(chain, rank, self.names.word(rank))
            child_chain = (*chain, child.taxon_id)
            for between, p in _INTERMEDIATE.get(rank, ()):
                if not small and self.rng.random() < p:
                    inner = self._child(child_chain, between, self.names.word(between))
                    child_chain = (*child_chain, inner.taxon_id)
            if rank == "genus":
                self.genera.append(child)
            self._grow(child, child_chain, [*names, child.name], rest, small)

    def chain_of(self, taxon_id: int) -> tuple[int, ...]:
        taxon = self.by_id[taxon_id]
        return (*taxon.ancestry, taxon_id)

    # The odd taxa: each returns a taxon id an observation can be put on.

    def inactive_species(self, genus: _Taxon) -> int:
        taxon = self._child(self.chain_of(genus.taxon_id), "species", f"{genus.name} {self.names.word('species')}")
        taxon.active = False
        return taxon.taxon_id

    def malformed_species(self, genus: _Taxon, variant: int) -> int:
        chain = self.chain_of(genus.taxon_id)
        taxon = self._child(chain, "species", f"{genus.name} {self.names.word('species')}")
        parts = [str(t) for t in chain]
        if variant % 2 == 0:
            parts[2] = "x" + parts[2]  # a non-numeric id
        else:
            parts.insert(2, "")  # an empty step: "48460/1//..."
        taxon.ancestry_text = "/".join(parts)
        return taxon.taxon_id

    def stale_species(self, species: Species, variant: int) -> int:
        """A species whose ancestry no longer matches its parents': the family swapped for another one
        (a taxon moved without its descendants' ancestry updated), or an ancestor that is not in taxa."""
        genus_chain = self.chain_of(species.ranks[5])
        taxon = self._child(genus_chain, "species", f"{species.binomial.split()[0]} {self.names.word('species')}")
        if variant % 2 == 0:
            family = species.ranks[4]
            other = next(t for t in self.taxa if t.rank == "family" and t.taxon_id != family
                         and t.ancestry[:3] == self.by_id[family].ancestry[:3])
            taxon.ancestry = tuple(other.taxon_id if t == family else t for t in genus_chain)
        else:
            taxon.ancestry = (*genus_chain[:3], 9_999_000 + variant, *genus_chain[3:])
        return taxon.taxon_id

    def familyless_species(self, species: Species) -> int:
        """A species whose genus hangs directly under an order: a lineage without a family."""
        order_chain = self.chain_of(species.ranks[3])
        genus = self._child(order_chain, "genus", self.names.word("genus"))
        return self._child((*order_chain, genus.taxon_id), "species",
                           f"{genus.name} {self.names.word('species')}").taxon_id

    def broken_rows(self, n: int) -> list[str]:
        """Taxa lines with an empty name (unusable on their own)."""
        lines = []
        for _ in range(n):
            taxon = _Taxon(self.new_id(), (LIFE_TAXON_ID, 1), "species", "")
            lines.append(taxon.line())
        return lines


# --- observers -----------------------------------------------------------------------------------

_GIVEN = ("Ana", "Ben", "Chloé", "Dmitri", "Eun-ji", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kalani", "Lena")
_FAMILY = ("Okafor", "O'Brien", "Nguyen", "Müller", "Silva", "Kowalski", "Haddad", "Tanaka", "Moreau", "Dubois")


@dataclass(frozen=True)
class Observer:
    observer_id: int
    login: str
    name: str
    """As written: a name, ``None`` or empty."""

    def line(self) -> str:
        return f"{self.observer_id}\t{self.login}\t{self.name}"


def make_observers(rng: np.random.Generator, n: int) -> list[Observer]:
    observers = []
    ids = np.sort(rng.choice(np.arange(1, 50 * n), size=n, replace=False))
    for i, observer_id in enumerate(ids.tolist()):
        login = f"naturalist{observer_id}"
        draw = rng.random()
        if draw < 0.2:
            name = "None"
        elif draw < 0.23:
            name = ""
        else:
            name = f"{_GIVEN[i % len(_GIVEN)]} {_FAMILY[int(rng.integers(len(_FAMILY)))]}"
            if i % 37 == 5:
                name = f'{name.split()[0]} "Birdy" {name.split()[1]}'
        observers.append(Observer(observer_id, login, name))
    return observers

