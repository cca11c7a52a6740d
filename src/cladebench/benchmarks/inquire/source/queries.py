"""INQUIRE's query and annotation CSVs as tables: every query with its text verbatim, every positive with its lineage.

Why apart: the rerank shards (:mod:`~cladebench.benchmarks.inquire.source.rerank`) and the full-rank evaluation
read these small CSVs, which have a format of their own (pandas' index column, a species folder per path).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from cladebench.benchmarks.inquire.source.columns import (
    ANNOTATION_COLUMNS,
    ANNOTATIONS_SCHEMA,
    QUERIES_SCHEMA,
    QUERY_COLUMNS,
    READ_STATS_KEY,
)
from cladebench.curate.sources import with_stats
from cladebench.curate.sources.rows import csv_records, integer, text_or_none
from cladebench.curate.sources.values import folder_of, inat24_file_key, species_folder_lineage, split_from_name
from cladebench.errors import SchemaError
from cladebench.taxonomy import RANK_COLUMNS, Lineage


def read_inquire_queries(path: str | Path, *, split: str | None = None) -> pa.Table:
    """Read an INQUIRE query CSV: every query, in file order, texts exactly as written.

    ``split`` defaults to the one in the file name (``inquire_queries_val.csv`` -> ``val``), null when
    the name has none. A repeated ``query_id`` is a :class:`SchemaError` naming the file and both rows.
    """
    path = Path(path)
    split = split or split_from_name(path)
    columns: dict[str, list[object]] = {f.name: [] for f in QUERIES_SCHEMA}
    first_row: dict[int, int] = {}
    records = csv_records(path, QUERY_COLUMNS, what="an INQUIRE queries CSV", other_columns=False, ignored=("",))
    for where, record in records:
        query_id = integer(record["query_id"], "query_id", where)
        if query_id in first_row:
            raise where.error("query_id", f"query id {query_id} repeats row {first_row[query_id]}")
        first_row[query_id] = where.number
        if not record["query_text"].strip():
            raise where.error("query_text", "empty; every INQUIRE query has a text")
        columns["query_id"].append(query_id)
        columns["query_text"].append(record["query_text"])
        for name in ("supercategory", "category", "iconic_group"):
            columns[name].append(text_or_none(record[name], name, where))
        columns["split"].append(split)
    stats = {"file": path.name, "split": split, "rows": len(first_row),
             "without_iconic_group": columns["iconic_group"].count(None)}
    table = pa.table(columns, schema=QUERIES_SCHEMA)
    return with_stats(table, READ_STATS_KEY, stats)


def query_ids_by_text(queries: pa.Table | str | Path | Sequence[str | Path]) -> dict[str, int]:
    """Query text -> id, from a queries table or the query CSVs; a text with two ids is an error."""
    if not isinstance(queries, pa.Table):
        paths = [queries] if isinstance(queries, (str, Path)) else list(queries)
        queries = pa.concat_tables([read_inquire_queries(p) for p in paths])
    by_text: dict[str, int] = {}
    for text, query_id in zip(queries.column("query_text").to_pylist(), queries.column("query_id").to_pylist(),
                              strict=True):
        if by_text.setdefault(text, query_id) != query_id:
            raise SchemaError(f"query text {text!r} has two ids ({by_text[text]} and {query_id}) in the queries given")
    return by_text


# --- annotations -----------------------------------------------------------------------------------


class LineageCache:
    """Lineage per species folder: thousands of rows share a few hundred folders."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, Lineage] | None] = {}

    def get(self, folder: str | None) -> tuple[int, Lineage] | None:
        if folder is None:
            return None
        if folder not in self._seen:
            try:
                self._seen[folder] = species_folder_lineage(folder)
            except ValueError:
                self._seen[folder] = None
        return self._seen[folder]


def lineage_values(lineage: Lineage | None) -> dict[str, object]:
    """The rank columns and ``scientific_name`` of a lineage; all null without one."""
    if lineage is None:
        return {**dict.fromkeys(RANK_COLUMNS), "scientific_name": None}
    return {**dict(zip(RANK_COLUMNS, lineage.names, strict=True)), "scientific_name": lineage.scientific_name}


def read_inquire_annotations(path: str | Path) -> pa.Table:
    """Read INQUIRE's annotation CSV (every row a positive) with the iNat24 key and the species' lineage.

    ``inat24_file_name`` is the match key (see :func:`inat24_file_key`); the lineage and
    ``inat24_category_id`` come from the species folder, and a path without one is an error naming
    the file, the row (1 = the first after the header) and ``image_path``. A (query, image) pair listed twice
    is kept and counted (``repeated_pairs`` in :func:`read_stats`): the official code counts distinct paths.
    """
    path = Path(path)
    columns: dict[str, list[object]] = {f.name: [] for f in ANNOTATIONS_SCHEMA}
    lineages = LineageCache()
    pairs: Counter[tuple[int, str]] = Counter()
    for where, record in csv_records(path, ANNOTATION_COLUMNS, what="an INQUIRE annotations CSV", other_columns=False,
                                         ignored=("",)):
        query_id = integer(record["query_id"], "query_id", where)
        image_id = integer(record["image_id"], "image_id", where)
        image_path = record["image_path"]
        found = lineages.get(folder_of(image_path))
        if found is None:
            raise where.error("image_path", f"{image_path!r} is not <split>/<species folder>/<file>, the folder being "
                                            "<id>_<Kingdom>_<Phylum>_<Class>_<Order>_<Family>_<Genus>_<epithet>")
        category_id, lineage = found
        key = inat24_file_key(image_path)
        pairs[(query_id, key)] += 1
        values = {"query_id": query_id, "image_id": image_id, "image_path": image_path, "inat24_file_name": key,
                  "inat24_category_id": category_id, **lineage_values(lineage)}
        for name, column in columns.items():
            column.append(values[name])
    table = pa.table(columns, schema=ANNOTATIONS_SCHEMA)
    stats = {"file": path.name, "rows": table.num_rows, "queries": len({q for q, _ in pairs}),
             "repeated_pairs": sum(n - 1 for n in pairs.values())}
    return with_stats(table, READ_STATS_KEY, stats)



__all__ = ["LineageCache", "lineage_values", "query_ids_by_text", "read_inquire_annotations", "read_inquire_queries"]
