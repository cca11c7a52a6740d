"""Error galleries: the worst predictions of each run, with the photo, what was true, what was predicted, the
score, and the photo's license and attribution. A photo without a recorded license or attribution is said once per
gallery (how many), not on every card. Zero-shot labels are named by their species, the whole label on hover.

Which predictions are the worst depends on the task, so each task names its picker in :data:`GALLERIES`
(:attr:`cladebench.tasks.Task.error_gallery`): zero-shot shows its most severe mistakes (the lowest common
ancestor of truth and prediction farthest up the tree, written beside each: ``same family (height 2)``), then
those with the lowest probability on their true label (predictions written before heights: the lowest
probability alone); rerank the non-relevant candidates scored highest; lineage the targets whose completion under
the hint went wrong earliest. Ties are broken by uuid, so a gallery does not change with row order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.compute as pc

from cladebench.metrics.hierarchy import HEIGHT_COLUMN, lca_words
from cladebench.registry import Registry
from cladebench.report.formatting import format_number
from cladebench.report.runs import ReportRun
from cladebench.report.sections.base import ReportContext, register_section
from cladebench.report.taxon_names import TaxonName, run_name_style, taxon_name
from cladebench.report.thumbnails import Photo, read_photos
from cladebench.tasks import known_task

if TYPE_CHECKING:
    from markupsafe import Markup


@dataclass(frozen=True)
class GalleryItem:
    """One prediction to show: its example and what to say about it."""

    uuid: str
    """Dataset row of the photo."""
    fields: tuple[tuple[str, str | TaxonName], ...]
    """(label, value) pairs shown under the photo: truth, prediction, score... (a taxon label as its name)"""


@dataclass(frozen=True)
class Picked:
    """A run's gallery before its photos are read."""

    ordering: str
    """How the items were chosen, said above the gallery."""
    items: tuple[GalleryItem, ...]


Picker = Callable[[ReportRun, int], Picked | None]
"""(run, most items) -> the run's worst predictions, or None when its predictions do not allow a gallery."""

GALLERIES: Registry[Picker] = Registry("gallery picker")
"""Registry: gallery name (a task's :attr:`~cladebench.tasks.Task.error_gallery`) -> gallery picker."""


def _has(run: ReportRun, *columns: str) -> bool:
    return run.predictions is not None and set(columns) <= set(run.predictions.column_names)


def _text(value: object) -> str:
    return "—" if value is None else str(value)


@GALLERIES.register("least-probable-truth")
def _zeroshot(run: ReportRun, most: int) -> Picked | None:
    if not _has(run, "uuid", "true_label", "pred_label", "true_prob", "scored", "top5_probs"):
        return None
    table = run.predictions
    assert table is not None  # _has found its columns
    table = table.filter(pc.and_(table.column("scored").fill_null(False),
                                 pc.is_finite(table.column("true_prob")).fill_null(False)))
    severity = HEIGHT_COLUMN in table.column_names
    if severity:  # the worst mistakes first: the farthest up the tree, then the least probable truth
        table = table.filter(pc.greater(table.column(HEIGHT_COLUMN), 0).fill_null(False))
    # Sorted and cut in Arrow: a run may hold hundreds of thousands of rows, a gallery a dozen.
    keys = [(HEIGHT_COLUMN, "descending")] if severity else []
    order = pc.sort_indices(table, sort_keys=[*keys, ("true_prob", "ascending"), ("uuid", "ascending")])
    rows = table.take(order[:most]).to_pylist()
    style = run_name_style(run.record.provenance)
    rank = str((run.record.provenance.get("task") or {}).get("rank") or "species")
    items = tuple(GalleryItem(uuid=r["uuid"], fields=(
        *((("group", _text(r["group"])),) if "group" in r else ()),
        ("truth", taxon_name(_text(r["true_label"]), style)),
        ("predicted", taxon_name(_text(r["pred_label"]), style)),
        *((("LCA", lca_words(int(r[HEIGHT_COLUMN]), rank)),) if severity else ()),
        ("P(truth)", format_number(r["true_prob"])),
        ("P(predicted)", format_number((r["top5_probs"] or [math.nan])[0])),
    )) for r in rows)
    if severity:
        return Picked(ordering="the most severe mistakes (the lowest common ancestor of truth and prediction "
                               "farthest up the tree), then the lowest probability on the true label", items=items)
    return Picked(ordering="scored images with the lowest probability on their true label", items=items)


@GALLERIES.register("top-scored-irrelevant")
def _rerank(run: ReportRun, most: int) -> Picked | None:
    if not _has(run, "uuid", "query_id", "query", "relevant", "score"):
        return None
    assert run.predictions is not None  # _has found its columns
    rows = run.predictions.select(["uuid", "query_id", "query", "relevant", "score"]).to_pylist()
    rank_in_query: dict[int, int] = {}
    by_query: dict[object, list[int]] = {}
    for i, row in enumerate(rows):
        by_query.setdefault(row["query_id"], []).append(i)
    for members in by_query.values():
        for rank, i in enumerate(sorted(members, key=lambda j: (-rows[j]["score"], rows[j]["uuid"])), start=1):
            rank_in_query[i] = rank
    wrong = sorted((i for i, r in enumerate(rows) if not r["relevant"]), key=lambda i: (-rows[i]["score"],
                                                                                        rows[i]["uuid"]))
    items = tuple(GalleryItem(uuid=rows[i]["uuid"], fields=(
        ("query", _text(rows[i]["query"])),
        ("relevant", "no"),
        ("score", format_number(rows[i]["score"])),
        ("rank in query", f"{rank_in_query[i]} of {len(by_query[rows[i]['query_id']])}"),
    )) for i in wrong[:most])
    return Picked(ordering="non-relevant candidates with the highest scores", items=items)


@GALLERIES.register("farthest-lineage")
def _lineage(run: ReportRun, most: int) -> Picked | None:
    needed = ("uuid", "target", "scored", "hint", "divergence_rank", "true_species", "hint_pred_species",
              "hint_exact", "hint_depth", "hint_lca_distance", "other_species")
    if not _has(run, *needed):
        return None
    assert run.predictions is not None  # _has found its columns
    rows = [r for r in run.predictions.select(list(needed)).to_pylist() if r["scored"] and r["hint_exact"] is False]
    rows.sort(key=lambda r: (-(r["hint_lca_distance"] or 0.0), r["uuid"], r["target"]))
    items = tuple(GalleryItem(uuid=r["uuid"], fields=(
        ("hint", _text(r["hint"])),
        ("diverges at", _text(r["divergence_rank"])),
        ("truth", _text(r["true_species"])),
        ("predicted", _text(r["hint_pred_species"])),
        ("other organism", _text(r["other_species"])),
        ("LCA distance", format_number(r["hint_lca_distance"], 2)),
    )) for r in rows[:most])
    return Picked(ordering="targets whose completion under the hint went wrong earliest (largest LCA distance)",
                  items=items)


@dataclass(frozen=True)
class Gallery:
    run: ReportRun
    ordering: str
    entries: tuple[tuple[GalleryItem, Photo | None], ...]
    note: str | None

    @property
    def photos(self) -> int:
        """Cards whose row was found in the dataset."""
        return sum(photo is not None for _, photo in self.entries)

    @property
    def without_attribution(self) -> int:
        return sum(photo is not None and not photo.attribution for _, photo in self.entries)

    @property
    def without_license(self) -> int:
        return sum(photo is not None and not (photo.license_name or photo.license_link) for _, photo in self.entries)


def run_gallery(run: ReportRun, most: int, cache: dict[object, object] | None = None) -> Gallery | None:
    """A run's gallery with its photos read from the run's dataset (through ``cache``, a report's photos made
    once); None when its task has no picker."""
    task = known_task(run.task)
    picker = GALLERIES.get(task.error_gallery) if task is not None and task.error_gallery else None
    picked = picker(run, most) if picker and most > 0 else None
    if picked is None or not picked.items:
        return None
    dataset = run.record.provenance.get("dataset") or {}
    photos, note = read_photos(str(dataset.get("uri")), dataset.get("version"), [i.uuid for i in picked.items],
                               cache)
    return Gallery(run=run, ordering=picked.ordering,
                   entries=tuple((item, photos.get(item.uuid)) for item in picked.items), note=note)


@register_section("gallery", "Error galleries", order=80, folded=True)
def gallery_section(runs: Sequence[ReportRun], context: ReportContext) -> Markup | None:
    if not context.has_template("gallery"):
        return None
    photos = context.cache.setdefault("photos", {})
    galleries = [g for run in runs if (g := run_gallery(run, context.max_gallery, photos)) is not None]
    return context.render("gallery", galleries=galleries) if galleries else None
