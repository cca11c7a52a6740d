"""The card of a dataset loaded by ``load images`` (``README.md`` in it), and the counts it is written from.

What a person needs to trust it: where the images came from (the source, its files and how its columns were
read, an archive's rights and citations), how many records were read and written, every record left out by
reason, each distinct label's resolution against the backbone with its number of rows (ambiguous labels with
their candidates, unresolved ones listed, never dropped), the licenses, and the rows without one (kept, counted
and flagged: whoever publishes from them must find the rights first).

Why a module: the card is what the load says about itself; the counts are gathered while rows stream by.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cladebench.curate.builders.cards import markdown_table
from cladebench.curate.fetch import DownloadReport
from cladebench.curate.sources.images.labels import ROW_STATUSES
from cladebench.taxonomy.resolve import Resolution


@dataclass
class ImagesLoadSummary:
    """What ``load images`` did: the counts of the card, and where its files are."""

    dataset_path: Path
    """The Lance dataset (``--out``)."""
    failures_path: Path
    """The records left out, with where each is and why (``OUT/left_out.parquet``)."""
    kind: str
    """The source's kind (``folder``, ``table``, ``webdataset``, ``dwca``)."""
    source: str
    """The path given."""
    backbone: str
    """The taxonomy backbone labels were resolved against."""
    source_notes: dict[str, object] = field(default_factory=dict)
    """The reader's notes on the source (files, columns, rights, citations)."""
    rows: int = 0
    """Records read."""
    written: int = 0
    """Rows written."""
    failed_by_reason: Counter[str] = field(default_factory=Counter)
    """Records left out, by reason."""
    rows_by_status: Counter[str] = field(default_factory=Counter)
    """Rows written, by their label's resolution status."""
    rows_by_label: Counter[str] = field(default_factory=Counter)
    """Rows written, by label."""
    licenses: Counter[str] = field(default_factory=Counter)
    """Rows written, by license (``none`` for rows without one)."""
    without_attribution: int = 0
    """Rows written with no attribution."""
    duplicates: int = 0
    """Photos byte-identical to one before them (kept or left out, as ``--duplicates`` says)."""
    duplicates_kept: bool = True
    """Whether those photos were written (``--duplicates keep``)."""
    values_set_null: Counter[str] = field(default_factory=Counter)
    """Values present in the source but unreadable (a latitude of 95, a date that is not one), set to null."""
    resolutions: dict[str, Resolution] = field(default_factory=dict)
    """Each distinct label's resolution."""
    download: DownloadReport | None = None
    """The downloader's report, when URLs were fetched."""
    heif_unread: int = 0
    """HEIC/HEIF photos left out because the heif extra (pillow-heif) is not installed."""

    @property
    def failed(self) -> int:
        return sum(self.failed_by_reason.values())

    @property
    def without_license(self) -> int:
        return self.licenses.get("none", 0)

    @property
    def notes(self) -> list[str]:
        """What the CLI prints after the counts."""
        by_status = sorted(self.rows_by_status.items(), key=lambda kv: _status_order(kv[0]))
        lines = [f"labels: {', '.join(f'{n:,} rows {status}' for status, n in by_status)}; "
                 f"the card is {self.dataset_path / 'README.md'}"]
        if self.without_license:
            lines.append(f"{self.without_license:,} rows have no license (kept, flagged in the card); for your own "
                         "photos, give it with --license (e.g. cc-by-4.0)")
        if self.without_attribution:
            lines.append(f"{self.without_attribution:,} rows have no attribution; for your own photos, give it with "
                         "--attribution NAME")
        if self.heif_unread:
            from cladebench.images import HEIF_EXTRA

            lines.append(f"{self.heif_unread:,} HEIC/HEIF photos left out: reading them needs the heif extra "
                         f"({HEIF_EXTRA})")
        if self.duplicates:
            lines.append(f"{self.duplicates:,} photos are byte-identical to one before them ("
                         + ("kept: same image_sha256; --duplicates drop leaves them out)" if self.duplicates_kept
                            else "left out as duplicate_image)"))
        linked = self.source_notes.get("linked_folders")
        if isinstance(linked, dict) and linked:
            lines.append(f"{len(linked):,} linked folder(s) outside the tree read under "
                         "the link's name (listed in the card)")
        if self.failed_by_reason:
            left_out = self.failed_by_reason.most_common()
            lines.append("left out: " + ", ".join(f"{n:,} {reason}" for reason, n in left_out))
        return lines

    def resolution_records(self) -> list[dict[str, Any]]:
        return [{**self.resolutions[label].as_dict(), "rows": self.rows_by_label.get(label, 0)}
                for label in sorted(self.resolutions)]

    def as_dict(self) -> dict[str, object]:
        return {"dataset_path": str(self.dataset_path), "failures_path": str(self.failures_path),
                "kind": self.kind, "source": self.source, "backbone": self.backbone, "rows": self.rows,
                "written": self.written, "failed_by_reason": dict(self.failed_by_reason),
                "rows_by_status": dict(self.rows_by_status), "licenses": dict(self.licenses),
                "without_license": self.without_license, "without_attribution": self.without_attribution,
                "duplicates": self.duplicates, "duplicates_kept": self.duplicates_kept,
                "values_set_null": dict(self.values_set_null),
                "downloads": None if self.download is None else self.download.summary(),
                "source_notes": {k: v for k, v in self.source_notes.items()
                                 if k not in ("rights.txt", "citations.txt")}}


def _status_order(status: str) -> int:
    return ROW_STATUSES.index(status) if status in ROW_STATUSES else len(ROW_STATUSES)


def render_card(summary: ImagesLoadSummary, left_out: Sequence[str] = ()) -> str:
    """The card as Markdown; ``left_out`` is :func:`~cladebench.curate.reports.left_out_section` of the load."""
    s = summary
    parts = [f"# Images loaded from `{Path(s.source).name}`", "",
             f"Loaded by `cladebench load images` from `{s.source}` (a {s.kind} source). Labels resolved offline "
             f"against `{s.backbone}`.", "",
             "## Counts", "",
             markdown_table(["", "records"], [("read", s.rows), ("written", s.written), ("left out", s.failed)])]
    if s.failed_by_reason:
        parts += ["", "## Left out, by reason", "",
                  "Each is a row of `left_out.parquet`, with where it is in the source and the detail.", "",
                  markdown_table(["reason", "records"], sorted(s.failed_by_reason.items(), key=lambda kv: -kv[1])),
                  "", *left_out]
    parts += ["", "## Labels", "",
              "Each distinct label resolved against the backbone: `exact` (the name as written), `normalised` "
              "(after case, underscores, a trailing `sp.` or an author and year), `ambiguous` (several taxa bear "
              "it; a row whose own rank columns agree with one of them is `disambiguated` to it, the others keep "
              "the source's own ranks, if any), `unresolved` (no taxon bears it; the row keeps "
              "its label as `scientific_name`). Rows record `source_label` and `label_status`.", "",
              markdown_table(["status", "rows"], sorted(s.rows_by_status.items(), key=lambda kv: _status_order(kv[0]))),
              "", markdown_table(
                  ["label", "rows", "status", "matched", "rank", "taxon id", "candidates"],
                  [(r["label"], r["rows"], r["status"], r["matched_name"] or "", r["rank"] or "",
                    "" if r["taxon_id"] is None else str(r["taxon_id"]), "; ".join(r["candidates"]))
                   for r in sorted(s.resolution_records(), key=lambda r: (_status_order(r["status"]), r["label"]))],
                  literal=(0, 3, 6))]
    parts += ["", "## Licenses", "", markdown_table(["license", "rows"], sorted(s.licenses.items(),
                                                                                key=lambda kv: -kv[1]), literal=(0,))]
    if s.without_license:
        parts += ["", f"**{s.without_license:,} rows have no license.** They are kept; find the rights before "
                      "publishing them (`license_name IS NULL`)."]
    if s.without_attribution:
        parts += ["", f"{s.without_attribution:,} rows have no attribution."]
    if s.duplicates:
        parts += ["", f"{s.duplicates:,} photos are byte-identical to one before them (the same `image_sha256`): "
                      + ("kept." if s.duplicates_kept else "left out as `duplicate_image`.")]
    if s.values_set_null:
        parts += ["", "## Values set to null", "", "Present in the source but unreadable (a coordinate out of range, "
                  "a date that is not one):", "",
                  markdown_table(["field", "rows"], sorted(s.values_set_null.items()))]
    parts += ["", "## Source", "", "```json", json.dumps(s.as_dict()["source_notes"], indent=1, default=str), "```"]
    for name in ("rights.txt", "citations.txt"):
        if s.source_notes.get(name):
            parts += ["", f"### {name}", "", "```", str(s.source_notes[name]).strip(), "```"]
    if s.download is not None:
        parts += ["", f"Downloads: {s.download.summary()}"]
    return "\n".join(parts) + "\n"


__all__ = ["ImagesLoadSummary", "render_card"]
