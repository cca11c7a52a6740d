"""Planted rerank datasets: queries (a species' scientific name each) x candidate images of a synthetic world, with
the rerank columns (query_id, query, relevant).

One builder for the rerank task tests and the VLM fault tests, which differ only in size, seed and which
candidates are relevant.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from cladebench import store
from cladebench.synthetic import WorldConfig, make_world


def rerank_table(queries: int, candidates: int, *, seed: int, positives: int | None = None) -> pa.Table:
    """``queries`` x ``candidates`` images; candidates of one query are consecutive rows. Relevant: the first
    ``positives`` candidates of every query when given, else the candidates of the query's species (and the very
    first row, so query 1 has a positive for sure)."""
    world = make_world(WorldConfig(seed=seed, names="generated", branching=(1, 1, 2, 1, 2, 2, 2)))
    table = world.to_table(queries * candidates, seed=seed, image_format="jpeg")
    names = table.column("scientific_name").to_pylist()
    species = sorted(set(names))[:queries]
    query_of = [species[i // candidates] for i in range(table.num_rows)]
    uuids = [f"{q}-{u}" for q, u in zip(query_of, table.column("uuid").to_pylist(), strict=True)]
    table = table.set_column(table.column_names.index("uuid"), "uuid", pa.array(uuids))
    table = table.append_column("query_id", pa.array([species.index(q) + 1 for q in query_of], pa.int64()))
    table = table.append_column("query", pa.array(query_of))
    if positives is not None:
        relevant = [i % candidates < positives for i in range(table.num_rows)]
    else:
        relevant = [n == q for n, q in zip(names, query_of, strict=True)]
        relevant[0] = True
    return table.append_column("relevant", pa.array(relevant))


def write_rerank_dataset(path: Path, queries: int, candidates: int, *, seed: int, positives: int | None = None
                         ) -> Path:
    """:func:`rerank_table` written as a Lance dataset at ``path``."""
    store.write_dataset(rerank_table(queries, candidates, seed=seed, positives=positives), path)
    return path
