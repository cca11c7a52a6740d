"""Why a row or photo of an iNat export is left out of iNat Co-Observed: every check, as SQL, in order.

**What is kept.** A photo on exactly two observations (deduplicated by ``(photo_id, observation)``),
whose rows agree on observer, license and extension, both observations found once, valid, by the
photo's observer and research grade, both taxa found, active, with a well-formed ancestry that agrees
with their ancestors' own (a taxon moved without its descendants being updated does not), with all
seven ranks kingdom .. species (joined from the ancestry by rank name; intermediate ranks ignored; a
subspecies observation counts as its species), kingdoms Animalia, Plantae or Fungi, of different
species and different genera (a pair parting only at species has no lineage left to complete below
its divergence rank), a license CC0, CC-BY or CC-BY-NC (codes in any case, parsed by
:func:`cladebench.benchmarks.inquire.source.parse_license`), not in ``--exclude-photo-ids``, and an observer
with a login. Every photo id the export holds ends in exactly one of :data:`PHOTO_CHECKS`'s reasons,
a sampling reason (:data:`SAMPLING_REASONS`) or the dataset; the summary asserts that they add up.

Why a module: the checks are the builder's definition of a usable photo; the card documents each one
from here (its ``doc``), and the summary asserts that every photo id ends in exactly one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cladebench.benchmarks.coobserved.builder.config import ALLOWED_LICENSES, INCLUDED_KINGDOMS
from cladebench.curate import inat_export
from cladebench.taxonomy import RANK_COLUMNS

# --- the checks, in the order they are applied ---------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One reason a row or photo is left out: its name, the SQL condition that detects it, and why."""

    reason: str
    condition: str
    """SQL over the stage's columns; true means the row or photo fails this check."""
    doc: str


CHECKED_TYPES: dict[str, tuple[str, ...]] = {
    "photos": ("photo_id", "observation_uuid", "observer_id"),
    "observations": ("observation_uuid", "observer_id", "taxon_id", "latitude", "longitude", "positional_accuracy",
                     "observed_on"),
    "taxa": ("taxon_id", "active"),
    "observers": ("observer_id",),
}
"""Per file, the typed columns whose values the build relies on; a row where one does not parse is
``invalid_value``. Each is cast once per row, and the stages use that cast value too (:func:`typed_column`).
The other typed columns (``photo_uuid``, ``width``, ``height``, ``position``,
``anomaly_score``, ``rank_level``) are cast where they are written, a value that does not parse becoming
null there: checking them on every row of a full export would cost a third of the build for columns
nothing is decided on."""


def _any_null(columns: Iterable[str]) -> str:
    # The reader gives null for an empty field, so "is null" is "is empty" (and a short line's missing fields).
    return " OR ".join(f'"{c}" IS NULL' for c in columns)


def typed_column(column: str) -> str:
    """The quoted name under which a file's rows carry ``column`` cast to its type, once per row
    (:meth:`cladebench.benchmarks.coobserved.builder.stages.ExportFile.rows`): the checks and the stages read
    that one cast instead of casting the text again."""
    return f'"{column}::typed"'


def _bad_types(columns: Iterable[str]) -> str:
    return " OR ".join(f'("{c}" IS NOT NULL AND {typed_column(c)} IS NULL)' for c in columns)


def _row_checks(table: str) -> tuple[Check, ...]:
    invalid = _bad_types(CHECKED_TYPES[table])
    if table == "observations":
        invalid += f" OR abs({typed_column('latitude')}) > 90 OR abs({typed_column('longitude')}) > 180"
    checks = [
        Check("missing_fields", _any_null(inat_export.REQUIRED[table]),
              "a required field is empty (or the line short)"),
        Check("invalid_value", invalid, "a value does not parse as its structure.sql type, or a coordinate is out of "
                                        "range"),
    ]
    if table == "taxa":
        checks.append(Check("malformed_ancestry",
                            "ancestry IS NOT NULL AND NOT regexp_full_match(ancestry, '[0-9]+(/[0-9]+)*')",
                            "the ancestry is not taxon ids joined by /"))
    return tuple(checks)


ROW_CHECKS: dict[str, tuple[Check, ...]] = {table: _row_checks(table) for table in inat_export.TABLES}
"""Per file, the checks of each row, first failing one wins; plus ``malformed_line`` (a line the reader
cannot split), ``duplicate_row`` (photos), ``duplicate_taxon_id`` (taxa) and ``duplicate_observer_id``
(observers), counted apart."""

GROUP_CHECKS: tuple[Check, ...] = (
    Check("invalid_photo_row", "n_missing + n_invalid > 0", "a row of the photo is bad (missing or invalid field)"),
    Check("single_observation", "n_observations = 1", "on one observation: not a co-observed photo"),
    Check("more_than_two_observations", "n_observations > 2", "on three or more observations"),
    Check("inconsistent_photo_rows", "attrs_min <> attrs_max",
          "its rows disagree on observer, license or extension"),
)
"""Checks of a photo id from its rows alone."""

TAXON_CHECKS: tuple[Check, ...] = (
    Check("malformed_ancestry", "any_malformed", "its ancestry (or an ancestor's) is not ids joined by /"),
    Check("inactive_taxon", "NOT self_active", "the taxon is inactive (replaced in iNat's taxonomy)"),
    Check("ancestry_mismatch",
          "any_missing OR inactive_ancestor OR any_stale OR greatest(" + ", ".join(
              f"n_{c}" for c in RANK_COLUMNS) + ") > 1",
          "an ancestor is missing or inactive, an ancestor's own ancestry disagrees (the taxon moved), "
          "or a rank repeats"),
    Check("incomplete_lineage", "least(" + ", ".join(f"n_{c}" for c in RANK_COLUMNS) + ") = 0",
          "one of kingdom .. species is not in the lineage"),
)
"""Checks of a taxon's lineage; a photo fails one when either organism's taxon does."""


def _either(template: str) -> str:
    return "(" + " OR ".join(template.format(side=s) for s in ("a", "b")) + ")"


PHOTO_CHECKS: tuple[Check, ...] = (
    *GROUP_CHECKS,
    Check("unknown_observation", _either("o{side}.n IS NULL"), "an observation is not in observations.csv"),
    Check("invalid_observation_row", _either("o{side}.bad"), "an observation's row is bad"),
    Check("ambiguous_observation", _either("o{side}.n > 1"), "an observation appears on more than one row"),
    Check("observer_mismatch", _either("o{side}.observer_id IS DISTINCT FROM c.observer_id"),
          "an observation is not by the photo's observer"),
    Check("not_research_grade", _either("coalesce(lower(trim(o{side}.quality_grade)), '') <> 'research'"),
          "an observation is not research grade"),
    Check("unknown_taxon", _either("l{side}.taxon_id IS NULL"),
          "an observation's taxon is not in taxa.csv (or has no taxon, or a duplicated id)"),
    *(Check(t.reason, _either(f"l{{side}}.status = '{t.reason}'"), t.doc) for t in TAXON_CHECKS),
    Check("kingdom_not_included", _either("l{side}.name_kingdom NOT IN ("
                                          + ", ".join(f"'{k}'" for k in INCLUDED_KINGDOMS) + ")"),
          "an organism is not in Animalia, Plantae or Fungi"),
    Check("same_species", "la.id_species = lb.id_species", "both organisms are the same species"),
    Check("same_genus", "la.id_genus = lb.id_genus",
          "both species are in one genus: they part at species, leaving nothing to complete"),
    Check("license_not_allowed", "lic.code IS NULL OR lic.code NOT IN ("
          + ", ".join(f"'{c}'" for c in ALLOWED_LICENSES) + ")", "the license is not CC0, CC-BY or CC-BY-NC"),
    Check("excluded_photo_id", "x.photo_id IS NOT NULL", "the photo id is in --exclude-photo-ids"),
    Check("unknown_observer", "u.observer_id IS NULL OR u.display_name IS NULL",
          "the observer is not in observers.csv, or has neither login nor name"),
)
"""Every reason a photo id in the export is not eligible, first failing one wins."""

SAMPLING_REASONS: tuple[str, ...] = ("species_cap", "observer_cap", "rank_quota")
"""Why an eligible photo was not sampled."""
FETCH_REASON = "image_fetch_failed"


def case_sql(checks: Sequence[Check]) -> str:
    """SQL naming the first of ``checks`` that fails (null when none does)."""
    return "CASE " + " ".join(f"WHEN {c.condition} THEN '{c.reason}'" for c in checks) + " END"



__all__ = [
    "CHECKED_TYPES",
    "FETCH_REASON",
    "GROUP_CHECKS",
    "PHOTO_CHECKS",
    "ROW_CHECKS",
    "SAMPLING_REASONS",
    "TAXON_CHECKS",
    "Check",
    "case_sql",
    "typed_column",
]
