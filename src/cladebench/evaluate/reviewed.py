"""``eval ... --labels-from-reviews``: score a model against the labels experts gave in ``cladebench serve``.

The rows reviewed are scored, and only they; their truth is the reviewers' label, not the dataset's. A row counts
when every reviewer's current label on it is the same (:func:`~cladebench.store.reviews.review_summary`): rows
where reviewers disagree are left out and counted, as are rows found "not identifiable" and reviews of uuids the
dataset does not hold. Everything else about the run is as without the option: the label set and the groups come
from the whole dataset (a zero-shot label set is the benchmark's taxa, plus any taxon a reviewer named that the
dataset lacked), so a reviewed genus-only camera-trap row is scored among the same species as the rest of its group.

How: the dataset is shallow-cloned at its current version into ``<out>/reviewed-labels.lance`` (Lance copies the
manifest only and references the data files; the dataset itself is never written), the reviewed rows' rank columns
(and ``scientific_name``, ``common_name``) are replaced there by one ``merge_insert``, the task runs on the clone,
and its predictions are narrowed to the reviewed rows before any metric. The record's ``labels_from_reviews``
names the reviews table and its version, the dataset and version reviewed, and every count above.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import CladebenchError, UsageError
from cladebench.paths import NOT_OURS, WRONG_KIND, write_refusal
from cladebench.store.dataset import is_remote, open_dataset
from cladebench.store.reviews import read_reviews, review_summary, reviews_path
from cladebench.tasks import DEFAULT_TASK, all_tasks, get_task
from cladebench.taxonomy import RANK_COLUMNS, Lineage

if TYPE_CHECKING:
    from cladebench.tasks.common import Predictions

CLONE_NAME = "reviewed-labels.lance"
"""The labelled clone's name inside ``--out``."""
MARKER = ".cladebench-reviewed-labels"
"""A file inside the clone saying this tool made it, so a later run into the same ``--out`` may replace it."""


def check_labels_from_reviews(config: Any) -> None:
    """A usage error, before any work, for a task whose truth no review can give."""
    # A task declares whether its truth is a row's own taxon (Task.reviewed_labels): rerank's relevance and lineage
    # completion's co-observed organisms are not.
    if getattr(config, "labels_from_reviews", False) and not get_task(config.task or DEFAULT_TASK).reviewed_labels:
        reviewed = [name for name, task in all_tasks().items() if task.reviewed_labels]
        raise UsageError(f"--labels-from-reviews scores tasks whose truth is each row's taxon "
                         f"({', '.join(reviewed)}), not {config.task}")


@dataclass(frozen=True)
class ReviewedLabels:
    """The labelled clone a run reads, the uuids scored, and what the record says about them."""

    uri: str
    """The clone the task runs on."""
    scored: frozenset[str]
    """The uuids whose reviewers agree on a taxon and that the dataset holds."""
    provenance: dict[str, object]
    """What the run record keeps under ``labels_from_reviews``."""

    def unreviewed(self, uuids: pa.ChunkedArray) -> int:
        """How many of ``uuids`` are not scored (no review, or reviewers who disagree)."""
        scored = pc.is_in(uuids, value_set=pa.array(sorted(self.scored), pa.string()).cast(uuids.type))
        return len(uuids) - pc.sum(scored.cast(pa.int64())).as_py() if len(uuids) else 0

    def restrict(self, predictions: Predictions) -> Predictions:
        """The predictions of the scored rows only (metrics are computed from them)."""
        table = predictions.table
        keep = pc.is_in(table.column("uuid"), value_set=pa.array(sorted(self.scored), pa.string()))
        return dataclasses.replace(predictions, table=table.filter(keep))


def _clone_target(out: Path) -> Path:
    """``<out>/reviewed-labels.lance``, emptied when a previous run made it; anything else there is refused."""
    target = Path(out) / CLONE_NAME
    if write_refusal(target, folder=True, ours=lambda folder: (folder / MARKER).is_file()) in (NOT_OURS, WRONG_KIND):
        raise UsageError(f"{target} exists and was not made by --labels-from-reviews; move it or choose "
                         "another --out")
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _updates(agreed: dict[str, dict[str, str | None]], schema: pa.Schema) -> pa.Table:
    """One row per scored uuid with the dataset's naming columns set from the reviewed lineage, in its types."""
    columns = [c for c in (*RANK_COLUMNS, "scientific_name", "common_name") if c in schema.names]
    rows = []
    for uuid, review in agreed.items():
        lineage = Lineage(tuple(review[c] for c in RANK_COLUMNS))
        values = dict(zip(RANK_COLUMNS, lineage.names, strict=True))
        values["scientific_name"] = lineage.scientific_name
        values["common_name"] = None  # the dataset's common name may name the old taxon
        rows.append({"uuid": uuid, **{c: values[c] for c in columns}})
    fields = [schema.field("uuid"), *(schema.field(c) for c in columns)]
    plain = pa.Table.from_pylist(rows, schema=pa.schema([pa.field(f.name, pa.string()) for f in fields]))
    return plain.cast(pa.schema(fields))


def reviewed_labels(uri: str, out: Path) -> ReviewedLabels:
    """The clone of ``uri`` with the agreed reviewed labels in place, under ``out``; a :class:`CladebenchError`
    when no review can be scored (none made, or none agreed on a taxon of a row the dataset holds)."""
    dataset = open_dataset(uri)
    path = reviews_path(uri)
    table = read_reviews(path)
    summary = review_summary(table)
    held = set(dataset.to_table(columns=["uuid"]).column("uuid").to_pylist())
    not_identifiable = {u for u, r in summary.agreed.items() if r["not_identifiable"]}
    missing = {u for u in summary.agreed if u not in held}
    agreed = {u: r for u, r in summary.agreed.items() if u not in not_identifiable and u not in missing}
    counts = {"reviews": summary.reviews, "rows_reviewed": len(summary.current), "scored": len(agreed),
              "disagreements_excluded": len(summary.disagreements), "not_identifiable_excluded": len(not_identifiable),
              "not_in_dataset_excluded": len(missing)}
    if not agreed:
        raise CladebenchError(f"--labels-from-reviews: no reviewed row of {uri} can be scored ("
                              + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items()) + f"; table {path})")
    target = _clone_target(out)
    try:
        clone = dataset.shallow_clone(str(target), dataset.version)
    except (OSError, ValueError, RuntimeError) as exc:
        hint = " (copy it here first with `cladebench subset`)" if is_remote(uri) else ""
        raise CladebenchError(f"--labels-from-reviews: cannot clone {uri}{hint}: {str(exc).split(', /')[0]}") from None
    (target / MARKER).write_text("made by cladebench eval --labels-from-reviews; replaced by the next such run\n")
    clone.merge_insert("uuid").when_matched_update_all().execute(_updates(agreed, dataset.schema))
    import lance

    provenance = {
        "source": "expert reviews (cladebench serve)", "rule": "latest label per row; a row counts only when every "
        "reviewer's current label on it is the same taxon at the same rank",
        "reviews_table": str(path), "reviews_version": lance.dataset(str(path)).version,
        "dataset": {"uri": str(uri), "version": int(dataset.version)}, "labelled_clone": str(target),
        "reviewers": sorted({r for by in summary.current.values() for r in by}),
        "dataset_versions_reviewed": sorted({r["dataset_version"] for r in agreed.values()
                                             if r["dataset_version"] is not None}),
        **counts,
    }
    return ReviewedLabels(uri=str(target), scored=frozenset(agreed), provenance=provenance)
