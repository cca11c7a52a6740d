"""What a CrypticBio curation reports: its summary (``build.json``) and its dataset card (``README.md``).

Why a module: the card is read by people deciding whether to trust a benchmark, so every number in it
(rows read, dropped by reason, per subset and taxonomic group, cryptic-group statistics, photos fetched)
is laid out here, apart from the code that counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cladebench.benchmarks.crypticbio.builder.rows import DUPLICATE_URL, MALFORMED_LINE, ROW_CHECKS
from cladebench.benchmarks.crypticbio.source import CSV_COLUMNS
from cladebench.curate.builders.cards import markdown_table
from cladebench.curate.skeleton import summary_dict


@dataclass(frozen=True)
class CrypticBioCurationSummary:
    """What a curation wrote, and where every metadata row went."""

    out: Path
    rows_read: int
    """Data rows the readers split into fields (malformed lines not included)."""
    malformed_lines: int
    kept: int
    """Rows passing every check and filter, one per photo URL: the pool the subsets are cut from."""
    dropped: dict[str, int]
    """Rows dropped, by the first reason (data checks, then ``filter:<key>``, then duplicate_url)."""
    failing: dict[str, int]
    """Per filter: rows (passing the data checks) that fail it, whatever the other filters say."""
    filters: list[str]
    unmatched_filter_names: list[str]
    subsets: dict[str, dict[str, Any]]
    cryptic: dict[str, Any]
    downloads: dict[str, dict[str, Any]]
    seed: int
    elapsed_s: float
    config: dict[str, Any]

    def as_dict(self) -> dict[str, object]:
        return summary_dict(self)

    def describe(self) -> str:
        lines = [f"{self.out}: {self.kept} of {self.rows_read} rows kept ({self.malformed_lines} malformed lines) "
                 f"in {self.elapsed_s:.1f} s"]
        lines += [f"  {name}: {info['rows']} rows, {info['species']} species -> {info['file']}"
                  for name, info in self.subsets.items()]
        if self.dropped:
            lines.append("  dropped: " + ", ".join(f"{k} {v}" for k, v in self.dropped.items()))
        lines += [f"  {name}: {info['written']} photos in {info['dataset']}, {info['failed']} failed"
                  for name, info in self.downloads.items()]
        return "\n".join(lines)


def render_card(summary: CrypticBioCurationSummary, left_out: Sequence[str] = ()) -> str:
    """The dataset card (README.md) of a curation; ``left_out`` is
    :func:`~cladebench.curate.reports.left_out_section` of the build."""
    subsets = summary.subsets
    parts = [
        f"# CrypticBio curation: {summary.out.name}",
        "",
        "Benchmarks cut from CrypticBio-style metadata (Manolache et al., 2025, `gmanolache/CrypticBio`) by "
        "`cladebench build crypticbio`. Files follow the published benchmark format: "
        f"`{', '.join(CSV_COLUMNS)}`. Seed {summary.seed}; every per-species sample orders rows by "
        "MD5(`<seed>:<url>`).",
        "",
        "## Subsets",
        "",
        markdown_table(["subset", "file", "rows", "species", "species with a cryptic group", "notes"],
               [(name, f"`{info['file']}`", info["rows"], info["species"], info.get("species_with_group", "–"),
                 "; ".join(f"{k}: {v}" for k, v in info["notes"].items() if k != "unmatched_examples") or "–")
                for name, info in subsets.items()]),
        "",
        "## Rows per taxonomic group",
        "",
        "The taxonomic group is the `class` value (CrypticBio files Squamata there).",
        "",
    ]
    groups = sorted({g for info in subsets.values() for g in info["taxonomic_groups"]})
    parts.append(markdown_table(["taxonomic group", *subsets], [(g, *(info["taxonomic_groups"].get(g, 0)
                                                              for info in subsets.values())) for g in groups],
                                literal=(0,)))
    parts += [
        "", "## Rows read and dropped", "",
        f"{summary.rows_read} rows read, {summary.malformed_lines} malformed lines skipped, {summary.kept} rows kept "
        "(one per photo URL). A row is counted under the first reason that drops it; the last column counts, for "
        "each filter on its own, the rows passing the data checks that fail it.",
        "",
        markdown_table(["reason", "rows dropped (first reason)", "rows failing it (on its own)"],
               [(reason, count, summary.failing.get(reason, "–")) for reason, count in summary.dropped.items()]),
        "",
        "Filters: " + ("; ".join(f"`{f}`" for f in summary.filters) if summary.filters else "none") + ".",
    ]
    if summary.unmatched_filter_names:
        parts += ["", "Filter names that match no valid row: "
                  + ", ".join(f"`{n}`" for n in summary.unmatched_filter_names) + "."]
    for name, info in subsets.items():
        examples = info["notes"].get("unmatched_examples")
        if examples:
            parts += ["", f"{name}: list names with no row (first {len(examples)}): "
                      + ", ".join(f"`{n}`" for n in examples) + "."]
    parts += ["", "## Cryptic groups", ""]
    cryptic = summary.cryptic
    if not cryptic:
        parts.append("No cryptic groups: neither generate_pairs nor a cryptic group column.")
    else:
        stats = cryptic["statistics"]
        parts += [
            f"Source: {cryptic['source']}. {stats['groups']} species known to the source, {stats['pairs']} "
            f"directed pairs; group size (the species included) min {stats['size_min']}, median "
            f"{stats['size_median']}, mean {stats['size_mean']}, max {stats['size_max']}. Of the {stats['species']} "
            f"species written, {stats['species_with_group']} have at least one confusable species.",
        ]
        if cryptic.get("mining"):
            mining = cryptic["mining"]
            parts += ["", f"Mining: B joins A's group when at least {mining['min_observations']} observations of A "
                      f"(and at least {mining['min_fraction']} of them) carry an identification of B; withdrawn "
                      f"identifications {'counted' if mining['count_withdrawn'] else 'ignored'}. "
                      f"{mining['candidates']} candidate pairs, {mining['below_min_observations']} below the "
                      f"observation count, {mining['below_min_fraction']} below the fraction, {mining['pairs']} kept.",
                      "", markdown_table(["identifications", "count"], mining["identifications"].items())]
    if summary.downloads:
        parts += ["", "## Photos", "",
                  markdown_table(["subset", "dataset", "photos written", "failed", "failures by reason"],
                         [(n, f"`{d['dataset']}`" if d["dataset"] else "none (no photo fetched)", d["written"],
                           d["failed"],
                           ", ".join(f"{k} {v}" for k, v in d["failed_by_reason"].items()) or "–")
                          for n, d in summary.downloads.items()])]
    parts += ["", "## Data checks", "", markdown_table(["reason", "meaning"], [(c.reason, c.doc) for c in ROW_CHECKS]
                                               + [(DUPLICATE_URL, "a photo URL already kept from an earlier row"),
                                                  (MALFORMED_LINE, "a CSV line with more or fewer fields than "
                                                   "the header")]), "", *left_out]
    return "\n".join(parts)




__all__ = ["CrypticBioCurationSummary", "render_card"]
