"""What an iNat Co-Observed build reports: its summary (``build.json``) and its dataset card (``README.md``).

Why a module: the card is read by people deciding whether to trust a benchmark; every count it shows
(per divergence rank, kingdom and class pair, license, reason) is laid out here, apart from the counting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cladebench.benchmarks.coobserved.builder.checks import PHOTO_CHECKS
from cladebench.benchmarks.coobserved.builder.config import DATA_FILE, DIVERGENCE_RANKS
from cladebench.curate.builders.cards import counts, markdown_table
from cladebench.curate.skeleton import summary_dict


@dataclass(frozen=True)
class CoObservedBuildSummary:
    """What a build read, dropped (by reason), kept and wrote."""

    out: Path
    """The output folder."""
    data_path: Path
    """``data/coobserved.parquet``: the rows, without images."""
    card_path: Path
    """``README.md``: the dataset card."""
    dataset_path: Path | None
    """``coobserved.lance`` with the images (``--download``), else ``None``."""
    rows: int
    """Photos in the dataset (in ``data_path``)."""
    fingerprint: str
    """SHA-256 of the rows' uuids in order (:func:`cladebench.store.fingerprint_uuids`), which is what the
    Lance dataset's fingerprint is when every photo is fetched."""
    files: dict[str, dict[str, Any]]
    """Per table: file, header variant (columns) and data lines read."""
    row_issues: dict[str, dict[str, int]]
    """Bad rows per table and reason."""
    photo_outcomes: dict[str, int]
    """Photo ids per reason they are not in the dataset (every :data:`PHOTO_CHECKS` reason and
    :data:`SAMPLING_REASONS`, zeros included), plus ``image_fetch_failed`` with ``--download``."""
    photo_ids: int
    """Distinct photo ids in the export (lines rejected by the reader have none)."""
    eligible: int
    """Photos that passed every check, before sampling."""
    eligible_per_rank: dict[str, int]
    kept_per_rank: dict[str, int]
    kingdom_pairs: dict[str, int]
    """Kept photos per kingdom pair."""
    class_pairs: dict[str, int]
    """Kept photos per class pair."""
    species: int
    """Distinct species among the kept photos' organisms."""
    licenses: dict[str, int]
    """Kept photos per license code."""
    notes: dict[str, object]
    """Counts that are not drops: observers without a name, attributions from the login, malformed line kinds."""
    dataset_fingerprint: str | None = None
    """Fingerprint of the Lance dataset (``--download``); equals ``fingerprint`` when no fetch failed."""
    config: dict[str, object] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def describe(self) -> str:
        """A few lines for a terminal: what was written, and the largest reasons photos were left out."""
        drops = sorted(((n, r) for r, n in self.photo_outcomes.items() if n and r != "single_observation"),
                       reverse=True)
        bad_rows = sum(n for issues in self.row_issues.values() for n in issues.values())
        lines = [
            f"{self.out}: {self.rows:,} photos ({self.fingerprint[:12]}) of {self.eligible:,} eligible, from "
            f"{self.photo_ids:,} photo ids ({self.photo_outcomes.get('single_observation', 0):,} on one observation)",
            "left out: " + (", ".join(f"{r} {n:,}" for n, r in drops[:8]) or "none")
            + (f"; {bad_rows:,} bad rows" if bad_rows else "") + f"; all counts in {self.card_path}",
        ]
        if self.dataset_path is None:
            lines.append(f"images: cladebench load inat-coobserved {self.out / 'data'} --out <dataset>.lance")
        else:
            lines.append(f"dataset with images: {self.dataset_path}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return summary_dict(self)


def _docs() -> dict[str, str]:
    docs = {c.reason: c.doc for c in PHOTO_CHECKS}
    docs.update(species_cap="a species already had its cap of photos", observer_cap="the observer had its cap",
                rank_quota="eligible, but the divergence rank was full", image_fetch_failed="the photo could not be "
                "fetched (--download; reasons in coobserved.lance.failures.parquet)")
    return docs


def render_card(summary: CoObservedBuildSummary, left_out: Sequence[str] = ()) -> str:
    """The dataset card: what the dataset is, how it was built, and every count; ``left_out`` is
    :func:`~cladebench.curate.reports.left_out_section` of the build."""
    config = summary.config
    docs = _docs()
    kept_total = max(summary.rows, 1)
    sections = [
        "# iNat Co-Observed (rebuilt from an iNaturalist open-data export)",
        "",
        f"{summary.rows:,} iNaturalist photos, each attached by its observer to two research-grade observations of "
        "different species (different genera), with both organisms' seven-rank lineages and the rank at which they "
        "part (`divergence_rank`). The task it serves is steered lineage completion: given the image and one "
        "organism's lineage down to the divergence rank, complete the rest of its lineage; either organism can be "
        "the target.",
        "",
        f"- Fingerprint (SHA-256 of the row uuids in order): `{summary.fingerprint}`",
        f"- Rows: `{DATA_FILE}` (the published dataset's columns, no image bytes)"
        + (f"; with images: `{summary.dataset_path.name}`" if summary.dataset_path else
           "; images: `cladebench load inat-coobserved <out>/data --out <dataset>.lance` fetches them"),
        f"- Built with: per_rank={config.get('per_rank')}, seed={config.get('seed')}, "
        f"max_per_species={config.get('max_per_species')}, max_per_observer={config.get('max_per_observer')}, "
        f"exclude_photo_ids={config.get('exclude_photo_ids')}, tol_species={config.get('tol_species')}",
        "- Licenses: CC0, CC-BY and CC-BY-NC only; each row's `attribution` is the one iNaturalist requires "
        "(the observer's name, or the login when no name is given).",
        "",
        "## Photos per divergence rank",
        "",
        markdown_table(["divergence rank", "eligible", "in dataset"],
               [(r, summary.eligible_per_rank.get(r, 0), summary.kept_per_rank.get(r, 0)) for r in DIVERGENCE_RANKS]
               + [("total", summary.eligible, summary.rows)]),
        "",
        "## Kingdom pairs",
        "",
        markdown_table(["kingdom pair", "photos", "share"],
               [(k, n, f"{n / kept_total:.1%}") for k, n in summary.kingdom_pairs.items()], literal=(0,)),
        "",
        "## Species and class pairs",
        "",
        f"{summary.species:,} species in {len(summary.class_pairs):,} class pairs. The most frequent class pairs:",
        "",
        markdown_table(["class pair", "photos"], list(summary.class_pairs.items())[:20], literal=(0,)),
        "",
        "## Licenses",
        "",
        markdown_table(["license", "photos"], list(summary.licenses.items()), literal=(0,)),
        "",
        "## What was left out, and why",
        "",
        f"The export held {summary.photo_ids:,} distinct photo ids. Each is in the dataset or counted under "
        "exactly one reason (first failing check, in this order):",
        "",
        markdown_table(["reason", "photo ids", "meaning"],
               [(r, n, docs.get(r, "")) for r, n in summary.photo_outcomes.items()]),
        "",
        "Rows that are bad on their own, per file (a bad photo row also leaves its photo out, above):",
        "",
        markdown_table(["file", "data lines", "reason", "rows"],
               [(t, summary.files[t]["rows"], r, n) for t in summary.files for r, n in
                summary.row_issues.get(t, {}).items()] or [("all", "", "none", 0)]),
        "",
        markdown_table(["note", "count"],
                       [(k, v if isinstance(v, int) else json.dumps(v)) for k, v in summary.notes.items()]),
        "",
        *left_out,
        "## Source",
        "",
        "iNaturalist open data (`inaturalist-open-data` bucket): photos.csv, observations.csv, taxa.csv, "
        "observers.csv, read as tab-separated text without quoting:",
        "",
        markdown_table(["file", "columns", "data lines"],
               [(Path(v["file"]).name, len(v["columns"]), v["rows"]) for v in summary.files.values()]),
        "",
    ]
    return "\n".join(sections)


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    species = {(o["kingdom"], o["phylum"], o["class"], o["order"], o["family"], o["genus"], o["species"])
               for r in rows for o in r["organisms"]}
    from cladebench.curate.sources.values import parse_license

    return {
        "kept_per_rank": {r: sum(row["divergence_rank"] == r for row in rows) for r in DIVERGENCE_RANKS},
        "kingdom_pairs": counts(r["kingdom_pair"] for r in rows),
        "class_pairs": counts(r["class_pair"] for r in rows),
        "species": len(species),
        "licenses": counts(parse_license(r["license"]).code for r in rows),  # type: ignore[union-attr]
    }



__all__ = ["CoObservedBuildSummary", "render_card", "summarise"]
