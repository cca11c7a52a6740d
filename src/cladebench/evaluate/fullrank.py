"""The run record of an INQUIRE fullrank evaluation (``cladebench search --queries --annotations --out``).

Why a module of its own: :mod:`cladebench.tasks.text_search` ranks and scores the queries (a task), and writing
the run record with its provenance is the evaluation stage's job, as for ``eval``; tasks never import the
evaluation stage.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cladebench.benchmarks.inquire.source import read_inquire_annotations, read_inquire_queries
from cladebench.evaluate.record import (
    RunRecord,
    check_out_outside_dataset,
    command_line,
    dataset_provenance,
    metric_definitions,
)
from cladebench.metrics.retrieval import RetrievalConfig, summarize, summarize_by
from cladebench.provenance import software_versions
from cladebench.tasks.text_search import FULLRANK_K, check_k, fullrank

if TYPE_CHECKING:
    import lance

    from cladebench.models import Encoder

SHORT_LIST_RULE = ("a query with fewer than k rows passing the filter is scored over the rows it has (cutoff c = "
                   "rows): AP normalised by min(count_pos, c), precision divided by c, as INQUIRE's "
                   "compute_retrieval_metrics cuts at the length of the list it is given")
"""How a query whose filter leaves fewer than k rows is scored."""
COUNT_POS_RULE = ("count_pos is the query's annotated positives (all of them, whether or not they pass the filter), "
                  "as INQUIRE's len(pos_images); at least the relevant rows retrieved")
"""What a fullrank query's count_pos is."""


def write_fullrank_record(dataset: lance.LanceDataset, encoder: Encoder, command: Any) -> tuple[Any, object]:
    """Run :func:`fullrank` for ``cladebench search --queries --annotations`` and write its run record."""
    check_out_outside_dataset(command.out, command.dataset)
    queries = read_inquire_queries(command.queries)
    annotations = read_inquire_annotations(command.annotations)
    k = FULLRANK_K if command.k is None else check_k(command.k)
    table, info = fullrank(dataset, encoder, queries, annotations, match_column=command.match_column, k=k,
                           where=command.where, column=command.column, templates=command.templates)
    per_query = info["per_query"]
    config = RetrievalConfig(k=k)
    metrics = {name: estimate.to_dict() for name, estimate in summarize(per_query, config).estimates.items()}
    supercategories = [str(s) for s in queries.column("supercategory").to_pylist()]
    for group, summary in summarize_by(per_query, supercategories, config).items():
        for name, estimate in summary.estimates.items():
            metrics[f"supercategory={group}/{name}"] = estimate.to_dict()
    files = {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in (command.queries, command.annotations)}
    described = encoder.describe()
    provenance = {
        "dataset": dataset_provenance(dataset, command.dataset, where=command.where,
                                      evaluated_uuids=sorted(set(table.column("uuid").to_pylist()))),
        "split": {"kind": "none: every query searches the whole (filtered) dataset", "seed": None,
                  "sampling_unit": "query"},
        "label_set": {"kind": "queries", "size": len(info["query_ids"]), "files_sha256": files},
        "model": {"id": described["model_id"], "revision": described.get("revision"),
                  "image_embeddings": {"column": info["column"]}},
        "prompts": {"templates_name": command.templates},
        "task": {"protocol": "INQUIRE fullrank", "k": k, "match_column": command.match_column,
                 "ranking": info["ranking"], "annotated_positives": info["positives"],
                 "count_pos_rule": COUNT_POS_RULE,
                 "short_lists": int((per_query.cutoff < k).sum()), "short_list_rule": SHORT_LIST_RULE,
                 **per_query.tie_counts()},
        "metrics": metric_definitions(sorted({n.rsplit("/", 1)[-1] for n in metrics})),
        "software": software_versions(),
        "command": command_line(),
    }
    settings = {name: str(v) if isinstance(v, Path) else v for name, v in vars(command).items()}
    record = RunRecord(task="fullrank", metrics=metrics, provenance=provenance, config={**settings, "k": k})
    return record, record.write(command.out, table)
