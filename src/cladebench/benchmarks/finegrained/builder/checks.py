"""Which catalog rows a Fine-Grained Challenges build keeps: licenses, the row checks, the sampling.

**What is kept.** Each row of a group passes :data:`ROW_CHECKS` (first failing one is its reason):
a uuid, unique among the groups' rows (every copy of a repeated uuid is dropped: which copy is right
cannot be known), a genus, a binomial whose genus agrees, one provenance record, and a license that
is CC0, CC-BY, CC-BY-NC or CC-BY-SA in any spelling :func:`cladebench.benchmarks.inquire.source.parse_license`
reads (never ND in any variant, never all rights reserved, never ``other`` or a value it does not
read) with a license link, and an image source (a local path or a URL). Then the sampling: at most
``per_species`` rows per species, and at most ``genus_only_cap`` rows per genus among the rows
identified to genus only (a bucket of their own, so camera-trap rows without a species cannot crowd
out the species); within a bucket rows go in seeded order (:func:`sample_key`), so the same catalog,
config and seed give the same rows in the same order (the same fingerprint). Last the images: a
sampled row whose image cannot be fetched or decoded is dropped under its reason (not replaced, so
the selection never depends on which hosts answered). Every row of the catalog ends in the dataset,
``outside_groups`` or exactly one reason; the build asserts that they add up.

Why a module: the checks and the sampling are the builder's definition of a usable, fairly drawn row;
they run in plain Python over the groups' rows (a small part of the catalog) and are tested on their own.

Example:
    >>> [classify_license(raw)[0] for raw in ("cc-by-nc-4.0", "CC BY-NC-ND 4.0", "All rights reserved", "other")]
    [None, 'license_no_derivatives', 'license_all_rights_reserved', 'license_other']
    >>> sample_key(0, "a") == sample_key(0, "a") != sample_key(1, "a")
    True
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cladebench.benchmarks.finegrained.builder.config import ChallengeGroup, FineGrainedBuildConfig
from cladebench.taxonomy import RANK_COLUMNS, Lineage, Rank

if TYPE_CHECKING:

    from cladebench.curate.sources.values import InatLicense

def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t}


def classify_license(raw: str | None) -> tuple[str | None, InatLicense | None]:
    """Why a license is refused (a :data:`ROW_CHECKS` reason) or ``None`` when it is kept, and the parsed license.

    ND is recognised in any spelling (``-nd``, ``NoDerivatives``, ``NoDerivs``), even where the rest of the value
    does not parse; so is "all rights reserved" with stray punctuation. A value that names no license
    (``other``) and one that :func:`~cladebench.curate.sources.values.parse_license` does not read are refused apart.
    """
    from cladebench.curate.sources.values import parse_license

    text = (raw or "").strip()
    if not text:
        return "missing_license", None
    tokens = _tokens(text)
    parsed = parse_license(text)
    if parsed is None and "other" in tokens:
        return "license_other", None
    if "nd" in tokens or any(t.startswith("noderiv") for t in tokens) or (
            parsed is not None and "nd" in parsed.code.split("-")):
        return "license_no_derivatives", parsed
    if (parsed is not None and parsed.code == "all-rights-reserved") or {"all", "rights", "reserved"} <= tokens:
        return "license_all_rights_reserved", parsed
    if parsed is None:
        return "license_unrecognised", None
    return None, parsed


@dataclass(frozen=True)
class Check:
    """One reason a row of a challenge group is left out, and how to see it."""

    reason: str
    """Short name counted in the card and ``left_out.parquet``."""
    doc: str
    """What it means, for the card."""
    fails: Callable[[Mapping[str, Any]], bool]
    """True when the (prepared) row fails this check."""


def _license_check(reason: str, doc: str) -> Check:
    return Check(reason, doc, lambda row: row["license_reason"] == reason)


def _species_genus_mismatch(row: Mapping[str, Any]) -> bool:
    words = (row["species"] or "").split()
    return len(words) >= 2 and words[0][:1].isupper() and words[0].lower() != (row["genus"] or "").strip().lower()


ROW_CHECKS: tuple[Check, ...] = (
    Check("missing_uuid", "the row has no uuid", lambda row: not row["uuid"]),
    Check("invalid_uuid", "the uuid contains a line break (the fingerprint separates uuids by newlines)",
          lambda row: "\n" in row["uuid"] or "\r" in row["uuid"]),
    Check("duplicate_uuid", "the uuid is on more than one row of the groups (every copy dropped: which is right "
          "cannot be known)", lambda row: row["n_copies"] > 1),
    Check("above_genus", "identified above genus (no genus name)", lambda row: not (row["genus"] or "").strip()),
    Check("species_genus_mismatch", "the species binomial names another genus than the genus column",
          _species_genus_mismatch),
    Check("ambiguous_provenance", "the provenance table gives this uuid more than one license record",
          lambda row: (row["n_provenance"] or 0) > 1),
    _license_check("missing_license", "no provenance row, or an empty license_name"),
    _license_check("license_other", "the license is given as 'other' (no license named)"),
    _license_check("license_no_derivatives", "a NoDerivatives (ND) license: resized images are derivatives"),
    _license_check("license_all_rights_reserved", "all rights reserved"),
    _license_check("license_unrecognised", "a license value that does not parse as CC0 or a CC-BY variant"),
    Check("missing_license_link", "no license_link", lambda row: not (row["license_link"] or "").strip()),
    Check("no_image_source", "neither a local image path nor a source_url",
          lambda row: not (row["image_path"] or "").strip() and not (row["source_url"] or "").strip()),
)
"""Every reason a row of a challenge group is not eligible, in the order checked (first failing one wins)."""

SAMPLING_REASONS: dict[str, str] = {
    "species_cap": "eligible, but its species already had per_species images",
    "genus_only_cap": "eligible, identified to genus only, and its genus already had genus_only_cap such images",
}
IMAGE_REASONS: dict[str, str] = {
    "image_fetch_failed": "sampled, but the image could not be fetched (detail in left_out.parquet)",
    "image_file_missing": "sampled, but its local image file does not exist",
    "image_decode_failed": "sampled, but the image does not decode (corrupt, truncated, not an image)",
}
OUTSIDE_REASON = "outside_groups"


def reason_docs() -> dict[str, str]:
    """Every outcome a catalog row can have other than the dataset, with its meaning, in card order."""
    return {OUTSIDE_REASON: "its taxon is in no challenge group (distractor taxa, the rest of the catalog)",
            **{c.reason: c.doc for c in ROW_CHECKS}, **SAMPLING_REASONS, **IMAGE_REASONS}


def sample_key(seed: int, uuid: str) -> str:
    """The seeded order of rows within a bucket: SHA-256 of ``"<seed>:<uuid>"`` in hex (the same on any machine;
    Python's ``hash`` is salted per process)."""
    return hashlib.sha256(f"{seed}:{uuid}".encode()).hexdigest()



def _prepare(row: dict[str, Any]) -> dict[str, object]:
    row["uuid"] = row["uuid"] or ""
    row["license_reason"], row["license"] = classify_license(row["license_name"])
    return row


def check_rows(rows: Iterable[dict[str, object]]) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The eligible rows, and the others, each with the ``reason`` of the first :data:`ROW_CHECKS` check it fails."""
    eligible, refused = [], []
    for row in rows:
        prepared = _prepare(row)
        reason = next((c.reason for c in ROW_CHECKS if c.fails(prepared)), None)
        if reason is None:
            eligible.append(prepared)
        else:
            prepared["reason"] = reason
            refused.append(prepared)
    return eligible, refused


def _bucket(row: Mapping[str, Any]) -> tuple[str, str, str | None]:
    lineage: Lineage = row["lineage"]
    genus = lineage[Rank.GENUS] or ""
    return row["challenge_group"], genus.lower(), lineage[Rank.SPECIES]


def sample(eligible: Sequence[dict[str, Any]], config: FineGrainedBuildConfig,
           groups: Sequence[ChallengeGroup]) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The rows kept by the caps, in dataset order (group, genus, species with genus-only rows first, seeded order),
    and the rows the caps refused (each with its ``reason``)."""
    buckets: dict[tuple[str, str, str | None], list[dict[str, object]]] = {}
    for row in eligible:
        row["lineage"] = Lineage(tuple(row[c] for c in RANK_COLUMNS), common_name=row["common_name"])
        row["sample_key"] = sample_key(config.seed, row["uuid"])
        buckets.setdefault(_bucket(row), []).append(row)
    order = {g.name: i for i, g in enumerate(groups)}
    kept, refused = [], []
    for key in sorted(buckets, key=lambda k: (order[k[0]], k[1], k[2] or "")):
        rows = sorted(buckets[key], key=lambda r: (r["sample_key"], r["uuid"]))
        cap, reason = (config.per_species, "species_cap") if key[2] is not None else \
            (config.genus_only_cap, "genus_only_cap")
        kept.extend(rows[:cap])
        for row in rows[cap:]:
            row["reason"] = reason
            refused.append(row)
    return kept, refused



__all__ = [
    "IMAGE_REASONS",
    "OUTSIDE_REASON",
    "ROW_CHECKS",
    "SAMPLING_REASONS",
    "Check",
    "check_rows",
    "classify_license",
    "reason_docs",
    "sample",
    "sample_key",
]
