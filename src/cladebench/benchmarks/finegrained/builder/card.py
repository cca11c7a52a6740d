"""What a Fine-Grained Challenges build reports: its summary (``build.json``) and its dataset card (``README.md``).

Why a module: the card is what the published dataset's users read (groups, species, licenses,
seen_in_training, embeddings, indices, every drop by reason); it is laid out here, apart from the counting.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from cladebench.benchmarks.finegrained.builder.checks import OUTSIDE_REASON, reason_docs
from cladebench.benchmarks.finegrained.builder.config import DATASET_DIR, ChallengeGroup
from cladebench.curate.builders.cards import markdown_table
from cladebench.curate.skeleton import summary_dict


@dataclass(frozen=True)
class FineGrainedBuildSummary:
    """What a build read, dropped (by reason), kept and wrote."""

    out: Path
    """The output folder."""
    dataset_path: Path
    """``data/challenges.lance`` inside ``out``."""
    card_path: Path
    """``README.md``: the card."""
    rows: int
    """Images in the dataset."""
    fingerprint: str
    """SHA-256 of the dataset's uuids in row order (:func:`cladebench.store.fingerprint`)."""
    catalog_rows: int
    """Rows the catalog holds."""
    outcomes: dict[str, int]
    """Catalog rows per reason they are not in the dataset (``outside_groups`` and every reason of
    :func:`reason_docs`, zeros included); with ``rows`` they add up to ``catalog_rows``."""
    groups: dict[str, dict[str, Any]]
    """Per challenge group: its taxon, images, species, genus-only images, eligible rows."""
    species: dict[str, dict[str, int]]
    """Per group, images per binomial (``Genus`` alone for genus-only rows)."""
    licenses: dict[str, dict[str, int]]
    """Per license code, images per group and ``total``."""
    seen_in_training: dict[str, dict[str, int]]
    """Per ``--seen`` model: uuids listed, and images of the dataset among them."""
    embeddings: dict[str, dict[str, object]]
    """Per ``emb_*`` column: model, revision, preprocessing, dim, valid and failed rows."""
    indices: list[dict[str, Any]]
    """The dataset's indices: name, type, columns."""
    vector_index_skipped: str | None
    """Why the emb_ columns have no IVF_FLAT index (too few rows), or ``None``."""
    images: dict[str, object]
    """Where the images came from: local files, fetched, cached, failed."""
    notes: dict[str, object]
    """Counts that are not drops (rows in several groups, --seen uuids not in the dataset)."""
    config: dict[str, object] = field(default_factory=dict)
    elapsed_s: float = 0.0

    def describe(self) -> str:
        """A few lines for a terminal: what was written, and the largest reasons rows were left out."""
        drops = sorted(((n, r) for r, n in self.outcomes.items() if n and r != OUTSIDE_REASON), reverse=True)
        groups = ", ".join(f"{g} {v['images']:,}" for g, v in self.groups.items())
        return "\n".join([
            f"{self.dataset_path}: {self.rows:,} images ({groups}), fingerprint {self.fingerprint[:12]}",
            f"from {self.catalog_rows:,} catalog rows ({self.outcomes.get(OUTSIDE_REASON, 0):,} outside the groups); "
            "left out: " + (", ".join(f"{r} {n:,}" for n, r in drops[:8]) or "none"),
            "embeddings: " + (", ".join(self.embeddings) or "none") + f"; card: {self.card_path}",
        ])

    def as_dict(self) -> dict[str, object]:
        return summary_dict(self)


def render_card(summary: FineGrainedBuildSummary, left_out: Sequence[str] = ()) -> str:
    """The dataset card: what the dataset is, how it was built, and every count (all taken from the written data);
    ``left_out`` is :func:`~cladebench.curate.reports.left_out_section` of the build."""
    config = summary.config
    group_names = list(summary.groups)
    docs = reason_docs()
    embedding_rows = [(c, m.get("model", ""), m.get("revision", "") or "", m.get("dim", ""),
                       json.dumps(m.get("preprocessing", ""), sort_keys=True)) for c, m in summary.embeddings.items()]
    sections = [
        "# Fine-Grained Challenges (built from a TreeOfLife-200M catalog)",
        "",
        f"{summary.rows:,} images in {len(summary.groups)} challenge groups of visually similar taxa, one Lance table "
        f"(`{DATASET_DIR}`) with the image (lossless WebP, longest side at most {config.get('max_side')} px), seven "
        "ranks, provenance, license, `seen_in_training` and raw embeddings. Tasks: zero-shot classification per "
        "group, few-shot on frozen embeddings, comparison of embedding spaces, nearest-neighbour retrieval, and "
        "inspection of the genus-only rows.",
        "",
        f"- Fingerprint (SHA-256 of the row uuids in order): `{summary.fingerprint}`",
        f"- Built with: per_species={config.get('per_species')}, genus_only_cap={config.get('genus_only_cap')}, "
        f"seed={config.get('seed')}, catalog `{config.get('catalog')}`, provenance `{config.get('provenance')}`",
        "- A valid evaluation states its split, sampling unit, label set, model revision, prompts and metric.",
        "",
        "## Challenge groups",
        "",
        markdown_table(["challenge_group", "taxon", "species", "images", "genus-only images"],
               [(g, v["taxon"], v["species"], v["images"], v["genus_only"]) for g, v in summary.groups.items()]
               + [("total", "", sum(v["species"] for v in summary.groups.values()), summary.rows,
                   sum(v["genus_only"] for v in summary.groups.values()))]),
        "",
        "## Licenses",
        "",
        "CC0, CC-BY, CC-BY-NC and CC-BY-SA only: no NoDerivatives variant (a resized image is a derivative), no "
        "all-rights-reserved, no unnamed (`other`) license, none without a license link.",
        "",
        markdown_table(["license", *group_names, "total"],
               [(lic, *(v.get(g, 0) for g in group_names), v["total"]) for lic, v in summary.licenses.items()]
               + [("total", *(summary.groups[g]["images"] for g in group_names), summary.rows)]),
        "",
        "## Images per species",
        "",
        f"At most {config.get('per_species')} per species and {config.get('genus_only_cap')} per genus among rows "
        "identified to genus only (listed by the genus alone).",
        "",
        markdown_table(["challenge_group", "taxon", "images"],
               [(g, name, n) for g, names in summary.species.items() for name, n in names.items()], literal=(0, 1)),
        "",
        "## seen_in_training",
        "",
        markdown_table(["model", "uuids listed", "images in the dataset"],
               [(m, v["listed"], v["in_dataset"]) for m, v in summary.seen_in_training.items()])
        if summary.seen_in_training else "No training lists were given: `seen_in_training` is null (unknown).",
        "",
        "## Embeddings and indices",
        "",
        markdown_table(["column", "model", "revision", "dim", "preprocessing"], embedding_rows) if embedding_rows
        else "No embedding columns.",
        "",
        "Indices: " + ", ".join(f"`{i['name']}` ({i['type']} on {', '.join(i['columns'])})" for i in summary.indices)
        + "." + (f" {summary.vector_index_skipped}" if summary.vector_index_skipped else ""),
        "",
        "## What was left out, and why",
        "",
        f"The catalog held {summary.catalog_rows:,} rows. Each is in the dataset or counted under exactly one "
        "reason (the first that applies, in this order):",
        "",
        markdown_table(["reason", "rows", "meaning"], [(r, n, docs.get(r, "")) for r, n in summary.outcomes.items()]
               + [("in the dataset", summary.rows, "")]),
        "",
        *left_out,
    ]
    return "\n".join(sections)


def summarise(table: pa.Table, groups: Sequence[ChallengeGroup], eligible: Counter[str]) -> dict[str, Any]:
    """Per-group, per-species and per-license counts, from the rows as written."""
    rows = table.select(["challenge_group", "genus", "species", "license_name"]).to_pylist()
    species: dict[str, Counter[str]] = {g.name: Counter() for g in groups}
    licenses: dict[str, Counter[str]] = {}
    for row in rows:
        name = row["species"] or row["genus"]  # the binomial, or the genus of a genus-only row
        species[row["challenge_group"]][name] += 1
        licenses.setdefault(row["license_name"], Counter())[row["challenge_group"]] += 1
    return {
        "groups": {g.name: {"taxon": g.taxon, "images": sum(species[g.name].values()),
                            "species": sum(1 for n in species[g.name] if " " in n),
                            "genus_only": sum(n for name, n in species[g.name].items() if " " not in name),
                            "eligible": eligible[g.name]} for g in groups},
        "species": {g: dict(sorted(c.items())) for g, c in species.items()},
        "licenses": {lic: {**dict(c), "total": sum(c.values())}
                     for lic, c in sorted(licenses.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))},
    }



__all__ = ["FineGrainedBuildSummary", "render_card", "summarise"]
