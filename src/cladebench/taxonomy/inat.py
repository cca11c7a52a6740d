"""Lineages from taxonomy tables: rank columns (TreeOfLife, Rare Species, CrypticBio) and iNaturalist's taxa table.

iNaturalist gives each taxon its ancestors as an ancestry string of ids (``48460/1/2/355675/...``) and names
a species by its binomial; these readers turn both into :class:`~cladebench.taxonomy.lineage.Lineage` rows.
A module apart from the lineage itself because only curation and the lineage task read such tables.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cladebench.errors import SchemaError
from cladebench.taxonomy.lineage import RANK_COLUMNS, Lineage

if TYPE_CHECKING:
    import pyarrow as pa


def lineages_from_table(table: pa.Table) -> list[Lineage]:
    """One lineage per row of a table with rank columns (TreeOfLife, Rare Species, CrypticBio, a benchmark's rows):
    each distinct row parsed once, since a benchmark repeats a few thousand lineages over many images (and a run
    reads its rows twice: once to decide the label set, once with the vectors)."""
    names = tuple(table.column_names)
    # Column by column, not a dict per row: a row is only a key until a new one is parsed (lists made hashable).
    values = [[tuple(v) if isinstance(v, list) else v for v in column.to_pylist()] if kind.num_fields
              else column.to_pylist() for column, kind in zip(table.columns, table.schema.types, strict=True)]
    parsed: dict[tuple[object, ...], Lineage] = {}
    out = []
    for key in zip(*values, strict=True) if values else [()] * table.num_rows:
        lineage = parsed.get(key)
        if lineage is None:
            lineage = parsed[key] = _parsed_row(names, key)
        out.append(lineage)
    return out


@functools.lru_cache(maxsize=1 << 14)  # a few thousand taxa per benchmark; memory bounded
def _parsed_row(names: tuple[str, ...], values: tuple[object, ...]) -> Lineage:
    """A row's lineage, remembered: lineages are immutable, and the same rows are read again within a run."""
    return Lineage.from_row({name: list(v) if isinstance(v, tuple) else v
                             for name, v in zip(names, values, strict=True)})


def ancestry_from_parents(parents: Mapping[int, int | None]) -> dict[int, str]:
    """Ancestry strings (``"48460/1/2"``, root first, self excluded) from a child -> parent map.

    Useful for taxonomy dumps that give ``id,parent_id`` instead of ancestry. A parent that is not
    in the map ends the chain there (the ancestry starts at it); a cycle is an error.
    """
    memo: dict[int, tuple[int, ...]] = {}

    def chain(taxon: int) -> tuple[int, ...]:
        stack: list[int] = []
        seen: set[int] = set()
        node: int | None = taxon
        while node is not None and node not in memo:
            if node in seen:
                raise SchemaError(f"taxonomy has a cycle through taxon {node}")
            seen.add(node)
            stack.append(node)
            parent = parents.get(node)
            if parent is None or parent not in parents:
                # The root, or a parent missing from the table: the chain starts at the parent.
                memo[node] = () if parent is None else (parent,)
                stack.pop()
                break
            node = parent
        for child in reversed(stack):
            parent = parents[child]
            assert parent is not None  # only a taxon whose parent is in the table stays on the stack
            memo[child] = (*memo[parent], parent)
        return memo[taxon]

    return {t: "/".join(str(a) for a in chain(t)) for t in parents}


def read_inat_taxa(path: str | Path) -> pa.Table:
    """Read an iNaturalist open-data ``taxa.csv`` (tab-separated, no quoting) into Arrow."""
    import duckdb

    con = duckdb.connect()
    relation = con.read_csv(
        str(path), delimiter="\t", quotechar="", escapechar="", header=True,
        dtype={"taxon_id": "BIGINT", "ancestry": "VARCHAR", "rank": "VARCHAR", "name": "VARCHAR"},
    )
    return relation.to_arrow_table()


def inat_rank_table(taxa: pa.Table | str | Path) -> pa.Table:
    """Seven rank columns for every taxon of an iNat taxa table with ancestry strings.

    Input columns: ``taxon_id``, ``ancestry`` (ids joined by ``/``, self excluded, as the open-data
    export writes it), ``rank`` and ``name``. Output: ``taxon_id``, ``rank``, ``name`` and the seven
    rank columns, the species column holding the binomial (under the genus column's spelling). Ancestors
    absent from the table leave their rank ``None``: a sample of an export is not a closed tree. The join
    runs in DuckDB so a full export (1.5M taxa) takes seconds.
    """
    import duckdb

    if isinstance(taxa, (str, Path)):
        taxa = read_inat_taxa(taxa)
    missing = {"taxon_id", "ancestry", "rank", "name"} - set(taxa.column_names)
    if missing:
        raise SchemaError(f"iNat taxa table lacks column(s) {sorted(missing)}; has {taxa.column_names}")
    con = duckdb.connect()
    con.register("taxa", taxa)
    pivots = ",\n".join(
        f"max(a.name) FILTER (WHERE lower(a.rank) = '{c}') AS \"{c}\"" for c in RANK_COLUMNS
    )
    query = f"""
        WITH chain AS (
            SELECT t.taxon_id,
                   unnest(list_append(
                       CASE WHEN t.ancestry IS NULL OR t.ancestry = '' THEN []
                            ELSE string_split(t.ancestry, '/') END,
                       CAST(t.taxon_id AS VARCHAR))) AS ancestor
            FROM taxa t
        ),
        ranks AS (
            SELECT c.taxon_id, {pivots}
            FROM chain c
            LEFT JOIN taxa a ON a.taxon_id = TRY_CAST(c.ancestor AS BIGINT)
            GROUP BY c.taxon_id
        )
        SELECT t.taxon_id, t.rank, t.name, {", ".join(f'r."{c}"' for c in RANK_COLUMNS)}
        FROM taxa t JOIN ranks r USING (taxon_id)
        ORDER BY t.taxon_id
    """
    table = con.sql(query).to_arrow_table()
    return _species_binomials(table)


def _species_binomials(table: pa.Table) -> pa.Table:
    """iNat names a species by its binomial; the canonical species column holds it as :class:`Lineage` does:
    the genus column's spelling, then the epithet in lower case.

    When the genus taxon is missing from the table (a sample of an export, or a species iNat hangs
    directly under a family), the genus is taken from the binomial's first word, which is what the
    name itself asserts. A species whose genus ancestor has another name keeps its epithet under the
    ancestor (the lineage's genus), as a :class:`Lineage` built from the two columns would.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    species = table.column("species")
    is_binomial = pc.fill_null(pc.match_substring(species, " "), False)
    epithet = pc.if_else(is_binomial, pc.utf8_lower(pc.replace_substring_regex(species, r"^\S+\s+", "")), species)
    no_name = pa.scalar(None, pa.string())
    first_word = pc.if_else(is_binomial, pc.replace_substring_regex(species, r"\s.*$", ""), no_name)
    genus = pc.coalesce(table.column("genus"), first_word)
    binomial = pc.coalesce(pc.binary_join_element_wise(genus, pc.utf8_lower(epithet), " "), epithet)
    table = table.set_column(table.column_names.index("genus"), pa.field("genus", pa.string()), genus)
    return table.set_column(table.column_names.index("species"), pa.field("species", pa.string()), binomial)


def inat_lineages(taxa: pa.Table | str | Path) -> dict[int, Lineage]:
    """Lineage of every taxon in an iNat taxa table with ancestry strings, keyed by taxon id."""
    table = inat_rank_table(taxa)
    return {
        row["taxon_id"]: Lineage(tuple(row[c] for c in RANK_COLUMNS), taxon_id=row["taxon_id"])
        for row in table.to_pylist()
    }


