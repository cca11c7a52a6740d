"""Label strings read back as a species name and its lineage, so a report names a species the way a reader looks it
up (``Anchoa mitchilli``), with the ranks above it kept for a hover or a second line.

Zero-shot runs store their labels in the run's name style. BioCLIP's ``taxon`` style writes the whole lineage
(``Animalia Chordata Actinopterygii Clupeiformes Engraulidae Anchoa mitchilli``): ranks capitalised, the epithet in
lower case, missing ranks skipped. Read back, the binomial is the last capitalised word (the genus) and the epithet
after it; everything before is the lineage. ``taxon_com`` adds ``with common name X``. The other styles
(``sci``, ``com``, ``mixed``) already are the name a reader wants, and are shown as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

LINEAGE_STYLES = ("taxon", "taxon_com")
"""Name styles whose labels hold the lineage above the species."""
COMMON_NAME = " with common name "
"""How ``taxon_com`` appends a common name."""


@dataclass(frozen=True)
class TaxonName:
    """A label as a reader sees it."""

    name: str
    """The binomial (or the deepest name, for a label above species); the label itself when it cannot be read."""
    lineage: str | None
    """The ranks above ``name``, highest first, as the label writes them; None when the label has none."""
    label: str
    """The label as the run stored it."""

    @property
    def hover(self) -> str:
        """The whole label: shown on hover (a ``title``), so the lineage is one pointer away."""
        return self.label


GUESSED_RANKS = 4
"""Capitalised words a label of an unrecorded style needs before it is read as a lineage (kingdom to order at
least), so that a common name such as ``Great Blue Heron`` is not taken for one."""


def _reads_as_lineage(words: list[str], least: int) -> bool:
    """At least ``least`` capitalised rank names, then at most one lower-case epithet: a ``taxon`` label's shape."""
    head = words[:-1] if words[-1][:1].islower() else words
    return len(head) >= least and all(word[:1].isupper() for word in head)


def taxon_name(label: str | None, name_style: str | None) -> TaxonName:
    """``label`` split into its species name and lineage when its style writes a lineage (``name_style`` None: an
    older record, read by the label's shape)."""
    text = "" if label is None else str(label)
    if name_style is not None and name_style not in LINEAGE_STYLES:
        return TaxonName(name=text, lineage=None, label=text)
    taxon, _, common = text.partition(COMMON_NAME)
    words = taxon.split()
    if not words or not _reads_as_lineage(words, 1 if name_style else GUESSED_RANKS):
        return TaxonName(name=text, lineage=None, label=text)
    cut = len(words) - (2 if words[-1][:1].islower() else 1)
    name = " ".join(words[cut:]) + (f" ({common})" if common else "")
    return TaxonName(name=name, lineage=" ".join(words[:cut]) or None, label=text)


def run_name_style(provenance: dict) -> str | None:
    """The name style a run's labels are written in, as its provenance records it."""
    style = (provenance.get("prompts") or {}).get("name_style")
    return str(style) if style else None
