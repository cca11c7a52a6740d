"""Which selected images a cohort keeps, and why every other one is left out: the reasons, the screening by
detections, and the per-collection accounting that adds up exactly.

Every image of a named collection that carries a selected label is **selected**, and ends under exactly one
reason of :data:`REASONS` (the first that applies, in that order) or is **kept**. The stages, as the card
counts them:

- selection: ``excluded_collection``, ``label_unresolved``, ``label_ambiguous``, ``label_outside_group``,
  ``image_record_missing``; what passes is a **candidate**;
- retrieval: ``image_not_retrieved``, ``image_decode_failed``; what passes was **retrieved**;
- screening by the detector: ``no_detector_result``, ``detector_failed``, ``person_detected``,
  ``vehicle_detected``, ``no_animal_detection``; what passes is **kept**.

So ``selected = candidates + selection drops``, ``candidates = retrieved + retrieval drops`` and
``retrieved = kept + screened out``, per collection; :func:`accounting` checks the three.

An image's label: of its selected labels, the first that resolves inside the cohort's taxon; failing that the
image is ``label_outside_group`` when one of them resolved elsewhere, ``label_ambiguous`` when one was
ambiguous, else ``label_unresolved``.

**Screening** (:func:`screen`): a detection counts when its confidence is at least the threshold. With
``person: drop`` a counted person detection drops the image (``person_detected``, checked first: no image of a
person is kept), with ``vehicle: drop`` a counted vehicle does (``vehicle_detected``); an image is kept only with a
counted animal detection, and its ``detection_conf`` is the highest such confidence. A detection whose confidence
could not be read (the reader counts it as ``detection_bad_conf``) counts as a person or vehicle at the
threshold and never as an animal: a malformed record may leave an image out, never keep one with a person.

Why a module: these rules are what the card states; they are kept apart from reading and writing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from cladebench.benchmarks.finegrained.cameratrap.config import Cohort
from cladebench.benchmarks.finegrained.cameratrap.megadetector import ImageDetections
from cladebench.benchmarks.finegrained.cameratrap.resolve import Resolution

SELECTION_REASONS: dict[str, str] = {
    "excluded_collection": "the collection is excluded by the cohort",
    "label_unresolved": "no selected label of the image names a taxon of the backbone",
    "label_ambiguous": "a selected label names several taxa of the backbone, and none resolved inside the taxon",
    "label_outside_group": "the image's selected labels resolve to taxa outside the cohort's taxon",
    "image_record_missing": "an annotation selects the image, but the metadata has no usable record of it",
}
RETRIEVAL_REASONS: dict[str, str] = {
    "image_not_retrieved": "the image could not be fetched (or is not in the image folder)",
    "image_decode_failed": "the image was retrieved but does not decode",
}
SCREENING_REASONS: dict[str, str] = {
    "no_detector_result": "the detector output has no entry for the image",
    "detector_failed": "the detector output says the image was not processed",
    "person_detected": "a person detection at the threshold (person: drop)",
    "vehicle_detected": "a vehicle detection at the threshold (vehicle: drop)",
    "no_animal_detection": "no animal detection at the threshold",
}
REASONS: dict[str, str] = {**SELECTION_REASONS, **RETRIEVAL_REASONS, **SCREENING_REASONS}
"""Every reason an image is left out, in the order they are checked, with what it means."""
STAGES: dict[str, str] = {
    "excluded_collection": "sample", "label_unresolved": "resolve", "label_ambiguous": "resolve",
    "label_outside_group": "resolve", "image_record_missing": "read", **dict.fromkeys(RETRIEVAL_REASONS, "fetch"),
    **dict.fromkeys(SCREENING_REASONS, "screen")}
"""The stage of the left-out record (:data:`cladebench.store.left_out.STAGES`) each reason belongs to."""


def label_outcome(labels: Sequence[str], resolutions: Mapping[str, Resolution]
                  ) -> tuple[str | None, Resolution | None]:
    """(None, the resolution it is taken by) for an image whose label resolves inside the taxon, else
    (its reason, None); see the module docstring."""
    found = [resolutions[label] for label in labels]
    inside = next((r for r in found if r.resolved and r.in_group), None)
    if inside is not None:
        return None, inside
    if any(r.resolved for r in found):
        return "label_outside_group", None
    if any(r.status == "ambiguous" for r in found):
        return "label_ambiguous", None
    return "label_unresolved", None


def screen(entry: ImageDetections | None, cohort: Cohort) -> tuple[str | None, float | None]:
    """(None, the highest animal confidence) for an image the detections keep, else (its reason, None)."""
    if entry is None:
        return "no_detector_result", None
    if entry.failure is not None:
        return "detector_failed", None
    # An unreadable confidence (None) counts for a person or vehicle and not for an animal: it can only drop.
    counted = [d for d in entry.detections if d.conf is None or d.conf >= cohort.threshold]
    if cohort.person == "drop" and any(d.category == "person" for d in counted):
        return "person_detected", None
    if cohort.vehicle == "drop" and any(d.category == "vehicle" for d in counted):
        return "vehicle_detected", None
    animal = [d.conf for d in counted if d.category == "animal" and d.conf is not None]
    if not animal:
        return "no_animal_detection", None
    return None, max(animal)


def accounting(collections: Iterable[str], outcomes: Iterable[tuple[str, str | None]]) -> dict[str, dict[str, object]]:
    """Per collection (and ``total``): selected, candidates, retrieved, screened_out, kept and every reason's count,
    from ``(collection, reason or None for kept)`` pairs; the identities of the module docstring are checked."""
    counts: dict[str, Counter[str]] = {name: Counter() for name in collections}
    for collection, reason in outcomes:
        counts[collection][reason or "kept"] += 1
    table: dict[str, dict[str, object]] = {}
    for name, count in [*counts.items(), ("total", sum(counts.values(), Counter()))]:
        unknown = set(count) - set(REASONS) - {"kept"}
        if unknown:
            raise AssertionError(f"reasons without a definition: {sorted(unknown)}")
        selected = sum(count.values())
        candidates = selected - sum(count[r] for r in SELECTION_REASONS)
        retrieved = candidates - sum(count[r] for r in RETRIEVAL_REASONS)
        screened_out = sum(count[r] for r in SCREENING_REASONS)
        if retrieved - screened_out != count["kept"]:
            raise AssertionError(f"{name}: {retrieved} retrieved - {screened_out} screened out != {count['kept']} kept")
        table[name] = {"selected": selected, "candidates": candidates, "retrieved": retrieved,
                       "screened_out": screened_out, "kept": count["kept"],
                       "reasons": {r: count[r] for r in REASONS}}
    return table


__all__ = ["REASONS", "RETRIEVAL_REASONS", "SCREENING_REASONS", "SELECTION_REASONS", "STAGES", "accounting",
           "label_outcome", "screen"]
