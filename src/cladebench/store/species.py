"""Datasets written before ``species`` held the binomial stay readable, and give the same numbers.

Schema version 2 stores the species binomial (``"Peromyscus maniculatus"``) in ``species``, as the Fine-Grained
Challenges card defines the column. Version 1 stored the lower-case epithet (``"maniculatus"``) beside the genus.
Every reader of the store (:func:`cladebench.store.read`, ``subset``, search, the fingerprint's filter) asks
:func:`holds_epithets` and, for such a dataset, hands back the binomial built from the genus and the epithet, and
reads a filter's ``species`` as that binomial, so that ``--where "species = 'Peromyscus maniculatus'"``, group-by,
breakdowns and labels agree with the same data written today.

A dataset holds epithets when it is not marked version 2 or later, has ``genus`` and ``species`` columns, and some
row has a genus beside a species without a space (an epithet; a binomial always has one). Datasets written by
other tools carry no version; those that store binomials (the published Fine-Grained Challenges) are read as they
are. In a dataset that holds epithets a species is taken as an epithet (``gorilla gorilla`` under *Gorilla* is
*Gorilla gorilla gorilla*: that is how version 1 wrote them) unless it already starts with its genus as spelled
(``Felis catus`` under *Felis*: a dataset of another tool with binomials and one ``sp.`` row must not read as
``Felis Felis catus``); a blank species stays blank rather than becoming the genus and a space.

Example:
    >>> species_filter("species = 'Felis catus' AND organism.species = 'x'").startswith(f"({SPECIES_EXPRESSION}) =")
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from cladebench.errors import SchemaError
from cladebench.store.schema import SCHEMA_METADATA_KEY

if TYPE_CHECKING:
    import lance

BINOMIAL_SCHEMA_VERSION = 2
"""The first schema version whose ``species`` column holds the binomial."""

SPECIES_EXPRESSION = ("coalesce(left(genus || ' ', (length(genus) + 1)"
                      " * (1 - CAST(starts_with(species, genus || ' ') AS INT))"
                      " * CAST(length(btrim(species)) > 0 AS INT)) || species, species)")
"""The binomial of a version-1 row in Lance's SQL (which has no CASE): ``genus epithet``; the species as it is when it
already starts with ``genus `` or is blank (the prefix is cut to no characters), or when the genus is null (``||``
gives null, and ``coalesce`` takes the species). :func:`binomial_species` computes the same in Arrow."""

_EPITHET_ROW = "genus IS NOT NULL AND species IS NOT NULL AND NOT (species LIKE '% %')"

# String literals, quoted identifiers, plain words, anything else one character at a time.
_TOKEN = re.compile(r"'(?:[^']|'')*'?|\"(?:[^\"]|\"\")*\"?|`[^`]*`?|[A-Za-z_][A-Za-z0-9_]*|\s+|.", re.S)


def schema_version(schema: pa.Schema) -> int | None:
    """The cladebench schema version a dataset was written with, or ``None`` (written by another tool)."""
    value = (schema.metadata or {}).get(SCHEMA_METADATA_KEY, b"").decode(errors="replace").strip()
    return int(value) if value.isdigit() else None


def holds_epithets(dataset: lance.LanceDataset) -> bool:
    """Whether the dataset's ``species`` column holds epithets (written before schema version 2)."""
    names = dataset.schema.names
    if "species" not in names or "genus" not in names:
        return False
    version = schema_version(dataset.schema)
    if version is not None and version >= BINOMIAL_SCHEMA_VERSION:
        return False
    return dataset.to_table(columns=["species"], filter=_EPITHET_ROW, limit=1).num_rows > 0


def check_appendable(dataset: lance.LanceDataset, uri: object) -> None:
    """Refuse to append to a dataset that holds epithets: new rows hold binomials, and the two would be mixed in one
    dataset marked version 1. Every writer that appends (:func:`~cladebench.store.append`, ``subset`` in append
    mode) asks this."""
    if holds_epithets(dataset):
        raise SchemaError(f"{uri} was written before `species` held the binomial (schema version 1); appending "
                          "binomials would mix the two: copy it with `cladebench subset` first (the copy holds "
                          "binomials) and append to the copy")


def species_filter(where: str | None) -> str | None:
    """A filter with every reference to the top-level ``species`` column read as the binomial
    (:data:`SPECIES_EXPRESSION`); quoted literals and struct fields (``organism.species``) are left alone."""
    if where is None:
        return None
    out: list[str] = []
    previous = ""
    for token in _TOKEN.findall(where):
        name = token[1:-1] if token[:1] in "\"`" and len(token) > 1 else token
        if name == "species" and token[:1] != "'" and previous != ".":
            token = f"({SPECIES_EXPRESSION})"
        out.append(token)
        if not token.isspace():
            previous = token
    return "".join(out)


def binomial_species(table: pa.Table) -> pa.Table:
    """``table`` (with ``genus`` and ``species`` columns, as a version-1 dataset stored them) with the binomial in
    ``species``: ``genus epithet``, the epithet alone where the genus is null."""
    species = table.column("species")
    genus = table.column("genus").cast(species.type)
    # Starts with ``genus `` (as SQL's starts_with(species, genus || ' ')): a space, and the genus before the first.
    first_word = pc.replace_substring_regex(species, r"(?s) .*$", "")
    keep = pc.or_(pc.and_(pc.match_substring(species, " "), pc.equal(first_word, genus)),
                  pc.equal(pc.utf8_trim(species, " "), ""))
    joined = pc.binary_join_element_wise(genus, species, pa.scalar(" ", species.type))
    binomial = pc.coalesce(pc.if_else(pc.fill_null(keep, False), species, joined), species)
    index = table.column_names.index("species")
    return table.set_column(index, table.schema.field(index), binomial)


def columns_to_read(columns: Sequence[str] | None, names: Sequence[str]) -> tuple[list[str] | None, bool]:
    """The projection to read from a dataset that holds epithets, and whether ``genus`` was added to it only to
    build the binomial (to drop again)."""
    if columns is None or "species" not in columns or "genus" in columns or "genus" not in names:
        return (None if columns is None else list(columns)), False
    return [*columns, "genus"], True


def with_binomials(table: pa.Table, added_genus: bool) -> pa.Table:
    """A table read from a dataset that holds epithets, as if the dataset held binomials."""
    if "species" in table.column_names and "genus" in table.column_names:
        table = binomial_species(table)
    return table.drop_columns(["genus"]) if added_genus else table


def binomials_for_epithets(table: pa.Table) -> pa.Table:
    """``table`` with each epithet in ``species`` written as the binomial, as :class:`cladebench.taxonomy.Lineage`
    reads a row: a species beside a genus is an epithet unless it is two words or more whose first is that genus
    (``catus`` and ``silvestris lybica`` under *Felis* become ``Felis catus`` and ``Felis silvestris lybica``;
    ``Gorilla gorilla`` stays). The writer applies it, so a version-2 dataset holds binomials whoever made the
    table."""
    if "species" not in table.column_names or "genus" not in table.column_names:
        return table
    species = table.column("species")
    if not pa.types.is_string(species.type) and not pa.types.is_large_string(species.type):
        return table  # a type the schema check refuses, with its own message
    genus = table.column("genus").cast(species.type)
    first_word = pc.utf8_lower(pc.replace_substring_regex(pc.utf8_trim_whitespace(species), r"\s.*$", ""))
    is_binomial = pc.and_(pc.match_substring_regex(pc.utf8_trim_whitespace(species), r"\s"),
                          pc.equal(first_word, pc.utf8_lower(genus)))
    blank = pc.equal(pc.utf8_trim_whitespace(species), "")  # stays blank, not "Genus "
    is_epithet = pc.fill_null(pc.and_(pc.invert(is_binomial), pc.invert(blank)), False)
    binomial = pc.binary_join_element_wise(genus, species, pa.scalar(" ", species.type))
    species = pc.if_else(pc.and_(is_epithet, pc.is_valid(binomial)), binomial, species)
    index = table.column_names.index("species")
    return table.set_column(index, table.schema.field(index), species)


def binomial_reader(reader: pa.RecordBatchReader, added_genus: bool) -> pa.RecordBatchReader:
    """Batches read from a dataset that holds epithets, streamed as if the dataset held binomials."""
    schema = with_binomials(reader.schema.empty_table(), added_genus).schema

    def batches() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            yield from with_binomials(pa.Table.from_batches([batch]), added_genus).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())
